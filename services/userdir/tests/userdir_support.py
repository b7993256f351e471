"""Helpers shared by the user-directory tests: a real uvicorn server in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn
from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol

POSTGRES_URL_VARIABLE = "CLUSTERFORGE_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON = (
    "PostgreSQL tests need a server: set CLUSTERFORGE_TEST_POSTGRES_URL, "
    'e.g. eval "$(scripts/postgres-up)"'
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RunningServer:
    base_url: str
    port: int
    app: Any
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve_in_thread(
    app: Any, *, port: int | None = None, log_level: str = "warning"
) -> RunningServer:
    """Run ``app`` with uvicorn on 127.0.0.1 in a daemon thread, ready when this returns.

    ``log_level="info"`` turns uvicorn's access log on, for tests that read it.
    """
    port = port or free_port()
    # The service's own protocol, as the CLI runs it: its header limits are under test too.
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level=log_level,
        lifespan="on",
        http=GuardedHttpToolsProtocol,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"test server on port {port} did not start")
        time.sleep(0.02)
    return RunningServer(f"http://127.0.0.1:{port}", port, app, server, thread)


StartServer = Callable[..., RunningServer]
"""The type of the ``start_userdir_server`` fixture: start a server with given settings."""


def unique_username(prefix: str = "user") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


@contextmanager
def silent_listener() -> Iterator[int]:
    """A stand-in for a database host that never answers: a listening socket, nothing more.

    The kernel completes the TCP handshake from the backlog, so a client gets connected
    and then waits for an answer that never comes (unlike a closed port, which refuses at
    once). Yields the port on 127.0.0.1.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


@dataclass
class RecordedRequest:
    request_line: str
    headers: dict[str, str]


@dataclass
class RecordingServer:
    """A stand-in remote service that records each request line exactly as it arrived.

    ``http.server`` keeps the raw request line, before any URL decoding or path
    normalisation, so a test sees which path the client really sent. Every request is
    answered 200 with ``answer`` as JSON.
    """

    answer: Any = field(
        default_factory=lambda: {
            "id": 1,
            "username": "recorded",
            "status": 1,
            "createdAt": "2024-05-01T08:30:00",
        }
    )
    requests: list[RecordedRequest] = field(default_factory=list)

    @contextmanager
    def running(self) -> Iterator[str]:
        """Serve on a free 127.0.0.1 port; yields the base URL."""
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _record_and_answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                recorder.requests.append(
                    RecordedRequest(
                        self.requestline, {k.lower(): v for k, v in self.headers.items()}
                    )
                )
                body = json.dumps(recorder.answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            # http.server dispatches to do_<METHOD>; an override keeps its names.
            def do_GET(self) -> None:
                self._record_and_answer()

            def do_POST(self) -> None:
                self._record_and_answer()

            def do_PUT(self) -> None:
                self._record_and_answer()

            def do_DELETE(self) -> None:
                self._record_and_answer()

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, name="recording-server", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    @property
    def request_lines(self) -> list[str]:
        return [request.request_line for request in self.requests]
