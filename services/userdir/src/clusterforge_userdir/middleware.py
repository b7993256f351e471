"""Pure ASGI middleware: request and trace ids, bearer-token auth, request-size limit.

Written against raw ASGI rather than Starlette's BaseHTTPMiddleware because it runs on
every request and the latter costs a task and a queue per request.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from typing import Any

from clusterforge_service_kit import BearerTokens, new_id, trace_id_for
from clusterforge_service_kit.request_ids import REQUEST_ID_HEADER, TRACE_ID_HEADER
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("clusterforge_userdir.server")

__all__ = [
    "ACCESS_LOG_FILTER",
    "REQUEST_ID_HEADER",
    "TRACE_ID_HEADER",
    "QueryStringDroppingFilter",
    "RequestBodyTimeoutError",
    "RequestBodyTooLargeError",
    "RequestContextMiddleware",
    "drop_query_strings_from_access_log",
    "new_id",
]

_OPEN_PATHS = frozenset({"/mock-api/health", "/openapi.json", "/docs", "/docs/oauth2-redirect"})


class RequestBodyTooLargeError(Exception):
    """Raised while the body is read; answered with 413 by the app's handler."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(f"request body exceeds {limit} bytes")
        self.limit = limit


class RequestBodyTimeoutError(Exception):
    """Raised while the body is read; answered with 408 (and the connection closed)."""

    def __init__(self, *, timeout: float) -> None:
        super().__init__(f"request body not received within {timeout:g} s")
        self.timeout = timeout


class QueryStringDroppingFilter(logging.Filter):
    """Cuts the query string off the path in uvicorn's access log lines.

    A query string may carry a secret (``?access_token=...`` was logged in full even
    though the service refused it); paths carry ids only.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        arguments = record.args
        if isinstance(arguments, tuple) and len(arguments) == 5 and isinstance(arguments[2], str):
            path = arguments[2].partition("?")[0]
            record.args = (arguments[0], arguments[1], path, arguments[3], arguments[4])
        return True


ACCESS_LOG_FILTER = QueryStringDroppingFilter()


def drop_query_strings_from_access_log() -> None:
    """Install the filter on uvicorn's access logger (once, however often called)."""
    logging.getLogger("uvicorn.access").addFilter(ACCESS_LOG_FILTER)


def _client_gone(error: BaseException) -> bool:
    # Starlette reports a client that left mid-request as ClientDisconnect, which
    # FastAPI wraps into a 400 while it reads the body; writing to a closed socket
    # surfaces as an OSError.
    from starlette.requests import ClientDisconnect

    seen: BaseException | None = error
    for _unwrapping in range(4):
        if seen is None:
            return False
        if isinstance(seen, ClientDisconnect | ConnectionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _json_error(status: int, message: str) -> bytes:
    return json.dumps({"code": status, "message": message}, ensure_ascii=False).encode()


class RequestContextMiddleware:
    """Adds X-Request-Id and X-Trace-Id to every response and enforces the limits."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        accepted_tokens: Iterable[str],
        max_body_bytes: int,
        body_timeout: float,
    ) -> None:
        self.app = app
        self._accepted_tokens = BearerTokens(accepted_tokens)
        self._max_body_bytes = max_body_bytes
        self._body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trace_id = b""
        content_length = -1
        for name, value in scope["headers"]:
            if name == b"x-trace-id":
                trace_id = value
            elif name == b"content-length":
                content_length = int(value) if value.isdigit() and len(value) <= 19 else -1
        trace_id = trace_id_for(trace_id)
        context_headers = [
            (b"x-request-id", new_id().encode()),
            (b"x-trace-id", trace_id),
        ]
        scope.setdefault("state", {})["trace_id"] = trace_id.decode()
        response_started = False

        async def send_with_ids(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                message["headers"] = [*message.get("headers", ()), *context_headers]
            await send(message)

        if (
            self._accepted_tokens
            and scope["path"] not in _OPEN_PATHS
            and not self._accepted_tokens.accepts_headers(scope["headers"])
        ):
            await _send_json(
                send_with_ids,
                401,
                _json_error(401, "missing or invalid bearer token"),
                extra_headers=[(b"www-authenticate", b"Bearer")],
            )
            return
        if content_length > self._max_body_bytes:
            await _send_json(
                send_with_ids,
                413,
                _json_error(413, f"request body exceeds {self._max_body_bytes} bytes"),
            )
            return

        try:
            await self.app(scope, self._limited(scope, receive), send_with_ids)
        except RequestBodyTimeoutError as late:
            if not response_started:
                await _send_json(
                    send_with_ids,
                    408,
                    _json_error(408, str(late)),
                    extra_headers=[(b"connection", b"close")],
                )
        except Exception as failure:
            if _client_gone(failure):
                # One line: the client's choice, not a fault of the service.
                logger.info(
                    "client %s left before %s %s was answered",
                    _client_address(scope),
                    scope["method"],
                    scope["path"],
                )
                return
            logger.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if not response_started:
                await _send_json(send_with_ids, 500, _json_error(500, "internal server error"))

    def _limited(self, scope: Scope, receive: Receive) -> Receive:
        received = 0
        limit = self._max_body_bytes
        timeout = self._body_timeout
        deadline: float | None = None
        body_complete = False

        async def receive_within_limit() -> Message:
            nonlocal received, deadline, body_complete
            if body_complete:
                # Past the body only a disconnect can come, and waiting for it is the
                # caller's business (a streaming response), not a slow client's.
                return await receive()
            # One budget for the whole body, from the first read: a client dripping a
            # byte now and then would renew a per-read timeout for ever.
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + timeout
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except TimeoutError:
                logger.info(
                    "request body from %s not complete within %g s; answered 408",
                    _client_address(scope),
                    timeout,
                )
                raise RequestBodyTimeoutError(timeout=timeout) from None
            if message["type"] == "http.disconnect":
                body_complete = True
                logger.info(
                    "client %s left before sending the whole body of %s %s",
                    _client_address(scope),
                    scope["method"],
                    scope["path"],
                )
            elif message["type"] == "http.request":
                body_complete = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestBodyTooLargeError(limit=limit)
            return message

        return receive_within_limit


def _client_address(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown client"


async def _send_json(
    send: Send, status: int, body: bytes, *, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra_headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
