"""One guard for the HTTP edge of both services run on their own: head size, read time.

Why a subclass of uvicorn's httptools protocol rather than uvicorn's own limits: uvicorn
has none that hold against a slow or large request on httptools, its fast parser.
``h11_max_incomplete_event_size`` applies to the h11 parser only (which halves the
throughput); ``timeout_keep_alive`` is renewed by every byte a client sends, so a client
that drips a byte every few seconds keeps a connection for ever, before any
authentication; ``limit_concurrency`` bounds connections, not how long each is held.
So the two services' own subclasses (190 and 219 lines that did the same) became this
one, and in deployment the TLS proxy in front holds the same edges as well.

:class:`GuardedHttpToolsProtocol` answers

- 431 when the request line and headers exceed ``max_header_bytes``, counted both as
  parsed and as raw bytes still waiting for the end of the head, so an endless header is
  cut off after one read (at most 256 KiB more) without being buffered whole;
- 408 when a request has not arrived whole (head and body) within
  ``read_timeout_seconds`` of its first byte, or a new connection sends nothing within
  it; when the app has answered already (a 401, or a 413 decided from Content-Length,
  without reading the body) the connection is closed at that moment instead, so a client
  dripping body bytes after the answer cannot hold it;
- 400 to a request the parser refuses;

each in the service's own error shape, with ``X-Request-Id`` and ``X-Trace-Id`` like
every other answer, and ``Connection: close``. The limits are the app's
(``app.state.http_edge``, an :class:`EdgeLimits`), found by walking the wrappers uvicorn
puts around it, so every worker process gets them from its own app.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from .request_ids import new_id, trace_id_for

DEFAULT_MAX_HEADER_BYTES = 16 * 1024
DEFAULT_READ_TIMEOUT_SECONDS = 10.0
# Per header line on top of name and value (": " and CRLF), so the parsed count matches
# the bytes on the wire.
_HEADER_LINE_OVERHEAD = 4

ErrorBody = Callable[[int, str, str], bytes]


def code_and_message_body(status: int, _code: str, message: str) -> bytes:
    """The user directory's error shape: ``{"code": <status>, "message": ...}``."""
    return json.dumps({"code": status, "message": message}).encode()


def error_and_violations_body(_status: int, code: str, message: str) -> bytes:
    """The order service's error shape: ``{"error", "message", "violations": []}``."""
    return json.dumps({"error": code, "message": message, "violations": []}).encode()


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    read_timeout_seconds: float = DEFAULT_READ_TIMEOUT_SECONDS
    error_body: ErrorBody = code_and_message_body
    logger_name: str = "clusterforge_service_kit.http"


def find_edge_limits(app: Any) -> EdgeLimits:
    """The limits of the first app in uvicorn's chain of wrappers that carries some."""
    for _unwrapping in range(16):  # a handful of wrappers at most; the bound only guards a cycle
        if app is None:
            break
        limits = getattr(getattr(app, "state", None), "http_edge", None)
        if isinstance(limits, EdgeLimits):
            return limits
        app = getattr(app, "app", None)
    return EdgeLimits()


class _HeadTooLargeError(Exception):
    """Raised inside a parser callback to stop parsing; httptools wraps it."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol plus the limits of the module docstring; give uvicorn ``http=``."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = find_edge_limits(self.app)
        self._edge_logger = logging.getLogger(self._limits.logger_name)
        self._awaiting_head = True
        self._raw_head_bytes = 0
        self._parsed_head_bytes = 0
        # Head over the limit: nothing more of this connection is parsed or served.
        self._rejected = False
        self._sent_trace_id = b""
        self._read_timer: asyncio.TimerHandle | None = None

    # -- connection and parser callbacks -------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read_timer()  # a connection that never sends a byte is bounded too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        if self._awaiting_head:
            self._raw_head_bytes += len(data)
            if self._read_timer is None:
                self._arm_read_timer()
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # As uvicorn answers without a WebSocket library: neither service has one.
            self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if self._rejected:
                self._refuse_large_head()
                return
            self._edge_logger.warning("invalid HTTP request from %s; answered 400", self._peer())
            self._answer_and_close(400, b"Bad Request", "bad_request", "invalid HTTP request")
            return
        if self._awaiting_head and self._raw_head_bytes > self._limits.max_header_bytes:
            self._rejected = True
            self._refuse_large_head()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer is plain text without the ids; the services' is their shape.
        self._answer_and_close(400, b"Bad Request", "bad_request", msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_head = True
        self._parsed_head_bytes = 0
        self._sent_trace_id = b""
        if self._read_timer is None:
            self._arm_read_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head_bytes(len(name) + len(value) + _HEADER_LINE_OVERHEAD)
        if name.lower() == b"x-trace-id":
            self._sent_trace_id = value
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        # The read timer goes on: the body must arrive within the same budget.
        self._awaiting_head = False
        self._raw_head_bytes = 0
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._rejected:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_read_timer()
        if self._rejected:
            return
        # What follows on this connection is the next request; its clock starts with its
        # first byte (uvicorn's keep-alive timeout covers the idle time before it).
        self._awaiting_head = True
        self._raw_head_bytes = 0
        super().on_message_complete()

    # -- the limits -----------------------------------------------------------------

    def _count_head_bytes(self, size: int) -> None:
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > self._limits.max_header_bytes:
            self._rejected = True
            raise _HeadTooLargeError

    def _refuse_large_head(self) -> None:
        self._edge_logger.warning(
            "request head from %s exceeds %d bytes; answered 431",
            self._peer(),
            self._limits.max_header_bytes,
        )
        self._answer_and_close(
            431,
            b"Request Header Fields Too Large",
            "request_header_fields_too_large",
            f"request line and headers exceed {self._limits.max_header_bytes} bytes",
        )

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(
            self._limits.read_timeout_seconds, self._read_timed_out
        )

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        timeout = self._limits.read_timeout_seconds
        cycle = None if self._awaiting_head else self.cycle
        if cycle is not None and cycle.response_started:
            # Answered without the whole body (a 401, a 413 from Content-Length): the
            # rest is not waited for, however slowly it comes.
            self._edge_logger.info(
                "request body from %s not complete within %g s after the answer; closed",
                self._peer(),
                timeout,
            )
            self.transport.close()
            return
        if cycle is not None:
            # The handler waiting for the body gets a disconnect, and anything it then
            # sends is dropped rather than written after the 408.
            cycle.disconnected = True
            cycle.message_event.set()
        # A connection that never sent a byte (a pre-connect, a TCP probe) is routine.
        idle = self._awaiting_head and self._raw_head_bytes == 0
        self._edge_logger.log(
            logging.INFO if idle else logging.WARNING,
            "%s from %s not received within %g s; answered 408",
            "no request" if idle else "request",
            self._peer(),
            timeout,
        )
        self._answer_and_close(
            408,
            b"Request Timeout",
            "request_timeout",
            f"request not received whole within {timeout:g} s",
        )

    def _answer_and_close(self, status: int, reason: bytes, code: str, message: str) -> None:
        self._cancel_read_timer()
        if self.transport.is_closing():
            return
        body = self._limits.error_body(status, code, message)
        self.transport.write(
            b"".join(
                [
                    b"HTTP/1.1 %d %s\r\n" % (status, reason),
                    b"content-type: application/json\r\n",
                    b"content-length: %d\r\n" % len(body),
                    b"x-request-id: " + new_id().encode() + b"\r\n",
                    b"x-trace-id: " + trace_id_for(self._sent_trace_id) + b"\r\n",
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "an unknown client"
