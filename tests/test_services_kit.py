"""The two services as one family (issue 40): the same rules and the same HTTP edge.

Both services take their token rule, their private-file rule and their HTTP edge guard
from one kit (services/kit, ``clusterforge_service_kit``). These tests hold each rule
against both services, parametrised, over their real settings loaders and real sockets,
so a rule that drifts in one of them fails here by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from clusterforge_orders import ConfigurationError, OrderServiceRuntime, create_app
from clusterforge_orders import load_settings as load_orders_settings
from clusterforge_service_kit import BearerTokens, is_loopback_host
from clusterforge_userdir import ServerSettings
from clusterforge_userdir import create_app as create_userdir_app
from uvicorn_server import serve_on_loopback

GOOD_TOKEN = "kit-test-token-0123456789abcdef"
READ_TIMEOUT = 1.0
HEADER_CAP = 4096

BAD_TOKENS = [
    pytest.param("changeme", id="placeholder"),
    pytest.param("short-token", id="short"),
    pytest.param("token with spaces 0123456789", id="space"),
    pytest.param("tab\tinside-0123456789abcdef", id="tab"),
    pytest.param("bell\x07inside-0123456789abcdef", id="control"),
    pytest.param("nbsp\u00a0inside-0123456789abcdef", id="no-break-space"),
]


def _userdir_refuses_inline(token: str, _tmp_path: Path) -> str:
    with pytest.raises(ValueError) as refused:
        ServerSettings(database_url="sqlite:///x.db", auth_tokens=token)
    return str(refused.value)


def _orders_refuses_inline(token: str, _tmp_path: Path) -> str:
    with pytest.raises(ConfigurationError) as refused:
        load_orders_settings(environ={}, overrides={"orders.auth-tokens": [token]})
    return str(refused.value)


def _userdir_refuses_file(path: Path) -> str:
    settings = ServerSettings(database_url="sqlite:///x.db", auth_tokens_file=path)
    with pytest.raises(ValueError) as refused:
        settings.accepted_tokens()
    return str(refused.value)


def _orders_refuses_file(path: Path) -> str:
    settings = load_orders_settings(environ={}, overrides={"orders.auth-tokens-file": str(path)})
    with pytest.raises(ConfigurationError) as refused:
        settings.orders.accepted_tokens()
    return str(refused.value)


SERVICES_INLINE = [
    pytest.param(_userdir_refuses_inline, id="userdir"),
    pytest.param(_orders_refuses_inline, id="orders"),
]
SERVICES_FILE = [
    pytest.param(_userdir_refuses_file, id="userdir"),
    pytest.param(_orders_refuses_file, id="orders"),
]


@pytest.mark.parametrize("token", BAD_TOKENS)
@pytest.mark.parametrize("refuses", SERVICES_INLINE)
def test_both_services_refuse_the_same_bad_tokens(
    refuses: Callable[[str, Path], str], token: str, tmp_path: Path
) -> None:
    message = refuses(token, tmp_path)
    assert "token #1" in message
    assert token not in message


@pytest.mark.parametrize("token", BAD_TOKENS)
@pytest.mark.parametrize("refuses", SERVICES_FILE)
def test_both_services_refuse_the_same_bad_tokens_in_a_file(
    refuses: Callable[[Path], str], token: str, tmp_path: Path
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{GOOD_TOKEN}\n{token}\n", encoding="utf-8")
    path.chmod(0o600)
    message = refuses(path)
    assert "token #2" in message
    assert token not in message


def _regular(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"{GOOD_TOKEN}\n", encoding="utf-8")
    path.chmod(mode)
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.d"
    path.mkdir(mode=0o700)
    return path


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.fifo"
    os.mkfifo(path, 0o600)
    return path


READABLE_FILES = [
    pytest.param(lambda tmp: _regular(tmp, 0o644), id="0644"),
    pytest.param(lambda tmp: _regular(tmp, 0o604), id="0604"),
    pytest.param(lambda tmp: _regular(tmp, 0o660), id="0660"),
    pytest.param(lambda tmp: _regular(tmp, 0o620), id="0620"),
    pytest.param(lambda tmp: _regular(tmp, 0o650), id="0650"),
    pytest.param(lambda tmp: _regular(tmp, 0o606), id="0606"),
    pytest.param(_directory, id="directory"),
    pytest.param(_fifo, id="fifo"),
]


@pytest.mark.parametrize("make", READABLE_FILES)
@pytest.mark.parametrize("refuses", SERVICES_FILE)
def test_both_services_refuse_the_same_readable_or_odd_files(
    refuses: Callable[[Path], str], make: Callable[[Path], Path], tmp_path: Path
) -> None:
    path = make(tmp_path)
    message = refuses(path)
    assert str(path) in message
    assert GOOD_TOKEN not in message


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to root needs root")
@pytest.mark.parametrize("mode", [0o640, 0o440])
@pytest.mark.parametrize("refuses", SERVICES_FILE)
def test_both_services_take_a_root_file_their_group_may_only_read(
    refuses: Callable[[Path], str], mode: int, tmp_path: Path
) -> None:
    path = _regular(tmp_path, mode)
    os.chown(path, 0, os.getegid())
    userdir = ServerSettings(database_url="sqlite:///x.db", auth_tokens_file=path)
    orders = load_orders_settings(environ={}, overrides={"orders.auth-tokens-file": str(path)})
    assert userdir.accepted_tokens() == orders.orders.accepted_tokens() == {GOOD_TOKEN}
    os.chown(path, 0, os.getegid() + 4242)  # another group's members could read it
    assert str(path) in refuses(path)


# -- the HTTP edge, one guard ----------------------------------------------------------


@dataclass
class Served:
    port: int
    server: uvicorn.Server
    thread: threading.Thread
    error_key: str  # the key of the service's error shape that carries the status


@pytest.fixture(params=["userdir", "orders"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    runtime: OrderServiceRuntime | None = None
    if request.param == "userdir":
        app = create_userdir_app(
            ServerSettings(
                database_url=f"sqlite:///{tmp_path / 'userdir.db'}",
                auth_tokens=GOOD_TOKEN,
                request_read_timeout=READ_TIMEOUT,
                max_request_header_bytes=HEADER_CAP,
            )
        )
        key = "code"
    else:
        settings = load_orders_settings(
            environ={},
            overrides={
                "orders.database-url": f"sqlite:///{tmp_path / 'orders.db'}",
                "orders.auth-tokens": [GOOD_TOKEN],
                "orders.read-timeout-seconds": READ_TIMEOUT,
                "orders.max-header-bytes": HEADER_CAP,
            },
        )
        runtime = OrderServiceRuntime.open(settings, executor_await_termination_seconds=5)
        app = create_app(runtime=runtime)
        key = "error"
    port, server, thread = serve_on_loopback(app, name="kit-test")
    yield Served(port, server, thread, key)
    server.should_exit = True
    thread.join(timeout=30)
    if runtime is not None:
        runtime.close()


def _exchange(served: Served, payload: bytes, *, wait: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", served.port), timeout=wait) as connection:
        with contextlib.suppress(OSError):  # the server may answer before taking it all
            connection.sendall(payload)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


def _head_and_body(answer: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, json.loads(body)


EDGE_CASES = [
    pytest.param(
        b"GET /x HTTP/1.1\r\nHost: x\r\nX-Trace-Id: edge-trace-1\r\nX-Big: "
        + b"a" * (HEADER_CAP * 2)
        + b"\r\n\r\n",
        431,
        id="431",
    ),
    # A head cut off after its trace id (the parser hands a header over once the next begins).
    pytest.param(
        b"GET /x HTTP/1.1\r\nX-Trace-Id: edge-trace-1\r\nHost: x\r\nX-More: y", 408, id="408"
    ),
    pytest.param(b"NOT A REQUEST\r\n\r\n", 400, id="parser-400"),
]


@pytest.mark.parametrize(("payload", "status"), EDGE_CASES)
def test_the_guards_answers_carry_the_ids_and_the_services_shape(
    served: Served, payload: bytes, status: int
) -> None:
    answer = _exchange(served, payload)
    got, headers, body = _head_and_body(answer)
    assert got == status
    assert len(headers["x-request-id"]) == 32
    assert headers["x-trace-id"]
    if b"edge-trace-1" in payload and status == 408:
        assert headers["x-trace-id"] == "edge-trace-1"
    assert headers["connection"] == "close"
    assert served.error_key in body
    if served.error_key == "code":
        assert body["code"] == status
    else:
        assert body["violations"] == []


def test_a_body_dripped_after_a_401_is_cut_at_the_read_timeout(served: Served) -> None:
    head = (
        b"POST /"
        + (b"mock-api/users" if served.error_key == "code" else b"orders")
        + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", served.port), timeout=1) as connection:
        connection.sendall(head)
        connection.settimeout(0.2)
        closed = False
        while not closed and time.monotonic() - started < READ_TIMEOUT + 8:
            try:
                connection.sendall(b"x")
                closed = connection.recv(65536) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
    assert closed
    assert time.monotonic() - started < READ_TIMEOUT + 3


def test_both_services_serve_metrics_from_prometheus_client(served: Served) -> None:
    path = b"/metrics"
    request = (
        b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer " + GOOD_TOKEN.encode() + b"\r\n\r\n"
    )
    _exchange(served, b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = _exchange(served, request)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    text = body.decode()
    prefix = "userdir" if served.error_key == "code" else "orders"
    assert f"# TYPE {prefix}_http_requests_total counter" in text
    assert f'{prefix}_http_requests_total{{method="GET",status="401"}} 1.0' in text
    assert f"# TYPE {prefix}_http_request_duration_seconds histogram" in text


# -- the kit's own rules, and that both services use the same ---------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),  # noqa: S104 (the bind under test)
        ("", False),
        ("::", False),
        ("192.0.2.10", False),
        ("localhost.example", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_bearer_tokens_accept_only_a_configured_token() -> None:
    tokens = BearerTokens([GOOD_TOKEN, "second-token-0123456789abcdef"])
    assert tokens.accepts(f"Bearer {GOOD_TOKEN}".encode())
    assert tokens.accepts(b"bearer second-token-0123456789abcdef")
    assert not tokens.accepts(GOOD_TOKEN.encode())
    assert not tokens.accepts(f"Basic {GOOD_TOKEN}".encode())
    assert not tokens.accepts(b"Bearer ")
    assert not tokens.accepts(f"Bearer {GOOD_TOKEN}x".encode())
    assert tokens.accepts_headers(
        [(b"x", b"y"), (b"authorization", f"Bearer {GOOD_TOKEN}".encode())]
    )
    # Two Authorization lines are refused whichever holds the token.
    good, bad = (b"authorization", f"Bearer {GOOD_TOKEN}".encode()), (b"authorization", b"x")
    assert not tokens.accepts_headers([good, bad])
    assert not tokens.accepts_headers([bad, good])
    assert not tokens.accepts_headers([good, good])
    assert not tokens.accepts_headers([])
    assert not BearerTokens([])
    assert not BearerTokens([]).accepts(f"Bearer {GOOD_TOKEN}".encode())


def _busy_timeout(engine: Any) -> int:
    with engine.connect() as connection:
        return int(connection.exec_driver_sql("PRAGMA busy_timeout").scalar_one())


def test_both_services_open_sqlite_the_same_way(tmp_path: Path) -> None:
    from clusterforge_orders.storage import Database
    from clusterforge_userdir.storage import create_database_engine

    userdir = create_database_engine(f"sqlite:///{tmp_path / 'userdir.db'}")
    orders = Database(url=f"sqlite:///{tmp_path / 'orders.db'}")
    try:
        assert _busy_timeout(userdir) == _busy_timeout(orders.engine) == 10_000
        with userdir.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
    finally:
        userdir.dispose()
        orders.dispose()
    for name in ("userdir.db", "orders.db"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite:///:memory:", "mysql://db/x"])
def test_both_services_refuse_the_same_database_urls(url: str) -> None:
    with pytest.raises(ValueError):
        ServerSettings(database_url=url)
    with pytest.raises(ConfigurationError):
        load_orders_settings(environ={}, overrides={"orders.database-url": url})
