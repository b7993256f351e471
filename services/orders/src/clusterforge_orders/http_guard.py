"""uvicorn's httptools protocol with two limits it lacks: header size and read time.

httptools (llhttp) buffers a header of any size, and uvicorn waits for a request's
headers and body as long as the client sends a byte now and then. Before this, a 64 MB
header was read whole (115 MB more memory, 7.9 s) before authentication could refuse it,
and a client that sent half a header held its connection open for as long as it liked.

- ``max_header_bytes``: a request whose request line and headers exceed it is answered
  431 and its connection closed, without the rest being read. Counted twice: per received
  chunk while the headers are incomplete, so at most one chunk (256 KiB) more is ever
  buffered; and exactly (URL, names and values) once they are complete, for headers that
  arrived whole in one chunk.
- ``read_timeout_seconds``: a request must arrive whole (headers and body) within it from
  its first byte, and a new connection must start its request within it; otherwise the
  connection is answered 408 (when nothing was answered yet) and closed. The handler
  reading the body sees a disconnect, which app.py logs as one line.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger("clusterforge_orders.http")

DEFAULT_MAX_HEADER_BYTES = 16 * 1024
DEFAULT_READ_TIMEOUT_SECONDS = 10.0


def _plain_response(status_line: bytes, code: str, message: str) -> bytes:
    body = ('{"error": "' + code + '", "message": "' + message + '", "violations": []}').encode()
    return (
        status_line
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: close\r\n\r\n"
        + body
    )


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol plus the header-size limit and the read timeout (module docstring).

    The limits are class attributes: uvicorn builds the protocol from a class, so
    :func:`guarded_protocol` makes a subclass holding the configured values.
    """

    max_header_bytes = DEFAULT_MAX_HEADER_BYTES
    read_timeout_seconds = DEFAULT_READ_TIMEOUT_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._awaiting_headers = True
        # Bytes received since the request began, while its headers are incomplete.
        self._header_bytes = 0
        # The parsed request line and headers of the current request.
        self._parsed_header_bytes = 0
        # Headers over the limit: nothing more of this connection is parsed or served.
        self._rejected = False
        self._read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        if self._awaiting_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        too_large = self._awaiting_headers and self._header_bytes > self.max_header_bytes
        if (self._rejected or too_large) and not self.transport.is_closing():
            self._rejected = True
            self._answer_431()

    def _answer_431(self) -> None:
        logger.warning(
            "request headers from %s exceed %d bytes: answered 431 and closed",
            _client_text(self.client),
            self.max_header_bytes,
        )
        self._cancel_read_timer()
        self.transport.write(
            _plain_response(
                b"HTTP/1.1 431 Request Header Fields Too Large",
                "request_header_fields_too_large",
                f"request line and headers exceed {self.max_header_bytes} bytes",
            )
        )
        self.transport.close()

    def on_url(self, url: bytes) -> None:
        self._parsed_header_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        super().on_header(name, value)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._parsed_header_bytes = 0
        self._arm_read_timer()

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        if self._parsed_header_bytes > self.max_header_bytes:
            # No request cycle: data_received answers 431 once the parser returns.
            self._rejected = True
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._rejected:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_read_timer()
        if self._rejected:
            return
        # What follows on this connection is the next request's request line.
        self._awaiting_headers = True
        self._header_bytes = 0
        super().on_message_complete()

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(self.read_timeout_seconds, self._read_timed_out)

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle if not self._awaiting_headers else None
        if cycle is not None and cycle.response_started:
            # Answered already (a 401 to a body never finished): just stop waiting.
            self.transport.close()
            return
        if cycle is not None:
            # The handler waiting for the body gets a disconnect, and anything it then
            # sends is dropped rather than written after the 408.
            cycle.disconnected = True
            cycle.message_event.set()
        # A connection that never sent a byte (a pre-connect, a TCP probe) is routine.
        idle = self._awaiting_headers and self._header_bytes == 0
        logger.log(
            logging.INFO if idle else logging.WARNING,
            "%s from %s not received within %s s: answered 408 and closed",
            "request" if not idle else "no request",
            _client_text(self.client),
            self.read_timeout_seconds,
        )
        self.transport.write(
            _plain_response(
                b"HTTP/1.1 408 Request Timeout",
                "request_timeout",
                f"request not received whole within {self.read_timeout_seconds} s",
            )
        )
        self.transport.close()


def _client_text(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown client"


def guarded_protocol(
    *, max_header_bytes: int, read_timeout_seconds: float
) -> type[GuardedHttpToolsProtocol]:
    """The protocol class to give uvicorn (``http=``) with these limits."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"max_header_bytes": max_header_bytes, "read_timeout_seconds": read_timeout_seconds},
    )
