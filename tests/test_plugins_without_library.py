"""The plugins load without the clusterforge library, and a run that needs it fails with
the fix (issue 52).

Ansible imports every plugin of a collection to list or document it (ansible-doc,
ansible-test's import test), on control nodes where the library may not be installed yet.
Here the library is made unimportable (``sys.modules["clusterforge"] = None``), as on
such a node, while each plugin file is loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from ansible.errors import AnsibleActionFail, AnsibleFilterError, AnsibleLookupError

from collection_plugins import load_plugin

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


@pytest.fixture
def without_library() -> Iterator[None]:
    # Only the library's entries change: Ansible's own modules imported meanwhile stay.
    kept = {
        name: module for name, module in sys.modules.items() if name.split(".")[0] == "clusterforge"
    }
    for name in kept:
        sys.modules[name] = None  # type: ignore[assignment]
    sys.modules["clusterforge"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "clusterforge"]:
            del sys.modules[name]
        sys.modules.update(kept)


def _load(kind: str, name: str) -> ModuleType:
    return load_plugin(kind, name)


def test_every_action_loads_and_a_run_fails_naming_the_fix(without_library: None) -> None:
    needing = []
    for path in sorted((PLUGINS / "action").glob("*.py")):
        plugin = _load("action", path.stem)
        error = getattr(plugin, "CLUSTERFORGE_IMPORT_ERROR", None)
        if error is None:
            continue  # an action that does not use the library
        # Calling run() before anything else: no task, connection or templar needed.
        action = object.__new__(plugin.ActionModule)
        with pytest.raises(AnsibleActionFail) as failed:
            action.run(task_vars={})
        message = str(failed.value)
        assert "clusterforge Python library is not importable" in message, path.stem
        assert "pip install" in message and "As a collection" in message, path.stem
        needing.append(path.stem)
    # One fewer since the monitoring is planned in the plan (clusterforge_monitoring went).
    assert "clusterforge_plan" in needing and len(needing) >= 8, needing


def test_the_filters_load_and_only_those_that_need_the_library_fail(
    without_library: None,
) -> None:
    filters = _load("filter", "clusterforge").FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match="pip install"):
        filters["clusterforge_config_file"]("internalusers")
    # Plain data shaping still works.
    entries = filters["clusterforge_file_entries"](
        {"a.yml": "x"}, "/etc/app", owner="root", group="root", mode="0644"
    )
    assert entries[0]["path"] == "/etc/app/a.yml"


def test_the_lookup_loads_and_fails_naming_the_fix(without_library: None) -> None:
    plugin = _load("lookup", "clusterforge_generated_secret")
    with pytest.raises(AnsibleLookupError, match="pip install"):
        plugin.LookupModule().run(["/nonexistent/secret"], {})


def test_with_the_library_the_plugins_have_no_import_error() -> None:
    for kind in ("action", "lookup", "filter"):
        for path in sorted((PLUGINS / kind).glob("*.py")):
            plugin = _load(kind, path.stem)
            assert getattr(plugin, "CLUSTERFORGE_IMPORT_ERROR", None) is None, path
