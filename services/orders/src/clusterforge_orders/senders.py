"""Where the notification listener sends its text: a pluggable :class:`NotificationSender`."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Protocol, TextIO

import httpx

from .errors import NotificationError
from .logsafe import LOG_FORMAT, escape_for_log
from .shared_client import SharedClientClosedError, SharedHttpClient

logger = logging.getLogger("clusterforge_orders.notifications")

# The logging sender writes its lines at most this long after they were sent...
DEFAULT_FLUSH_INTERVAL_SECONDS = 0.2
# ...or at once when this many characters wait (about 300 notifications).
MAX_PENDING_CHARS = 64 * 1024


class NotificationSender(Protocol):
    def send(self, text: str) -> None:
        """Deliver ``text`` or raise; called on an executor thread."""

    def close(self) -> None:
        """Release what the sender holds; called once at shutdown."""


class LoggingNotificationSender:
    """The default: writes each notification as one line of the service's log, at INFO.

    The line has the layout of every other log line (``LOG_FORMAT``, logger
    ``clusterforge_orders.notifications``) and goes to the same stream, standard error
    (the journal under systemd). The text holds the client's ``productName`` and
    ``userId``; their control characters are escaped, so a newline cannot forge a line.
    While that logger is not enabled for INFO (``log-level: warning``), nothing is written.

    Two things differ from ``logger.info``, both because this runs once per order:

    - the line is rendered here, not through a ``LogRecord`` and a ``Formatter``
      (about 2 us against 10 us);
    - the lines are written in batches, one ``write`` per ``flush_interval_seconds``
      (at once when ``MAX_PENDING_CHARS`` wait), by a daemon thread started with the
      first notification. Under load, one system call per order, with the interpreter
      lock given up and taken back around it, cost the order path more than the rest
      of the notification (bench/RESULTS.md).

    :meth:`close` writes what is still pending. A crash can lose the lines of the last
    interval: notifications are at most once (README, "Notifications are at most once").
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS,
    ) -> None:
        self._stream = stream  # None: sys.stderr as it is when the lines are written
        self._flush_interval = flush_interval_seconds
        self._lock = threading.Lock()
        self._lines_waiting = threading.Condition(self._lock)
        self._pending: list[str] = []
        self._pending_chars = 0
        self._flusher: threading.Thread | None = None
        self._closed = False
        # (second, its text): the timestamp's costly part, rendered once per second.
        self._second_stamp: tuple[int, str] = (-1, "")

    def send(self, text: str) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        line = self._render(text)
        with self._lock:
            self._pending.append(line)
            self._pending_chars += len(line)
            if self._closed or self._pending_chars >= MAX_PENDING_CHARS:
                self._write_pending()
            elif self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._flush_periodically, name="notification-log", daemon=True
                )
                self._flusher.start()
            elif len(self._pending) == 1:
                self._lines_waiting.notify()

    def _render(self, text: str) -> str:
        now = time.time()
        second = int(now)
        cached_second, stamp = self._second_stamp
        if cached_second != second:
            # logging.Formatter's default asctime: local time, then milliseconds.
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._second_stamp = (second, stamp)
        fields = {
            "asctime": f"{stamp},{int((now - second) * 1000):03d}",
            "levelname": "INFO",
            "threadName": threading.current_thread().name,
            "name": logger.name,
            "message": escape_for_log(text),
        }
        return LOG_FORMAT % fields + "\n"

    def _flush_periodically(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._pending:
                    self._lines_waiting.wait()
                    continue
                # Let the interval's lines gather, then write them with one call.
                deadline = time.monotonic() + self._flush_interval
                while not self._closed and (remaining := deadline - time.monotonic()) > 0:
                    self._lines_waiting.wait(remaining)
                self._write_pending()

    def _write_pending(self) -> None:
        """Write and flush the pending lines; called with the lock held, to keep order."""
        if not self._pending:
            return
        lines = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        stream = self._stream or sys.stderr
        try:
            stream.write(lines)
            stream.flush()
        except (OSError, ValueError):
            # As logging does: a broken log stream must not fail the listener. The lines
            # are lost, which at-most-once notifications allow.
            pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lines_waiting.notify_all()
            self._write_pending()
        if self._flusher is not None:
            self._flusher.join(timeout=5.0)


class WebhookNotificationSender:
    """POSTs ``{"text": ...}`` as JSON to a webhook and requires a 2xx answer.

    The URL is never logged, since webhook URLs commonly embed their token.
    """

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url = url
        self._client = SharedHttpClient(httpx.Client(timeout=timeout_seconds, transport=transport))

    def send(self, text: str) -> None:
        try:
            response = self._client.post(self._url, json={"text": text})
        except (httpx.HTTPError, SharedClientClosedError) as error:
            raise NotificationError(f"webhook request failed: {type(error).__name__}") from None
        if not response.is_success:
            raise NotificationError(f"webhook answered HTTP {response.status_code}")

    def close(self) -> None:
        self._client.close()
