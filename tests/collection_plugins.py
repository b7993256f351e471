"""Load one of the collection's plugin files as a plain module, without Ansible's loader."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def load_plugin(kind: str, name: str) -> ModuleType:
    """``plugins/<kind>/<name>.py``, e.g. ``load_plugin("filter", "clusterforge")``."""
    spec = importlib.util.spec_from_file_location(
        f"clusterforge_{kind}_{name}", PLUGINS / kind / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_action_using_api(name: str) -> ModuleType:
    """An action plugin that imports clusterforge_api by its collection name
    (``ansible_collections.clusterforge.stack.plugins.action.clusterforge_api``): outside
    Ansible's loader that name is given for the import only, then taken back."""
    api = load_plugin("action", "clusterforge_api")
    path = "ansible_collections.clusterforge.stack.plugins.action"
    names = [".".join(path.split(".")[: index + 1]) for index in range(len(path.split(".")))]
    added = [name for name in [*names, f"{path}.clusterforge_api"] if name not in sys.modules]
    for added_name in added:
        sys.modules[added_name] = ModuleType(added_name)
    sys.modules[f"{path}.clusterforge_api"] = api
    try:
        return load_plugin("action", name)
    finally:
        for added_name in added:
            del sys.modules[added_name]
