"""One guard for the HTTP edge of both services run on their own: head, order, read time.

Why a subclass of uvicorn's httptools protocol rather than uvicorn's own limits: uvicorn
has none that hold against a slow or large request on httptools, its fast parser.
``h11_max_incomplete_event_size`` applies to the h11 parser only (which halves the
throughput); ``timeout_keep_alive`` is renewed by every byte a client sends, so a client
that drips a byte every few seconds keeps a connection for ever, before any
authentication; ``limit_concurrency`` bounds connections, not how long each is held.
So the two services' own subclasses (190 and 219 lines that did the same) became this
one, and in deployment the TLS proxy in front holds the same edges as well.

:class:`GuardedHttpToolsProtocol` answers

- 431 when the request head (request line, header lines and the empty line that ends
  them, as bytes on the wire) exceeds ``max_header_bytes``. The head is measured on the
  raw bytes, the same way however they arrive: the parser is fed up to the end of each
  head, of each Content-Length body and of each chunked body, never past it, so the
  count of one head never takes in bytes of the message before it. An endless header is
  cut off after one read without being buffered, and the same head gets the same answer
  in one write and in many;
- 400 to a request the parser refuses, and to one without ``Host`` (HTTP/1.1) or with two
  ``Host`` or two ``Authorization`` header lines (RFC 9112, 3.2; two credentials leave
  which one counts to the reader);
- 408 when a request has not arrived whole (head and body) within
  ``read_timeout_seconds`` of its first byte, or a new connection sends nothing within
  it; when the app has answered already (a 401, or a 413 decided from Content-Length,
  without reading the body) the connection is closed at that moment instead, so a client
  dripping body bytes after the answer cannot hold it;

each in the service's own error shape, with ``X-Request-Id`` and ``X-Trace-Id`` like
every other answer, ``Connection: close``, and counted in the service's request metrics
(:meth:`RequestMetrics.count_refusal`).

One answer per request, in order: a refusal of a request pipelined behind others (sent in
the same read, or before their answers) goes out after their answers, which the app
gives as usual; the refused request itself never reaches the app, and nothing after it
is read. A refusal never writes over an answer in progress, and a connection the guard
closes marks every request still open on it as disconnected, so the app's late answer is
dropped instead of raising on a closed transport.

The limits are the app's (``app.state.http_edge``, an :class:`EdgeLimits`), found by
walking the wrappers uvicorn puts around it, so every worker process gets them from its
own app.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from .metrics import RequestMetrics
from .request_ids import new_id, trace_id_for

DEFAULT_MAX_HEADER_BYTES = 16 * 1024
DEFAULT_READ_TIMEOUT_SECONDS = 10.0
# The end of a head, and of a chunked body (its last chunk and trailers end the same way).
# llhttp takes CRLF line ends only, so a message cannot end anywhere else.
_EMPTY_LINE_END = b"\r\n\r\n"

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
    # Where the guard's answers are counted beside the app's (None: not counted).
    metrics: RequestMetrics | None = None


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


def request_head_problem(http_version: str, headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """Why a parsed head must be refused with 400 (RFC 9112, 3.2), or None.

    ``headers`` are ASGI's: names in lower case, one pair per header line.
    """
    hosts = sum(1 for name, _value in headers if name == b"host")
    authorizations = sum(1 for name, _value in headers if name == b"authorization")
    if hosts > 1:
        return f"{hosts} Host header lines; send exactly one"
    if hosts == 0 and http_version != "1.0":
        return "no Host header; an HTTP/1.1 request must send exactly one"
    if authorizations > 1:
        return f"{authorizations} Authorization header lines; send exactly one"
    return None


def _empty_line_end(tail: bytes, data: bytes, start: int) -> int:
    """Index in ``data`` just past the first CRLFCRLF from ``start``, or -1.

    ``tail`` is up to 3 bytes scanned before ``start`` (in an earlier read), so an end
    split between two reads is found at the same place as one in a single read.
    """
    if tail:
        joined = tail + data[start : start + 3]
        found = joined.find(_EMPTY_LINE_END)
        if found >= 0:
            return start + found + len(_EMPTY_LINE_END) - len(tail)
    found = data.find(_EMPTY_LINE_END, start)
    return found + len(_EMPTY_LINE_END) if found >= 0 else -1


def _tail_after(tail: bytes, data: bytes, start: int, stop: int) -> bytes:
    return (tail + data[start:stop])[-(len(_EMPTY_LINE_END) - 1) :]


class _StopParsingError(Exception):
    """Raised inside a parser callback once a refusal is decided; httptools wraps it."""


@dataclass(frozen=True, slots=True)
class _Refusal:
    status: int
    method: str
    answer: bytes


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
        self._head_bytes = 0  # raw bytes of the head being read
        self._head_tail = b""
        self._in_body = False  # a head was passed to the app, its body not complete
        self._body_left: int | None = None  # of a Content-Length body; None: chunked
        self._body_tail = b""
        # A refusal is decided: nothing more of this connection is parsed or served.
        self._refusing = False
        self._deferred: _Refusal | None = None  # waits for the answers before it
        self._sent_trace_id = b""
        self._request_method = "other"  # until a request line is parsed, for the metrics
        self._read_timer: asyncio.TimerHandle | None = None

    # -- connection ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read_timer()  # a connection that never sends a byte is bounded too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refusing:
            return
        self._unset_keepalive_if_required()
        position = 0
        while position < len(data) and not self._refusing:
            if self._awaiting_head:
                position = self._take_head_bytes(data, position)
            elif self._body_left is not None:
                stop = min(len(data), position + self._body_left)
                self._body_left -= stop - position
                position = self._feed(data, position, stop)
            else:
                end = _empty_line_end(self._body_tail, data, position)
                stop = end if end >= 0 else len(data)
                self._body_tail = (
                    b"" if end >= 0 else _tail_after(self._body_tail, data, position, stop)
                )
                position = self._feed(data, position, stop)

    def _take_head_bytes(self, data: bytes, position: int) -> int:
        """Feed the parser the next bytes of a head, at most up to its end; the new position."""
        if self._read_timer is None:
            self._arm_read_timer()
        end = _empty_line_end(self._head_tail, data, position)
        stop = end if end >= 0 else len(data)
        room = self._limits.max_header_bytes - self._head_bytes
        if stop - position > room:
            # What fits is parsed first, so a syntax error within the limit is a 400 in
            # every split; past the limit the answer is 431 whatever follows.
            if room > 0:
                self._feed(data, position, position + room)
            if not self._refusing:
                self._refuse_large_head()
            return len(data)
        self._head_bytes += stop - position
        # Past an end the parser did not take as a head's (empty lines before a request
        # line), the count goes on and the scan starts afresh.
        self._head_tail = b"" if end >= 0 else _tail_after(self._head_tail, data, position, stop)
        return self._feed(data, position, stop)

    def _feed(self, data: bytes, start: int, stop: int) -> int:
        """Parse ``data[start:stop]``; ``stop``, or len(data) when parsing has ended."""
        try:
            self.parser.feed_data(data[start:stop])
        except httptools.HttpParserUpgrade:
            # As uvicorn answers without a WebSocket library: neither service has one.
            self._unsupported_upgrade_warning()
            return len(data)
        except httptools.HttpParserError as refused:
            if not self._refusing:
                self._edge_logger.warning(
                    "invalid HTTP request from %s (%s); answered 400", self._peer(), refused
                )
                self._refuse(400, b"Bad Request", "bad_request", "invalid HTTP request")
            return len(data)
        return len(data) if self._refusing else stop

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer is plain text without the ids; the services' is their shape.
        self._refuse(400, b"Bad Request", "bad_request", msg)

    # -- parser callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._sent_trace_id = b""
        self._request_method = "other"
        if self._read_timer is None:
            self._arm_read_timer()

    def on_url(self, url: bytes) -> None:
        if not self.url:  # the method is parsed once the target begins
            self._request_method = self.parser.get_method().decode("ascii", "replace")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"x-trace-id":
            self._sent_trace_id = value
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        # The read timer goes on: the body must arrive within the same budget.
        self._awaiting_head = False
        self._head_bytes = 0
        self._head_tail = b""
        problem = request_head_problem(self.parser.get_http_version(), self.headers)
        if problem is not None:
            self._edge_logger.warning("request from %s: %s; answered 400", self._peer(), problem)
            self._refuse(400, b"Bad Request", "bad_request", problem)
            raise _StopParsingError
        self._body_left = None
        self._body_tail = b""
        if not any(name == b"transfer-encoding" for name, _value in self.headers):
            # The parser refused a second or malformed Content-Length already.
            self._body_left = next(
                (int(value) for name, value in self.headers if name == b"content-length"), 0
            )
        self._in_body = True
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refusing:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_read_timer()
        self._in_body = False
        # What follows on this connection is the next request; its clock starts with its
        # first byte (uvicorn's keep-alive timeout covers the idle time before it).
        self._awaiting_head = True
        self._body_left = None
        self._request_method = "other"
        if self._refusing:
            return
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._deferred is not None and not self.pipeline:
            # The last answer before the refused request is out: the refusal follows it.
            self.server_state.total_requests += 1
            refusal, self._deferred = self._deferred, None
            if not self.transport.is_closing():
                self._send_and_close(refusal)
            return
        super().on_response_complete()

    # -- refusals --------------------------------------------------------------------

    def _refuse(self, status: int, reason: bytes, code: str, message: str) -> None:
        """Answer the request being read with ``status``, after the answers before it."""
        self._refusing = True
        self._cancel_read_timer()
        if self.transport.is_closing():
            return
        refusal = _Refusal(
            status=status,
            method=self._request_method,
            answer=self._answer(status, reason, code, message),
        )
        earlier_open = bool(self.pipeline)
        refused_cycle = self.cycle if self._in_body else None
        if refused_cycle is not None:
            queued = [entry for entry in self.pipeline if entry[0] is refused_cycle]
            if queued:
                # Never started: it waits behind an answer in progress and leaves quietly.
                self.pipeline.remove(queued[0])
                earlier_open = True
            elif refused_cycle.response_started:
                # The app has answered it already (a 401, a 413): no second answer.
                self._close()
                return
            else:
                # Running, waiting for its body: it gets a disconnect, and what it sends
                # then is dropped rather than written before or after the refusal.
                refused_cycle.disconnected = True
                refused_cycle.message_event.set()
        elif self.cycle is not None:
            earlier_open = earlier_open or not (
                self.cycle.response_complete or self.cycle.disconnected
            )
        if earlier_open:
            self._deferred = refusal
        else:
            self._send_and_close(refusal)

    def _refuse_large_head(self) -> None:
        self._edge_logger.warning(
            "request head from %s exceeds %d bytes; answered 431",
            self._peer(),
            self._limits.max_header_bytes,
        )
        self._refuse(
            431,
            b"Request Header Fields Too Large",
            "request_header_fields_too_large",
            f"request line and headers exceed {self._limits.max_header_bytes} bytes",
        )

    def _answer(self, status: int, reason: bytes, code: str, message: str) -> bytes:
        body = self._limits.error_body(status, code, message)
        return b"".join(
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

    def _send_and_close(self, refusal: _Refusal) -> None:
        self.transport.write(refusal.answer)
        if self._limits.metrics is not None:
            self._limits.metrics.count_refusal(refusal.method, refusal.status)
        self._close()

    def _close(self) -> None:
        # Until uvloop reports the connection lost, a write to it raises; a request still
        # open on it must drop its answer instead (uvicorn checks ``disconnected``).
        open_cycles = [entry[0] for entry in self.pipeline]
        if self.cycle is not None:
            open_cycles.append(self.cycle)
        for cycle in open_cycles:
            if not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
        self.pipeline.clear()
        self.transport.close()

    # -- the read timer --------------------------------------------------------------

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
        if self.transport.is_closing() or self._refusing:
            return
        timeout = self._limits.read_timeout_seconds
        cycle = self.cycle if self._in_body else None
        if cycle is not None and cycle.response_started:
            # Answered without the whole body (a 401, a 413 from Content-Length): the
            # rest is not waited for, however slowly it comes.
            self._edge_logger.info(
                "request body from %s not complete within %g s after the answer; closed",
                self._peer(),
                timeout,
            )
            self._refusing = True
            self._close()
            return
        # A connection that never sent a byte (a pre-connect, a TCP probe) is routine.
        idle = self._awaiting_head and self._head_bytes == 0
        self._edge_logger.log(
            logging.INFO if idle else logging.WARNING,
            "%s from %s not received within %g s; answered 408",
            "no request" if idle else "request",
            self._peer(),
            timeout,
        )
        self._refuse(
            408,
            b"Request Timeout",
            "request_timeout",
            f"request not received whole within {timeout:g} s",
        )

    def _peer(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "an unknown client"
