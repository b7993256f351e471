"""Bearer tokens and the HTTP edges (431, 408, disconnects, userId), on a real socket."""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from pathlib import Path

import pytest

from clusterforge_orders import ConfigurationError, load_settings
from clusterforge_orders.models import MAX_USER_ID_CHARS, USER_ID_TOO_LONG
from orders_testing import RunningServer, ServerFactory, make_settings, wait_until

TOKEN = "orders-test-token-0123456789abcdef"
OTHER_TOKEN = "orders-other-token-0123456789abcd"
ORDER = {"userId": "u-1", "productName": "键盘", "amount": 2}


def _authorized(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def secured(tmp_path: Path, start_server: ServerFactory) -> RunningServer:
    return start_server(
        make_settings(
            f"sqlite:///{tmp_path}/orders.db",
            **{"orders.auth-tokens": [TOKEN, OTHER_TOKEN], "orders.read-timeout-seconds": 1.0},
        )
    )


def _raw_exchange(server: RunningServer, payload: bytes, *, wait: float = 5.0) -> bytes:
    """Send ``payload`` as it is and read until the server closes (or ``wait`` passes)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as connection:
        # The server may answer and close before taking everything.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.sendall(payload)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


def test_orders_and_metrics_need_a_token_and_health_does_not(secured: RunningServer) -> None:
    client = secured.client
    for headers in ({}, _authorized("orders-wrong-token-0123456789abcd"), {"Authorization": TOKEN}):
        refused = client.post("/orders", json=ORDER, headers=headers)
        assert refused.status_code == 401, headers
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"] == "unauthorized"
        assert client.get("/metrics", headers=headers).status_code == 401
    for token in (TOKEN, OTHER_TOKEN):
        assert client.post("/orders", json=ORDER, headers=_authorized(token)).status_code == 200
    assert client.get("/metrics", headers=_authorized()).status_code == 200
    assert client.get("/health").status_code == 200
    document = client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    assert document["paths"]["/orders"]["post"]["security"] == [{"bearerToken": []}]
    assert "401" in document["paths"]["/orders"]["post"]["responses"]


def test_without_tokens_a_loopback_service_stays_open(
    tmp_path: Path, start_server: ServerFactory
) -> None:
    server = start_server(make_settings(f"sqlite:///{tmp_path}/orders.db"))
    assert server.post_order(ORDER).status_code == 200
    assert server.client.get("/metrics").status_code == 200
    assert "securitySchemes" not in server.client.get("/openapi.json").json().get("components", {})


EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 (the bind these tests are about)


@pytest.mark.parametrize("host", [EVERY_ADDRESS, "", "::", "10.20.0.22", "orders.example.internal"])
def test_off_loopback_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={}, overrides={"orders.host": host})
    message = str(caught.value)
    assert "orders.auth-tokens is empty" in message and "bind orders.host to 127.0.0.1" in message
    settings = load_settings(environ={"ORDERS_AUTH_TOKENS": f"{TOKEN},{OTHER_TOKEN}"})
    assert settings.orders.accepted_tokens() == {TOKEN, OTHER_TOKEN}
    assert TOKEN not in repr(settings)


@pytest.mark.parametrize("token", ["changeme", "short-token", "orders token with spaces!"])
def test_a_weak_token_is_refused_without_being_printed(token: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={}, overrides={"orders.auth-tokens": [token]})
    assert "token #1 in orders.auth-tokens" in str(caught.value)
    assert token not in str(caught.value)


def _token_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN}\n{OTHER_TOKEN}\n", encoding="utf-8")
    path.chmod(mode)
    return path


def test_a_private_token_file_is_read(tmp_path: Path) -> None:
    path = _token_file(tmp_path, 0o600)
    settings = load_settings(environ={}, overrides={"orders.auth-tokens-file": str(path)})
    assert settings.orders.accepted_tokens() == {TOKEN, OTHER_TOKEN}


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o660, 0o620, 0o666])
def test_a_token_file_others_or_the_group_may_touch_is_refused(tmp_path: Path, mode: int) -> None:
    path = _token_file(tmp_path, mode)
    settings = load_settings(environ={}, overrides={"orders.auth-tokens-file": str(path)})
    with pytest.raises(ConfigurationError) as caught:
        settings.orders.accepted_tokens()
    message = str(caught.value)
    assert f"chmod 600 {path}" in message and f"orders.auth-tokens-file {path}" in message
    assert TOKEN not in message


@pytest.mark.skipif(not hasattr(__import__("os"), "getegid"), reason="POSIX ownership")
def test_0640_is_accepted_only_from_root_with_the_services_group(tmp_path: Path) -> None:
    import os

    path = _token_file(tmp_path, 0o640)
    settings = load_settings(environ={}, overrides={"orders.auth-tokens-file": str(path)})
    owned_by_root_with_our_group = os.stat(path).st_uid == 0 and os.stat(path).st_gid == (
        os.getegid()
    )
    if owned_by_root_with_our_group:
        assert settings.orders.accepted_tokens() == {TOKEN, OTHER_TOKEN}
        if os.geteuid() == 0:
            # The same mode with another group: that group's members could read it.
            os.chown(path, 0, os.getegid() + 4242)
            with pytest.raises(ConfigurationError, match="chmod 600"):
                settings.orders.accepted_tokens()
    else:
        with pytest.raises(ConfigurationError, match="chmod 600"):
            settings.orders.accepted_tokens()


def test_a_settings_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    config.write_text(f"orders:\n  auth-tokens: [{TOKEN}]\n", encoding="utf-8")
    config.chmod(0o644)
    with pytest.raises(ConfigurationError) as caught:
        load_settings(config_file=config, environ={})
    assert f"settings file {config}" in str(caught.value)
    assert f"chmod 600 {config}" in str(caught.value)
    config.chmod(0o600)
    assert load_settings(config_file=config, environ={}).orders.auth_tokens == [TOKEN]


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        (
            {
                "orders.listeners.notification.sender": "webhook",
                "orders.listeners.notification.webhook-url": "https://bot:Hook-Pass-1@hooks.example/x",
            },
            "webhook-url",
        ),
        (
            {
                "orders.search.urls": "https://writer:Search-Pass-1@node-1.example:9200",
                "orders.search.ca-file": "/etc/ca.pem",
            },
            "orders.search.urls #1",
        ),
    ],
)
def test_urls_with_credentials_are_refused_without_being_printed(
    overrides: dict[str, object], setting: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={}, overrides=overrides)
    message = str(caught.value)
    assert setting in message and "user:password@" in message
    assert "Pass-1" not in message


def test_a_user_id_is_capped_like_a_product_name(
    tmp_path: Path, start_server: ServerFactory
) -> None:
    server = start_server(make_settings(f"sqlite:///{tmp_path}/orders.db"))
    accepted = server.post_order({**ORDER, "userId": "u" * MAX_USER_ID_CHARS})
    assert accepted.status_code == 200
    refused = server.post_order({**ORDER, "userId": "u" * 60_000})
    assert refused.status_code == 400
    assert refused.json()["violations"] == [{"field": "userId", "message": USER_ID_TOO_LONG}]


def test_oversized_headers_are_answered_431_before_being_read(secured: RunningServer) -> None:
    # 64 MB would be read whole before; now the answer comes after the first chunks.
    header = b"X-Padding: " + b"a" * (64 * 1024 * 1024) + b"\r\n"
    started = time.monotonic()
    answer = _raw_exchange(secured, b"POST /orders HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"request_header_fields_too_large" in answer
    assert time.monotonic() - started < 5
    # Headers just under the limit are fine.
    near = secured.client.get("/health", headers={"X-Padding": "a" * 8000})
    assert near.status_code == 200


def test_oversized_headers_in_one_chunk_are_answered_431(secured: RunningServer) -> None:
    # Small enough to arrive with the body in one read, so the exact count decides.
    request = (
        b"POST /orders HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 20_000 + b"\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    answer = _raw_exchange(secured, request)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_a_large_body_does_not_count_as_headers(secured: RunningServer) -> None:
    # Headers near the limit plus a 60 KB body, sent in one write: the body is no header.
    body = '{"userId": "u-1", "productName": "p", "amount": 2, "pad": "' + "x" * 60_000 + '"}'
    answer = secured.client.post(
        "/orders",
        content=body.encode(),
        headers={**_authorized(), "Content-Type": "application/json", "X-Padding": "a" * 15_000},
    )
    assert answer.status_code == 200, answer.text


def test_half_sent_headers_are_answered_408_within_the_read_timeout(
    secured: RunningServer,
) -> None:
    started = time.monotonic()
    answer = _raw_exchange(secured, b"POST /orders HTTP/1.1\r\nHost: x\r\nX-Slow: ", wait=10)
    elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert 0.9 <= elapsed < 5, elapsed


def test_an_idle_connection_is_closed_within_the_read_timeout(secured: RunningServer) -> None:
    started = time.monotonic()
    answer = _raw_exchange(secured, b"", wait=10)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 5


def test_a_half_sent_body_is_answered_408_and_logged_in_one_line(
    secured: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    request = (
        b"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b'\r\nContent-Length: 100\r\n\r\n{"userId"'
    )
    started = time.monotonic()
    answer = _raw_exchange(secured, request, wait=10)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert time.monotonic() - started < 5
    wait_until(lambda: any("disconnected before" in r.getMessage() for r in caplog.records))
    assert not [record for record in caplog.records if record.exc_info], "no traceback"


def test_a_client_gone_mid_body_is_one_log_line(
    secured: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    host, port = secured.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(
            b"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        time.sleep(0.2)
    wait_until(lambda: any("disconnected before" in r.getMessage() for r in caplog.records))
    lines = [r for r in caplog.records if "disconnected before" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0].getMessage()
    assert not [record for record in caplog.records if record.exc_info], "no traceback"
