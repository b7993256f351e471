"""Lookup plugin: a secret generated once on the control node, read back on every run.

``lookup('clusterforge.stack.clusterforge_generated_secret', path, alphabet='alphanumeric',
length=32)`` returns the secret stored in ``path``, generating it there first when the file
is missing, through :func:`clusterforge.pki.generated_secrets.read_or_generate`: the file 0600
in a 0700 directory, written whole, the first of two concurrent runs wins and the other
reads its value. The one writer of the toolkit's generated secrets, so a play's secrets
get the same guarantees as the plan's and the lab's. Lookups run on the control node.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: clusterforge_generated_secret
short_description: A secret generated once into a 0600 file on the control node
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
description:
  - Returns the secret stored in each file named; a missing file is generated first, 0600
    in a 0700 directory, and kept. Two concurrent runs agree on one value.
  - Never rewrites an existing file; remove it to have a new secret generated.
options:
  _terms:
    description:
      - Paths of the secrets' files on the control node; a relative one is taken from the
        playbook's or role's directory, as ansible.builtin.password does.
    required: true
  alphabet:
    description:
      - C(alphanumeric) (letters and digits, safe inside a URL) or C(url_safe) (also '-'
        and '_').
    type: str
    default: alphanumeric
    choices: [alphanumeric, url_safe]
  length:
    description: Characters of an alphanumeric secret; random bytes of a url_safe one.
    type: int
    default: 32
  fix:
    description: Appended to the error of an unusable file (what else the user may do).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The service's database password
  ansible.builtin.set_fact:
    service_password: >-
      {{ lookup('clusterforge.stack.clusterforge_generated_secret',
                inventory_dir ~ '/.postgresql/order_service.password') }}
  no_log: true
"""

RETURN = r"""
_raw:
  description: One secret per path, as stored (without the trailing line break).
  type: list
  elements: str
"""

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.pki.generated_secrets import (
        GeneratedSecretError,
        alphanumeric,
        read_or_generate,
        url_safe,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

ALPHABETS = ("alphanumeric", "url_safe")
MIN_LENGTH = 16


class LookupModule(LookupBase):  # type: ignore[misc]
    def run(
        self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[str]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleLookupError)
        alphabet = kwargs.pop("alphabet", "alphanumeric")
        length = kwargs.pop("length", 32)
        fix = str(kwargs.pop("fix", ""))
        if kwargs:
            raise AnsibleLookupError(
                f"clusterforge_generated_secret: unknown option(s) {', '.join(sorted(kwargs))}; "
                "use alphabet, length or fix"
            )
        if alphabet not in ALPHABETS:
            raise AnsibleLookupError(
                f"clusterforge_generated_secret: alphabet is {alphabet!r}; set it to "
                f"{' or '.join(ALPHABETS)}"
            )
        if isinstance(length, bool) or not isinstance(length, int) or length < MIN_LENGTH:
            raise AnsibleLookupError(
                f"clusterforge_generated_secret: length is {length!r}; set it to a whole "
                f"number of at least {MIN_LENGTH}"
            )
        generate = alphanumeric(length) if alphabet == "alphanumeric" else url_safe(length)
        secrets = []
        for term in terms:
            path = Path(str(term))
            if not path.is_absolute():
                # Where ansible.builtin.password, which this replaces, put a relative path:
                # beside the playbook or role, so an existing file is found again.
                path = Path(self._loader.path_dwim(str(term)))
            try:
                secrets.append(read_or_generate(path, generate=generate, fix=fix))
            except GeneratedSecretError as error:
                raise AnsibleLookupError(f"clusterforge_generated_secret: {error}") from None
        return secrets
