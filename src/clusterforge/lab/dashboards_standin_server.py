"""STAND-IN for OpenSearch Dashboards, for tests only: it is not Dashboards.

The real Dashboards archive cannot be downloaded on the machines this project is built
on, so the molecule scenarios install this script, packed like a release archive by
:mod:`clusterforge.lab.dashboards_standin`. It exercises what is real around the console:
the role's install mechanics, the rendered ``opensearch_dashboards.yml``, and the backend
contract in the real cluster. Like Dashboards, it:

- reads ``$OSD_PATH_CONF/opensearch_dashboards.yml`` and listens on ``server.host`` and
  ``server.port``;
- signs in to ``opensearch.hosts`` as ``opensearch.username`` with ``opensearch.password``,
  trusting only ``opensearch.ssl.certificateAuthorities`` and checking host names when
  ``opensearch.ssl.verificationMode`` is ``full``;
- creates its own index ``.kibana_1`` with the alias ``.kibana`` as that user, which the
  user's role (kibana_server) must allow;
- answers ``GET /api/status`` with ``status.overall.state`` green once the backend is
  reachable and its index exists, red (503) before; in the secured modes only for a caller
  whose Basic credentials the cluster accepts.

It runs on the host's python3 with PyYAML and nothing else from this project.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

CONSOLE_INDEX = ".kibana_1"
CONSOLE_ALIAS = ".kibana"
BACKEND_POLL_S = 3.0
BACKEND_TIMEOUT_S = 10.0


def load_settings() -> dict[str, Any]:
    home = Path(__file__).resolve().parents[1]
    config_dir = Path(os.environ.get("OSD_PATH_CONF") or home / "config")
    loaded: dict[str, Any] = yaml.safe_load((config_dir / "opensearch_dashboards.yml").read_text())
    return loaded or {}


def package_version() -> str:
    home = Path(__file__).resolve().parents[1]
    return str(json.loads((home / "package.json").read_text())["version"])


class Backend:
    """The cluster as the console sees it, through the rendered settings only."""

    def __init__(self, settings: dict[str, Any]) -> None:
        hosts = settings.get("opensearch.hosts") or ["http://localhost:9200"]
        self.hosts = [str(host).rstrip("/") for host in hosts]
        self.username = settings.get("opensearch.username")
        self.password = settings.get("opensearch.password")
        self.context: ssl.SSLContext | None = None
        if any(host.startswith("https://") for host in self.hosts):
            authorities = settings.get("opensearch.ssl.certificateAuthorities") or []
            self.context = ssl.create_default_context(
                cafile=authorities[0] if authorities else None
            )
            if settings.get("opensearch.ssl.verificationMode", "full") != "full":
                self.context.check_hostname = False
        self.state = "red"
        self.message = "not checked yet"

    def own_authorization(self) -> str | None:
        if not self.username:
            return None
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return f"Basic {token}"

    def request(
        self, method: str, path: str, authorization: str | None, body: bytes | None = None
    ) -> tuple[int, bytes]:
        """Try each host in turn; the first that answers at all decides."""
        last_error: Exception | None = None
        for host in self.hosts:
            request = urllib.request.Request(f"{host}{path}", data=body, method=method)  # noqa: S310
            if authorization:
                request.add_header("Authorization", authorization)
            if body is not None:
                request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(  # noqa: S310
                    request, timeout=BACKEND_TIMEOUT_S, context=self.context
                ) as response:
                    return response.status, response.read()
            except urllib.error.HTTPError as error:
                return error.code, error.read()
            except OSError as error:
                last_error = error
        raise OSError(f"no host of {self.hosts} answered: {last_error}")

    def check(self) -> None:
        """Reach the cluster as the console user and make sure the console index exists."""
        try:
            status, _body = self.request("GET", "/", self.own_authorization())
            if status != 200:
                self.state, self.message = (
                    "red",
                    f"the cluster answered {status} to the console user",
                )
                return
            status, _body = self.request("HEAD", f"/{CONSOLE_INDEX}", self.own_authorization())
            if status == 404:
                body = json.dumps({"aliases": {CONSOLE_ALIAS: {}}}).encode()
                status, answer = self.request(
                    "PUT", f"/{CONSOLE_INDEX}", self.own_authorization(), body
                )
                if status not in (200, 201):
                    self.state = "red"
                    self.message = f"creating {CONSOLE_INDEX} failed: {status} {answer[:200]!r}"
                    return
            self.state, self.message = "green", "All services are available"
        except OSError as error:
            self.state, self.message = "red", str(error)


def make_handler(settings: dict[str, Any], backend: Backend) -> type[BaseHTTPRequestHandler]:
    version = package_version()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/api/status":
                self.reply(404, {"statusCode": 404, "error": "Not Found"})
                return
            if backend.username:
                authorization = self.headers.get("Authorization")
                if not authorization:
                    self.reply(401, {"statusCode": 401, "error": "Unauthorized"})
                    return
                try:
                    status, _body = backend.request(
                        "GET", "/_plugins/_security/authinfo", authorization
                    )
                except OSError:
                    status = 503
                if status != 200:
                    self.reply(401, {"statusCode": 401, "error": "Unauthorized"})
                    return
            overall = {
                "state": backend.state,
                "title": backend.state.title(),
                "nickname": backend.message,
            }
            self.reply(
                200 if backend.state == "green" else 503,
                {
                    "name": settings.get("server.name", "standin"),
                    "version": {"number": version, "build_flavor": "clusterforge-standin"},
                    "status": {"overall": overall},
                },
            )

        def reply(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            print(f"{self.address_string()} {format % args}", flush=True)

    return Handler


def main() -> int:
    settings = load_settings()
    backend = Backend(settings)

    def keep_checking() -> None:
        while True:
            backend.check()
            time.sleep(BACKEND_POLL_S)

    threading.Thread(target=keep_checking, daemon=True).start()
    address = (
        str(settings.get("server.host", "localhost")),
        int(settings.get("server.port", 5601)),
    )
    server = ThreadingHTTPServer(address, make_handler(settings, backend))
    print(f"STAND-IN Dashboards {package_version()} on {address[0]}:{address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
