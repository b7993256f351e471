"""Helpers shared by the order service's tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol

from clusterforge_orders import (
    OrderServiceRuntime,
    OrderServiceSettings,
    create_app,
    load_settings,
)
from clusterforge_orders.sinks import DeliveryResult, OrderDocument


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


class SlowSender(RecordingSender):
    """A stand-in for a slow notification channel: each send holds its pool thread.

    With the after-commit listener only handing orders to the delivery worker, a slow
    notification is what saturates ``eventTaskExecutor`` (as a slow webhook does)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def send(self, text: str) -> None:
        time.sleep(self.seconds)
        super().send(text)


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


# What the start_server fixture gives: a function starting the service on a free port.
ServerFactory = Callable[..., RunningServer]


def serve_in_thread(runtime: OrderServiceRuntime) -> RunningServer:
    """The real app under uvicorn on a free 127.0.0.1 port, in a thread of this process.

    It runs the protocol the console script runs (the kit's guard), with the settings' limits.
    """
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        create_app(runtime=runtime),
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=GuardedHttpToolsProtocol,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listening]}, name="test-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    base_url = f"http://127.0.0.1:{port}"
    return RunningServer(
        runtime=runtime,
        base_url=base_url,
        client=httpx.Client(base_url=base_url, timeout=30),
        server=server,
        thread=thread,
    )


def metric_value(text: str, line_start: str) -> float:
    """The value of the first sample of Prometheus ``text`` that starts with ``line_start``."""
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {line_start} not found")


def wait_until(condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@dataclass
class RecordingSink:
    """A delivery sink that keeps what it was given (a stand-in for the cluster, in-process)."""

    documents: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def deliver(
        self, documents: Sequence[OrderDocument], *, attempts: int | None = None
    ) -> DeliveryResult:
        with self.lock:
            for document in documents:
                self.documents[document.order_id] = document.source
        return DeliveryResult(delivered={document.order_id for document in documents})

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class StandInCertificates:
    """A throwaway CA and a server certificate for ``localhost`` (made with openssl)."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_test_certificates(directory: Path) -> StandInCertificates:
    def openssl(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], check=True, capture_output=True, cwd=directory)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=clusterforge orders test CA (stand-in)",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (directory / "server.ext").write_text(
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        encoding="utf-8",
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
    )  # fmt: skip
    return StandInCertificates(
        ca_file=directory / "ca.pem",
        cert_file=directory / "server.pem",
        key_file=directory / "server.key",
    )


STAND_IN_USER = "orders_writer"
STAND_IN_PASSWORD = "stand-in-pa55word"


class StandInCluster:
    """A stand-in for the OpenSearch cluster: a real HTTPS server on 127.0.0.1 speaking
    just enough of ``POST /_bulk`` (index actions) for the order service's sink.

    It checks basic auth, keeps the documents by index and id, and records when each
    arrived. Knobs: ``delay_seconds`` (a slow cluster), ``down`` (answers 503),
    ``fail_items`` (order id -> how many more times that item gets a 429 inside an
    HTTP 200 bulk answer with ``errors: true``).
    """

    def __init__(self, certificates: StandInCertificates) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}
        self.arrivals: dict[str, float] = {}
        self.bulk_requests = 0
        self.delay_seconds = 0.0
        self.down = False
        self.fail_items: dict[str, int] = {}
        self.authorizations: list[str] = []
        self.lock = threading.Lock()
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                authorization = self.headers.get("Authorization", "")
                if self.path.endswith("/_search"):
                    status, answer = cluster._search(self.path, authorization, body)
                else:
                    status, answer = cluster._bulk(self.path, authorization, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certificates.cert_file, certificates.key_file)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self.url = f"https://localhost:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stand-in-cluster", daemon=True
        )
        self._thread.start()

    def _bulk(self, path: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        expected = (
            "Basic " + base64.b64encode(f"{STAND_IN_USER}:{STAND_IN_PASSWORD}".encode()).decode()
        )
        with self.lock:
            self.authorizations.append(authorization)
        if authorization != expected:
            return 401, {"error": "unauthorized"}
        if path != "/_bulk":
            return 404, {"error": f"no handler for {path}"}
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        if self.down:
            return 503, {"error": "cluster is down (stand-in)"}
        lines = body.decode().splitlines()
        items: list[dict[str, Any]] = []
        errors = False
        with self.lock:
            self.bulk_requests += 1
            for action_line, source_line in zip(lines[::2], lines[1::2], strict=True):
                action = json.loads(action_line)["index"]
                order_id = action["_id"]
                if self.fail_items.get(order_id, 0) > 0:
                    self.fail_items[order_id] -= 1
                    errors = True
                    items.append(
                        {
                            "index": {
                                "_index": action["_index"],
                                "_id": order_id,
                                "status": 429,
                                "error": {"type": "es_rejected_execution_exception"},
                            }
                        }
                    )
                    continue
                self.documents[(action["_index"], order_id)] = json.loads(source_line)
                self.arrivals.setdefault(order_id, time.monotonic())
                items.append(
                    {"index": {"_index": action["_index"], "_id": order_id, "status": 201}}
                )
        return 200, {"took": 1, "errors": errors, "items": items}

    def _search(self, path: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """``POST /<index>/_search`` with an ``ids`` query only (the bench's probes):
        a document is found as soon as its bulk request was answered (no refresh)."""
        expected = (
            "Basic " + base64.b64encode(f"{STAND_IN_USER}:{STAND_IN_PASSWORD}".encode()).decode()
        )
        if authorization != expected:
            return 401, {"error": "unauthorized"}
        index = path.strip("/").split("/")[0]
        wanted = json.loads(body or b"{}").get("query", {}).get("ids", {}).get("values")
        if not isinstance(wanted, list):
            return 400, {"error": "the stand-in answers only an ids query"}
        with self.lock:
            hits = [
                {"_index": index, "_id": order_id}
                for order_id in wanted
                if (index, order_id) in self.documents
            ]
        return 200, {"hits": {"total": {"value": len(hits)}, "hits": hits}}

    def ids(self, index: str = "orders") -> set[str]:
        with self.lock:
            return {order_id for (name, order_id) in self.documents if name == index}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def search_settings(cluster: StandInCluster, ca_file: Path) -> dict[str, object]:
    """Dotted-key overrides that point the service at ``cluster``."""
    return {
        "orders.search.urls": [cluster.url],
        "orders.search.ca-file": str(ca_file),
        "orders.search.username": STAND_IN_USER,
        "orders.search.password": STAND_IN_PASSWORD,
    }
