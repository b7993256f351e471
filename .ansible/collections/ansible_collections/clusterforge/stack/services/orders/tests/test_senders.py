"""Notification senders against a real HTTP server on loopback."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from clusterforge_orders import (
    LoggingNotificationSender,
    NotificationError,
    WebhookNotificationSender,
)
from clusterforge_orders.logsafe import SingleLineFormatter


class _Webhook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, str]]] = []
    status = 204

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).received.append(json.loads(self.rfile.read(length)))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[_Webhook]]]:
    handler = type("Webhook", (_Webhook,), {"received": [], "status": 204})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook?token=t0ps3cret", handler
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_sender_posts_the_text(webhook: tuple[str, type[_Webhook]]) -> None:
    url, handler = webhook
    sender = WebhookNotificationSender(url=url, timeout_seconds=5)
    try:
        sender.send("用户 u 的订单已创建")
    finally:
        sender.close()
    assert handler.received == [{"text": "用户 u 的订单已创建"}]


def test_webhook_sender_fails_on_error_status_without_leaking_the_url(
    webhook: tuple[str, type[_Webhook]],
) -> None:
    url, handler = webhook
    handler.status = 503
    sender = WebhookNotificationSender(url=url, timeout_seconds=5)
    try:
        with pytest.raises(NotificationError, match="HTTP 503") as caught:
            sender.send("x")
    finally:
        sender.close()
    assert "t0ps3cret" not in str(caught.value)


def test_webhook_sender_fails_when_nothing_listens() -> None:
    sender = WebhookNotificationSender(url="http://127.0.0.1:9/hook?token=t0ps3cret")
    try:
        with pytest.raises(NotificationError) as caught:
            sender.send("x")
    finally:
        sender.close()
    assert "t0ps3cret" not in str(caught.value)


def test_logging_sender_logs_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="clusterforge_orders.notifications"):
        LoggingNotificationSender().send("订单 ORD-1 已创建")
    assert "订单 ORD-1 已创建" in caplog.text


def test_logged_notification_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="clusterforge_orders.notifications")
    forged = "键盘\n2026-01-01 00:00:00,000 ERROR [main] forged: pwned\r\u2028x\x1b[31m"
    LoggingNotificationSender().send(f"订单已创建：商品 {forged}")
    (message,) = caplog.messages
    assert "\n" not in message and "\r" not in message and "\u2028" not in message
    assert "\x1b" not in message
    assert "键盘\\n2026-01-01 00:00:00,000 ERROR" in message, "escaped, and Chinese kept"
    assert message.endswith("\\r\\u2028x\\u001b[31m")


def test_formatter_keeps_each_message_on_its_line_but_tracebacks_intact() -> None:
    formatter = SingleLineFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord(
        "orders", logging.WARNING, __file__, 1, "bad %s", ("a\nINFO forged",), None
    )
    assert formatter.format(record) == "WARNING bad a\\nINFO forged"
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failed = logging.LogRecord(
            "orders", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    text = formatter.format(failed)
    assert text.startswith("ERROR failed\nTraceback"), "the traceback keeps its lines"
