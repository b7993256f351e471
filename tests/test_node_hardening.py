"""Issue 32 items 6-9 on the control node: strong TLS, failed logins recorded and slowed,
confined units, and markers only root writes (docs/hardening.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.render import render_node_files, render_template
from clusterforge.plan.plan import build_plan

ROOT = Path(__file__).resolve().parents[1]
PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}
# TLS 1.3's suites, or TLS 1.2's with ECDHE and an AEAD cipher.
STRONG_SUITE = re.compile(
    r"^TLS_(AES_(128|256)_GCM_SHA(256|384)|CHACHA20_POLY1305_SHA256"
    r"|ECDHE_(RSA|ECDSA)_WITH_(AES_(128|256)_GCM_SHA(256|384)|CHACHA20_POLY1305_SHA256))$"
)
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def nodes(pki_dir: Path, mode: str = "tls", **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    common = {
        "opensearch_security_mode": mode,
        "opensearch_pki_dir": str(pki_dir),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
        **overrides,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{70 + i}", **common}) for i in (1, 2, 3)]


def node_settings(plan: dict[str, Any]) -> dict[str, Any]:
    loaded = yaml.safe_load(plan["nodes"]["os-1"]["files"]["opensearch.yml"])
    assert isinstance(loaded, dict)
    return loaded


def security_document(plan: dict[str, Any], name: str) -> dict[str, Any]:
    loaded = yaml.safe_load(plan["security"]["files"][name])
    assert isinstance(loaded, dict)
    return loaded


# --- item 6: TLS 1.3 and 1.2 only, ECDHE with AEAD on 1.2 -------------------------------


def test_both_layers_accept_only_tls_1_3_and_1_2_with_strong_suites(tmp_path: Path) -> None:
    settings = node_settings(build_plan(nodes(tmp_path), fetch=False))
    for layer in ("http", "transport"):
        assert settings[f"plugins.security.ssl.{layer}.enabled_protocols"] == ["TLSv1.3", "TLSv1.2"]
        suites = settings[f"plugins.security.ssl.{layer}.enabled_ciphers"]
        assert suites, layer
        assert all(STRONG_SUITE.match(suite) for suite in suites), suites
        # The finding: DHE-RSA-AES128-SHA is TLS_DHE_RSA_WITH_AES_128_CBC_SHA here.
        assert not any("CBC" in suite or suite.endswith("_SHA") for suite in suites)


def test_basic_mode_sets_the_policy_on_transport_its_only_tls_layer(tmp_path: Path) -> None:
    settings = node_settings(build_plan(nodes(tmp_path, mode="basic"), fetch=False))
    assert settings["plugins.security.ssl.transport.enabled_protocols"] == ["TLSv1.3", "TLSv1.2"]
    assert not any(key.startswith("plugins.security.ssl.http.enabled_") for key in settings)


def test_an_open_cluster_gets_no_tls_settings() -> None:
    cluster = build_cluster(
        [("os-1", {"ansible_host": "127.0.0.71", "opensearch_security_mode": "open"})]
    )
    settings = yaml.safe_load(render_node_files(cluster, cluster.nodes[0])["opensearch.yml"])
    assert not any(key.startswith("plugins.security.ssl") for key in settings)
    assert "plugins.security.audit.type" not in settings


def test_tls_1_3_alone_narrows_the_policy(tmp_path: Path) -> None:
    settings = node_settings(
        build_plan(
            nodes(
                tmp_path,
                opensearch_tls_protocols=["TLSv1.3"],
                opensearch_tls_ciphers=["TLS_AES_256_GCM_SHA384"],
            ),
            fetch=False,
        )
    )
    assert settings["plugins.security.ssl.http.enabled_protocols"] == ["TLSv1.3"]
    assert settings["plugins.security.ssl.transport.enabled_ciphers"] == ["TLS_AES_256_GCM_SHA384"]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"opensearch_tls_protocols": ["TLSv1.1"]}, "opensearch_tls_protocols"),
        ({"opensearch_tls_protocols": []}, "opensearch_tls_protocols is empty"),
        (
            {"opensearch_tls_ciphers": ["TLS_DHE_RSA_WITH_AES_128_CBC_SHA"]},
            "opensearch_tls_ciphers",
        ),
        (
            {"opensearch_tls_ciphers": ["TLS_AES_256_GCM_SHA384"]},
            "opensearch_tls_protocols has TLSv1.2 but opensearch_tls_ciphers has no suite",
        ),
        (
            {
                "opensearch_tls_protocols": ["TLSv1.3"],
                "opensearch_tls_ciphers": ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"],
            },
            "opensearch_tls_protocols has TLSv1.3 but opensearch_tls_ciphers has no suite",
        ),
    ],
)
def test_a_weak_or_unusable_tls_policy_is_refused_by_name(
    overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(InventoryError) as refused:
        build_cluster([("os-1", {"ansible_host": "127.0.0.71", **overrides})])
    assert named in str(refused.value)


# --- item 9: failed logins recorded and slowed ---------------------------------------------


def test_failed_logins_are_audited_alone_into_the_rolled_log(tmp_path: Path) -> None:
    plan = build_plan(nodes(tmp_path), fetch=False)
    settings = node_settings(plan)
    assert settings["plugins.security.audit.type"] == "log4j"
    audit = security_document(plan, "audit.yml")["config"]
    assert audit["enabled"] is True
    categories = {
        "AUTHENTICATED",
        "GRANTED_PRIVILEGES",
        "MISSING_PRIVILEGES",
        "BAD_HEADERS",
        "SSL_EXCEPTION",
        "OPENDISTRO_SECURITY_INDEX_ATTEMPT",
        "INDEX_EVENT",
        "FAILED_LOGIN",
    }
    for layer in ("rest", "transport"):
        assert audit["audit"][f"enable_{layer}"] is True
        left_out = set(audit["audit"][f"disabled_{layer}_categories"])
        assert categories - left_out == {"FAILED_LOGIN"}
    assert audit["audit"]["exclude_sensitive_headers"] is True
    assert audit["audit"]["log_request_body"] is False


def test_failed_logins_are_limited_per_address(tmp_path: Path) -> None:
    plan = build_plan(
        nodes(
            tmp_path,
            opensearch_auth_failure_allowed_tries=5,
            opensearch_auth_failure_time_window="2m",
            opensearch_auth_failure_block_expiry="1h",
        ),
        fetch=False,
    )
    listeners = security_document(plan, "config.yml")["config"]["dynamic"]["auth_failure_listeners"]
    assert list(listeners) == ["ip_rate_limiting"]
    limit = listeners["ip_rate_limiting"]
    assert limit["type"] == "ip"
    assert (
        limit["allowed_tries"],
        limit["time_window_seconds"],
        limit["block_expiry_seconds"],
    ) == (
        5,
        120,
        3600,
    )


def test_both_can_be_turned_off(tmp_path: Path) -> None:
    plan = build_plan(
        nodes(
            tmp_path,
            opensearch_audit_failed_logins=False,
            opensearch_auth_failure_allowed_tries=0,
        ),
        fetch=False,
    )
    assert "plugins.security.audit.type" not in node_settings(plan)
    assert security_document(plan, "audit.yml")["config"]["enabled"] is False
    dynamic = security_document(plan, "config.yml")["config"]["dynamic"]
    assert "auth_failure_listeners" not in dynamic


def test_changing_the_limit_reloads_only_the_config_type(tmp_path: Path) -> None:
    before = build_plan(nodes(tmp_path), fetch=False)["security"]["digests"]
    after = build_plan(nodes(tmp_path, opensearch_auth_failure_allowed_tries=3), fetch=False)[
        "security"
    ]["digests"]
    assert {kind for kind in before if before[kind] != after[kind]} == {"config"}


# --- item 8: the markers live where only root writes -------------------------------------------


def test_markers_live_in_the_state_directory_and_their_old_places_are_known(
    tmp_path: Path,
) -> None:
    facts = build_plan(nodes(tmp_path), fetch=False)["cluster"]
    state_dir, data_path = facts["state_dir"], facts["data_path"]
    assert state_dir == "/var/lib/clusterforge/opensearch"
    assert not state_dir.startswith(data_path + "/")
    assert set(facts["markers"]) == set(facts["legacy_markers"])
    for key, path in facts["markers"].items():
        assert os.path.dirname(path) == state_dir, key
        legacy = facts["legacy_markers"][key]
        assert os.path.dirname(legacy) == data_path
        assert os.path.basename(legacy) == os.path.basename(path)
    assert facts["markers"]["security_loaded"].endswith("/.clusterforge-security-loaded.json")


def test_a_state_directory_the_service_user_owns_is_refused() -> None:
    with pytest.raises(InventoryError) as refused:
        build_cluster(
            [
                (
                    "os-1",
                    {
                        "ansible_host": "127.0.0.71",
                        "opensearch_security_mode": "open",
                        "opensearch_state_dir": "/var/lib/opensearch/clusterforge",
                    },
                )
            ]
        )
    assert (
        "opensearch_state_dir /var/lib/opensearch/clusterforge is inside opensearch_data_path"
        in (str(refused.value))
    )


def _move_script() -> str:
    role_vars = yaml.safe_load((ROOT / "roles/opensearch/vars/main.yml").read_text())
    return str(role_vars["_opensearch_move_markers_script"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the move makes the markers root's")
def test_a_rerun_moves_old_markers_and_drops_links_and_leftovers(tmp_path: Path) -> None:
    old, new = tmp_path / "data", tmp_path / "state"
    old.mkdir()
    new.mkdir()
    (old / "formed").write_text("formed as blue\n")
    (old / "loaded").write_text('{"config": "abc"}\n')
    secret = tmp_path / "secret"
    secret.write_text("not for the markers\n")
    (old / "mode").symlink_to(secret)
    (old / "log").write_text("an old line\n")
    (new / "log").write_text("the kept line\n")
    pairs = [
        str(path)
        for name in ("formed", "loaded", "mode", "log")
        for path in (old / name, new / name)
    ]

    moved = subprocess.run(
        ["sh", "-c", _move_script(), "sh", *pairs], check=True, capture_output=True, text=True
    )

    assert (new / "formed").read_text() == "formed as blue\n"
    assert (new / "loaded").read_text() == '{"config": "abc"}\n'
    assert oct((new / "formed").stat().st_mode & 0o777) == "0o644"
    assert (new / "formed").stat().st_uid == 0
    # A link is never followed into the state directory; the file it named is untouched.
    assert not (new / "mode").exists() and not (new / "mode").is_symlink()
    assert secret.read_text() == "not for the markers\n"
    # The state directory's file wins over an old one, which goes.
    assert (new / "log").read_text() == "the kept line\n"
    assert not any(old.iterdir())
    assert moved.stdout.split() == [
        str(new / "formed"),
        str(new / "loaded"),
        str(old / "mode"),
        str(old / "log"),
    ]
    again = subprocess.run(
        ["sh", "-c", _move_script(), "sh", *pairs], check=True, capture_output=True, text=True
    )
    assert again.stdout == ""


# --- item 7: confined units ---------------------------------------------------------------


def _python_service_unit() -> str:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROOT / "roles/_python_service/templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # noqa: S701 - a unit file, not HTML
    )
    environment.filters["comment"] = lambda text: f"# {text}"
    return environment.get_template("python-service.service.j2").render(
        ansible_managed="managed",
        _python_service_description="a service",
        _python_service_user="userdir",
        _python_service_data_dir="/var/lib/userdir",
        _python_service_settings_as_environment=True,
        _python_service_settings_path="/etc/userdir/userdir.env",
        _python_service_venv="/opt/userdir/venv",
        _python_service_console_script="clusterforge-userdir",
        _python_service_arguments=["--port", "8081"],
        _python_service_stop_timeout=10,
    )


def _units() -> dict[str, str]:
    cluster = build_cluster(
        [("os-1", {"ansible_host": "127.0.0.71", "opensearch_security_mode": "open"})]
    )
    console = {
        "inventory_name": "console-1",
        "service_user": "opensearch-dashboards",
        "config_dir": "/etc/opensearch-dashboards",
        "data_path": "/var/lib/opensearch-dashboards",
    }
    return {
        "opensearch.service": render_node_files(cluster, cluster.nodes[0])["opensearch.service"],
        "opensearch-dashboards.service": render_template(
            "opensearch-dashboards.service.j2",
            cluster=cluster,
            console=console,
            home="/opt/opensearch-dashboards/current",
        ),
        "userdir.service": _python_service_unit(),
    }


def _directives(unit: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


@pytest.mark.parametrize(
    "name", ["opensearch.service", "opensearch-dashboards.service", "userdir.service"]
)
def test_every_unit_is_confined(name: str) -> None:
    directives = _directives(_units()[name])
    for key, value in {
        "NoNewPrivileges": "true",
        "ProtectSystem": "strict",
        "ProtectHome": "true",
        "PrivateTmp": "true",
        "PrivateDevices": "true",
        "ProtectKernelTunables": "true",
        "ProtectKernelModules": "true",
        "ProtectKernelLogs": "true",
        "ProtectControlGroups": "true",
        "ProtectClock": "true",
        "ProtectHostname": "true",
        "CapabilityBoundingSet": "",
        "AmbientCapabilities": "",
        "RestrictNamespaces": "true",
        "LockPersonality": "true",
        "RestrictRealtime": "true",
        "RestrictSUIDSGID": "true",
        "SystemCallArchitectures": "native",
        "UMask": "0027",
    }.items():
        assert directives.get(key) == [value], (name, key)
    assert directives["SystemCallFilter"][0].startswith("@system-service")
    assert set(directives["RestrictAddressFamilies"][0].split()) <= {
        "AF_UNIX",
        "AF_INET",
        "AF_INET6",
        "AF_NETLINK",
    }


def test_each_unit_writes_only_its_own_paths() -> None:
    units = {name: _directives(text) for name, text in _units().items()}
    assert units["opensearch.service"]["ReadWritePaths"] == [
        "/var/lib/opensearch /var/log/opensearch /var/backups/opensearch "
        "/opt/opensearch/current/logs"
    ]
    assert units["opensearch-dashboards.service"]["ReadWritePaths"] == [
        "/var/lib/opensearch-dashboards"
    ]
    assert units["userdir.service"]["ReadWritePaths"] == ["/var/lib/userdir"]
    # The arguments end the line; the next directive must not be glued to the last one.
    assert units["userdir.service"]["ExecStart"] == [
        "/opt/userdir/venv/bin/clusterforge-userdir --port 8081"
    ]
    assert units["userdir.service"]["Restart"] == ["on-failure"]
    # A JIT writes the code it runs: the JVM and V8 cannot have it; CPython does.
    assert "MemoryDenyWriteExecute" not in units["opensearch.service"]
    assert "MemoryDenyWriteExecute" not in units["opensearch-dashboards.service"]
    assert units["userdir.service"]["MemoryDenyWriteExecute"] == ["true"]


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="needs systemd-analyze")
@pytest.mark.parametrize(
    "name", ["opensearch.service", "opensearch-dashboards.service", "userdir.service"]
)
def test_systemd_scores_every_unit_below_five(name: str, tmp_path: Path) -> None:
    unit = tmp_path / name
    unit.write_text(_units()[name])
    analysis = subprocess.run(
        [str(SYSTEMD_ANALYZE), "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", analysis.stdout)
    assert score, analysis.stdout + analysis.stderr
    assert float(score.group(1)) < 5.0, analysis.stdout
