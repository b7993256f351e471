"""A webhook receiver for Alertmanager, for the lab and the drills: a test tool.

    python -m clusterforge.testing.alert_receiver --listen 127.0.0.1:9099 \\
        --log /path/receiver.jsonl [--token-file /path/token]

Each notification Alertmanager POSTs (any path) is appended to the log as one JSON line,
``{"received_at": <ISO time>, "path": ..., "notification": <the body>}``, and flushed
before the answer, so a drill that sees the 200 can read the line. With ``--token-file``
a request without ``Authorization: Bearer <the file's token>`` gets 401 and is not
logged; the token is read from the file, never from the command line. ``GET /healthz``
answers 200 (for a wait). It binds to loopback only: it speaks plain HTTP.
"""

from __future__ import annotations

import argparse
import hmac
import json
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from clusterforge.addresses import is_loopback_host

MAX_BODY = 1024 * 1024


class AlertReceiver(ThreadingHTTPServer):
    """The server: where it logs, and the token it expects (None: no check)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, log_path: Path, token: str | None) -> None:
        if not is_loopback_host(address[0]):
            raise ValueError(
                f"alert_receiver: {address[0]} is not a loopback address; it speaks plain "
                "HTTP, so bind it to 127.0.0.1 (or another 127.0.0.0/8 address)"
            )
        self.log_path = log_path
        self.token = token
        self.lock = threading.Lock()
        super().__init__(address, _Handler)

    def record(self, path: str, notification: Any) -> None:
        line = {
            "received_at": datetime.now(UTC).isoformat(),
            "path": path,
            "notification": notification,
        }
        with self.lock, self.log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(line, sort_keys=True) + "\n")
            log.flush()


class _Handler(BaseHTTPRequestHandler):
    server: AlertReceiver
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the notifications go to the log file, not stderr."""

    def _answer(self, status: int, text: str) -> None:
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._answer(200, "ok")
        else:
            self._answer(404, "POST notifications; GET /healthz")

    def do_POST(self) -> None:
        expected = self.server.token
        if expected is not None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
                self._answer(401, "bearer token missing or wrong")
                return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer(413, "body too large")
            return
        try:
            notification = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._answer(400, "the body is not JSON")
            return
        self.server.record(self.path, notification)
        self._answer(200, "recorded")


def read_token(path: Path) -> str:
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"alert_receiver: {path} is empty; write the bearer token into it")
    return token


def serve(host: str, port: int, *, log_path: Path, token_file: Path | None = None) -> AlertReceiver:
    """A bound receiver (port 0: any free one; ``server_address`` says which); call
    ``serve_forever`` on it, and ``shutdown`` to stop."""
    token = read_token(token_file) if token_file is not None else None
    return AlertReceiver((host, port), log_path=log_path, token=token)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The notifications recorded so far, in order."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterforge.testing.alert_receiver")
    parser.add_argument("--listen", default="127.0.0.1:9099", help="loopback host:port")
    parser.add_argument("--log", type=Path, required=True, help="the JSON-lines file")
    parser.add_argument("--token-file", type=Path, help="a file holding the bearer token")
    args = parser.parse_args(argv)
    host, _separator, port = str(args.listen).rpartition(":")
    try:
        server = serve(host, int(port), log_path=args.log, token_file=args.token_file)
    except (ValueError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    print(f"alert_receiver: listening on {host}:{server.server_address[1]}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
