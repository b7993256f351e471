"""The Host header the TLS proxy hands the services, through a real nginx started from the
rendered configuration. The services refuse an HTTP/1.1 request without Host (RFC 9112),
and the proxy's hop to them is HTTP/1.1, so an HTTP/1.0 client that sends none must still
reach them with one. The upstream here records the head it receives on a real socket."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge.plan.cluster.host_certificates import (
    ensure_host_certificate,
    issuing_ca_without_cluster,
)
from clusterforge.plan.services.tls_proxy import plan_tls_proxy, render_nginx_conf
from clusterforge.schema import load_schema

SCHEMA = load_schema()
# An unused loopback address of this test's own, and upstream ports no lab uses.
PROXY_ADDRESS = "127.0.0.62"
APP_PORT = 28081

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="Debian's nginx")


class RecordingUpstream:
    """Answers every request 200 and keeps each request's head."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", APP_PORT))
        # Accept wakes up to see close(): a socket closed under a blocked accept stays bound.
        self._server.settimeout(0.2)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.heads.append(data.split(b"\r\n\r\n", 1)[0])
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                )

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self._server.close()


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ssl.SSLContext, RecordingUpstream]]:
    tmp_path = tmp_path_factory.mktemp("proxy")
    plan = plan_tls_proxy(
        "apps-1",
        {
            "tls_proxy_listen_address": PROXY_ADDRESS,
            "tls_proxy_config_dir": str(tmp_path),
            "user_directory_app_port": APP_PORT,
        },
        ["user_directory"],
        tls_protocols=tuple(SCHEMA.default_of("opensearch_tls_protocols")),
        tls_ciphers=tuple(SCHEMA.default_of("opensearch_tls_ciphers")),
    )
    assert plan is not None
    ca = issuing_ca_without_cluster(
        {"opensearch_ca_passphrase": "test-passphrase-0123456789"}, inventory_dir=tmp_path
    )
    issued = ensure_host_certificate(
        ca, host="apps-1", purpose="tls_proxy", alt_names=[PROXY_ADDRESS]
    )
    (tmp_path / "tls").mkdir()
    Path(plan.cert_path).write_text(issued.certificate_pem)
    Path(plan.key_path).write_text(issued.key_pem)
    bundle = tmp_path / "ca-bundle.pem"
    bundle.write_text(issued.ca_bundle_pem)
    (tmp_path / "run").mkdir()
    conf = render_nginx_conf(plan).replace(plan.runtime_dir, str(tmp_path / "run"))
    # The journal is the unit's; here the access log goes to a file.
    conf = conf.replace(
        "access_log syslog:server=unix:/dev/log,", f"access_log {tmp_path}/a.log; #"
    )
    Path(plan.config_path).write_text(conf)
    upstream = RecordingUpstream()
    nginx = subprocess.Popen(
        ["nginx", "-c", plan.config_path, "-g", f"daemon off; error_log {tmp_path}/e.log;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((PROXY_ADDRESS, plan.services[0].public_port), 1).close()
                break
            except OSError:
                assert nginx.poll() is None, nginx.stderr.read() if nginx.stderr else ""
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                time.sleep(0.1)
        context = ssl.create_default_context(cafile=str(bundle))
        yield context, upstream
    finally:
        nginx.terminate()
        nginx.wait(10)
        upstream.close()


def _through_proxy(context: ssl.SSLContext, request: bytes) -> bytes:
    with (
        socket.create_connection((PROXY_ADDRESS, 8081), 5) as raw,
        context.wrap_socket(raw, server_hostname=PROXY_ADDRESS) as tls,
    ):
        tls.sendall(request)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return answer


def _host_lines(head: bytes) -> list[bytes]:
    return [line for line in head.split(b"\r\n") if line.lower().startswith(b"host:")]


def test_an_http_1_0_request_without_host_reaches_the_service_with_one(
    proxy: tuple[ssl.SSLContext, RecordingUpstream],
) -> None:
    context, upstream = proxy
    answer = _through_proxy(context, b"GET /health HTTP/1.0\r\n\r\n")
    assert answer.split(b"\r\n", 1)[0].endswith(b"200 OK"), answer[:200]
    (host,) = _host_lines(upstream.heads[-1])
    assert host.split(b":", 1)[1].strip(), upstream.heads[-1]


def test_the_host_a_client_sends_is_passed_on_as_sent(
    proxy: tuple[ssl.SSLContext, RecordingUpstream],
) -> None:
    context, upstream = proxy
    _through_proxy(
        context, b"GET /health HTTP/1.1\r\nHost: users.example:8081\r\nConnection: close\r\n\r\n"
    )
    assert _host_lines(upstream.heads[-1]) == [b"Host: users.example:8081"]
