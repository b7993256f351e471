"""A real uvicorn server on a free loopback port, in a thread, for the services' edge
tests: started with the kit's guard (or another protocol) and waited for."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol


def serve_on_loopback(
    app: Any, protocol: Any = GuardedHttpToolsProtocol, *, name: str = "uvicorn-test"
) -> tuple[int, uvicorn.Server, threading.Thread]:
    """Start ``app``; its port, the server (set ``should_exit`` to stop it) and its thread."""
    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    port = int(listening.getsockname()[1])
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", http=protocol, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listening]}, name=name, daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    return port, server, thread
