"""The clusterforge_http_wait module, run as Ansible runs it (its arguments in a JSON file),
against a real HTTP server on a loopback socket."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from module_runner import run_module

MODULE = Path(__file__).resolve().parents[1] / "plugins" / "modules" / "clusterforge_http_wait.py"


def run(tmp_path: Path, **args: Any) -> dict[str, Any]:
    return run_module(MODULE, tmp_path, args, timeout=60)


class Script:
    """The answers the server gives, in order; the last one repeats."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, str]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script([(200, {})])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            script.requests.append(dict(self.headers))
            index = min(len(script.requests), len(script.answers)) - 1
            status, body = script.answers[index]
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/_cluster/health", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_waits_through_not_ready_answers_until_the_wanted_body(
    tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    script.answers = [(503, {}), (200, {"status": "DOWN"}), (200, {"status": "UP"})]
    started = time.monotonic()
    result = run(tmp_path, url=url, ready_json={"status": "UP"}, timeout=20)
    assert not result.get("failed"), result
    assert result["status"] == 200
    assert result["json"] == {"status": "UP"}
    assert result["attempts"] == 3
    # Pauses of 0.1 s and 0.2 s, not the whole seconds of an until loop.
    assert time.monotonic() - started < 5


def test_a_status_that_waiting_will_not_change_fails_at_once(
    tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    script.answers = [(401, {"error": "unauthorized"})]
    result = run(tmp_path, url=url, timeout=30)
    assert result["failed"]
    assert result["status"] == 401
    assert result["attempts"] == 1
    assert "waiting will not change" in result["msg"]


def test_a_listed_status_is_waited_on(tmp_path: Path, server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(401, {}), (200, {})]
    result = run(tmp_path, url=url, retry_status=[401], timeout=20)
    assert not result.get("failed"), result
    assert result["attempts"] == 2


def test_sends_basic_auth_and_keeps_the_password_out_of_the_result(
    tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    result = run(
        tmp_path,
        url=url,
        url_username="admin",
        url_password="s3cret-Pass",
        force_basic_auth=True,
        timeout=20,
    )
    assert not result.get("failed"), result
    assert script.requests[0]["Authorization"].startswith("Basic ")
    assert "s3cret-Pass" not in json.dumps(result)


def test_a_closed_port_is_asked_again_until_the_timeout_names_the_url(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    started = time.monotonic()
    result = run(tmp_path, url=url, timeout=3.0)
    waited = time.monotonic() - started
    assert result["failed"]
    assert url in result["msg"]
    assert "no answer" in result["msg"]
    # Asked every 0.1 s while refused: about 30 tries within the budget, where whole-second
    # pauses would make 3 or 4. The budget is 3 s, not 1.5 s: on a loaded machine one CI
    # run saw only 3 tries in 1.5 s, while the module alone took 4.5 s to start.
    assert result["attempts"] >= 5
    assert waited < 15
