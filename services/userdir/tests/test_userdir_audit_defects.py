"""The defects an audit of the service run on its own found (issue 40), one test each.

Each reproduces the audit's input over a real socket, a real process or a real server
the client talks to, and checks what the docs promise instead.
"""

from __future__ import annotations

import gzip
import logging
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clusterforge_userdir import ClientConfig, ServerSettings, UserDirectoryClient, create_app
from clusterforge_userdir.errors import ResponseTooLargeError
from test_userdir_client_limits import raw_server
from test_userdir_settings_failures import assert_refused_in_one_line, run_cli
from userdir_support import RunningServer, serve_in_thread

TOKEN = "audit-token-0123456789abcdef"
READ_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def secured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    database = tmp_path_factory.mktemp("audit") / "userdir.db"
    settings = ServerSettings(
        database_url=f"sqlite:///{database}",
        auth_tokens=TOKEN,
        request_read_timeout=READ_TIMEOUT,
        max_request_body_bytes=1024,
    )
    running = serve_in_thread(create_app(settings))
    yield running
    running.stop()


def _seconds_until_closed(server: RunningServer, head: bytes, *, limit: float) -> float:
    """Send ``head``, then one body byte every 0.2 s; how long until the server closes."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=limit) as connection:
        connection.sendall(head)
        connection.settimeout(0.2)
        answered = b""
        while time.monotonic() - started < limit:
            try:
                connection.sendall(b"x")
            except OSError:
                return time.monotonic() - started
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return time.monotonic() - started
            if not chunk:
                return time.monotonic() - started
            answered += chunk
    return time.monotonic() - started


@pytest.mark.parametrize(
    "head",
    [
        # 401: answered before the body is read.
        b"POST /mock-api/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n",
        # 413 decided from Content-Length.
        b"POST /mock-api/users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
        # A GET that carries a body.
        b"GET /mock-api/users/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nContent-Length: 900\r\n\r\n",
    ],
    ids=["401", "413", "get-with-body"],
)
def test_a_body_dripped_after_the_answer_does_not_hold_the_connection(
    secured_server: RunningServer, head: bytes
) -> None:
    held = _seconds_until_closed(secured_server, head, limit=READ_TIMEOUT + 8)
    assert held < READ_TIMEOUT + 3


@pytest.mark.parametrize(
    "path", ["/mock-api/users/1/", "/mock-api/health/", "/mock-api/result/users/"]
)
def test_a_trailing_slash_is_404_never_a_redirect_built_from_host(
    secured_server: RunningServer, path: str
) -> None:
    answer = httpx.get(
        f"{secured_server.base_url}{path}",
        headers={"Authorization": f"Bearer {TOKEN}", "Host": "attacker.example"},
    )
    assert answer.status_code == 404
    assert "location" not in answer.headers
    assert answer.json()["code"] == 404


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
@pytest.mark.parametrize("path", ["/mock-api/users", "/mock-api/result/users"])
def test_only_utf8_json_is_taken(secured_server: RunningServer, encoding: str, path: str) -> None:
    body = '{"username": "utf16-user", "nickname": "n"}'.encode(encoding)
    answer = httpx.post(
        f"{secured_server.base_url}{path}",
        content=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    if path.startswith("/mock-api/result/"):
        assert answer.status_code == 200
        assert answer.json()["code"] in (400, 415)
    else:
        assert answer.status_code in (400, 415), answer.text
        assert answer.json()["code"] == answer.status_code


NOT_LOOPBACK = "192.0.2.10"  # TEST-NET-1: never this machine's, so nothing can be bound


@pytest.mark.parametrize("host", [NOT_LOOPBACK, "userdir.example.internal"])
def test_the_service_on_its_own_refuses_to_bind_off_loopback_without_a_token(
    tmp_path: Path, host: str
) -> None:
    answer = run_cli(
        tmp_path, "--host", host, "--database-url", f"sqlite:///{tmp_path / 'userdir.db'}"
    )
    line = assert_refused_in_one_line(answer, "CLUSTERFORGE_USERDIR_AUTH_TOKENS", host)
    assert "--host" in line


# -- the client ------------------------------------------------------------------------


def test_the_client_caps_what_it_decompresses() -> None:
    bomb = gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9)

    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(bomb) + bomb
        )

    limit = 256 * 1024
    with raw_server(answer) as base_url:
        client = UserDirectoryClient(
            config=ClientConfig(root_uri=base_url, max_response_bytes=limit)
        )
        tracemalloc.start()
        try:
            with pytest.raises(ResponseTooLargeError):
                client.list_users()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            client.close()
    assert peak < 8 * 1024 * 1024


def test_a_gzip_answer_under_the_cap_is_read() -> None:
    body = gzip.compress(b"[]")

    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )

    with raw_server(answer) as base_url:
        client = UserDirectoryClient(config=ClientConfig(root_uri=base_url))
        try:
            assert client.list_users() == []
        finally:
            client.close()


def test_httpx_request_line_stays_out_of_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
        )

    with raw_server(answer) as base_url, caplog.at_level(logging.DEBUG):
        client = UserDirectoryClient(config=ClientConfig(root_uri=base_url))
        try:
            client.list_users(keyword="QUERY-TOKEN-7f3a")
        finally:
            client.close()
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "QUERY-TOKEN-7f3a" not in logged
    assert not [record for record in caplog.records if record.name.startswith("httpx")]
