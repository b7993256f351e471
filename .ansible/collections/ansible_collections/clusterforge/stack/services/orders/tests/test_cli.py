"""The console script, started as a real process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

SCRIPT = Path(sys.executable).with_name("clusterforge-orders")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_console_script_serves_and_stops_gracefully(tmp_path: Path) -> None:
    port = _free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))}
    environment["EVENT_ASYNC_THREAD_NAME_PREFIX"] = "cli-task-"
    process = subprocess.Popen(
        [str(SCRIPT), "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "service did not come up"
            time.sleep(0.1)
        answer = httpx.post(
            f"{base_url}/orders", json={"userId": "u", "productName": "p", "amount": 2}
        )
        assert answer.status_code == 200
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    # uvicorn re-raises the SIGTERM it handled once shutdown is complete, so the process
    # ends by that signal (systemd counts it as a clean stop).
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
    assert (tmp_path / "orders.db").exists(), "default database is in the working directory"
    assert "[cli-task-1]" in output, "notification logged from a prefixed pool thread"
    assert "eventTaskExecutor shut down" in output


def test_bad_settings_exit_with_a_message(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(SCRIPT), "--port", "70000"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "orders.port" in result.stderr


def test_a_forged_log_line_stays_on_its_own_line(tmp_path: Path) -> None:
    port = _free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))}
    process = subprocess.Popen(
        [str(SCRIPT), "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    forged = "2026-01-01 00:00:00,000 ERROR [main] forged: disk wiped"
    try:
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "service did not come up"
            time.sleep(0.1)
        answer = httpx.post(
            f"{base_url}/orders",
            json={"userId": "u\r\nx", "productName": f"键盘\n{forged}", "amount": 2},
        )
        assert answer.status_code == 200
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert not any(line.startswith(forged) for line in output.splitlines()), output
    assert f"键盘\\n{forged}" in output, "the notification line, escaped"


def test_a_yaml_error_in_the_settings_file_prints_no_part_of_it(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    config.write_text(
        'orders:\n  database-url: "postgresql+psycopg://orders:S3cret-pw@db/orders\n',
        encoding="utf-8",
    )
    config.chmod(0o600)
    result = subprocess.run(
        [str(SCRIPT), "--config", str(config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "not valid YAML (line" in result.stderr
    for fragment in ("S3cret", "postgresql", "database-url"):
        assert fragment not in (result.stdout + result.stderr).replace(str(config), "")
