"""The clusterforge library on the control node, imported by the plugins that run it.

The collection's action, lookup and filter plugins run the ``clusterforge`` Python
package (this checkout's ``src/``). Ansible imports every plugin of a collection to list
or document it (``ansible-doc``, ``ansible-test``'s import check) without running it, so a
plugin imports the library inside ``try``, keeps the error, and calls
:func:`require_library` when it runs: the missing library then fails the task that needs
it, with the fix, and nothing else.
"""

from __future__ import annotations

from ansible.errors import AnsibleError

INSTALL_HINT = (
    "install it into the Python that runs Ansible on the control node: "
    'pip install "$C" "$C/services/kit[server]" "$C/services/userdir[server]" '
    '"$C/services/orders", where $C is the installed collection\'s directory '
    '(.../ansible_collections/clusterforge/stack; README.md, "As a collection")'
)


def missing_library_message(error: ImportError) -> str:
    """What a task says when the library cannot be imported: the cause and the fix."""
    return f"the clusterforge Python library is not importable ({error}); {INSTALL_HINT}"


def require_library(error: ImportError | None, failure: type[AnsibleError] = AnsibleError) -> None:
    """Raise ``failure`` naming the fix when the plugin's import of the library failed."""
    if error is not None:
        raise failure(missing_library_message(error)) from error
