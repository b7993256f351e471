"""The HTTP layer: POST /orders, GET /health and GET /metrics.

Decisions for what the spec leaves "not shown" (documented in docs/orders.md):

- success is 200 with the OrderCreateResponse;
- every rejection is a JSON object ``{"error", "message", "violations"}``; a validation
  rejection is 400 and lists every broken rule as ``{"field", "message"}``;
- malformed JSON is 400 ``malformed_json``; a body that is not declared JSON is 415;
  a body over 64 KiB is 413; request line and headers over ``orders.max-header-bytes``
  are 431 and a request not received whole within ``orders.read-timeout-seconds`` is
  408 (both by the kit's guard, clusterforge_service_kit.http_edge);
- with tokens configured, POST /orders and GET /metrics without a valid bearer token are
  401 (auth.py); GET /health and the OpenAPI document stay open;
- a failing synchronous listener (or any other failure) is 500 ``order_not_created``,
  and nothing of the order is stored;
- every other error (an unknown path, a trailing slash, a method a path does not take,
  an unexpected failure) has the same shape, its ``error`` the status's name in
  snake_case (``not_found``, ``method_not_allowed``, ``internal_server_error``); a
  trailing slash is 404, never a redirect (whose Location would be built from the
  client's Host header).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus

import anyio
from clusterforge_service_kit.http_edge import EdgeLimits, error_and_violations_body
from clusterforge_service_kit.metrics import RequestMetricsMiddleware
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .auth import BearerTokenMiddleware
from .errors import (
    FieldViolation,
    RequestBodyTooLargeError,
    RequestRejectedError,
    SynchronousListenerError,
    UnsupportedMediaTypeError,
)
from .metrics import PROMETHEUS_CONTENT_TYPE
from .models import order_request_json_schema, parse_order_create_request
from .runtime import OrderServiceRuntime

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
# Threads that may run create-order at once. More only queue on the database (SQLite has
# one writer) and starve eventTaskExecutor's threads of the GIL, so listeners fall behind.
ORDER_WORKER_THREADS = 8
JSON_MEDIA_TYPE = "application/json"
BEARER_SCHEME = "bearerToken"

_ERROR_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": ["error", "message", "violations"],
    "properties": {
        "error": {"type": "string"},
        "message": {"type": "string"},
        "violations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}


def _error_response(description: str) -> dict[str, object]:
    return {"description": description, "content": {JSON_MEDIA_TYPE: {"schema": _ERROR_SCHEMA}}}


_UNAUTHORIZED = _error_response(
    "Missing or wrong bearer token (when orders.auth-tokens is set; WWW-Authenticate: Bearer)"
)
_EDGE_RESPONSES: dict[int | str, dict[str, object]] = {
    "408": _error_response(
        "The request did not arrive whole within orders.read-timeout-seconds (10 s)"
    ),
    "431": _error_response("Request line and headers exceed orders.max-header-bytes (16 KiB)"),
}
_ORDER_RESPONSE_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": ["orderId", "userId", "productName", "amount", "createTime"],
    "properties": {
        "orderId": {"type": "string"},
        "userId": {"type": "string"},
        "productName": {"type": "string"},
        "amount": {"type": "number"},
        "createTime": {"type": "string"},
    },
}


def _error_body(code: str, message: str, violations: tuple[FieldViolation, ...] = ()) -> bytes:
    document = {
        "error": code,
        "message": message,
        "violations": [{"field": item.field, "message": item.message} for item in violations],
    }
    return json.dumps(document, ensure_ascii=False).encode()


def _json_response(status_code: int, body: bytes) -> Response:
    return Response(content=body, status_code=status_code, media_type=JSON_MEDIA_TYPE)


def _status_code_name(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def _install_error_handlers(app: FastAPI) -> None:
    """Starlette's own answers (404, 405, 500) in the service's one error shape."""

    async def on_http_error(_request: Request, exc: Exception) -> Response:
        if not isinstance(exc, StarletteHTTPException):
            raise exc
        status = exc.status_code
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        response = _json_response(status, _error_body(_status_code_name(status), message))
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    async def on_unexpected(_request: Request, exc: Exception) -> Response:
        logger.error("unexpected failure: %s", type(exc).__name__, exc_info=exc)
        return _json_response(
            500, _error_body("internal_server_error", "internal server error; see the log")
        )

    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


def _is_json_content_type(header: str | None) -> bool:
    if not header:
        return False
    media_type = header.split(";", 1)[0].strip().lower()
    return media_type == JSON_MEDIA_TYPE or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestBodyTooLargeError(f"request body exceeds {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    # A client gone mid-body raises ClientDisconnect here; the handler logs it in one line.
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RequestBodyTooLargeError(f"request body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(*, runtime: OrderServiceRuntime) -> FastAPI:
    """The ASGI app; its lifespan closes ``runtime`` (draining the executor) on shutdown."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(runtime.close)

    app = FastAPI(
        title="clusterforge order service",
        version="1",
        lifespan=lifespan,
        openapi_url="/openapi.json",
        redirect_slashes=False,
    )
    app.state.runtime = runtime
    # Read by the kit's GuardedHttpToolsProtocol, which uvicorn creates before any request.
    app.state.http_edge = EdgeLimits(
        max_header_bytes=runtime.settings.orders.max_header_bytes,
        read_timeout_seconds=runtime.settings.orders.read_timeout_seconds,
        error_body=error_and_violations_body,
        logger_name="clusterforge_orders.http",
        metrics=runtime.request_metrics,
    )
    _install_error_handlers(app)
    app.add_middleware(BearerTokenMiddleware, accepted_tokens=runtime.accepted_tokens)
    # Added last, so outermost: 401s are counted and timed too.
    app.add_middleware(RequestMetricsMiddleware, metrics=runtime.request_metrics)
    # Secured operations name the scheme only when tokens are configured, so the document
    # says what this instance enforces.
    security: list[dict[str, list[str]]] = [{BEARER_SCHEME: []}] if runtime.accepted_tokens else []
    secured_responses: dict[int | str, dict[str, object]] = (
        {"401": _UNAUTHORIZED} if runtime.accepted_tokens else {}
    )
    order_workers = anyio.CapacityLimiter(ORDER_WORKER_THREADS)

    @app.post(
        "/orders",
        summary="Create an order",
        responses={
            "200": {
                "description": "The order, stored",
                "content": {JSON_MEDIA_TYPE: {"schema": _ORDER_RESPONSE_SCHEMA}},
            },
            "400": _error_response("Malformed JSON or broken validation rules (violations)"),
            **secured_responses,
            "413": _error_response("Body over 64 KiB"),
            "415": _error_response("Body not declared as application/json"),
            **_EDGE_RESPONSES,
            "500": _error_response("A synchronous listener failed; nothing was stored"),
        },
        openapi_extra={
            "security": security,
            # Generated from the pydantic model that validates the body (models.py).
            "requestBody": {
                "required": True,
                "content": {JSON_MEDIA_TYPE: {"schema": order_request_json_schema()}},
            },
        },
    )
    async def create_order(request: Request) -> Response:
        try:
            if not _is_json_content_type(request.headers.get("content-type")):
                raise UnsupportedMediaTypeError("send the order as Content-Type: application/json")
            order_request = parse_order_create_request(await _read_body(request))
        except ClientDisconnect:
            # Nothing to answer and nothing stored: one line, not a traceback.
            client = request.client
            logger.info(
                "client %s disconnected before sending the whole order; nothing stored",
                f"{client.host}:{client.port}" if client else "(unknown)",
            )
            return _json_response(
                400, _error_body("client_disconnected", "the body did not arrive whole")
            )
        except RequestRejectedError as rejection:
            return _json_response(
                rejection.status_code,
                _error_body(rejection.code, rejection.message, rejection.violations),
            )
        try:
            response = await anyio.to_thread.run_sync(
                runtime.service.create_order, order_request, limiter=order_workers
            )
        except SynchronousListenerError as failure:
            logger.error("order not created: %s", failure, exc_info=failure.__cause__)
            return _json_response(
                500, _error_body("order_not_created", "order was not created; nothing was stored")
            )
        except Exception:
            logger.exception("order not created")
            return _json_response(
                500, _error_body("order_not_created", "order was not created; nothing was stored")
            )
        return _json_response(200, response.to_json())

    @app.get(
        "/health",
        summary="Health of the database and eventTaskExecutor (never needs a token)",
        responses={"503": {"description": "The database or eventTaskExecutor is down"}},
    )
    async def health() -> Response:
        database_up = await run_in_threadpool(runtime.database.is_reachable)
        executor_up = not runtime.executor.is_shut_down
        status = "UP" if database_up and executor_up else "DOWN"
        body = {
            "status": status,
            "database": "UP" if database_up else "DOWN",
            "eventTaskExecutor": "UP" if executor_up else "DOWN",
        }
        return _json_response(200 if status == "UP" else 503, json.dumps(body).encode())

    @app.get(
        "/metrics",
        summary="Prometheus metrics",
        responses={
            "200": {"description": "Prometheus text", "content": {"text/plain": {}}},
            **secured_responses,
            **_EDGE_RESPONSES,
        },
        openapi_extra={"security": security},
    )
    async def metrics() -> Response:
        return Response(content=runtime.render_metrics(), media_type=PROMETHEUS_CONTENT_TYPE)

    if runtime.accepted_tokens:
        app.openapi_schema = None
        schema = app.openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})[BEARER_SCHEME] = {
            "type": "http",
            "scheme": "bearer",
        }
    return app
