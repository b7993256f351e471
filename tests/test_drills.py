"""The drills' waiting on the lab's webhook receiver (clusterforge.testing.drills), against
the real receiver (clusterforge.testing.alert_receiver) on loopback, and the lab's
monitoring variables through the plan's own checks (clusterforge.plan.alerting)."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge.lab.monitoring import RECEIVER_NAME, RECEIVER_TOKEN_VARIABLE, group_vars
from clusterforge.plan.alerting import alertmanager_config, build_alerting
from clusterforge.testing.alert_receiver import AlertReceiver
from clusterforge.testing.drills import DrillError, Lab, wait_for_alert


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
