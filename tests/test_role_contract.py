"""The roles' documented inputs are generated from the schema and never drift from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.plan.console import console_defaults
from clusterforge.plan.model import cluster_defaults
from clusterforge.schema import (
    BEGIN_MARKER,
    END_MARKER,
    ROOT,
    check_value,
    drifted_files,
    generated_files,
    load_schema,
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
