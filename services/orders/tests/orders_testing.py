"""Helpers shared by the order service's tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import uvicorn

from clusterforge_orders import OrderServiceRuntime, OrderServiceSettings, load_settings


def make_settings(database_url: str, **overrides: object) -> OrderServiceSettings:
    """Settings from defaults plus dotted-key ``overrides``; the environment is ignored."""
    values: dict[str, object] = {"orders.database-url": database_url}
    values.update({key.replace("__", "."): value for key, value in overrides.items()})
    return load_settings(environ={}, overrides=values)


@dataclass
class RecordingSender:
    """A notification sender that keeps what it was given (a stand-in for a real channel)."""

    texts: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, text: str) -> None:
        with self.lock:
            self.texts.append(text)
            self.threads.append(threading.current_thread().name)

    def close(self) -> None:
        return None


@dataclass
class RunningServer:
    runtime: OrderServiceRuntime
    base_url: str
    client: httpx.Client
    server: uvicorn.Server
    thread: threading.Thread

    def post_order(self, body: object = None, *, content: bytes | None = None) -> httpx.Response:
        if content is not None:
            return self.client.post(
                "/orders", content=content, headers={"Content-Type": "application/json"}
            )
        return self.client.post("/orders", json=body)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "server did not stop"


def wait_until(condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
