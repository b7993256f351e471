"""The client's bounds over real sockets: a total deadline per call, a maximum response
size, typed errors for values that cannot be sent, and no secret in its settings or logs."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clusterforge_userdir import (
    ClientConfig,
    ClientConfigError,
    UserCreateRequest,
    UserDirectoryClient,
    UserDirectoryError,
    UserSearchRequest,
    load_client_config,
)
from clusterforge_userdir.errors import (
    CallDeadlineExceededError,
    RemoteAccessError,
    RequestEncodingError,
    ResponseTooLargeError,
)
from userdir_support import RecordingServer

USER_JSON = b'{"id":1,"username":"slow","status":1,"createdAt":"2024-05-01T08:30:00"}'
LONE_SURROGATE = "\ud800"

Answer = Callable[[socket.socket], None]


@contextmanager
def raw_server(answer: Answer) -> Iterator[str]:
    """A server that reads a request head and lets ``answer`` write what it likes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stopping = threading.Event()

    def handle(connection: socket.socket) -> None:
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                received += chunk
            with contextlib.suppress(OSError):  # the client gave up, as it should
                answer(connection)

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=handle, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        thread.join(timeout=5)
        listener.close()


def drip(data: bytes, *, every: float = 1.0) -> Answer:
    def answer(connection: socket.socket) -> None:
        for byte in data:
            connection.sendall(bytes([byte]))
            time.sleep(every)

    return answer


def client_for(base_url: str, **settings: object) -> UserDirectoryClient:
    return UserDirectoryClient(config=ClientConfig(root_uri=base_url, **settings))  # type: ignore[arg-type]


# -- total deadline ----------------------------------------------------------------------


def test_a_server_dripping_its_head_cannot_hold_a_call_past_the_deadline() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"a" * 60
    with raw_server(drip(head, every=0.5)) as base_url:
        client = client_for(base_url, read_timeout=2.0, total_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(CallDeadlineExceededError) as raised:
            client.get_user(1)
        elapsed = time.monotonic() - started
        client.close()
    assert 1.5 <= elapsed < 3.5
    assert isinstance(raised.value, RemoteAccessError)
    assert "total-timeout of 2 s" in str(raised.value)


def test_a_server_dripping_its_body_cannot_hold_a_call_past_the_deadline() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(USER_JSON)
        )
        drip(USER_JSON, every=0.5)(connection)

    with raw_server(answer) as base_url:
        client = client_for(base_url, read_timeout=2.0, total_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(CallDeadlineExceededError):
            client.get_user(1)
        elapsed = time.monotonic() - started
        client.close()
    assert elapsed < 3.5


def test_a_prompt_server_is_answered_within_the_deadline() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(USER_JSON), USER_JSON)
        )

    with raw_server(answer) as base_url:
        client = client_for(base_url, total_timeout=2.0)
        user = client.get_user(1)
        client.close()
    assert user is not None
    assert user.username == "slow"


# -- maximum response size ---------------------------------------------------------------


def test_a_declared_huge_body_is_refused_before_it_is_read() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (64 * 1024 * 1024)
        )
        connection.sendall(b"[" + b" " * 65536)
        time.sleep(2)

    with raw_server(answer) as base_url:
        client = client_for(base_url, max_response_bytes=1024 * 1024)
        started = time.monotonic()
        with pytest.raises(ResponseTooLargeError) as raised:
            client.list_users()
        client.close()
    assert time.monotonic() - started < 1.5
    assert raised.value.limit == 1024 * 1024


def test_an_endless_body_is_cut_off_at_the_limit() -> None:
    sent = 0

    def answer(connection: socket.socket) -> None:
        nonlocal sent
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        piece = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
        for _ in range(1024):  # 64 MB, if nobody stops it
            connection.sendall(piece)
            sent += 65536

    with raw_server(answer) as base_url:
        client = client_for(base_url, max_response_bytes=256 * 1024)
        with pytest.raises(ResponseTooLargeError):
            client.list_users()
        client.close()
    assert sent < 16 * 1024 * 1024


# -- values that cannot be sent ----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "part"),
    [
        (lambda c: c.create_user(UserCreateRequest(username="a", nickname=LONE_SURROGATE)), "body"),
        (lambda c: c.search_users(UserSearchRequest(keyword=LONE_SURROGATE)), "body"),
        (lambda c: c.list_users(keyword=LONE_SURROGATE), "query"),
        (lambda c: c.get_org_user(LONE_SURROGATE, 1), "path"),
        (lambda c: c.exchange("GET", "/mock-api/health", headers={"X-Tenant-Id": "ünï"}), "header"),
    ],
)
def test_a_value_that_cannot_be_sent_raises_a_typed_error_and_sends_nothing(
    call: Callable[[UserDirectoryClient], object], part: str
) -> None:
    recorder = RecordingServer()
    with recorder.running() as base_url:
        client = client_for(base_url)
        with pytest.raises(RequestEncodingError, match=part) as raised:
            call(client)
        client.close()
    assert isinstance(raised.value, UserDirectoryError)
    assert LONE_SURROGATE not in str(raised.value)
    assert recorder.requests == []


# -- settings and logs -------------------------------------------------------------------


def test_credentials_in_the_root_uri_are_refused_without_repeating_them() -> None:
    with pytest.raises(ClientConfigError, match="bearer-token") as raised:
        ClientConfig(root_uri="http://reader:URI-PASSWORD-99@127.0.0.1:8081")
    assert "URI-PASSWORD-99" not in str(raised.value)


def test_total_timeout_and_max_response_bytes_are_settings() -> None:
    config = load_client_config(
        environ={
            "DEMO_REST_TEMPLATE_TOTAL_TIMEOUT": "7s",
            "DEMO_REST_TEMPLATE_MAX_RESPONSE_BYTES": "65536",
        }
    )
    assert config.total_timeout == 7.0
    assert config.max_response_bytes == 65536
    with pytest.raises(ClientConfigError, match="max-response-bytes"):
        ClientConfig(max_response_bytes=10)
    with pytest.raises(ClientConfigError, match="total-timeout"):
        ClientConfig(total_timeout=0)


def test_a_client_file_with_a_token_readable_by_others_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "client.yml"
    file.write_text(
        "demo:\n  rest-template:\n    bearer-token: client-token-0123456789\n", encoding="utf-8"
    )
    file.chmod(0o644)
    with pytest.raises(ClientConfigError, match=f"chmod 600 {file}") as raised:
        load_client_config(yaml_file=file, environ={})
    assert "client-token-0123456789" not in str(raised.value)
    file.chmod(0o600)
    assert load_client_config(yaml_file=file, environ={}).bearer_token == "client-token-0123456789"


def test_a_missing_client_file_raises_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="cannot read"):
        load_client_config(yaml_file=tmp_path / "absent.yml", environ={})


def test_the_debug_log_keeps_query_strings_out(caplog: pytest.LogCaptureFixture) -> None:
    recorder = RecordingServer(answer=[])
    with (
        recorder.running() as base_url,
        caplog.at_level(logging.DEBUG, logger="clusterforge_userdir.client"),
    ):
        client = client_for(base_url)
        client.list_users(keyword="QUERY-SECRET-1d4e")
        client.close()
    assert "QUERY-SECRET-1d4e" in recorder.request_lines[0]
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "/mock-api/users" in logged
    assert "QUERY-SECRET-1d4e" not in logged


def test_a_body_that_is_not_json_raises_a_typed_error() -> None:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot json!"
        )

    with raw_server(answer) as base_url:
        client = client_for(base_url)
        full = client.exchange("GET", "/mock-api/health")
        client.close()
    with pytest.raises(RemoteAccessError):
        full.json()


def _answering(body: bytes, *, status: bytes = b"200 OK", charset: bytes = b"") -> Answer:
    def answer(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 "
            + status
            + b"\r\nContent-Type: application/json"
            + charset
            + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )

    return answer


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(USER_JSON.replace(b'"slow"', b'"sl\xffow"'), id="ff-in-a-field"),
        pytest.param(USER_JSON[:-1] + b',"x":"\xed\xa0\x80"}', id="surrogate-ignored-field"),
        pytest.param(b"\xe4\xb8", id="truncated"),
    ],
)
@pytest.mark.parametrize("charset", [b"", b"; charset=utf-8", b"; charset=latin-1"])
def test_a_body_that_is_not_utf8_raises_the_typed_decoding_error(
    body: bytes, charset: bytes
) -> None:
    with raw_server(_answering(body, charset=charset)) as base_url:
        client = client_for(base_url)
        with pytest.raises(RemoteAccessError) as raised:
            client.exchange("GET", "/mock-api/users/1")
        with pytest.raises(RemoteAccessError):
            client.get_user(1)
        client.close()
    assert isinstance(raised.value.cause, UnicodeDecodeError)
    assert "not UTF-8" in str(raised.value)
    assert "\ufffd" not in str(raised.value)


def test_an_error_answer_that_is_not_utf8_raises_the_typed_decoding_error() -> None:
    answer = _answering(b'{"code":500,"message":"\xff"}', status=b"500 Internal Server Error")
    with raw_server(answer) as base_url:
        client = client_for(base_url)
        with pytest.raises(RemoteAccessError) as raised:
            client.get_user(1)
        client.close()
    assert "answered 500" in str(raised.value)


def test_a_utf8_body_is_read_as_sent() -> None:
    body = USER_JSON.replace(b'"slow"', '"键盘"'.encode())
    with raw_server(_answering(body)) as base_url:
        client = client_for(base_url)
        assert client.get_user(1).username == "键盘"
        client.close()
