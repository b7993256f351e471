"""The lab's webhook receiver (clusterforge.testing.alert_receiver), over real sockets:
httpx against it, and a real Alertmanager (Debian's binary, on loopback) delivering an
alert to it with the bearer token read from a file."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from alertmanager_process import post_alert, running_alertmanager
from clusterforge.plan.monitoring.alerting import (
    alertmanager_config,
    alertmanager_secret_files,
    build_alerting,
)
from clusterforge.testing.alert_receiver import AlertReceiver, main, read_log, serve

TOKEN = "receiver-token-5be1"


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[AlertReceiver, str]]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = serve("127.0.0.1", 0, log_path=tmp_path / "receiver.jsonl", token_file=token_file)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_each_notification_becomes_one_json_line(receiver: tuple[AlertReceiver, str]) -> None:
    server, url = receiver
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    for number in (1, 2):
        answer = httpx.post(f"{url}/hook", json={"n": number}, headers=headers, timeout=5)
        assert answer.status_code == 200
    lines = read_log(server.log_path)
    assert [line["notification"] for line in lines] == [{"n": 1}, {"n": 2}]
    assert lines[0]["path"] == "/hook"
    assert lines[0]["received_at"].endswith("+00:00")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}"])
def test_a_wrong_or_missing_token_is_refused_and_not_logged(
    receiver: tuple[AlertReceiver, str], authorization: str | None
) -> None:
    server, url = receiver
    headers = {"Authorization": authorization} if authorization else {}
    answer = httpx.post(f"{url}/hook", json={"n": 1}, headers=headers, timeout=5)
    assert answer.status_code == 401
    assert read_log(server.log_path) == []


def test_a_body_that_is_not_json_is_refused(receiver: tuple[AlertReceiver, str]) -> None:
    server, url = receiver
    answer = httpx.post(
        f"{url}/hook", content=b"{not json", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    )
    assert answer.status_code == 400
    assert read_log(server.log_path) == []


def test_it_binds_to_loopback_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--listen", "0.0.0.0:0", "--log", str(tmp_path / "log")]) == 2
    assert "not a loopback address" in capsys.readouterr().err


def test_a_real_alertmanager_delivers_an_alert_with_its_token(
    receiver: tuple[AlertReceiver, str], tmp_path: Path
) -> None:
    server, url = receiver
    alerting = build_alerting(
        {
            "monitoring_alertmanager_group_wait": "1s",
            "monitoring_alertmanager_receivers": [
                {
                    "name": "lab",
                    "webhook": {"url": f"{url}/hook", "bearer_token_var": "vault_lab_token"},
                }
            ],
        }
    )
    secrets = {"vault_lab_token": TOKEN}
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir(mode=0o700)
    for path, content in alertmanager_secret_files(
        alerting, secrets, secrets_dir=str(secrets_dir)
    ).items():
        Path(path).write_text(content)
        Path(path).chmod(0o600)
    config = tmp_path / "alertmanager.yml"
    config.write_text(alertmanager_config(alerting, secrets, secrets_dir=str(secrets_dir)))
    assert TOKEN not in config.read_text()
    with running_alertmanager(config, tmp_path) as alertmanager:
        started = time.monotonic()
        post_alert(
            alertmanager,
            {"alertname": "OpenSearchNodesMissing", "cluster": "lab", "severity": "critical"},
            {"summary": "Cluster lab has fewer than 3 nodes"},
        )
        while not read_log(server.log_path):
            assert time.monotonic() - started < 15, "no notification within 15 s"
            time.sleep(0.1)
    notification = read_log(server.log_path)[0]["notification"]
    assert notification["receiver"] == "lab"
    assert notification["status"] == "firing"
    assert notification["alerts"][0]["labels"]["alertname"] == "OpenSearchNodesMissing"
    assert notification["commonAnnotations"]["summary"] == "Cluster lab has fewer than 3 nodes"
