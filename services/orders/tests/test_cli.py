"""The console script, started as a real process."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

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


def _bad_start(
    tmp_path: Path, *arguments: str, **variables: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))}
    environment.update(variables)
    return subprocess.run(
        [str(SCRIPT), *arguments],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("arguments", "variables", "expected"),
    [
        (
            ["--database-url", "postgresql+psycopg://u:Pw-Secret-1@db:notaport/db"],
            {},
            "orders.database-url: the database URL cannot be parsed",
        ),
        (
            ["--database-url", "mysql://u:Pw-Secret-1@db/orders"],
            {},
            "orders.database-url must be sqlite:///<path> or postgresql+psycopg://",
        ),
        (["--log-level", "loud"], {}, "orders.log-level 'loud' is not a log level"),
        (
            ["--database-url", "postgresql+psycopg://u:Pw-Secret-1@127.0.0.1:1/db"],
            {},
            "cannot open the order database postgresql+psycopg://u:***@127.0.0.1:1/db",
        ),
        (
            ["--database-url", "sqlite:////nonexistent-cf-dir/orders.db"],
            {},
            "its directory /nonexistent-cf-dir does not exist",
        ),
        (
            [],
            {
                "ORDERS_SEARCH_URLS": "https://127.0.0.1:9",
                "ORDERS_SEARCH_CA_FILE": "/no/ca.pem",
                "ORDERS_SEARCH_USERNAME": "w",
                "ORDERS_SEARCH_PASSWORD": "Pw-Secret-1",
            },
            "orders.search.ca-file /no/ca.pem cannot be used",
        ),
        (
            ["--host", "0.0.0.0"],  # noqa: S104 (the refused bind)
            {},
            "orders.auth-tokens is empty while orders.host is '0.0.0.0'",
        ),
        ([], {"ORDERS_AUTH_TOKENS_FILE": "/no/tokens"}, "cannot read orders.auth-tokens-file"),
    ],
)
def test_each_bad_setting_ends_in_one_line_with_status_2(
    tmp_path: Path, arguments: list[str], variables: dict[str, str], expected: str
) -> None:
    result = _bad_start(tmp_path, *arguments, **variables)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "Pw-Secret-1" not in result.stderr + result.stdout
    # The error is one line; before it only the start's INFO lines (the database opened).
    lines = result.stderr.splitlines()
    [line] = [item for item in lines if item.startswith("clusterforge-orders: ")]
    assert expected in line, line
    assert all(" INFO " in item for item in lines if item != line), lines


def test_a_settings_file_others_may_read_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    config.write_text("orders:\n  port: 9000\n", encoding="utf-8")
    config.chmod(0o644)
    result = _bad_start(tmp_path, "--config", str(config))
    assert result.returncode == 2
    assert f"chmod 600 {config}" in result.stderr and "Traceback" not in result.stderr


def test_the_sqlite_files_are_private_and_no_secret_reaches_the_log(tmp_path: Path) -> None:
    hook_calls: list[str] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            hook_calls.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    token = "orders-cli-token-0123456789abcdef"
    port = _free_port()
    process = subprocess.Popen(
        [str(SCRIPT), "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))},
            "ORDERS_AUTH_TOKENS": token,
            "ORDERS_LISTENERS_NOTIFICATION_SENDER": "webhook",
            "ORDERS_LISTENERS_NOTIFICATION_WEBHOOK_URL": (
                f"http://127.0.0.1:{hook.server_address[1]}/hook?token=Hook-Secret-1"
            ),
        },
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
            f"{base_url}/orders?access_token=Query-Secret-2",
            json={"userId": "u", "productName": "p", "amount": 2},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200
        deadline = time.monotonic() + 10
        while not hook_calls and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hook_calls == ["/hook?token=Hook-Secret-1"], "the webhook was called"
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        hook.shutdown()
        hook.server_close()
    for secret in ("Hook-Secret-1", "Query-Secret-2", token):
        assert secret not in output, secret
    assert '"POST /orders?<query left out> HTTP/1.1" 200' in output
    database = tmp_path / "orders.db"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
