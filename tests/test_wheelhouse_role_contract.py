"""The service roles that install from the wheelhouse keep their documented contract.

Each role's defaults equal the defaults its meta/argument_specs.yml declares, every input
is in its README, handlers restart by topic, and every template says it is managed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[1] / "roles"
SERVICE_ROLES = ["user_directory", "order_service"]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def options_of(role: str) -> dict[str, Any]:
    specs = load(ROLES / role / "meta" / "argument_specs.yml")
    options: dict[str, Any] = specs["argument_specs"]["main"]["options"]
    return options


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_defaults_and_argument_specs_agree(role: str) -> None:
    defaults = load(ROLES / role / "defaults" / "main.yml")
    declared = {name: option.get("default") for name, option in options_of(role).items()}
    assert defaults == declared


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_every_input_has_the_role_prefix_a_type_and_a_description(role: str) -> None:
    for name, option in options_of(role).items():
        assert name.startswith(f"{role}_"), name
        assert option.get("type"), f"{name} has no type"
        assert option.get("description"), f"{name} has no description"


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_every_input_is_in_the_readme(role: str) -> None:
    readme = (ROLES / role / "README.md").read_text(encoding="utf-8")
    missing = [name for name in options_of(role) if f"| `{name}` |" not in readme]
    assert not missing, f"roles/{role}/README.md does not list {missing}"


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_handlers_restart_by_topic(role: str) -> None:
    handlers = load(ROLES / role / "handlers" / "main.yml")
    assert handlers
    for handler in handlers:
        assert handler["name"].startswith("Restart "), handler["name"]
        assert handler["listen"] == f"{role} changed"


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_templates_start_with_the_managed_comment(role: str) -> None:
    templates = sorted((ROLES / role / "templates").glob("*.j2"))
    assert templates
    for template in templates:
        first_line = template.read_text(encoding="utf-8").splitlines()[0]
        assert first_line == "{{ ansible_managed | comment }}", template.name
