"""The rendered security configuration: complete, deterministic, safe, and digestible per type.

One test hands the files to the security plugin's own validator (``securityadmin -vc 7``)
from the 2.19.4.0 zip, with the engine's jars, when both are in the artifact cache.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from cached_artifacts import engine_zip, security_plugin_zip
from clusterforge.pki.hashing import DEMO_USER_HASHES, hash_password
from clusterforge.pki.security_config import (
    MANAGED_ATTRIBUTE,
    REST_API_ROLES_ENABLED,
    SECURITY_CONFIG_TYPES,
    InternalUser,
    RoleMapping,
    SecurityConfigError,
    changed_config_types,
    merge_unmanaged_users,
    overall_digest,
    parse_digest_marker,
    predefined_users,
    render_digest_marker,
    render_security_files,
    security_config_digest,
)


def fast_hash(password: str) -> str:
    return hash_password(password, rounds=4)


@pytest.fixture(scope="module")
def hashes() -> dict[str, str]:
    return {
        name: fast_hash(f"Unique-{name}-pw-1")
        for name in ("admin", "kibanaserver", "logstash", "kibana")
    }


@pytest.fixture(scope="module")
def alice() -> InternalUser:
    return InternalUser(
        name="alice",
        password_hash=fast_hash("Alice-pw-1"),
        backend_roles=("readall",),
        description="Analyst",
        attributes={"team": "search"},
    )


@pytest.fixture(scope="module")
def users(hashes: dict[str, str], alice: InternalUser) -> list[InternalUser]:
    return [*predefined_users(hashes), alice]


def parsed(files: dict[str, str], name: str) -> dict[str, Any]:
    document = yaml.safe_load(files[name])
    assert isinstance(document, dict)
    return document


def test_every_file_is_rendered_with_its_meta(users: list[InternalUser]) -> None:
    files = render_security_files(users=users)
    assert list(files) == list(SECURITY_CONFIG_TYPES)
    assert set(files) == {
        "internal_users.yml",
        "roles.yml",
        "roles_mapping.yml",
        "action_groups.yml",
        "tenants.yml",
        "config.yml",
        "nodes_dn.yml",
        "allowlist.yml",
        "whitelist.yml",
        "audit.yml",
    }
    for name, config_type in SECURITY_CONFIG_TYPES.items():
        assert parsed(files, name)["_meta"] == {"type": config_type, "config_version": 2}


def test_output_is_deterministic(users: list[InternalUser], alice: InternalUser) -> None:
    bob = InternalUser(name="bob", password_hash=fast_hash("Bob-pw-1"))
    first = render_security_files(
        users=[*users, bob],
        role_mappings={"readall": RoleMapping(users=("bob", "alice"))},
    )
    # Another input order gives byte-identical files.
    second = render_security_files(
        users=[bob, *reversed(users)],
        role_mappings={"readall": RoleMapping(users=("alice", "bob"))},
    )
    assert first == second
    assert list(parsed(first, "internal_users.yml")) == [
        "_meta",
        "admin",
        "kibanaserver",
        "logstash",
        "kibana",
        "alice",
        "bob",
    ]


def test_the_predefined_users_are_exactly_the_specs(
    users: list[InternalUser], hashes: dict[str, str]
) -> None:
    document = parsed(render_security_files(users=users), "internal_users.yml")
    expected = {
        "admin": (["admin"], True),
        "kibanaserver": ([], True),
        "logstash": (["logstash"], True),
        "kibana": (["kibanauser", "readall"], False),
    }
    for name, (backend_roles, reserved) in expected.items():
        user = document[name]
        assert user["backend_roles"] == backend_roles
        assert user["reserved"] is reserved
        assert user["hash"] == hashes[name]
        assert user["description"]
        assert user["attributes"][MANAGED_ATTRIBUTE] == "true"
    assert document["alice"] == {
        "hash": users[-1].password_hash,
        "reserved": False,
        "backend_roles": ["readall"],
        "attributes": {MANAGED_ATTRIBUTE: "true", "team": "search"},
        "description": "Analyst",
    }
    # No demo user survives.
    for demo_only in ("anomalyadmin", "kibanaro", "readall", "snapshotrestore"):
        assert demo_only not in document


def test_each_backend_role_maps_to_a_role_that_does_its_job(users: list[InternalUser]) -> None:
    files = render_security_files(users=users)
    mapping = parsed(files, "roles_mapping.yml")
    assert "admin" in mapping["all_access"]["backend_roles"]
    assert "admin" in mapping["security_rest_api_access"]["backend_roles"]
    assert mapping["kibana_server"]["users"] == ["kibanaserver"]
    assert mapping["logstash"]["backend_roles"] == ["logstash"]
    assert mapping["kibana_user"]["backend_roles"] == ["kibanauser"]
    assert mapping["readall"]["backend_roles"] == ["readall"]
    # The REST API role exists, so restapi.roles_enabled can name it.
    assert REST_API_ROLES_ENABLED == ("all_access", "security_rest_api_access")
    assert "security_rest_api_access" in parsed(files, "roles.yml")


def test_config_is_basic_internal_auth_with_a_challenge(users: list[InternalUser]) -> None:
    files = render_security_files(users=users)
    dynamic = parsed(files, "config.yml")["config"]["dynamic"]
    assert list(dynamic["authc"]) == ["basic_internal_auth_domain"]
    domain = dynamic["authc"]["basic_internal_auth_domain"]
    assert domain["http_enabled"] is True
    assert domain["http_authenticator"] == {"type": "basic", "challenge": True}
    assert domain["authentication_backend"] == {"type": "intern"}
    assert dynamic["http"]["anonymous_auth_enabled"] is False
    assert dynamic["kibana"]["server_username"] == "kibanaserver"
    assert parsed(files, "audit.yml")["config"]["enabled"] is False
    assert parsed(files, "allowlist.yml")["config"]["enabled"] is False
    everything = "".join(files.values())
    assert "demo" not in everything.lower()


def test_demo_hashes_are_refused(hashes: dict[str, str]) -> None:
    with pytest.raises(SecurityConfigError) as caught:
        render_security_files(
            users=predefined_users({**hashes, "admin": DEMO_USER_HASHES["admin"]})
        )
    assert "internal user 'admin' has a hash from the plugin's demo" in str(caught.value)


def test_every_problem_is_reported_at_once(hashes: dict[str, str]) -> None:
    admin, kibanaserver, logstash, _kibana = predefined_users(hashes)
    with pytest.raises(SecurityConfigError) as caught:
        render_security_files(
            users=[
                replace(admin, backend_roles=("admin", "extra")),
                replace(kibanaserver, reserved=False),
                logstash,
                InternalUser(name="carol", password_hash="Carol-plain-password"),
                InternalUser(name="dave", password_hash=fast_hash("Dave-pw-1")),
                InternalUser(name="dave", password_hash=fast_hash("Dave-pw-1")),
                InternalUser(name="bad:name", password_hash=fast_hash("Bad-pw-1")),
            ],
            roles={"all_access": {"cluster_permissions": ["*"]}},
        )
    problems = caught.value.problems
    assert any("predefined user 'admin' must have backend roles ['admin']" in p for p in problems)
    assert any("predefined user 'kibanaserver' must have reserved=True" in p for p in problems)
    assert any("'carol' has no valid bcrypt hash" in p for p in problems)
    assert any("'dave' is defined twice" in p for p in problems)
    assert any("'bad:name'" in p for p in problems)
    assert any("predefined user 'kibana' is missing" in p for p in problems)
    assert any("role 'all_access' is built in" in p for p in problems)
    assert "Carol-plain-password" not in str(caught.value).replace("'carol'", "")


def test_predefined_users_need_every_hash(hashes: dict[str, str]) -> None:
    incomplete = {name: value for name, value in hashes.items() if name != "logstash"}
    with pytest.raises(SecurityConfigError, match="'logstash'"):
        predefined_users(incomplete)


def test_extra_roles_and_mappings(users: list[InternalUser]) -> None:
    files = render_security_files(
        users=users,
        roles={
            "orders_writer": {
                "index_permissions": [
                    {"index_patterns": ["orders-*"], "allowed_actions": ["crud"]}
                ],
                "cluster_permissions": ["cluster_composite_ops"],
            }
        },
        role_mappings={
            "orders_writer": RoleMapping(backend_roles=("orders",)),
            "all_access": RoleMapping(users=("alice",)),
        },
    )
    roles = parsed(files, "roles.yml")
    assert roles["orders_writer"]["cluster_permissions"] == ["cluster_composite_ops"]
    mapping = parsed(files, "roles_mapping.yml")
    assert mapping["orders_writer"]["backend_roles"] == ["orders"]
    assert mapping["all_access"]["backend_roles"] == ["admin"]
    assert mapping["all_access"]["users"] == ["alice"]


# --- digests ------------------------------------------------------------------------------


def test_digests_change_only_for_the_changed_types(
    users: list[InternalUser], alice: InternalUser
) -> None:
    base = security_config_digest(render_security_files(users=users))
    assert set(base) == set(SECURITY_CONFIG_TYPES.values())
    assert security_config_digest(render_security_files(users=users)) == base

    new_password = [*users[:-1], replace(alice, password_hash=fast_hash("Alice-pw-2"))]
    after_password = security_config_digest(render_security_files(users=new_password))
    assert changed_config_types(base, after_password) == ["internalusers"]

    after_mapping = security_config_digest(
        render_security_files(users=users, role_mappings={"readall": RoleMapping(users=("alice",))})
    )
    assert changed_config_types(base, after_mapping) == ["rolesmapping"]

    after_both = security_config_digest(
        render_security_files(
            users=new_password,
            roles={"viewer": {"cluster_permissions": ["cluster_monitor"]}},
            role_mappings={"viewer": RoleMapping(backend_roles=("viewers",))},
        )
    )
    assert changed_config_types(base, after_both) == ["internalusers", "roles", "rolesmapping"]
    assert changed_config_types(None, base) == list(SECURITY_CONFIG_TYPES.values())
    assert changed_config_types(base, base) == []
    assert overall_digest(base) == overall_digest(dict(reversed(list(base.items()))))
    assert overall_digest(base) != overall_digest(after_password)


def test_digest_marker_round_trip(users: list[InternalUser]) -> None:
    digests = security_config_digest(render_security_files(users=users))
    marker = render_digest_marker(digests)
    assert parse_digest_marker(marker) == digests
    assert render_digest_marker(dict(reversed(list(digests.items())))) == marker
    assert parse_digest_marker(None) is None
    assert parse_digest_marker("not json") is None
    assert parse_digest_marker('{"types": 3}') is None


def test_digest_rejects_unknown_files() -> None:
    with pytest.raises(SecurityConfigError, match=r"opensearch\.yml"):
        security_config_digest({"opensearch.yml": ""})


# --- users created through the REST API ---------------------------------------------------


def test_reload_keeps_users_created_through_the_api(
    users: list[InternalUser], hashes: dict[str, str]
) -> None:
    rendered = render_security_files(users=users)["internal_users.yml"]
    cluster = yaml.safe_load(rendered)
    # In the cluster: a user made through the REST API, a user the inventory dropped since,
    # and alice with a password changed through the API.
    cluster["api_made"] = {
        "hash": fast_hash("Api-pw-1"),
        "reserved": False,
        "backend_roles": ["readall"],
        "attributes": {},
        "description": "made through PUT internalusers",
    }
    cluster["retired"] = {
        "hash": fast_hash("Retired-pw-1"),
        "reserved": False,
        "backend_roles": [],
        "attributes": {MANAGED_ATTRIBUTE: "true"},
        "description": "",
    }
    cluster["alice"] = {**cluster["alice"], "hash": fast_hash("Alice-pw-api")}
    merge = merge_unmanaged_users(rendered, yaml.safe_dump(cluster))
    assert merge.kept_users == ("api_made",)
    assert merge.dropped_users == ("retired",)
    merged = yaml.safe_load(merge.text)
    assert merged["api_made"] == cluster["api_made"]
    assert "retired" not in merged
    assert merged["alice"]["hash"] == users[-1].password_hash  # the inventory decides
    assert merged["admin"]["hash"] == hashes["admin"]
    # Nothing to keep: the rendered text is loaded byte for byte.
    assert merge_unmanaged_users(rendered, rendered).text == rendered


def test_merge_refuses_a_file_that_is_not_internal_users() -> None:
    with pytest.raises(SecurityConfigError, match="internalusers"):
        merge_unmanaged_users("_meta: {type: internalusers, config_version: 2}\n", "_meta: {}\n")


# --- the plugin's own validator -----------------------------------------------------------


@pytest.mark.slow
def test_the_security_plugin_accepts_the_rendered_files(
    users: list[InternalUser], tmp_path: Path
) -> None:
    java = shutil.which("java")
    if java is None:
        pytest.skip("java is not on PATH; install a JDK 17 to run securityadmin -vc")
    jars = tmp_path / "jars"
    jars.mkdir()
    for archive_path, wanted in ((security_plugin_zip(), ""), (engine_zip(), "/lib/")):
        with zipfile.ZipFile(archive_path) as archive:
            for name in archive.namelist():
                if name.endswith(".jar") and wanted in name and name.count("/") <= 2:
                    (jars / Path(name).name).write_bytes(archive.read(name))
    config = tmp_path / "config"
    config.mkdir()
    files = render_security_files(
        users=users,
        roles={"viewer": {"cluster_permissions": ["cluster_monitor"]}},
        role_mappings={"viewer": RoleMapping(backend_roles=("viewers",))},
    )
    for name, text in files.items():
        (config / name).write_text(text)
    result = subprocess.run(
        [
            java,
            "-cp",
            f"{jars}/*",
            "org.opensearch.security.tools.SecurityAdmin",
            "-vc",
            "7",
            "-cd",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (
        "internal_users.yml",
        "roles.yml",
        "roles_mapping.yml",
        "action_groups.yml",
        "tenants.yml",
        "config.yml",
        "audit.yml",
    ):
        assert f"{name} OK" in result.stdout
    assert "ERR" not in result.stdout
