"""The service roles that install from the wheelhouse keep their documented contract.

Each role's defaults equal the defaults its meta/argument_specs.yml declares, every input
is in its README, handlers restart by topic, and every template says it is managed. The
thin service roles leave installing to the internal role _python_service, included step
by step with tasks_from, and every step they include is one it declares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.schema import load_schema

ROLES = Path(__file__).resolve().parents[1] / "roles"
SERVICE_ROLES = list(load_schema().services)
INTERNAL_ROLE = "_python_service"


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


def test_templates_start_with_the_managed_comment() -> None:
    # The service roles' settings file and unit are the internal role's templates now.
    templates = [
        path
        for role in [*SERVICE_ROLES, INTERNAL_ROLE]
        for path in sorted((ROLES / role / "templates").glob("*.j2"))
    ]
    assert {path.parent.parent.name for path in templates} >= {INTERNAL_ROLE}
    for template in templates:
        first_line = template.read_text(encoding="utf-8").splitlines()[0]
        assert first_line == "{{ ansible_managed | comment }}", template.name


def _includes_of_the_internal_role(role: str) -> list[dict[str, Any]]:
    includes = []
    for path in sorted((ROLES / role / "tasks").glob("*.yml")):
        for task in load(path) or []:
            include = task.get("ansible.builtin.include_role")
            # By its fully qualified name: the roles are the collection clusterforge.stack's.
            if include and include["name"] == f"clusterforge.stack.{INTERNAL_ROLE}":
                includes.append({"task": task, "include": include, "file": path.name})
    return includes


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_the_service_role_is_thin_and_includes_every_step_of_the_internal_role(
    role: str,
) -> None:
    includes = _includes_of_the_internal_role(role)
    steps = [item["include"]["tasks_from"] for item in includes]
    assert steps == ["install", "configure", "run", "preflight"]  # main.yml, then preflight.yml
    specs = load(ROLES / INTERNAL_ROLE / "meta" / "argument_specs.yml")["argument_specs"]
    for item in includes:
        step = item["include"]["tasks_from"]
        required = {
            name for name, option in specs[step]["options"].items() if option.get("required")
        }
        given = set(item["task"].get("vars", {}))
        assert required <= given, f"{role} includes {step} without {required - given}"
        assert item["task"]["vars"]["_python_service_role"] == role
    assert not (ROLES / role / "templates").exists(), "the internal role holds the templates"
    # The service host's steps are main.yml and preflight.yml alone. The order service's
    # index is its side of the cluster (issue 33): site.yml runs that file on a node,
    # never on the service host, so it is the one other file the role may hold.
    cluster_side = {"order_service": {"orders_index.yml"}}.get(role, set())
    assert {path.name for path in (ROLES / role / "tasks").glob("*.yml")} == {
        "main.yml",
        "preflight.yml",
    } | cluster_side


@pytest.mark.parametrize("role", SERVICE_ROLES)
def test_the_internal_role_notifies_the_calling_roles_handler(role: str) -> None:
    for item in _includes_of_the_internal_role(role):
        if item["file"] == "main.yml":
            assert item["task"]["vars"]["_python_service_notify"] == f"{role} changed"


def test_the_internal_role_declares_each_step_and_writes_secrets_root_owned_without_logging() -> (
    None
):
    specs = load(ROLES / INTERNAL_ROLE / "meta" / "argument_specs.yml")["argument_specs"]
    assert set(specs) == {"main", "preflight", "install", "configure", "run"}
    for step in ("preflight", "install", "configure", "run"):
        assert (ROLES / INTERNAL_ROLE / "tasks" / f"{step}.yml").is_file()
        for name, option in specs[step]["options"].items():
            assert name.startswith("_python_service_"), name
            assert option.get("type") and option.get("description"), name
    # One clusterforge_files task places the step's files. The settings file is
    # root:<service> 0640 and marked secret, which keeps its content out of every result
    # and diff (the module's tests, tests/test_files_module.py, prove the masking); the
    # unit is not secret.
    (files_task,) = [
        task
        for task in load(ROLES / INTERNAL_ROLE / "tasks" / "configure.yml")
        if "settings" in task["name"]
    ]
    assert files_task["clusterforge.stack.clusterforge_files"]["files"].startswith(
        "{{ __python_service_files + "
    )
    settings_entry, unit_entry = files_task["vars"]["__python_service_files"]
    assert settings_entry["path"] == "{{ _python_service_settings_path }}"
    # Root owns it and the service only reads it through its group (issue 32).
    assert settings_entry["owner"] == "root"
    assert settings_entry["group"] == "{{ _python_service_user }}"
    assert settings_entry["mode"] == "0640"
    assert settings_entry["secret"] is True
    assert "settings.j2" in settings_entry["content"]
    assert unit_entry["path"].startswith("/etc/systemd/system/")
    assert not unit_entry.get("secret")
