"""The service's HTTP edges over real sockets: head size and time, body time, disconnects,
lone surrogates, strict search types, and what the access log keeps of a URL."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clusterforge_userdir import ServerSettings, create_app
from userdir_support import RunningServer, serve_in_thread

TOKEN = "edge-token-0123456789abcdef"
AUTH = f"Authorization: Bearer {TOKEN}\r\n".encode()
READ_TIMEOUT = 1.0
HEADER_CAP = 4096


@pytest.fixture(scope="module")
def edge_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    database = tmp_path_factory.mktemp("edges") / "userdir.db"
    settings = ServerSettings(
        database_url=f"sqlite:///{database}",
        auth_tokens=TOKEN,
        request_read_timeout=READ_TIMEOUT,
        max_request_header_bytes=HEADER_CAP,
    )
    running = serve_in_thread(create_app(settings), log_level="info")
    yield running
    running.stop()


def connect(server: RunningServer) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    return connection


def read_answer(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def body_of(answer: bytes) -> dict[str, object]:
    document: dict[str, object] = json.loads(answer.partition(b"\r\n\r\n")[2])
    return document


def post(server: RunningServer, path: str, body: bytes) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}{path}",
        content=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def lines(self) -> list[str]:
        return [record.getMessage() for record in self.records]


@pytest.fixture
def collected_logs() -> Iterator[Collected]:
    handler = Collected()
    loggers = [logging.getLogger(name) for name in ("uvicorn.access", "clusterforge_userdir")]
    previous = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield handler
    for logger, level in zip(loggers, previous, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


# -- request head ------------------------------------------------------------------------


def test_a_large_header_sent_at_once_gets_431_before_authentication(
    edge_server: RunningServer,
) -> None:
    with connect(edge_server) as connection:
        connection.sendall(
            b"GET /mock-api/users HTTP/1.1\r\nHost: x\r\nX-Big: "
            + b"a" * (HEADER_CAP * 4)
            + b"\r\n\r\n"
        )
        answer = read_answer(connection)
    assert status_of(answer) == 431
    assert body_of(answer)["code"] == 431


def test_an_endless_header_is_cut_off_without_being_buffered(edge_server: RunningServer) -> None:
    sent = 0
    with connect(edge_server) as connection:
        connection.sendall(b"GET /mock-api/health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        with pytest.raises(OSError):  # the server closes while the client still sends
            for _ in range(64 * 1024):  # up to 64 MB
                connection.sendall(b"a" * 1024)
                sent += 1024
        answer = read_answer(connection)
    assert status_of(answer) == 431
    assert sent < 8 * 1024 * 1024


def test_a_header_under_the_cap_is_served(edge_server: RunningServer) -> None:
    answer = httpx.get(
        f"{edge_server.base_url}/mock-api/health", headers={"X-Padding": "a" * (HEADER_CAP // 2)}
    )
    assert answer.status_code == 200


def test_a_half_sent_head_gets_408_within_the_read_timeout(edge_server: RunningServer) -> None:
    with connect(edge_server) as connection:
        started = time.monotonic()
        connection.sendall(b"GET /mock-api/health HTTP/1.1\r\nHost: x\r\n")
        answer = read_answer(connection)
        waited = time.monotonic() - started
    assert status_of(answer) == 408
    assert READ_TIMEOUT * 0.8 <= waited < READ_TIMEOUT + 3


def test_a_head_dripped_a_byte_at_a_time_does_not_renew_the_timeout(
    edge_server: RunningServer,
) -> None:
    request = b"GET /mock-api/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    started = time.monotonic()
    with connect(edge_server) as connection, pytest.raises(OSError):
        for byte in request:
            connection.sendall(bytes([byte]))
            time.sleep(0.1)
    assert time.monotonic() - started < READ_TIMEOUT + 3


def test_a_silent_connection_is_closed(edge_server: RunningServer) -> None:
    with connect(edge_server) as connection:
        started = time.monotonic()
        answer = read_answer(connection)
        waited = time.monotonic() - started
    assert status_of(answer) == 408
    assert waited < READ_TIMEOUT + 3


# -- request body ------------------------------------------------------------------------


def test_a_half_sent_body_gets_408_and_the_connection_closed(edge_server: RunningServer) -> None:
    with connect(edge_server) as connection:
        started = time.monotonic()
        connection.sendall(
            b"POST /mock-api/users HTTP/1.1\r\nHost: x\r\n"
            + AUTH
            + b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"username"'
        )
        answer = read_answer(connection)
        waited = time.monotonic() - started
    assert status_of(answer) == 408
    assert b"connection: close" in answer.lower()
    assert waited < READ_TIMEOUT + 3


def test_a_dripped_body_gets_408_within_one_read_timeout(edge_server: RunningServer) -> None:
    started = time.monotonic()
    with connect(edge_server) as connection:
        connection.sendall(
            b"POST /mock-api/users/search HTTP/1.1\r\nHost: x\r\n"
            + AUTH
            + b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        )
        try:
            for _ in range(200):
                connection.sendall(b" ")
                time.sleep(0.2)
        except OSError:
            pass
        answer = read_answer(connection)
    assert status_of(answer) == 408
    assert time.monotonic() - started < READ_TIMEOUT + 3


def test_a_client_leaving_mid_body_is_logged_in_one_line(
    edge_server: RunningServer, collected_logs: Collected
) -> None:
    with connect(edge_server) as connection:
        connection.sendall(
            b"POST /mock-api/users HTTP/1.1\r\nHost: x\r\n"
            + AUTH
            + b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user'
        )
        time.sleep(0.3)
    deadline = time.monotonic() + 5
    while not collected_logs.records and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # anything else it would log comes now
    service_records = [r for r in collected_logs.records if r.name.startswith("clusterforge")]
    assert len(service_records) == 1
    assert "left before sending the whole body of POST /mock-api/users" in (
        service_records[0].getMessage()
    )
    assert all(record.exc_info is None for record in collected_logs.records)


# -- what the access log keeps -----------------------------------------------------------


def test_the_access_log_drops_query_strings(
    edge_server: RunningServer, collected_logs: Collected
) -> None:
    secret = "QUERY-SECRET-7f3a9c"
    refused = httpx.get(f"{edge_server.base_url}/mock-api/users?access_token={secret}")
    assert refused.status_code == 401
    accepted = httpx.get(
        f"{edge_server.base_url}/mock-api/users?keyword={secret}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert accepted.status_code == 200
    time.sleep(0.2)
    access = [line for line in collected_logs.lines if "/mock-api/users" in line]
    assert len(access) == 2
    assert all('"GET /mock-api/users HTTP/1.1"' in line for line in access)
    assert not any(secret in line or TOKEN in line for line in collected_logs.lines)


# -- bodies and queries that must never give a 500 ---------------------------------------

LONE_SURROGATE_JSON = '"\\ud800"'  # valid JSON syntax, not valid Unicode


@pytest.mark.parametrize("field", ["startTime", "endTime", "keyword"])
def test_a_lone_surrogate_in_the_search_gets_400(edge_server: RunningServer, field: str) -> None:
    answer = post(
        edge_server, "/mock-api/users/search", f'{{"{field}":{LONE_SURROGATE_JSON}}}'.encode()
    )
    assert answer.status_code == 400
    assert answer.json()["code"] == 400
    assert field in answer.json()["message"]


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/mock-api/users", ["username", "nickname", "mobile"]),
        ("/mock-api/result/users", ["username", "nickname", "mobile"]),
        ("/mock-api/users/1", ["nickname", "mobile"]),
    ],
)
def test_a_lone_surrogate_in_any_body_field_never_gives_a_5xx(
    edge_server: RunningServer, path: str, fields: list[str]
) -> None:
    for field in fields:
        body = f'{{"username":"surrogate-user","{field}":{LONE_SURROGATE_JSON}}}'.encode()
        method = "PUT" if path == "/mock-api/users/1" else "POST"
        answer = httpx.request(
            method,
            f"{edge_server.base_url}{path}",
            content=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        assert answer.status_code < 500, (field, answer.text)
        answer.json()  # and the answer is JSON a strict parser reads


def test_undecodable_query_and_path_bytes_never_give_a_5xx(edge_server: RunningServer) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for url in (
        "/mock-api/users?keyword=%ED%A0%80",
        "/mock-api/users?keyword=%FF%FE",
        "/mock-api/users?status=%ED%A0%80",
        "/mock-api/users/%ED%A0%80",
        "/mock-api/result/users/page?pageNum=%ED%A0%80",
    ):
        answer = httpx.get(f"{edge_server.base_url}{url}", headers=headers)
        assert answer.status_code < 500, (url, answer.text)


@pytest.mark.parametrize(
    "criteria",
    [
        {"startTime": 0},
        {"startTime": 1.5e9},
        {"endTime": 1700000000},
        {"startTime": "2024-5-1T8:30:00"},
        {"startTime": "2024-05-01 08:30:00"},
        {"startTime": "2024-05-01T08:30:00Z"},
        {"startTime": "2024-05-01T08:30:00.5"},
        {"startTime": "2024-02-30T08:30:00"},
        {"startTime": True},
        {"includeLocked": "yes"},
        {"includeLocked": "true"},
        {"includeLocked": 1},
        {"includeLocked": 0},
    ],
)
def test_the_search_takes_only_the_documented_types(
    edge_server: RunningServer, criteria: dict[str, object]
) -> None:
    answer = post(edge_server, "/mock-api/users/search", json.dumps(criteria).encode())
    assert answer.status_code == 400, answer.text
    assert next(iter(criteria)) in answer.json()["message"]


@pytest.mark.parametrize(
    "criteria",
    [
        {"startTime": "2024-05-01T08:30:00", "endTime": None, "includeLocked": True},
        {"includeLocked": False},
        {"includeLocked": None},
    ],
)
def test_the_search_takes_the_documented_forms(
    edge_server: RunningServer, criteria: dict[str, object]
) -> None:
    answer = post(edge_server, "/mock-api/users/search", json.dumps(criteria).encode())
    assert answer.status_code == 200, answer.text


# -- the OpenAPI document states the limits ----------------------------------------------


def test_the_openapi_document_states_the_limits(edge_server: RunningServer) -> None:
    document = httpx.get(f"{edge_server.base_url}/openapi.json").json()
    description = document["info"]["description"]
    assert f"at most {HEADER_CAP} bytes (else 431)" in description
    assert "(else 413)" in description
    assert f"within {READ_TIMEOUT:g} s (else 408)" in description
    for path, operations in document["paths"].items():
        if path == "/mock-api/health":
            continue
        for method, operation in operations.items():
            for status in ("401", "408", "413", "431"):
                assert status in operation["responses"], (method, path, status)


def test_sqlite_files_are_private(tmp_path: Path) -> None:
    database = tmp_path / "private.db"
    running = serve_in_thread(create_app(ServerSettings(database_url=f"sqlite:///{database}")))
    try:
        created = httpx.post(f"{running.base_url}/mock-api/users", json={"username": "private"})
        assert created.status_code == 201
        files = sorted(tmp_path.glob("private.db*"))
        assert database in files
        assert {path.name: path.stat().st_mode & 0o777 for path in files} == {
            path.name: 0o600 for path in files
        }
    finally:
        running.stop()
