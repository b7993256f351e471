"""Probe a TLS endpoint's edges from outside, as an attacker or a careless client would.

Used by the services' and tls molecule scenarios and by hand against the lab
(``python -m clusterforge.testing.proxy_edges --ca CA URL...``). For each URL
(``https://host:port``) it checks, over real sockets:

- ``tls12_aead``: a TLS 1.2 handshake negotiates an ECDHE suite with an AEAD cipher;
- ``cbc_refused``: a client offering only CBC suites is refused;
- ``verified``: the certificate verifies against the CA and the host name;
- ``plain_http_no_data``: plain HTTP to the port gets no answer that carries data
  (nginx's 400 page for "plain HTTP to an HTTPS port", or a closed socket);
- ``big_header_refused``: a 64 KiB header gets 400 or 431;
- ``slow_header_closed``: a client sending one header byte a second is cut off within
  ``--slow-limit`` seconds (default 30).

Prints one JSON object (each check's verdict and what was seen) and exits 1 when a check
failed. Not a timed test: ``slow_header_closed`` records the seconds it took.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import sys
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

CBC_ONLY = "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA256:AES256-SHA256:AES128-SHA"


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or not parts.port:
        raise SystemExit(f"proxy_edges: {url!r} is not https://host:port; give such a URL")
    return parts.hostname, parts.port


def _context(ca: str, *, tls12_only: bool = False, ciphers: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if tls12_only:
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if ciphers:
        context.set_ciphers(ciphers)
    return context


def _tls(host: str, port: int, context: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection((host, port), timeout=10)
    return context.wrap_socket(raw, server_hostname=host)


def check_tls12_aead(host: str, port: int, ca: str) -> dict[str, Any]:
    with _tls(host, port, _context(ca, tls12_only=True)) as connection:
        name, version, _secret_bits = connection.cipher() or ("", "", 0)
    aead = any(part in name for part in ("GCM", "CHACHA20"))
    return {"ok": version == "TLSv1.2" and name.startswith("ECDHE") and aead, "seen": name}


def check_cbc_refused(host: str, port: int, ca: str) -> dict[str, Any]:
    try:
        with _tls(host, port, _context(ca, tls12_only=True, ciphers=CBC_ONLY)) as connection:
            return {"ok": False, "seen": f"negotiated {connection.cipher()}"}
    except (ssl.SSLError, ConnectionError) as error:
        return {"ok": True, "seen": f"refused: {error}"}


def check_verified(host: str, port: int, ca: str) -> dict[str, Any]:
    try:
        with _tls(host, port, _context(ca)) as connection:
            certificate = connection.getpeercert() or {}
            return {
                "ok": True,
                "seen": f"{connection.version()}, until {certificate.get('notAfter')}",
            }
    except ssl.SSLError as error:
        return {"ok": False, "seen": str(error)}


def check_plain_http(host: str, port: int) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(f"GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    # What a service would answer: JSON, or its health word. nginx's refusal is HTML.
    carries_data = b'"status"' in answer or b"UP" in answer.split(b"\r\n\r\n", 1)[-1][:16]
    return {"ok": not carries_data and not status.endswith(" 200 OK"), "seen": status or "closed"}


def check_big_header(host: str, port: int, ca: str) -> dict[str, Any]:
    with _tls(host, port, _context(ca)) as connection:
        request = (f"GET /health HTTP/1.1\r\nHost: {host}\r\nX-Big: {'a' * 65536}\r\n\r\n").encode()
        # The proxy may close before the whole header is sent; its answer still counts.
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            connection.sendall(request)
        try:
            answer = connection.recv(4096)
        except (ConnectionError, ssl.SSLError, TimeoutError):
            answer = b""
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    code = status.split(" ")[1] if status.count(" ") >= 1 else ""
    return {"ok": code in {"400", "431"} or not answer, "seen": status or "closed"}


def check_slow_header(host: str, port: int, ca: str, limit: float) -> dict[str, Any]:
    started = time.monotonic()
    request = f"GET /health HTTP/1.1\r\nHost: {host}\r\nX-Slow: " + "a" * 600
    with _tls(host, port, _context(ca)) as connection:
        connection.settimeout(1)
        for byte in request.encode():
            if time.monotonic() - started > limit + 5:
                return {"ok": False, "seen": f"still open after {limit + 5:.0f} s"}
            try:
                connection.sendall(bytes([byte]))
                connection.recv(4096)  # an answer (408) or the end: the server cut it off
                break
            except TimeoutError:
                continue  # silence: one more byte, a second later
            except (ConnectionError, ssl.SSLError, OSError):
                break
    seconds = time.monotonic() - started
    return {"ok": seconds <= limit, "seen": f"closed after {seconds:.1f} s"}


def probe(url: str, ca: str, *, slow_limit: float) -> dict[str, dict[str, Any]]:
    host, port = _address(url)
    return {
        "verified": check_verified(host, port, ca),
        "tls12_aead": check_tls12_aead(host, port, ca),
        "cbc_refused": check_cbc_refused(host, port, ca),
        "plain_http_no_data": check_plain_http(host, port),
        "big_header_refused": check_big_header(host, port, ca),
        "slow_header_closed": check_slow_header(host, port, ca, slow_limit),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--ca", required=True, help="the CA bundle that verifies the endpoints")
    parser.add_argument("--slow-limit", type=float, default=30.0)
    parser.add_argument("urls", nargs="+", help="https://host:port of each endpoint")
    arguments = parser.parse_args(argv)
    results = {
        url: probe(url, arguments.ca, slow_limit=arguments.slow_limit) for url in arguments.urls
    }
    print(json.dumps(results, indent=2))
    failed = [
        f"{url} {name}"
        for url, checks in results.items()
        for name, r in checks.items()
        if not r["ok"]
    ]
    if failed:
        print(f"proxy_edges: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
