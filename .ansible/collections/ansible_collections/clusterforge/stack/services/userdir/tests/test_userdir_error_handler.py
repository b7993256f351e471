"""The global error handler installed into a FastAPI app that calls a remote service."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response

from clusterforge_userdir import (
    ClientConfig,
    UserDirectoryClient,
    UserResponse,
    install_remote_error_handlers,
)
from userdir_support import RunningServer, free_port, serve_in_thread


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningServer]:
    app = FastAPI()

    @app.get("/teapot")
    async def teapot() -> PlainTextResponse:
        return PlainTextResponse("x" * 1200, status_code=418)

    @app.get("/envelope")
    async def envelope() -> Response:
        return Response('{"code":7,"message":"","data":null}', media_type="application/json")

    running = serve_in_thread(app)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def calling_app(upstream: RunningServer) -> Iterator[RunningServer]:
    """A test application that uses the client, with the handler installed."""
    reachable = UserDirectoryClient(config=ClientConfig(root_uri=upstream.base_url))
    unreachable = UserDirectoryClient(
        config=ClientConfig(
            root_uri=f"http://127.0.0.1:{free_port()}", remote_service="user-directory"
        )
    )
    app = FastAPI()
    install_remote_error_handlers(app)

    @app.get("/call/teapot")
    def call_teapot() -> str:
        return reachable.exchange("GET", "/teapot").text

    @app.get("/call/envelope")
    def call_envelope() -> object:
        return reachable.envelope_data(reachable.exchange("GET", "/envelope"), UserResponse)

    @app.get("/call/down")
    def call_down() -> object:
        return unreachable.health()

    running = serve_in_thread(app)
    yield running
    running.stop()
    reachable.close()
    unreachable.close()


def test_remote_call_error_becomes_its_status_with_the_body(calling_app: RunningServer) -> None:
    response = httpx.get(f"{calling_app.base_url}/call/teapot")
    assert response.status_code == 418
    assert response.json() == {
        "code": 418,
        "message": "远程服务返回异常状态",
        "data": {"statusCode": 418, "responseBody": "x" * 1000},
    }


def test_unsuccessful_envelope_becomes_code_200_with_http_502(calling_app: RunningServer) -> None:
    response = httpx.get(f"{calling_app.base_url}/call/envelope")
    assert response.status_code == 502
    body = response.json()
    assert (body["code"], body["message"]) == (200, "远程服务返回异常状态")
    assert body["data"]["statusCode"] == 200
    assert '"code": 7' in body["data"]["responseBody"]


def test_remote_access_error_becomes_503(calling_app: RunningServer) -> None:
    response = httpx.get(f"{calling_app.base_url}/call/down")
    assert response.status_code == 503
    assert response.json() == {
        "code": 503,
        "message": "远程服务暂时不可用",
        "data": {"remoteService": "user-directory"},
    }
