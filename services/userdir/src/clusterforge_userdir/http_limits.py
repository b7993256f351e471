"""uvicorn's httptools protocol with the limits it lacks: header size and header read time.

Stock uvicorn (httptools) buffers a request head of any size (64 MB was accepted before
authentication) and waits for a half-sent head as long as the client likes; a connection
that never sends a byte is never closed at all. :class:`BoundedHttpToolsProtocol` answers

- 431 when the request line and headers exceed ``max_request_header_bytes``, counted both
  as parsed and as raw bytes still waiting for the end of the head (so a single endless
  header is cut off without being buffered whole);
- 408 when the head has not arrived within ``request_read_timeout`` seconds of the
  connection opening or of the request's first byte;

and closes the connection. The body's read time is bounded by the ASGI middleware
(:mod:`.middleware`), where the app reads it.

The limits are the app's settings (``app.state.http_limits``, set by ``create_app``),
found by walking the wrappers uvicorn puts around the app, so every worker process gets
them from its own app without anything but the class crossing the process boundary.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from .settings import DEFAULT_MAX_REQUEST_HEADER_BYTES, DEFAULT_REQUEST_READ_TIMEOUT

logger = logging.getLogger("clusterforge_userdir.server")

# A per-line overhead on top of name and value (": " and CRLF), so that the parsed count
# matches the bytes on the wire.
_HEADER_LINE_OVERHEAD = 4


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_request_header_bytes: int = DEFAULT_MAX_REQUEST_HEADER_BYTES
    request_read_timeout: float = DEFAULT_REQUEST_READ_TIMEOUT


class _RequestHeadTooLargeError(Exception):
    """Raised inside a parser callback to stop parsing; httptools wraps it."""


def find_http_limits(app: Any) -> HttpLimits:
    """The limits of the first app in uvicorn's chain of wrappers that carries some."""
    for _ in range(16):  # a handful of wrappers at most; the bound only guards a cycle
        if app is None:
            break
        limits = getattr(getattr(app, "state", None), "http_limits", None)
        if isinstance(limits, HttpLimits):
            return limits
        app = getattr(app, "app", None)
    return HttpLimits()


def _closing_json(status: int, reason: bytes, message: str) -> bytes:
    body = json.dumps({"code": status, "message": message}).encode()
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, reason),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
    )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol plus a cap on the request head's size and time; see the module."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = find_http_limits(self.app)
        self._max_head_bytes = limits.max_request_header_bytes
        self._head_timeout = limits.request_read_timeout
        self._awaiting_head = True
        self._raw_head_bytes = 0
        self._parsed_head_bytes = 0
        self._head_too_large = False
        self._head_timer: asyncio.TimerHandle | None = None

    # -- connection and parser callbacks -------------------------------------------

    def connection_made(  # type: ignore[override]
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        # A connection that opens and never sends a byte is bounded too.
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_too_large:
            return
        if self._awaiting_head:
            self._raw_head_bytes += len(data)
            if self._head_timer is None:
                self._start_head_timer()
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Same answer as uvicorn: this service has no WebSocket endpoint.
            self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if self._head_too_large:
                self._refuse_too_large_head()
                return
            logger.warning("invalid HTTP request from %s; answered 400", self._peer())
            self.send_400_response("Invalid HTTP request received.")
            return
        if self._awaiting_head and self._raw_head_bytes > self._max_head_bytes:
            self._head_too_large = True
            self._refuse_too_large_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_head = True
        self._parsed_head_bytes = 0
        if self._head_timer is None:
            self._start_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head_bytes(len(name) + len(value) + _HEADER_LINE_OVERHEAD)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._raw_head_bytes = 0
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # The next request on this connection starts its own count; its clock starts
        # with its first byte (uvicorn's keep-alive timeout covers the idle time before).
        self._awaiting_head = True
        self._raw_head_bytes = 0

    # -- the limits -----------------------------------------------------------------

    def _count_head_bytes(self, size: int) -> None:
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > self._max_head_bytes:
            self._head_too_large = True
            raise _RequestHeadTooLargeError

    def _refuse_too_large_head(self) -> None:
        self._cancel_head_timer()
        logger.warning(
            "request head from %s exceeds %d bytes; answered 431",
            self._peer(),
            self._max_head_bytes,
        )
        self._answer_and_close(
            _closing_json(
                431,
                b"Request Header Fields Too Large",
                f"request line and headers exceed {self._max_head_bytes} bytes",
            )
        )

    def _start_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self._head_timeout, self._on_head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _on_head_timeout(self) -> None:
        self._head_timer = None
        if not self._awaiting_head or self.transport.is_closing():
            return
        logger.info(
            "request head from %s not complete within %g s; answered 408",
            self._peer(),
            self._head_timeout,
        )
        self._answer_and_close(
            _closing_json(
                408,
                b"Request Timeout",
                f"request line and headers not received within {self._head_timeout:g} s",
            )
        )

    def _answer_and_close(self, response: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "unknown peer"
