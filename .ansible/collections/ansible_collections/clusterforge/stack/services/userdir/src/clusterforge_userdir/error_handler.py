"""Global error handler for applications that call other services through the client.

``RemoteCallError`` -> ``{code: <status or 500>, message: "远程服务返回异常状态",
data: {statusCode, responseBody}}`` and ``RemoteAccessError`` -> ``{code: 503, message:
"远程服务暂时不可用", data: {remoteService}}``. The HTTP status equals ``code`` when
that is a 4xx/5xx status; a failed envelope (code 200) is answered with HTTP 502, as a bad
upstream answer.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from .errors import RemoteAccessError, RemoteCallError

REMOTE_CALL_FAILED_MESSAGE = "远程服务返回异常状态"
REMOTE_UNAVAILABLE_MESSAGE = "远程服务暂时不可用"


def remote_call_error_body(error: RemoteCallError) -> dict[str, Any]:
    return {
        "code": error.status_code or 500,
        "message": REMOTE_CALL_FAILED_MESSAGE,
        "data": {"statusCode": error.status_code, "responseBody": error.response_body},
    }


def remote_access_error_body(error: RemoteAccessError) -> dict[str, Any]:
    return {
        "code": 503,
        "message": REMOTE_UNAVAILABLE_MESSAGE,
        "data": {"remoteService": error.remote_service},
    }


def install_remote_error_handlers(app: FastAPI) -> None:
    """Map the client's errors to the spec's JSON answers in ``app``."""

    async def on_remote_call_error(_request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RemoteCallError):
            raise exc
        body = remote_call_error_body(exc)
        status = body["code"] if 400 <= body["code"] < 600 else 502
        return JSONResponse(body, status_code=status)

    async def on_remote_access_error(_request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RemoteAccessError):
            raise exc
        return JSONResponse(remote_access_error_body(exc), status_code=503)

    app.add_exception_handler(RemoteCallError, on_remote_call_error)
    app.add_exception_handler(RemoteAccessError, on_remote_access_error)
