"""SharedHttpClient: a shutdown's close never pulls a socket from under a request in flight.

Against a real HTTP server on loopback that holds each request until the test lets it go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from clusterforge_orders.shared_client import SharedClientClosedError, SharedHttpClient


class _HeldServer:
    """Answers 200 to every POST, but only once ``release`` is set."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        held = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                held.arrived.set()
                held.release.wait(10)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held_server() -> Iterator[_HeldServer]:
    server = _HeldServer()
    yield server
    server.close()


def test_close_during_a_request_lets_it_finish_then_closes(held_server: _HeldServer) -> None:
    client = SharedHttpClient(httpx.Client(timeout=10))
    with ThreadPoolExecutor(max_workers=1) as worker:
        answer: Future[httpx.Response] = worker.submit(client.post, held_server.url, content=b"x")
        assert held_server.arrived.wait(10), "the request reached the server"
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < 1.0, "close does not wait for the request"
        assert not client.closed, "the connection in use stays open"
        with pytest.raises(SharedClientClosedError):
            client.post(held_server.url, content=b"late")
        held_server.release.set()
        assert answer.result(timeout=10).status_code == 200
    assert client.closed, "the last request out closed the connections"


def test_close_when_idle_closes_at_once(held_server: _HeldServer) -> None:
    held_server.release.set()
    client = SharedHttpClient(httpx.Client(timeout=10))
    assert client.post(held_server.url, content=b"x").status_code == 200
    client.close()
    assert client.closed
    client.close()  # a second close is harmless
    with pytest.raises(SharedClientClosedError):
        client.post(held_server.url, content=b"late")
