"""The HTTP layer: POST /orders, GET /health and GET /metrics.

Decisions for what the spec leaves "not shown" (documented in docs/orders.md):

- success is 200 with the OrderCreateResponse;
- every rejection is a JSON object ``{"error", "message", "violations"}``; a validation
  rejection is 400 and lists every broken rule as ``{"field", "message"}``;
- malformed JSON is 400 ``malformed_json``; a body that is not declared JSON is 415;
  a body over 64 KiB is 413;
- a failing synchronous listener (or any other failure) is 500 ``order_not_created``,
  and nothing of the order is stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool

from .errors import (
    FieldViolation,
    RequestBodyTooLargeError,
    RequestRejectedError,
    SynchronousListenerError,
    UnsupportedMediaTypeError,
)
from .metrics import PROMETHEUS_CONTENT_TYPE
from .models import parse_order_create_request
from .runtime import OrderServiceRuntime

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
# Threads that may run create-order at once. More only queue on the database (SQLite has
# one writer) and starve eventTaskExecutor's threads of the GIL, so listeners fall behind.
ORDER_WORKER_THREADS = 8
JSON_MEDIA_TYPE = "application/json"


def _error_body(code: str, message: str, violations: tuple[FieldViolation, ...] = ()) -> bytes:
    document = {
        "error": code,
        "message": message,
        "violations": [{"field": item.field, "message": item.message} for item in violations],
    }
    return json.dumps(document, ensure_ascii=False).encode()


def _json_response(status_code: int, body: bytes) -> Response:
    return Response(content=body, status_code=status_code, media_type=JSON_MEDIA_TYPE)


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
    )
    app.state.runtime = runtime
    order_workers = anyio.CapacityLimiter(ORDER_WORKER_THREADS)

    @app.post(
        "/orders",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    JSON_MEDIA_TYPE: {
                        "schema": {
                            "type": "object",
                            "required": ["userId", "productName", "amount"],
                            "properties": {
                                "userId": {"type": "string", "minLength": 1},
                                "productName": {"type": "string", "minLength": 1},
                                "amount": {"type": "number", "minimum": 1},
                            },
                        }
                    }
                },
            }
        },
    )
    async def create_order(request: Request) -> Response:
        try:
            if not _is_json_content_type(request.headers.get("content-type")):
                raise UnsupportedMediaTypeError("send the order as Content-Type: application/json")
            order_request = parse_order_create_request(await _read_body(request))
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

    @app.get("/health")
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

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(content=runtime.render_metrics(), media_type=PROMETHEUS_CONTENT_TYPE)

    return app
