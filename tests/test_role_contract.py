"""The roles' documented inputs are generated from the schema and never drift from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.plan.cluster.console import console_defaults
from clusterforge.plan.cluster.model import cluster_defaults
from clusterforge.schema import (
    BEGIN_MARKER,
    END_MARKER,
    ROOT,
    YAML_BEGIN_MARKER,
    YAML_END_MARKER,
    check_value,
    drifted_files,
    generated_files,
    load_schema,
    replace_generated_yaml_block,
    role_defaults,
)

ROLES = ROOT / "roles"
SCHEMA = load_schema()
roles = pytest.mark.parametrize("role", sorted(SCHEMA.roles))
variables = pytest.mark.parametrize("name", sorted(SCHEMA.variables))


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_no_generated_file_drifts_from_the_schema() -> None:
    drifted = [str(path.relative_to(ROOT)) for path in drifted_files()]
    assert not drifted, (
        f"{drifted} differ from schema.yml: run python -m clusterforge.schema generate"
    )


def test_the_variables_page_and_every_role_readme_carry_a_generated_table() -> None:
    readmes = [path for path in generated_files() if path.suffix == ".md"]
    assert ROOT / "docs" / "variables.md" in readmes
    assert len(readmes) == len(SCHEMA.roles) + 1
    for readme in readmes:
        text = readme.read_text()
        assert text.count(BEGIN_MARKER) == 1 and text.count(END_MARKER) == 1, readme


@roles
def test_role_defaults_are_the_schema_defaults(role: str) -> None:
    defaults = load(ROLES / role / "defaults" / "main.yml") or {}
    assert defaults == role_defaults(role)
    assert all(name.startswith(f"{role}_") for name in defaults)


@roles
def test_every_input_is_declared_with_the_schema_default(role: str) -> None:
    specs = load(ROLES / role / "meta" / "argument_specs.yml")
    options = specs["argument_specs"]["main"]["options"]
    for var in SCHEMA.of_role(role):
        assert var.name in options, f"{var.name} is missing from roles/{role}/meta/argument_specs"
        assert options[var.name].get("default") == (var.default if var.has_default else None)
        if var.secret:
            assert options[var.name]["no_log"] is True


@roles
def test_every_input_is_in_the_role_readme(role: str) -> None:
    readme = (ROLES / role / "README.md").read_text()
    missing = [var.name for var in SCHEMA.of_role(role) if f"`{var.name}`" not in readme]
    assert not missing, f"roles/{role}/README.md does not list {missing}"


@variables
def test_every_default_passes_its_own_check(name: str) -> None:
    var = SCHEMA.variables[name]
    if var.has_default:
        assert check_value(var, var.default) is None


@variables
def test_every_variable_documents_itself_in_a_known_role(name: str) -> None:
    var = SCHEMA.variables[name]
    assert var.description and "\n" not in var.description
    assert set(var.roles) <= set(SCHEMA.roles)


def test_the_library_defaults_come_from_the_schema() -> None:
    assert cluster_defaults()["opensearch_security_mode"] == "tls"
    assert (
        cluster_defaults()["opensearch_heap_size"]
        == SCHEMA.variables["opensearch_heap_size"].default
    )
    assert console_defaults()["dashboards_port"] == 5601


def test_every_list_of_the_services_is_the_schemas() -> None:
    from clusterforge.plan.services.services_plan import SERVICES
    from clusterforge.status.target import SERVICE_HEALTH_PATHS

    names = list(SCHEMA.services)
    assert list(SERVICES) == names
    client = load(ROLES / "postgresql" / "meta" / "argument_specs.yml")["argument_specs"]["client"]
    assert client["options"]["_postgresql_client_service"]["choices"] == names
    preflight = load(ROLES / "_python_service" / "meta" / "argument_specs.yml")["argument_specs"][
        "preflight"
    ]
    assert preflight["options"]["_python_service_role"]["choices"] == names
    databases = load(ROLES / "postgresql" / "vars" / "main.yml")["_postgresql_services"]
    assert list(databases) == names
    for service in SCHEMA.services.values():
        assert SERVICE_HEALTH_PATHS[service.status_name] == service.health_path
        assert (ROOT / service.project / "src" / service.package / "settings.py").is_file()


def test_the_reserved_users_are_the_predefined_reserved_users() -> None:
    from clusterforge.pki.security_config import PREDEFINED_USERS

    reserved = load(ROLES / "opensearch_security" / "vars" / "main.yml")
    assert reserved["_opensearch_security_reserved_users"] == [
        user.name for user in PREDEFINED_USERS if user.reserved
    ]


def test_a_generated_yaml_block_takes_its_markers_indentation() -> None:
    text = f"a:\n  choices:\n    {YAML_BEGIN_MARKER}\n    - old\n    {YAML_END_MARKER}\nb: 1\n"
    replaced = replace_generated_yaml_block(text, ["x", "y"], Path("f.yml"))
    assert yaml.safe_load(replaced) == {"a": {"choices": ["x", "y"]}, "b": 1}
    assert replace_generated_yaml_block(replaced, ["x", "y"], Path("f.yml")) == replaced


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("order_service_search_enabled", "auto"),
        ("order_service_search_enabled", False),
        ("order_service_search_password", None),
        ("postgresql_credentials_dir", ""),
        ("postgresql_credentials_dir", "/srv/credentials"),
    ],
)
def test_raw_empty_ok_and_null_defaults_accept_their_values(name: str, value: Any) -> None:
    assert check_value(SCHEMA.variables[name], value) is None


def test_an_empty_ok_path_still_refuses_a_relative_one() -> None:
    problem = check_value(SCHEMA.variables["postgresql_credentials_dir"], "credentials")
    assert problem is not None and "absolute path" in problem
