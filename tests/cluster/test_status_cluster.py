"""scripts/status against the real cluster (the lab, or a molecule scenario's verify).

It runs the command as an operator does, on the same cluster.json / lab.json the other
client tests read (CLUSTERFORGE_CLUSTER_JSON), and checks what it reports against what
the cluster and its certificates say through other paths.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import client_for
from cryptography import x509

# A disk over a watermark depends on the machine the test runs on, not on the toolkit.
ENVIRONMENT_PROBLEM = "watermark ("


@pytest.fixture(scope="session")
def cluster_json(cluster: dict[str, Any]) -> str:
    """The path of the description the ``cluster`` fixture read (it skips without one)."""
    return os.environ["CLUSTERFORGE_CLUSTER_JSON"]


def run_status(cluster_json: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clusterforge.status", "--lab-json", cluster_json, *extra],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def status_report(cluster: dict[str, Any], cluster_json: str) -> tuple[int, dict[str, Any]]:
    done = run_status(cluster_json, "--json")
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_status_reports_the_cluster_as_it_is(cluster: dict[str, Any], cluster_json: str) -> None:
    returncode, report = status_report(cluster, cluster_json)
    unexpected = [p for p in report["problems"] if ENVIRONMENT_PROBLEM not in p]
    assert unexpected == [], unexpected
    assert returncode == (1 if report["problems"] else 0)
    assert report["cluster"]["health"] == "green"
    assert report["cluster"]["nodes_present"] == len(cluster["nodes"])
    assert report["cluster"]["versions"] == [cluster["version"]]
    assert set(report["cluster"]["watermarks"]) == {
        "threshold_enabled",
        "low",
        "high",
        "flood_stage",
    }

    live = client_for(cluster, cluster["nodes"][0]["url"])
    stats = live.nodes.stats(metric="jvm")["nodes"]
    uptimes = {node["name"]: node["jvm"]["uptime_in_millis"] // 1000 for node in stats.values()}
    plugins = live.cat.plugins(format="json")
    for node in report["nodes"]:
        assert node["in_cluster"] and node["reachable"], node
        assert node["version"] == cluster["version"]
        # Status ran before the live read, so its uptime cannot be larger.
        assert 0 < node["uptime_seconds"] <= uptimes[node["name"]]
        assert 0 < node["heap_used_percent"] <= 100
        assert 0 <= node["disk"]["used_percent"] <= 100
        assert {(p["name"], p["version"]) for p in node["plugins"]} == {
            (p["component"], p["version"]) for p in plugins if p["name"] == node["name"]
        }


def test_security_state_and_digest(cluster: dict[str, Any], cluster_json: str) -> None:
    _, report = status_report(cluster, cluster_json)
    security = report["security"]
    if cluster["mode"] == "open":
        assert security == {"enabled": False, "initialized": None, "config": None}
        return
    assert security["initialized"] is True
    assert len(security["config"]["sha256"]) == 64
    # Nothing changed the configuration in between: the digest is stable.
    _, again = status_report(cluster, cluster_json)
    assert again["security"]["config"] == security["config"]


def test_each_node_reports_the_certificate_it_serves(
    cluster: dict[str, Any], cluster_json: str
) -> None:
    _, report = status_report(cluster, cluster_json)
    if cluster["mode"] != "tls":
        assert all(node["certificate"] is None for node in report["nodes"])
        return
    urls = {node["name"]: node["url"] for node in cluster["nodes"]}
    for node in report["nodes"]:
        served = node["certificate"]
        assert served["verified"] is True, served
        assert served["days_left"] > 0
        # The same handshake done here with the stdlib alone, to compare serials.
        host_port = urls[node["name"]].split("://")[1]
        host, port = host_port.rsplit(":", 1)
        pem = ssl.get_server_certificate((host, int(port)), ca_certs=cluster["ca_cert"], timeout=10)
        certificate = x509.load_pem_x509_certificate(pem.encode())
        assert served["serial"] == format(certificate.serial_number, "x")
        assert served["not_after"] == certificate.not_valid_after_utc.isoformat()


def test_the_table_and_the_exit_code(cluster: dict[str, Any], cluster_json: str) -> None:
    done = run_status(cluster_json)
    assert done.returncode in (0, 1), done.stderr
    assert "health green" in done.stdout
    for node in cluster["nodes"]:
        assert node["name"] in done.stdout
    if cluster.get("admin_password_file"):
        password = Path(cluster["admin_password_file"]).read_text().strip()
        assert password not in done.stdout + done.stderr
