"""LDAP in the inventory: checked before any host, rendered into config.yml and the unit.

The bind password is the point: config.yml and the security index hold only the
``${env.NAME}`` placeholder, the unit reads a root-only environment file, and the plan
(what Ansible keeps in facts and scripts/render prints) never carries it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.pki import SubjectFields, load_or_create_ca
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.plan import build_plan
from clusterforge.plan.security.ldap import BIND_PASSWORD_ENV, CA_FILE_NAME, ENV_FILE_NAME

PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}
BIND_PASSWORD = "Bind-Secret-5d2c"


def directory_ca(tmp_path: Path) -> Path:
    ca = load_or_create_ca(
        tmp_path / "dir-ca", passphrase=b"unit-ca", subject=SubjectFields(common_name="dir ca")
    )
    return ca.cert_path


def ldap_vars(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    return {
        "opensearch_ldap_enabled": True,
        "opensearch_ldap_hosts": ["ldap.example.internal:636"],
        "opensearch_ldap_ca_path": str(directory_ca(tmp_path)),
        "opensearch_ldap_bind_dn": "cn=opensearch,ou=services,dc=example,dc=internal",
        "opensearch_ldap_bind_password": BIND_PASSWORD,
        "opensearch_ldap_userbase": "ou=people,dc=example,dc=internal",
        "opensearch_ldap_rolebase": "ou=groups,dc=example,dc=internal",
        **overrides,
    }


def nodes(tmp_path: Path, mode: str = "tls", **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    common = {
        "opensearch_security_mode": mode,
        "opensearch_pki_dir": str(tmp_path / "pki"),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
        "opensearch_security_users": [
            {"name": "reporting", "password": "Unit-Reporting-3f9a", "backend_roles": ["readall"]}
        ],
        **overrides,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **common}) for i in (1, 2, 3)]


def problems_of(inventory: list[tuple[str, dict[str, Any]]]) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        build_cluster(inventory)
    return caught.value.problems


def test_ldap_is_off_by_default_and_config_yml_keeps_the_internal_domain_alone(
    tmp_path: Path,
) -> None:
    plan = build_plan(nodes(tmp_path), fetch=False)
    dynamic = yaml.safe_load(plan["security"]["files"]["config.yml"])["config"]["dynamic"]
    assert list(dynamic["authc"]) == ["basic_internal_auth_domain"]
    assert "authz" not in dynamic
    assert plan["cluster"]["ldap"] is None
    assert "EnvironmentFile" not in plan["nodes"]["os-1"]["files"]["opensearch.service"]


def test_an_enabled_directory_needs_hosts_ca_bind_and_bases_each_named(tmp_path: Path) -> None:
    problems = problems_of(nodes(tmp_path, opensearch_ldap_enabled=True))
    joined = "\n".join(problems)
    for name in (
        "opensearch_ldap_hosts",
        "opensearch_ldap_ca_path",
        "opensearch_ldap_bind_dn",
        "opensearch_ldap_bind_password",
        "opensearch_ldap_userbase",
        "opensearch_ldap_rolebase",
    ):
        assert name in joined, name
    assert len(problems) == 6


def test_bad_values_are_refused_naming_the_variable(tmp_path: Path) -> None:
    problems = problems_of(
        nodes(
            tmp_path,
            **ldap_vars(
                tmp_path,
                opensearch_ldap_hosts=["ldap.example.internal"],
                opensearch_ldap_tls="plain",
                opensearch_ldap_usersearch="uid={0}",
                opensearch_ldap_rolesearch="(member=x)",
                opensearch_ldap_bind_password='has"quote',
            ),
        )
    )
    joined = "\n".join(problems)
    assert "opensearch_ldap_hosts entry 'ldap.example.internal' is not host:port" in joined
    assert "opensearch_ldap_tls" in joined and "starttls" in joined
    assert "opensearch_ldap_usersearch 'uid={0}' is not an LDAP filter" in joined
    assert "opensearch_ldap_rolesearch '(member=x)' has no placeholder" in joined
    assert "opensearch_ldap_bind_password holds one of" in joined
    assert 'has"quote' not in joined


def test_open_mode_refuses_a_directory(tmp_path: Path) -> None:
    inventory = [
        (name, {**host_vars, "opensearch_security_mode": "open"})
        for name, host_vars in nodes(tmp_path, **ldap_vars(tmp_path))
    ]
    problems = problems_of(inventory)
    assert any("opensearch_security_mode is open" in problem for problem in problems)


def test_a_missing_ca_file_is_refused_before_any_host(tmp_path: Path) -> None:
    inventory = nodes(tmp_path, **ldap_vars(tmp_path, opensearch_ldap_ca_path="missing-ca.pem"))
    with pytest.raises(InventoryError) as caught:
        build_plan(inventory, inventory_dir=tmp_path)
    assert any(
        "opensearch_ldap_ca_path 'missing-ca.pem' cannot be read on the control node" in problem
        for problem in caught.value.problems
    )


def rendered(plan: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(plan["security"]["files"]["config.yml"])
    return loaded["config"]["dynamic"]


def test_config_yml_gets_both_domains_internal_first_with_the_challenge(tmp_path: Path) -> None:
    plan = build_plan(nodes(tmp_path, **ldap_vars(tmp_path)), fetch=False)
    dynamic = rendered(plan)
    assert list(dynamic["authc"]) == ["basic_internal_auth_domain", "ldap"]
    internal, directory = dynamic["authc"]["basic_internal_auth_domain"], dynamic["authc"]["ldap"]
    assert (internal["order"], internal["http_authenticator"]["challenge"]) == (0, True)
    assert (directory["order"], directory["http_authenticator"]["challenge"]) == (1, False)
    backend = directory["authentication_backend"]
    assert backend["type"] == "ldap"
    config = backend["config"]
    assert config["hosts"] == ["ldap.example.internal:636"]
    assert (config["enable_ssl"], config["enable_start_tls"]) == (True, False)
    assert config["verify_hostnames"] is True
    assert config["pemtrustedcas_filepath"] == f"/etc/opensearch/{CA_FILE_NAME}"
    assert config["password"] == "${env." + BIND_PASSWORD_ENV + "}"
    authz = dynamic["authz"]["ldap_roles"]["authorization_backend"]["config"]
    assert authz["rolebase"] == "ou=groups,dc=example,dc=internal"
    assert authz["resolve_nested_roles"] is False
    # Every internal user is skipped by the group lookup, the inventory's own too.
    assert {"admin", "kibanaserver", "logstash", "kibana", "reporting"} <= set(authz["skip_users"])


def test_ldap_first_moves_the_challenge_and_starttls_switches_the_transport(tmp_path: Path) -> None:
    plan = build_plan(
        nodes(
            tmp_path,
            **ldap_vars(
                tmp_path,
                opensearch_ldap_domain_order="ldap_first",
                opensearch_ldap_tls="starttls",
                opensearch_ldap_nested_groups=True,
                opensearch_ldap_skip_users=["svc-backup"],
            ),
        ),
        fetch=False,
    )
    dynamic = rendered(plan)
    assert list(dynamic["authc"]) == ["ldap", "basic_internal_auth_domain"]
    assert dynamic["authc"]["ldap"]["http_authenticator"]["challenge"] is True
    assert (
        dynamic["authc"]["basic_internal_auth_domain"]["http_authenticator"]["challenge"] is False
    )
    config = dynamic["authc"]["ldap"]["authentication_backend"]["config"]
    assert (config["enable_ssl"], config["enable_start_tls"]) == (False, True)
    authz = dynamic["authz"]["ldap_roles"]["authorization_backend"]["config"]
    assert authz["resolve_nested_roles"] is True and "svc-backup" in authz["skip_users"]


def test_the_bind_password_is_nowhere_in_the_plan(tmp_path: Path) -> None:
    plan = build_plan(nodes(tmp_path, **ldap_vars(tmp_path)), fetch=False)
    assert BIND_PASSWORD not in json.dumps(plan)
    for path in (tmp_path / "pki").rglob("*"):
        if path.is_file():
            assert BIND_PASSWORD.encode() not in path.read_bytes(), path


def test_the_unit_reads_the_root_only_environment_file_and_the_plan_says_where(
    tmp_path: Path,
) -> None:
    plan = build_plan(nodes(tmp_path, **ldap_vars(tmp_path)), fetch=False)
    facts = plan["cluster"]["ldap"]
    state_dir = plan["cluster"]["state_dir"]
    assert facts["env_path"] == f"{state_dir}/{ENV_FILE_NAME}"
    assert facts["env_name"] == BIND_PASSWORD_ENV
    assert facts["ca_on_node"] == f"/etc/opensearch/{CA_FILE_NAME}"
    assert facts["ca_pem"].startswith("-----BEGIN CERTIFICATE-----")
    unit = plan["nodes"]["os-1"]["files"]["opensearch.service"]
    assert f"EnvironmentFile={facts['env_path']}\n" in unit


def test_changing_the_directory_changes_only_the_config_digest(tmp_path: Path) -> None:
    first = build_plan(nodes(tmp_path, **ldap_vars(tmp_path)), fetch=False)["security"]["digests"]
    again = build_plan(
        nodes(
            tmp_path, **ldap_vars(tmp_path, opensearch_ldap_hosts=["ldap2.example.internal:636"])
        ),
        fetch=False,
    )["security"]["digests"]
    assert [kind for kind in first if first[kind] != again[kind]] == ["config"]


def test_the_labs_roles_per_group_pass_the_plan(tmp_path: Path) -> None:
    from clusterforge.lab.directory_container import lab_roles

    plan = build_plan(nodes(tmp_path, **ldap_vars(tmp_path), **lab_roles()), fetch=False)
    text = json.dumps(plan["cluster_config"])
    assert "lab_team_a" in text and "team-a-*" in text and "lab_team_b" in text
