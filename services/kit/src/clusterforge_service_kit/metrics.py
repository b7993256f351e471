"""Prometheus metrics through ``prometheus_client``, the same way in both services.

Each app gets a registry of its own (tests run many apps in one process), a middleware
that counts every answer by method and status and times it, and :func:`render_metrics`
for its ``GET /metrics``. A service adds its own metrics to the same registry, as
``prometheus_client`` metrics or as a collector that reads its counters when scraped.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# Methods outside these count as "other": a client must not be able to make a label per
# word it sends.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Scope = dict[str, Any]
Message = dict[str, Any]


class RequestMetrics:
    """``<namespace>_http_requests_total{method,status}`` and its duration histogram.

    The counter holds every answer: the app's (:meth:`observe`, also timed) and those of
    the HTTP edge's guard (:meth:`count_refusal`).
    """

    def __init__(self, *, namespace: str, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._requests = Counter(
            "http_requests",
            "HTTP requests answered (the edge guard's refusals included), by method and status.",
            ["method", "status"],
            namespace=namespace,
            registry=registry,
        )
        self._duration = Histogram(
            "http_request_duration_seconds",
            "Seconds from a request reaching the app to the end of its answer.",
            ["method"],
            namespace=namespace,
            registry=registry,
            buckets=_DURATION_BUCKETS,
        )

    def observe(self, method: str, status: int, seconds: float) -> None:
        method = method if method in _KNOWN_METHODS else "other"
        self._requests.labels(method=method, status=str(status)).inc()
        self._duration.labels(method=method).observe(seconds)

    def count_refusal(self, method: str, status: int) -> None:
        """An answer of the HTTP edge's guard (400, 408, 431): counted, not timed.

        The request never reached the app, so it has no duration to put beside the app's;
        its method is "other" when no request line was parsed.
        """
        method = method if method in _KNOWN_METHODS else "other"
        self._requests.labels(method=method, status=str(status)).inc()


class RequestMetricsMiddleware:
    """Pure ASGI: every HTTP answer counted and timed (a task-free wrapper of ``send``)."""

    def __init__(self, app: Any, *, metrics: RequestMetrics) -> None:
        self.app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            self._metrics.observe(scope["method"], status, time.perf_counter() - started)


def render_metrics(registry: CollectorRegistry) -> bytes:
    """The registry in the Prometheus text format (:data:`PROMETHEUS_CONTENT_TYPE`)."""
    return generate_latest(registry)
