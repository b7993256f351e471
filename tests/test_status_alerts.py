"""scripts/status lists the alerts a real Alertmanager holds firing (Debian's binary on
loopback, an alert posted through its API as Prometheus posts one) and exits 1 while one
fires. The cluster's half of the report is a stand-in here (no cluster runs in this
test): tests/test_status.py covers it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from alertmanager_process import post_alert, running_alertmanager
from clusterforge.plan.monitoring.alerting import alertmanager_config, build_alerting
from clusterforge.status import command as status
from clusterforge.status.alerts import (
    AlertSource,
    alert_problems,
    alert_source,
    firing_alerts,
    render_alerts,
)

PASSWORD = "web-pw-4c1d0e"
ALERT = {"alertname": "OpenSearchNodesMissing", "cluster": "lab", "severity": "critical"}
SUMMARY = {"summary": "Cluster lab has fewer than 3 nodes"}


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "alertmanager.yml"
    config.write_text(alertmanager_config(build_alerting({}), {}))
    with running_alertmanager(config, tmp_path) as url:
        yield url


def write_lab_json(tmp_path: Path, monitoring: dict[str, Any]) -> Path:
    lab = tmp_path / "lab.json"
    lab.write_text(
        json.dumps(
            {
                "mode": "open",
                # An unused loopback address: nothing answers there.
                "nodes": [{"name": "opensearch-1", "url": "http://127.0.0.31:9200"}],
                "monitoring": monitoring,
            }
        )
    )
    return lab


@pytest.fixture
def healthy_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for the cluster's half of the report: nothing to report there."""
    monkeypatch.setattr(status, "collect", lambda *args, **kwargs: {})
    monkeypatch.setattr(status, "build_report", lambda *args, **kwargs: {"problems": []})


def test_status_exits_1_while_an_alert_fires_and_lists_it(
    alertmanager: str,
    tmp_path: Path,
    healthy_cluster: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab = write_lab_json(tmp_path, {"alertmanager": alertmanager})
    assert status.main(["--lab-json", str(lab), "--json"]) == status.EXIT_OK
    quiet = json.loads(capsys.readouterr().out)
    assert quiet["alerts"]["firing"] == []

    post_alert(alertmanager, ALERT, SUMMARY)
    assert status.main(["--lab-json", str(lab), "--json"]) == status.EXIT_PROBLEMS
    report = json.loads(capsys.readouterr().out)
    [firing] = report["alerts"]["firing"]
    assert firing["name"] == "OpenSearchNodesMissing"
    assert firing["labels"]["cluster"] == "lab"
    assert report["problems"] == [
        "alert OpenSearchNodesMissing is firing (critical): Cluster lab has fewer than 3 nodes"
    ]


def test_the_table_shows_the_firing_alert_beside_the_clusters_checks(
    alertmanager: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    post_alert(alertmanager, ALERT, SUMMARY)
    lab = write_lab_json(tmp_path, {"alertmanager": alertmanager})
    assert status.main(["--lab-json", str(lab)]) == status.EXIT_PROBLEMS
    table = capsys.readouterr().out
    assert f"alerts    1 firing ({alertmanager})" in table
    assert "critical  OpenSearchNodesMissing  Cluster lab has fewer than 3 nodes" in table
    assert "opensearch-1" in table  # the cluster's own checks are still there


def test_a_password_protected_alertmanager_is_asked_with_the_password_file(
    tmp_path: Path,
) -> None:
    web_config = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web_config.write_text(f"basic_auth_users:\n  clusterforge: {hashed}\n")
    config = tmp_path / "alertmanager.yml"
    config.write_text(alertmanager_config(build_alerting({}), {}))
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    with running_alertmanager(config, tmp_path, (f"--web.config.file={web_config}",)) as url:
        post_alert(url, ALERT, SUMMARY, auth=("clusterforge", PASSWORD))
        without = firing_alerts(AlertSource(url=url), timeout=5)
        source = alert_source({"alertmanager": url, "password_file": str(password_file)}, "x")
        assert source is not None
        with_password = firing_alerts(source, timeout=5)
    assert without["error"] == "HTTP 401"
    assert alert_problems(without) == [
        f"Alertmanager at {url} could not be read (HTTP 401); firing alerts are unknown"
    ]
    assert [alert["name"] for alert in with_password["firing"]] == ["OpenSearchNodesMissing"]
    assert PASSWORD not in repr(source)


def test_an_unreachable_alertmanager_is_a_problem() -> None:
    result = firing_alerts(AlertSource(url="http://127.0.0.31:9093"), timeout=2)
    assert result["error"]
    assert render_alerts(result)[0].startswith("alerts    unreadable at http://127.0.0.31:9093")
    assert len(alert_problems(result)) == 1


@pytest.mark.parametrize(
    ("monitoring", "expected"),
    [
        ({"alertmanager": "http://am.example.com:9093"}, "plain http to another host"),
        ({"alertmanager": "ftp://127.0.0.1"}, "is not an http(s) URL"),
        (
            {"alertmanager": "http://127.0.0.1:9093", "password_file": "/nonexistent/pw"},
            "cannot read",
        ),
    ],
)
def test_an_unusable_monitoring_object_is_a_usage_error(
    tmp_path: Path, monitoring: dict[str, Any], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = write_lab_json(tmp_path, monitoring)
    assert status.main(["--lab-json", str(lab)]) == status.EXIT_USAGE
    assert expected in capsys.readouterr().err


def test_no_monitoring_no_alerts_section(tmp_path: Path) -> None:
    assert alert_source(None, "x") is None
    assert alert_source({"prometheus": "http://127.0.0.1:9090"}, "x") is None
