"""The lab summary's curl line: it must authenticate, yet keep the password out of argv."""

from __future__ import annotations

import base64
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from clusterforge.lab.cluster import curl_example
from clusterforge.lab.summary import print_summary


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    seen_authorization: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen_authorization.append(self.headers.get("Authorization"))
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Silence the per-request log line."""


@pytest.fixture
def recording_server() -> Iterator[str]:
    _RecordingHandler.seen_authorization = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _RecordingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_printed_curl_line_authenticates_without_the_password_in_argv(
    tmp_path: Path, recording_server: str
) -> None:
    password = "Lab-Only-Passw0rd_x"  # a test value, never a real secret
    password_file = tmp_path / "admin"
    password_file.write_text(password + "\n")
    facts = {
        "mode": "basic",
        "nodes": [{"url": recording_server}],
        "admin_user": "admin",
        "admin_password_file": str(password_file),
    }
    line = curl_example(facts)

    assert password not in line
    assert " -u " not in line, "curl -u puts the password into the process list"
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)

    assert result.returncode == 0, result.stderr
    expected = "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()
    assert _RecordingHandler.seen_authorization == [expected]


def test_open_mode_needs_no_credentials() -> None:
    line = curl_example({"mode": "open", "nodes": [{"url": "http://127.0.0.11:9200"}]})
    assert line == "curl 'http://127.0.0.11:9200/_cat/nodes?v'"


def test_the_summary_names_both_services_token_files_but_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_directory_token = tmp_path / "user_directory_token"
    orders_token = tmp_path / "order_service_auth_token"
    facts = {
        "cluster_name": "clusterforge-lab",
        "version": "3.3.2",
        "mode": "open",
        "network": "loopback",
        "health": "green",
        "nodes": [
            {
                "name": "opensearch-1",
                "url": "http://127.0.0.11:9200",
                "roles": "dim",
                "cluster_manager": True,
            }
        ],
        "services": {
            "user_directory": "http://127.0.0.21:8081",
            "orders": "http://127.0.0.21:8082",
        },
        "user_directory_token_file": str(user_directory_token),
        "orders_token_file": str(orders_token),
        "changed": 0,
    }
    print_summary(facts, elapsed=1.0, lab_dir=tmp_path)
    lines = capsys.readouterr().out.splitlines()
    orders = [line for line in lines if line.startswith("service  orders")]
    directory = [line for line in lines if line.startswith("service  user directory")]
    assert orders == [
        f"service  orders          http://127.0.0.21:8082/orders  (bearer token in {orders_token})"
    ]
    assert directory and f"(bearer token in {user_directory_token})" in directory[0]
