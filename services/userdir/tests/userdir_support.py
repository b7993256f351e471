"""Helpers shared by the user-directory tests: a real uvicorn server in a thread."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn

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


def serve_in_thread(app: Any, *, port: int | None = None) -> RunningServer:
    """Run ``app`` with uvicorn on 127.0.0.1 in a daemon thread, ready when this returns."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
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
