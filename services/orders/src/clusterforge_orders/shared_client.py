"""An HTTP client that worker threads share and a shutdown closes: :class:`SharedHttpClient`.

Why it exists: ``httpx.Client.close()`` closes every pooled socket at once, even one that
another thread is inside a request on. That thread's TLS layer keeps the socket's number,
and the kernel hands the number to the next socket the process opens. The thread's next
read or alert then lands on an unrelated connection. Seen once in the tests: a worker
left over from a shutdown read another test's plain HTTP request off its server socket
and answered it with a TLS alert.

So :meth:`SharedHttpClient.close` only marks the client closed while requests are in
flight, and the last of them closes it when it returns. A shutdown still returns at
once; the request in flight ends by its own timeout at the latest.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx


class SharedClientClosedError(RuntimeError):
    """A request was started after :meth:`SharedHttpClient.close`."""


class SharedHttpClient:
    """Wraps an ``httpx.Client``: ``post`` from any thread, ``close`` once at shutdown."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._in_flight = 0
        self._closing = False
        self._closed = False

    def post(self, url: str, **options: Any) -> httpx.Response:
        """``httpx.Client.post``; raises :class:`SharedClientClosedError` after close."""
        with self._lock:
            if self._closing:
                raise SharedClientClosedError("the HTTP client was closed by a shutdown")
            self._in_flight += 1
        try:
            return self._client.post(url, **options)
        finally:
            with self._lock:
                self._in_flight -= 1
                last_out = self._closing and self._in_flight == 0 and not self._closed
                self._closed = self._closed or last_out
            if last_out:
                self._client.close()

    def close(self) -> None:
        """Refuse new requests; close the connections now, or when the last request ends."""
        with self._lock:
            self._closing = True
            close_now = self._in_flight == 0 and not self._closed
            self._closed = self._closed or close_now
        if close_now:
            self._client.close()

    @property
    def closed(self) -> bool:
        """True once the underlying client's connections are closed."""
        with self._lock:
            return self._closed
