"""Load one of the collection's plugin files as a plain module, without Ansible's loader."""

from __future__ import annotations

import importlib.util
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
