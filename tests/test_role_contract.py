"""Each role's documented inputs agree with the library's defaults (one source of truth)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.console import console_defaults
from clusterforge.model import cluster_defaults

ROLES = Path(__file__).resolve().parents[1] / "roles"
# Role name -> the library function that reads that role's defaults file.
ROLE_DEFAULTS: dict[str, Callable[[], dict[str, Any]]] = {
    "opensearch": cluster_defaults,
    "dashboards": console_defaults,
}
roles = pytest.mark.parametrize("role", sorted(ROLE_DEFAULTS))


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def options_of(role: str) -> dict[str, Any]:
    specs = load(ROLES / role / "meta" / "argument_specs.yml")
    options: dict[str, Any] = specs["argument_specs"]["main"]["options"]
    return options


@roles
def test_role_defaults_equal_the_library_defaults(role: str) -> None:
    assert load(ROLES / role / "defaults" / "main.yml") == ROLE_DEFAULTS[role]()


@roles
def test_every_default_is_declared_with_the_same_default(role: str) -> None:
    options = options_of(role)
    for key, value in ROLE_DEFAULTS[role]().items():
        assert key in options, f"{key} is missing from roles/{role}/meta/argument_specs.yml"
        assert options[key].get("default") == value, f"{key}: argument_specs default differs"


@roles
def test_every_input_is_in_the_role_readme(role: str) -> None:
    readme = (ROLES / role / "README.md").read_text()
    missing = [key for key in options_of(role) if f"`{key}`" not in readme]
    assert not missing, f"roles/{role}/README.md does not list {missing}"
