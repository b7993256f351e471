"""Booleans as Ansible takes them (issue 41, item 4).

`ansible-playbook playbooks/site.yml -e opensearch_config_prune=true` hands the plan the
string 'true', and an INI inventory hands it strings too. Wherever the schema declares a
bool, the model accepts what Ansible's own boolean conversion accepts and holds a real
bool; anything else is still refused, naming the variable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE as ANSIBLE_FALSE
from ansible.module_utils.parsing.convert_bool import BOOLEANS_TRUE as ANSIBLE_TRUE
from ansible.module_utils.parsing.convert_bool import boolean as ansible_boolean

from clusterforge.cli import main
from clusterforge.errors import InventoryError
from clusterforge.inventory.variables import read_inventory
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster_config import plan_cluster_config
from clusterforge.plan.plan import build_plan
from clusterforge.schema import (
    BOOLEANS_FALSE,
    BOOLEANS_TRUE,
    as_bool,
    check_value,
    load_schema,
    normalized,
)

TRUE_SPELLINGS = ["true", "True", "TRUE", "yes", "Yes", "on", "ON", "1", "y", "t", " true ", 1]
FALSE_SPELLINGS = ["false", "False", "FALSE", "no", "NO", "off", "Off", "0", "n", "f", 0]
REFUSED = ["maybe", "yess", "", "2", 2, -1, 1.5, "true false", [], {}, ["yes"], None]
BOOLEAN_VARIABLES = [var.name for var in load_schema().variables.values() if var.type == "bool"]


def test_the_accepted_spellings_are_ansibles_own() -> None:
    assert BOOLEANS_TRUE == ANSIBLE_TRUE
    assert BOOLEANS_FALSE == ANSIBLE_FALSE


@pytest.mark.parametrize("value", [*TRUE_SPELLINGS, *FALSE_SPELLINGS, True, False, 1.0, 0.0])
def test_as_bool_reads_what_ansible_reads(value: Any) -> None:
    assert as_bool(value) is ansible_boolean(value)


@pytest.mark.parametrize("value", [value for value in REFUSED if value is not None])
def test_as_bool_refuses_what_ansible_refuses(value: Any) -> None:
    assert as_bool(value) is None
    with pytest.raises(TypeError):
        ansible_boolean(value)


def test_the_schema_declares_booleans_of_every_kind_of_scope() -> None:
    # The conversion below is tested on each of them; a new one is covered by adding it.
    scopes = {load_schema().variables[name].scope for name in BOOLEAN_VARIABLES}
    assert {"cluster", "role", "service"} <= scopes
    assert "opensearch_config_prune" in BOOLEAN_VARIABLES


@pytest.mark.parametrize("name", BOOLEAN_VARIABLES)
@pytest.mark.parametrize(
    ("value", "expected"),
    [*((value, True) for value in TRUE_SPELLINGS), *((value, False) for value in FALSE_SPELLINGS)],
)
def test_every_declared_boolean_accepts_ansibles_spellings(
    name: str, value: Any, expected: bool
) -> None:
    var = load_schema().variables[name]
    assert check_value(var, value) is None
    assert normalized(var, value) is expected


@pytest.mark.parametrize("name", BOOLEAN_VARIABLES)
@pytest.mark.parametrize("value", [value for value in REFUSED if value is not None])
def test_every_declared_boolean_still_refuses_anything_else_naming_itself(
    name: str, value: Any
) -> None:
    var = load_schema().variables[name]
    problem = check_value(var, value)
    assert problem is not None
    assert problem.startswith(f"{name} ")
    assert "not a boolean" in problem and "true or false" in problem
    assert normalized(var, value) == value


def nodes(**common: Any) -> list[tuple[str, dict[str, Any]]]:
    base = {"opensearch_security_mode": "open", **common}
    return [(f"os-{i}", {"ansible_host": f"10.0.0.{i}", **base}) for i in (1, 2, 3)]


def test_the_model_holds_real_booleans_from_strings() -> None:
    cluster = build_cluster(
        nodes(
            opensearch_cors_enabled="yes",
            opensearch_cors_allow_origin="https://console.example.internal",
            opensearch_cors_allow_credentials="On",
            opensearch_audit_failed_logins="0",
        )
    )
    assert cluster.cors_enabled is True
    assert cluster.cors_allow_credentials is True
    assert cluster.audit_failed_logins is False


def test_the_string_false_is_false_in_the_model() -> None:
    # bool("false") is True in Python: the model must not read the string that way.
    cluster = build_cluster(nodes(opensearch_cors_enabled="false", opensearch_zone_forced="no"))
    assert cluster.cors_enabled is False
    assert cluster.zone_forced is False


def test_a_string_and_a_real_boolean_that_agree_are_one_cluster_wide_value() -> None:
    hosts = nodes(opensearch_cors_allow_credentials=False)
    hosts[0][1]["opensearch_cors_enabled"] = "true"
    for _, host_vars in hosts[1:]:
        host_vars["opensearch_cors_enabled"] = True
    assert build_cluster(hosts).cors_enabled is True


def test_a_word_that_is_no_boolean_is_refused_by_the_model_naming_the_variable() -> None:
    with pytest.raises(InventoryError) as caught:
        build_cluster(nodes(opensearch_zone_forced="sometimes"))
    assert any(
        problem.startswith("opensearch_zone_forced 'sometimes' is not a boolean")
        for problem in caught.value.problems
    ), caught.value.problems


def test_a_role_scoped_boolean_on_one_host_is_read_as_ansible_reads_it() -> None:
    hosts = nodes()
    hosts[0][1]["opensearch_plugins_remove_unlisted"] = "yes"
    build_cluster(hosts)
    hosts[0][1]["opensearch_plugins_remove_unlisted"] = "perhaps"
    with pytest.raises(InventoryError) as caught:
        build_cluster(hosts)
    assert any(
        "os-1: opensearch_plugins_remove_unlisted 'perhaps' is not a boolean" in problem
        for problem in caught.value.problems
    ), caught.value.problems


@pytest.mark.parametrize(("given", "expected"), [("true", True), ("Yes", True), ("off", False)])
def test_prune_is_read_as_ansible_reads_it(given: str, expected: bool) -> None:
    config = plan_cluster_config({"opensearch_config_prune": given}, secured=False)
    assert config.prune is expected


def test_prune_refuses_a_word_that_is_no_boolean() -> None:
    with pytest.raises(InventoryError) as caught:
        plan_cluster_config({"opensearch_config_prune": "always"}, secured=False)
    assert any("opensearch_config_prune must be true or false" in p for p in caught.value.problems)


def ini_inventory(root: Path, extra: str = "") -> Path:
    """An INI inventory: Ansible hands its group variables over as strings ('true')."""
    inventory = root / "hosts.ini"
    inventory.write_text(
        "[opensearch]\n"
        "os-1 ansible_host=10.0.0.1\n"
        "os-2 ansible_host=10.0.0.2\n"
        "os-3 ansible_host=10.0.0.3\n"
        "\n[opensearch:vars]\n"
        "opensearch_security_mode=open\n"
        "opensearch_cors_enabled=true\n"
        "opensearch_cors_allow_origin=https://console.example.internal\n"
        "opensearch_cors_allow_credentials=no\n" + extra
    )
    return inventory


def test_scripts_render_reads_string_booleans_of_an_ini_inventory(tmp_path: Path) -> None:
    inventory = ini_inventory(tmp_path)
    read = read_inventory(inventory)
    assert read.nodes[0][1]["opensearch_cors_enabled"] == "true"  # a string, as Ansible gives
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    for host in ("os-1", "os-2", "os-3"):
        settings = yaml.safe_load((out / host / "opensearch.yml").read_text())
        assert settings["http.cors.enabled"] is True
        assert settings["http.cors.allow-credentials"] is False


def test_scripts_render_refuses_a_string_that_is_no_boolean_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = ini_inventory(tmp_path, "opensearch_zone_forced=sometimes\n")
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "out")]) == 1
    assert "opensearch_zone_forced 'sometimes' is not a boolean" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra_vars", "expected"),
    [
        ({"opensearch_config_prune": "true"}, True),  # -e opensearch_config_prune=true
        ({"opensearch_config_prune": True}, True),  # -e '{"opensearch_config_prune": true}'
        ({"opensearch_config_prune": "false"}, False),
        ({}, False),
    ],
)
def test_an_extra_var_true_prunes_as_the_json_form_does(
    tmp_path: Path, extra_vars: dict[str, Any], expected: bool
) -> None:
    inventory = ini_inventory(tmp_path)
    read = read_inventory(inventory, extra_vars=extra_vars)
    plan = build_plan(read.nodes, inventory_dir=read.directory, fetch=False)
    assert plan["cluster_config"]["prune"] is expected


def test_a_service_boolean_is_read_as_ansible_reads_it_by_the_services_model() -> None:
    # The services' own settings models read service-scoped booleans; their reading
    # matches Ansible's (and the schema's).
    from clusterforge.plan.services.services_plan import plan_services

    for given, expected in (("true", True), ("Off", False), ("1", True)):
        # Reached on loopback alone, so no token is needed (the point here is the flag).
        variables = {"order_service_access_log": given, "tls_proxy_listen_address": "127.0.0.1"}
        planned = plan_services({"order_service": ["svc-1"]}, {"svc-1": variables})
        assert planned["svc-1"]["order_service"].public["orders"]["access-log"] is expected


ROLES = Path(__file__).resolve().parents[1] / "roles"
GENERATED_OR_DOCUMENTING = {"defaults", "meta"}


@pytest.mark.parametrize("name", BOOLEAN_VARIABLES)
def test_the_roles_read_a_declared_boolean_through_the_bool_filter(name: str) -> None:
    # Role argument specs validate `-e name=false` but hand the role the string 'false',
    # which Jinja's `not` and `if` read as true: every use in a role goes through `| bool`.
    unfiltered = []
    for path in sorted(ROLES.rglob("*.yml")):
        if GENERATED_OR_DOCUMENTING & set(path.relative_to(ROLES).parts):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            for match in re.finditer(rf"\b{name}\b(?!\s*\|\s*bool\b)", code):
                unfiltered.append(f"{path.relative_to(ROLES)}:{number}: {match.group(0)}")
    assert not unfiltered, unfiltered
