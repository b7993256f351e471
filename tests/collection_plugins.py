"""Load one of the collection's plugin files as a plain module, without Ansible's loader."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
# The collection name under which the plugins import the code they share
# (plugins/plugin_utils), as Ansible's collection loader provides it in a run.
PLUGIN_UTILS = "ansible_collections.clusterforge.stack.plugins.plugin_utils"


def _load_file(module_name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_plugin(kind: str, name: str) -> ModuleType:
    """``plugins/<kind>/<name>.py``, e.g. ``load_plugin("filter", "clusterforge")``.

    A plugin that imports ``plugins/plugin_utils`` by its collection name
    (``ansible_collections.clusterforge.stack.plugins.plugin_utils.api_action``) finds it:
    outside Ansible's loader those names are given for the import only, then taken back.
    """
    parts = PLUGIN_UTILS.split(".")
    names = [".".join(parts[: index + 1]) for index in range(len(parts))]
    added = [module_name for module_name in names if module_name not in sys.modules]
    for module_name in added:
        sys.modules[module_name] = ModuleType(module_name)
    utils = sorted((PLUGINS / "plugin_utils").glob("*.py"))
    for path in utils:
        module_name = f"{PLUGIN_UTILS}.{path.stem}"
        if module_name not in sys.modules:
            sys.modules[module_name] = _load_file(module_name, path)
            added.append(module_name)
    try:
        return _load_file(f"clusterforge_{kind}_{name}", PLUGINS / kind / f"{name}.py")
    finally:
        for module_name in added:
            del sys.modules[module_name]


def load_action_using_api(name: str) -> ModuleType:
    """An action plugin built on the API actions' shared base
    (plugins/plugin_utils/api_action.py); :func:`load_plugin` provides it."""
    return load_plugin("action", name)
