"""Notification senders against a real HTTP server on loopback."""

from __future__ import annotations

import io
import json
import logging
import re
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
from clusterforge_orders.logsafe import LOG_FORMAT, SingleLineFormatter
from clusterforge_orders.senders import MAX_PENDING_CHARS
from orders_testing import wait_until


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


NOTIFICATIONS = "clusterforge_orders.notifications"


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _send_from(thread_name: str, sender: LoggingNotificationSender, text: str) -> None:
    thread = threading.Thread(target=sender.send, args=(text,), name=thread_name)
    thread.start()
    thread.join()


def test_logging_sender_writes_a_line_in_the_log_layout(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=NOTIFICATIONS)
    stream = io.StringIO()
    sender = LoggingNotificationSender(stream=stream, flush_interval_seconds=0.05)
    try:
        _send_from("event-task-7", sender, "订单 ORD-1 已创建")
        wait_until(lambda: stream.getvalue().endswith("\n"))
    finally:
        sender.close()
    (line,) = stream.getvalue().splitlines()
    # What SingleLineFormatter(LOG_FORMAT) renders for the same record, timestamp aside.
    record = logging.LogRecord(
        NOTIFICATIONS, logging.INFO, __file__, 1, "订单 ORD-1 已创建", (), None
    )
    record.threadName = "event-task-7"
    expected = SingleLineFormatter(LOG_FORMAT).format(record)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} .*", line), line
    assert line[23:] == expected[23:]
    assert line[23:] == " INFO [event-task-7] clusterforge_orders.notifications: 订单 ORD-1 已创建"


def test_logging_sender_writes_the_lines_of_an_interval_with_one_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=NOTIFICATIONS)
    stream = _CountingStream()
    sender = LoggingNotificationSender(stream=stream, flush_interval_seconds=30)
    for number in range(50):
        sender.send(f"订单 ORD-{number} 已创建")
    assert stream.writes == 0, "nothing written before the interval ends"
    sender.close()
    assert stream.writes == 1
    lines = stream.getvalue().splitlines()
    assert [line.rsplit(" ", 2)[-2] for line in lines] == [f"ORD-{n}" for n in range(50)]

    # Without close(): the flusher writes them once the interval has passed.
    periodic = _CountingStream()
    sender = LoggingNotificationSender(stream=periodic, flush_interval_seconds=0.5)
    try:
        sender.send("first")
        sender.send("second")
        wait_until(lambda: periodic.getvalue().count("\n") == 2)
        assert periodic.writes == 1
        sender.send("third")
        wait_until(lambda: periodic.getvalue().count("\n") == 3)
    finally:
        sender.close()


def test_logging_sender_writes_at_once_when_a_batch_is_full(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=NOTIFICATIONS)
    stream = io.StringIO()
    sender = LoggingNotificationSender(stream=stream, flush_interval_seconds=30)
    try:
        while not stream.getvalue():
            sender.send("订单已创建 " + "x" * 1000)
        assert len(stream.getvalue()) >= MAX_PENDING_CHARS
    finally:
        sender.close()


def test_logging_sender_writes_nothing_below_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=NOTIFICATIONS)
    stream = io.StringIO()
    sender = LoggingNotificationSender(stream=stream, flush_interval_seconds=0.01)
    sender.send("订单 ORD-1 已创建")
    sender.close()
    assert stream.getvalue() == ""


def test_logged_notification_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=NOTIFICATIONS)
    stream = io.StringIO()
    sender = LoggingNotificationSender(stream=stream)
    forged = "键盘\n2026-01-01 00:00:00,000 ERROR [main] forged: pwned\r\u2028x\x1b[31m"
    sender.send(f"订单已创建：商品 {forged}")
    sender.close()
    (line,) = stream.getvalue().splitlines()
    assert stream.getvalue().count("\n") == 1
    assert "\r" not in line and "\u2028" not in line and "\x1b" not in line
    assert "键盘\\n2026-01-01 00:00:00,000 ERROR" in line, "escaped, and Chinese kept"
    assert line.endswith("\\r\\u2028x\\u001b[31m")


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
