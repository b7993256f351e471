"""scripts/status's rules and output shape, fed recorded API answers (no network).

The answers below are shaped like OpenSearch 2.19's (trimmed to the fields status reads);
tests/cluster/test_status_cluster.py runs the same code against a real cluster.
"""

from __future__ import annotations

import copy
import json
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusterforge.client import ClusterClient
from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import SubjectFields, load_certificate
from clusterforge.pki.issuing import ensure_node_certificate
from clusterforge.status import command as status
from clusterforge.status.probe import served_certificate
from clusterforge.status.report import (
    build_report,
    effective_setting,
    parse_watermark,
    security_digest,
)
from clusterforge.status.target import (
    SECURITY_CONFIG_TYPES,
    ExpectedNode,
    StatusConfigError,
    Target,
    load_lab_json,
    service_health_url,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
GIB = 1024**3


def make_target(**changes: Any) -> Target:
    fields: dict[str, Any] = {
        "source": "lab.json",
        "cluster_name": "lab",
        "mode": "tls",
        "version": "2.19.4",
        "nodes": tuple(
            ExpectedNode(name=f"opensearch-{i}", url=f"https://127.0.0.1{i}:9200")
            for i in (1, 2, 3)
        ),
        "ca_cert": Path("/nonexistent/ca.pem"),
        "admin_user": "admin",
        "admin_password": "s3cret-not-printed",
    }
    fields.update(changes)
    return Target(**fields)


def ok(body: Any) -> dict[str, Any]:
    return {"status": 200, "body": body}


def recorded_answers(
    names: tuple[str, ...] = ("opensearch-1", "opensearch-2", "opensearch-3"),
) -> dict[str, Any]:
    def node_info(name: str) -> dict[str, Any]:
        index = name[-1]
        return {
            "name": name,
            "ip": f"127.0.0.1{index}",
            "version": "2.19.4",
            "roles": ["cluster_manager", "data", "ingest"],
            "http": {"publish_address": f"127.0.0.1{index}:9200"},
            "plugins": [
                {"name": "opensearch-security", "version": "2.19.4.0"},
                {"name": "analysis-smartcn", "version": "2.19.4"},
            ],
        }

    def node_stats(total: int, available: int) -> dict[str, Any]:
        return {
            "jvm": {"uptime_in_millis": 3_723_000, "mem": {"heap_used_percent": 41}},
            "fs": {"total": {"total_in_bytes": total, "available_in_bytes": available}},
        }

    config = {
        kind: ok({"sample": {"kind": kind, "reserved": False}}) for kind in SECURITY_CONFIG_TYPES
    }
    return {
        "nodes_root": {name: ok({"name": name, "version": {"number": "2.19.4"}}) for name in names},
        "health": ok(
            {
                "cluster_name": "lab",
                "status": "green",
                "number_of_nodes": len(names),
                "unassigned_shards": 0,
            }
        ),
        "nodes_info": ok({"nodes": {f"id-{name}": node_info(name) for name in names}}),
        "nodes_stats": ok(
            {"nodes": {f"id-{name}": node_stats(100 * GIB, 80 * GIB) for name in names}}
        ),
        "settings": ok(
            {
                "persistent": {},
                "transient": {},
                "defaults": {
                    "cluster.routing.allocation.disk.threshold_enabled": "true",
                    "cluster.routing.allocation.disk.watermark.low": "85%",
                    "cluster.routing.allocation.disk.watermark.high": "90%",
                    "cluster.routing.allocation.disk.watermark.flood_stage": "95%",
                },
            }
        ),
        "security_health": ok({"message": None, "mode": "strict", "status": "UP"}),
        "security_config": config,
        "certificates": {
            name: {
                "subject": f"CN={name}",
                "issuer": "CN=lab Root CA",
                "serial": "1a2b",
                "not_after": (NOW + timedelta(days=700)).isoformat(),
                "sha256": "00" * 32,
                "verified": True,
                "verify_error": None,
            }
            for name in names
        },
        "services": {},
    }


def test_a_healthy_cluster_has_no_problems_and_the_documented_shape() -> None:
    report = build_report(make_target(), recorded_answers(), now=NOW)
    assert report["problems"] == []
    assert set(report) == {
        "checked_at", "source", "cluster", "nodes", "security", "console", "services",
        "snapshots", "problems"
    }  # fmt: skip
    assert report["cluster"]["health"] == "green"
    assert report["cluster"]["nodes_present"] == report["cluster"]["nodes_expected"] == 3
    assert report["cluster"]["watermarks"] == {
        "threshold_enabled": True, "low": "85%", "high": "90%", "flood_stage": "95%"
    }  # fmt: skip
    first = report["nodes"][0]
    assert first["address"] == "127.0.0.11:9200"
    assert first["uptime_seconds"] == 3723
    assert first["heap_used_percent"] == 41
    assert first["disk"] == {
        "total_bytes": 100 * GIB, "available_bytes": 80 * GIB, "used_percent": 20.0, "over": None
    }  # fmt: skip
    assert [p["name"] for p in first["plugins"]] == ["analysis-smartcn", "opensearch-security"]
    assert first["certificate"]["days_left"] == 700
    assert report["security"]["initialized"] is True
    assert len(report["security"]["config"]["sha256"]) == 64
    assert set(report["security"]["config"]["types"]) == set(SECURITY_CONFIG_TYPES)
    assert report["console"] is None and report["services"] == {}
    json.dumps(report)  # the --json document serialises as is


def test_yellow_health_is_a_problem() -> None:
    answers = recorded_answers()
    answers["health"]["body"].update(status="yellow", unassigned_shards=4)
    problems = build_report(make_target(), answers, now=NOW)["problems"]
    assert problems == ["cluster health is yellow (4 unassigned shards)"]


def test_a_missing_node_is_a_problem_and_named() -> None:
    answers = recorded_answers(("opensearch-1", "opensearch-3"))
    answers["nodes_root"]["opensearch-2"] = {"error": "ConnectionRefusedError: refused"}
    answers["health"]["body"]["status"] = "yellow"
    report = build_report(make_target(), answers, now=NOW)
    assert report["cluster"]["nodes_present"] == 2
    assert any("opensearch-2 is missing from the cluster (2 of 3" in p for p in report["problems"])
    assert any("opensearch-2 is unreachable" in p for p in report["problems"])
    row = next(node for node in report["nodes"] if node["name"] == "opensearch-2")
    assert row["in_cluster"] is False and row["reachable"] is False


def test_a_certificate_within_the_renewal_window_is_a_problem() -> None:
    answers = recorded_answers()
    answers["certificates"]["opensearch-3"]["not_after"] = (NOW + timedelta(days=29)).isoformat()
    problems = build_report(make_target(renew_within_days=30), answers, now=NOW)["problems"]
    assert len(problems) == 1
    assert "opensearch-3" in problems[0] and "opensearch_cert_renew_within_days (30)" in problems[0]
    assert build_report(make_target(renew_within_days=10), answers, now=NOW)["problems"] == []


def test_expired_and_unverified_certificates_are_problems() -> None:
    answers = recorded_answers()
    answers["certificates"]["opensearch-1"]["not_after"] = (NOW - timedelta(days=1)).isoformat()
    answers["certificates"]["opensearch-2"].update(
        verified=False, verify_error="unable to get local issuer certificate"
    )
    answers["certificates"]["opensearch-3"] = {"error": "TimeoutError: timed out"}
    problems = build_report(make_target(), answers, now=NOW)["problems"]
    assert len(problems) == 3
    assert "expired" in problems[0]
    assert "does not verify: unable to get local issuer" in problems[1]
    assert "no TLS handshake" in problems[2]


@pytest.mark.parametrize(
    ("settings", "available_gib", "over"),
    [
        ({}, 80, None),  # 20% used, defaults 85/90/95
        ({}, 14, "low"),  # 86% used
        ({}, 4, "flood_stage"),  # 96% used
        ({"persistent": {"cluster.routing.allocation.disk.watermark.low": "0.5"}}, 40, "low"),
        # A transient setting wins over a persistent one.
        (
            {
                "persistent": {"cluster.routing.allocation.disk.watermark.low": "50%"},
                "transient": {"cluster.routing.allocation.disk.watermark.low": "70%"},
            },
            40,
            None,
        ),
        # Byte watermarks name the free space left, not the space used.
        ({"persistent": {"cluster.routing.allocation.disk.watermark.low": "50gb"}}, 40, "low"),
        ({"persistent": {"cluster.routing.allocation.disk.threshold_enabled": "false"}}, 4, None),
    ],
)
def test_disk_use_against_the_effective_watermarks(
    settings: dict[str, Any], available_gib: int, over: str | None
) -> None:
    answers = recorded_answers()
    for scope, values in settings.items():
        answers["settings"]["body"][scope].update(values)
    stats = answers["nodes_stats"]["body"]["nodes"]["id-opensearch-2"]
    stats["fs"]["total"]["available_in_bytes"] = available_gib * GIB
    report = build_report(make_target(), answers, now=NOW)
    assert report["nodes"][1]["disk"]["over"] == over
    assert bool(report["problems"]) == (over is not None)
    if over:
        assert report["problems"][0].startswith(f"node opensearch-2: disk {100 - available_gib}.0%")


def test_watermark_forms() -> None:
    assert parse_watermark("85%") == {"used_percent": 85.0}
    assert parse_watermark("0.9") == {"used_percent": 90.0}
    assert parse_watermark("500mb") == {"free_bytes": 500 * 1024**2}
    with pytest.raises(ValueError, match="unrecognised"):
        parse_watermark("lots")
    assert effective_setting({"defaults": {"a": 1}, "persistent": {"a": 2}}, "a") == 2


def test_version_skew_and_a_version_other_than_the_inventory_are_problems() -> None:
    answers = recorded_answers()
    answers["nodes_info"]["body"]["nodes"]["id-opensearch-3"]["version"] = "2.19.3"
    problems = build_report(make_target(), answers, now=NOW)["problems"]
    assert problems[0] == (
        "version skew between nodes: {'2.19.3': ['opensearch-3'], "
        "'2.19.4': ['opensearch-1', 'opensearch-2']}"
    )
    assert problems[1] == "nodes run 2.19.3, 2.19.4 but the inventory says 2.19.4"


def test_security_not_initialized_is_a_problem_in_secured_modes_only() -> None:
    answers = recorded_answers()
    answers["security_health"] = {
        "status": 503,
        "body": {"status": "DOWN", "message": "Not initialized"},
    }
    for kind in SECURITY_CONFIG_TYPES:
        answers["security_config"][kind] = {"status": 503, "body": "not initialized"}
    report = build_report(make_target(), answers, now=NOW)
    assert report["security"]["initialized"] is False
    assert report["security"]["config"] is None
    # Not initialized explains the unreadable configuration: one problem, not two.
    assert [p.split(" (")[0] for p in report["problems"]] == ["security is not initialized"]

    open_answers = recorded_answers()
    del open_answers["security_health"], open_answers["security_config"]
    open_answers["certificates"] = {}
    report = build_report(make_target(mode="open", ca_cert=None), open_answers, now=NOW)
    assert report["problems"] == []
    assert report["security"] == {"enabled": False, "initialized": None, "config": None}


def test_the_digest_covers_every_type_and_changes_with_any() -> None:
    config = recorded_answers()["security_config"]
    first = security_digest(config)
    changed = copy.deepcopy(config)
    changed["roles"]["body"]["sample"]["reserved"] = True
    second = security_digest(changed)
    assert first["sha256"] != second["sha256"]
    assert first["types"]["roles"] != second["types"]["roles"]
    assert first["types"]["tenants"] == second["types"]["tenants"]
    # Key order in the answers does not change the digest (canonical JSON).
    reordered = {
        kind: {"body": dict(reversed(list(a["body"].items())))} for kind, a in config.items()
    }
    assert security_digest(reordered)["sha256"] == first["sha256"]


def test_console_and_services_present_healthy_unhealthy_and_absent() -> None:
    target = make_target(
        console="http://127.0.0.11:5601",
        services={
            "user_directory": "http://127.0.0.21:8081/mock-api/health",
            "orders": "http://127.0.0.21:8082/health",
        },
    )
    answers = recorded_answers()
    answers["console"] = ok({"status": {"overall": {"state": "green"}}})
    answers["services"] = {
        "user_directory": ok({"status": "ok"}),
        "orders": {"error": "ConnectionRefusedError: [Errno 111] Connection refused"},
    }
    report = build_report(target, answers, now=NOW)
    assert report["console"]["healthy"] is True
    assert report["services"]["user_directory"]["healthy"] is True
    assert report["services"]["orders"]["healthy"] is False
    assert report["problems"] == [
        "service orders at http://127.0.0.21:8082/health is not healthy: "
        "ConnectionRefusedError: [Errno 111] Connection refused"
    ]
    answers["console"] = {"status": 503, "body": {"status": {"overall": {"state": "red"}}}}
    assert any("the console" in p for p in build_report(target, answers, now=NOW)["problems"])


def test_the_table_names_every_node_and_problem_and_never_the_password() -> None:
    answers = recorded_answers()
    answers["health"]["body"]["status"] = "yellow"
    target = make_target()
    table = status.render_table(build_report(target, answers, now=NOW))
    assert "health yellow" in table and "nodes 3/3" in table
    for name in ("opensearch-1", "opensearch-2", "opensearch-3", "analysis-smartcn 2.19.4"):
        assert name.split()[0] in table
    assert "1 problem(s):\n  - cluster health is yellow" in table
    assert "s3cret" not in table and "s3cret" not in repr(target)


def test_lab_json_loading(tmp_path: Path) -> None:
    password = tmp_path / "admin"
    password.write_text("pw\n")
    lab = tmp_path / "lab.json"
    facts = {
        "mode": "basic",
        "nodes": [{"name": "n1", "url": "http://127.0.0.11:9200"}],
        "admin_user": "admin",
        "admin_password_file": str(password),
        "services": {
            "user_directory": "http://127.0.0.11:8081",
            "orders": "http://127.0.0.11:8082/",
        },
    }
    lab.write_text(json.dumps(facts))
    target = load_lab_json(lab)
    assert target.admin_password == "pw" and target.console is None
    assert dict(target.services) == {
        "user_directory": "http://127.0.0.11:8081/mock-api/health",
        "orders": "http://127.0.0.11:8082/health",
    }
    lab.write_text(json.dumps({"mode": "tls"}))
    with pytest.raises(StatusConfigError, match="lacks 'nodes'"):
        load_lab_json(lab)
    assert service_health_url("orders", "http://h:1/custom") == "http://h:1/custom"


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert status.main(["--lab-json", str(tmp_path / "absent.json")]) == status.EXIT_USAGE
    assert "run scripts/up first" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        status.main(["--vault-password-file", "x"])
    assert exited.value.code == 2


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """A real HTTPS server on loopback serving a certificate issued by a throwaway CA."""
    subject = SubjectFields(common_name="status-test Root CA")
    ca = load_or_create_ca(tmp_path / "pki", passphrase=b"status-test", subject=subject)
    issued = ensure_node_certificate(
        ca,
        directory=tmp_path / "pki",
        name="node",
        subject=SubjectFields(common_name="node"),
        dns_names=[],
        ip_addresses=["127.0.0.1"],
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status": "UP"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.cert_path, issued.key_path)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", ca.cert_path, issued.cert_path
    server.shutdown()
    server.server_close()


def test_the_served_certificate_is_read_from_a_real_handshake(
    tls_server: tuple[str, Path, Path],
) -> None:
    url, ca_cert, cert_path = tls_server
    served = served_certificate(url, ca_cert, timeout=5)
    issued = load_certificate(cert_path)
    assert served["verified"] is True
    assert served["serial"] == format(issued.serial_number, "x")
    assert served["not_after"] == issued.not_valid_after_utc.isoformat()
    # Reached by a name the certificate does not carry (hostname checks are on), it is
    # still read, but reported unverified.
    by_name = served_certificate(url.replace("127.0.0.1", "localhost"), ca_cert, timeout=5)
    assert by_name["verified"] is False
    assert "mismatch" in by_name["verify_error"]
    assert by_name["serial"] == served["serial"]


def test_a_certificate_from_another_ca_is_reported_unverified(
    tls_server: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, _, cert_path = tls_server
    other = load_or_create_ca(
        tmp_path / "other", passphrase=b"status-test", subject=SubjectFields(common_name="other CA")
    )
    served = served_certificate(url, other.cert_path, timeout=5)
    assert served["verified"] is False
    assert served["serial"] == format(load_certificate(cert_path).serial_number, "x")


def test_the_http_client_verifies_the_ca_and_records_refusals(
    tls_server: tuple[str, Path, Path],
) -> None:
    url, ca_cert, _ = tls_server
    client = ClusterClient(ca_cert=ca_cert, credentials=("admin", "pw"), timeout=5)
    assert client.get(f"{url}/_plugins/_security/health") == {
        "status": 200,
        "body": {"status": "UP"},
    }
    untrusting = ClusterClient(ca_cert=None, timeout=5)
    assert "CERTIFICATE_VERIFY_FAILED" in untrusting.get(url)["error"]
    assert "error" in client.get("https://127.0.0.1:1/")


def write_vaulted_inventory(root: Path, vault_password: str) -> Path:
    """A tls inventory whose admin password sits in an ansible-vault encrypted file."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([("default", VaultSecret(vault_password.encode()))])
    (root / "group_vars").mkdir(parents=True)
    (root / "hosts.yml").write_text(
        "all:\n  children:\n"
        "    opensearch:\n      hosts:\n"
        "        search-1: {ansible_host: 127.0.0.11}\n"
        "        search-2: {ansible_host: 127.0.0.12, opensearch_node_roles: [data, ingest]}\n"
        "    user_directory:\n      hosts:\n"
        "        app-1: {ansible_host: 127.0.0.21, user_directory_host: 0.0.0.0,"
        " user_directory_tls_proxy: false}\n"
        "    order_service:\n      hosts:\n"
        "        app-2: {ansible_host: 10.20.0.22, tls_proxy_listen_address: 127.0.0.1}\n"
    )
    (root / "group_vars" / "opensearch").mkdir()
    (root / "group_vars" / "opensearch" / "vars.yml").write_text(
        "opensearch_security_mode: tls\nopensearch_cert_renew_within_days: 45\n"
    )
    (root / "group_vars" / "user_directory.yml").write_text("user_directory_port: 8081\n")
    (root / "group_vars" / "order_service.yml").write_text(
        "order_service_port: 8082\norder_service_host: 127.0.0.1\n"
    )
    passwords = "".join(
        f"  {user}: vaulted-{user}-pw\n" for user in ("admin", "kibanaserver", "logstash", "kibana")
    )
    secret = vault.encrypt("opensearch_security_passwords:\n" + passwords)
    (root / "group_vars" / "opensearch" / "vault.yml").write_bytes(secret)
    return root


def test_an_inventory_with_a_vaulted_password(tmp_path: Path) -> None:
    from clusterforge.status.target import load_inventory

    inventory = write_vaulted_inventory(tmp_path / "inv", "vault-pw")
    vault_file = tmp_path / "vault-password"
    vault_file.write_text("vault-pw\n")
    target = load_inventory(inventory, vault_file)
    assert target.mode == "tls" and target.admin_user == "admin"
    assert target.admin_password == "vaulted-admin-pw"
    assert "vaulted" not in repr(target)
    assert [node.url for node in target.nodes] == [
        "https://127.0.0.11:9200",
        "https://127.0.0.12:9200",
    ]
    assert target.ca_cert == inventory / ".pki" / "ca.pem"
    assert target.renew_within_days == 45
    assert target.console is None
    assert dict(target.services) == {"user_directory": "http://127.0.0.21:8081/mock-api/health"}
    # Behind the TLS proxy (the default) the service is reached where the proxy listens.
    assert "tls_proxy_listen_address is 127.0.0.1 on app-2" in target.unchecked_services["orders"]
    with pytest.raises(StatusConfigError, match="vault"):
        load_inventory(inventory, None)


def test_when_no_node_answers_membership_and_security_are_unknown_not_missing() -> None:
    refused = {"error": "ConnectionRefusedError: [Errno 111] Connection refused"}
    answers: dict[str, Any] = {
        "nodes_root": {f"opensearch-{i}": refused for i in (1, 2, 3)},
        **{key: {"error": "no node answered"} for key in ("health", "nodes_info", "nodes_stats")},
        "settings": {"error": "no node answered"},
        "security_health": refused,
        "security_config": {kind: {"error": "no node answered"} for kind in SECURITY_CONFIG_TYPES},
        "certificates": {f"opensearch-{i}": refused for i in (1, 2, 3)},
        "services": {},
    }
    report = build_report(make_target(), answers, now=NOW)
    assert report["problems"] == [
        "the cluster did not answer its health: no node answered",
        *(
            f"node opensearch-{i} is unreachable at https://127.0.0.1{i}:9200: {refused['error']}"
            for i in (1, 2, 3)
        ),
    ]
    assert all(node["in_cluster"] is None for node in report["nodes"])
    assert report["security"]["initialized"] is None
    assert "UNREACHABLE" in status.render_table(report)


def test_a_service_behind_the_tls_proxy_is_checked_over_https_where_the_proxy_listens() -> None:
    from clusterforge.status.target import _inventory_services

    groups = {
        "user_directory": [("app-1", {"user_directory_port": 8081})],
        "order_service": [
            ("app-1", {"order_service_port": 8082, "tls_proxy_listen_address": "10.0.0.9"})
        ],
    }
    services, unchecked = _inventory_services(groups, {"app-1": "10.20.0.21"})
    assert services == {
        "user_directory": "https://10.20.0.21:8081/mock-api/health",
        "orders": "https://10.0.0.9:8082/health",
    }
    assert unchecked == {}


# --- what a killed run left half-done (issue 50) -------------------------------------------


def test_allocation_held_by_a_killed_rolling_restart_is_named_with_its_fix() -> None:
    answers = recorded_answers()
    answers["settings"]["body"]["persistent"]["cluster.routing.allocation.enable"] = "primaries"
    problems = build_report(make_target(), answers, now=NOW)["problems"]
    held = [p for p in problems if "cluster.routing.allocation.enable" in p]
    assert len(held) == 1
    assert "primaries" in held[0]
    assert "playbooks/rolling_restart.yml" in held[0]


def test_an_exclusion_left_by_a_killed_scale_in_is_named_with_its_fix() -> None:
    answers = recorded_answers()
    answers["settings"]["body"]["persistent"]["cluster.routing.allocation.exclude._name"] = "node-3"
    problems = build_report(make_target(), answers, now=NOW)["problems"]
    left = [p for p in problems if "cluster.routing.allocation.exclude._name" in p]
    assert len(left) == 1
    assert "node-3" in left[0]
    assert "site.yml" in left[0]


def test_allocation_back_to_all_and_no_exclusion_are_no_problem() -> None:
    answers = recorded_answers()
    answers["settings"]["body"]["persistent"]["cluster.routing.allocation.enable"] = "all"
    answers["settings"]["body"]["persistent"]["cluster.routing.allocation.exclude._name"] = ""
    assert build_report(make_target(), answers, now=NOW)["problems"] == []
