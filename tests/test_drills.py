"""The drills' waiting on the lab's webhook receiver (clusterforge.testing.drills), against
the real receiver (clusterforge.testing.alert_receiver) on loopback, and the lab's
monitoring variables through the plan's own checks (clusterforge.plan.monitoring.alerting)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterforge.lab.monitoring import RECEIVER_NAME, RECEIVER_TOKEN_VARIABLE, group_vars
from clusterforge.plan.monitoring.alerting import alertmanager_config, build_alerting
from clusterforge.testing import drills
from clusterforge.testing.alert_receiver import AlertReceiver
from clusterforge.testing.drills import (
    DrillError,
    Lab,
    run_drills,
    serving_receiver,
    wait_for_alert,
)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "receiver.jsonl"
    server = AlertReceiver(("127.0.0.1", 0), log_path=log, token=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/alerts", log
    finally:
        server.shutdown()
        server.server_close()


def _send(url: str, alertname: str, status: str) -> None:
    body = {"status": status, "alerts": [{"status": status, "labels": {"alertname": alertname}}]}
    request = urllib.request.Request(  # noqa: S310 - a loopback test server
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
        assert response.status == 200


def test_a_drill_sees_what_the_receiver_recorded_after_its_start(
    receiver: tuple[str, Path],
) -> None:
    url, log = receiver
    lab = Lab(facts={"monitoring": {"receiver_log": str(log)}}, repo=Path.cwd())
    _send(url, "OpenSearchNodesMissing", "firing")
    offset = log.stat().st_size
    # The firing before the drill's start does not count.
    with pytest.raises(DrillError, match="did not arrive firing"):
        wait_for_alert(lab, "OpenSearchNodesMissing", "firing", offset=offset, timeout=1)
    _send(url, "OpenSearchNodesMissing", "firing")
    _send(url, "OpenSearchNodesMissing", "resolved")
    assert wait_for_alert(lab, "OpenSearchNodesMissing", "firing", offset=offset, timeout=5) > 0
    assert wait_for_alert(lab, "OpenSearchNodesMissing", "resolved", offset=offset, timeout=5) > 0
    with pytest.raises(DrillError):
        wait_for_alert(lab, "OrderOutboxBacklog", "firing", offset=offset, timeout=1)


def test_the_lab_monitoring_variables_pass_the_plan(tmp_path: Path) -> None:
    variables = group_vars("127.0.0.21", tmp_path)
    alerting = build_alerting(variables)
    assert [receiver.name for receiver in alerting.receivers] == [RECEIVER_NAME]
    assert alerting.secret_variables == (RECEIVER_TOKEN_VARIABLE,)
    rendered = alertmanager_config(alerting, {RECEIVER_TOKEN_VARIABLE: "lab-token-0123456789"})
    assert "lab-token-0123456789" not in rendered
    assert (tmp_path / ".monitoring" / "receiver.token").stat().st_mode & 0o777 == 0o600


def _send_with_token(url: str, token: str, alertname: str, status: str) -> None:
    body = {"status": status, "alerts": [{"status": status, "labels": {"alertname": alertname}}]}
    request = urllib.request.Request(  # noqa: S310 - a loopback test server
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
        assert response.status == 200


def test_side_by_side_drills_each_see_their_alert_through_the_served_receiver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--serve-receiver and --parallel (the tls molecule scenario): each drill waits for
    the alert the other one sends, so one after the other they could not both pass."""
    log = tmp_path / "monitoring" / "receiver.jsonl"
    token_file = tmp_path / "receiver.token"
    token_file.write_text("drill-token-0123456789\n")
    lab = Lab(facts={"monitoring": {"receiver_log": str(log)}}, repo=tmp_path, status=False)
    base: dict[str, str] = {}

    def drill(mine: str, theirs: str) -> Any:
        def run(lab: Lab) -> dict[str, Any]:
            _send_with_token(base["url"] + "/alerts", "drill-token-0123456789", theirs, "firing")
            wait_for_alert(lab, mine, "firing", offset=0, timeout=10)
            return {"drill": mine}

        return run

    monkeypatch.setitem(drills.DRILLS, "a", drill("AlertOfA", "AlertOfB"))
    monkeypatch.setitem(drills.DRILLS, "b", drill("AlertOfB", "AlertOfA"))
    with serving_receiver("127.0.0.1:0", log=log, token_file=token_file) as url:
        base["url"] = url
        assert run_drills(lab, ["a", "b"], parallel=True) == 0
        # Without the token the receiver refuses (401) and records nothing.
        with pytest.raises(urllib.error.HTTPError, match="401"):
            _send_with_token(url + "/alerts", "wrong-token-0123456789", "Stray", "firing")
    assert log.stat().st_mode & 0o777 == 0o600
    assert "Stray" not in log.read_text()
    with pytest.raises(urllib.error.URLError):
        _send_with_token(url + "/alerts", "drill-token-0123456789", "After", "firing")


def test_a_drill_file_may_name_the_containers() -> None:
    lab = Lab(
        facts={"containers": {"cf-tls-3": "cf-tls-3"}, "orders_container": "cf-tls-1"},
        repo=Path.cwd(),
    )
    assert lab.node_container("cf-tls-3") == "cf-tls-3"
    assert lab.node_container("opensearch-3") == "clusterforge-lab-opensearch-3"
    assert lab.orders_container == "cf-tls-1"
    assert Lab(facts={}, repo=Path.cwd()).orders_container == "clusterforge-lab-apps-1"


def test_faults_takes_a_hold_above_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from clusterforge.testing.drills import main

    lab_json = tmp_path / "lab.json"
    lab_json.write_text(json.dumps({"nodes": []}))
    with pytest.raises(SystemExit):
        main(["--lab-json", str(lab_json), "--faults", "partition-manager", "--hold", "0"])
    assert "--hold takes a number of seconds above 0" in capsys.readouterr().err
