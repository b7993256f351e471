"""Counters of the order service, exposed through ``prometheus_client``.

:class:`OrderMetrics` counts as the service works (the listeners and the outbox call it,
and tests read it); :class:`OrderMetricsCollector` turns those counts, the executor's
state and the outbox backlog into metric families when ``GET /metrics`` is scraped, into
the app's registry beside the kit's request metrics (:mod:`clusterforge_service_kit.metrics`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from clusterforge_service_kit.metrics import PROMETHEUS_CONTENT_TYPE
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .executor import ExecutorStats

__all__ = ["PROMETHEUS_CONTENT_TYPE", "OrderMetrics", "OrderMetricsCollector", "OutboxBacklog"]


class OrderMetrics:
    """Thread-safe counters; listeners are registered up front so they show as 0."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._orders_created = 0
        self._events_published: Counter[str] = Counter()
        self._listener_failures: Counter[str] = Counter()
        self._task_rejections: Counter[str] = Counter()
        self._after_commit_skipped: Counter[str] = Counter()
        self._listeners: list[str] = []
        self._outbox_delivered = 0
        self._outbox_delivery_failures = 0
        self._outbox_relayed = 0
        self._outbox_batches = 0
        self._outbox_handoffs_refused = 0

    def register_listener(self, name: str) -> None:
        with self._lock:
            if name not in self._listeners:
                self._listeners.append(name)

    def order_created(self) -> None:
        with self._lock:
            self._orders_created += 1

    def event_published(self, event_type: str) -> None:
        with self._lock:
            self._events_published[event_type] += 1

    def listener_failed(self, listener: str) -> None:
        with self._lock:
            self._listener_failures[listener] += 1

    def task_rejected(self, listener: str) -> None:
        with self._lock:
            self._task_rejections[listener] += 1

    def after_commit_skipped(self, listener: str) -> None:
        with self._lock:
            self._after_commit_skipped[listener] += 1

    def outbox_delivered(self, count: int) -> None:
        with self._lock:
            self._outbox_delivered += count

    def outbox_delivery_failed(self, count: int) -> None:
        with self._lock:
            self._outbox_delivery_failures += count

    def outbox_relayed(self, count: int) -> None:
        with self._lock:
            self._outbox_relayed += count

    def outbox_batch_sent(self) -> None:
        with self._lock:
            self._outbox_batches += 1

    def outbox_handoff_refused(self) -> None:
        with self._lock:
            self._outbox_handoffs_refused += 1

    @property
    def outbox_batches(self) -> int:
        """Batches handed to the sink (each one bulk request, more when it retries)."""
        with self._lock:
            return self._outbox_batches

    @property
    def outbox_handoffs_refused(self) -> int:
        with self._lock:
            return self._outbox_handoffs_refused

    @property
    def outbox_counts(self) -> tuple[int, int, int]:
        """(delivered, delivery failures, delivered by the relay) since start."""
        with self._lock:
            return (self._outbox_delivered, self._outbox_delivery_failures, self._outbox_relayed)

    @property
    def orders_created(self) -> int:
        with self._lock:
            return self._orders_created

    def events_published(self, event_type: str) -> int:
        with self._lock:
            return self._events_published[event_type]

    def listener_failures(self, listener: str) -> int:
        with self._lock:
            return self._listener_failures[listener]

    def task_rejections(self, listener: str | None = None) -> int:
        with self._lock:
            if listener is None:
                return sum(self._task_rejections.values())
            return self._task_rejections[listener]

    def after_commit_skips(self, listener: str) -> int:
        with self._lock:
            return self._after_commit_skipped[listener]

    def snapshot(self) -> _Counts:
        """Every count at one moment (one lock), for a scrape."""
        with self._lock:
            return _Counts(
                listeners=tuple(self._listeners),
                orders_created=self._orders_created,
                events_published=dict(self._events_published),
                listener_failures=dict(self._listener_failures),
                task_rejections=dict(self._task_rejections),
                after_commit_skipped=dict(self._after_commit_skipped),
                outbox_delivered=self._outbox_delivered,
                outbox_delivery_failures=self._outbox_delivery_failures,
                outbox_relayed=self._outbox_relayed,
                outbox_batches=self._outbox_batches,
                outbox_handoffs_refused=self._outbox_handoffs_refused,
            )


@dataclass(frozen=True, slots=True)
class _Counts:
    listeners: tuple[str, ...]
    orders_created: int
    events_published: dict[str, int]
    listener_failures: dict[str, int]
    task_rejections: dict[str, int]
    after_commit_skipped: dict[str, int]
    outbox_delivered: int
    outbox_delivery_failures: int
    outbox_relayed: int
    outbox_batches: int
    outbox_handoffs_refused: int


@dataclass(frozen=True, slots=True)
class OutboxBacklog:
    """Undelivered outbox rows, and the creation time of the oldest (None: none)."""

    undelivered: int
    oldest_created_at: datetime | None


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _counter_by(
    name: str, documentation: str, label: str, values: dict[str, int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, value in values.items():
        family.add_metric([key], value)
    return family


class OrderMetricsCollector(Collector):
    """The service's own metrics, read from their sources at each scrape."""

    def __init__(
        self,
        *,
        metrics: OrderMetrics,
        executor_name: str,
        executor_stats: Callable[[], ExecutorStats],
        outbox_backlog: Callable[[], OutboxBacklog | None],
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        self._metrics = metrics
        self._executor_name = executor_name
        self._executor_stats = executor_stats
        self._outbox_backlog = outbox_backlog
        self._now = now

    def collect(self) -> Iterator[Metric]:
        counts = self._metrics.snapshot()
        yield _counter("orders_created", "Orders committed.", counts.orders_created)
        yield _counter_by(
            "orders_events_published",
            "Events published on the bus.",
            "event",
            counts.events_published or {"OrderCreatedEvent": 0},
        )
        for name, documentation, values in (
            (
                "orders_listener_failures",
                "Listener invocations that raised.",
                counts.listener_failures,
            ),
            (
                "orders_event_task_rejections",
                "Asynchronous listener tasks the executor rejected.",
                counts.task_rejections,
            ),
            (
                "orders_after_commit_skipped",
                "After-commit listeners skipped for lack of a transaction.",
                counts.after_commit_skipped,
            ),
        ):
            every_listener = {listener: values.get(listener, 0) for listener in counts.listeners}
            yield _counter_by(name, documentation, "listener", every_listener)
        yield _counter(
            "orders_outbox_delivered",
            "Outbox deliveries the target confirmed (listener and relay).",
            counts.outbox_delivered,
        )
        yield _counter(
            "orders_outbox_delivery_failures",
            "Outbox deliveries that failed and were left for the relay.",
            counts.outbox_delivery_failures,
        )
        yield _counter(
            "orders_outbox_relayed", "Outbox rows the relay delivered.", counts.outbox_relayed
        )
        yield _counter(
            "orders_outbox_batches",
            "Batches of orders sent to the target (listener and relay).",
            counts.outbox_batches,
        )
        yield _counter(
            "orders_outbox_handoffs_refused",
            "Orders the delivery worker's full or stopped queue left to the relay.",
            counts.outbox_handoffs_refused,
        )
        yield from self._executor_families()
        backlog = self._outbox_backlog()
        if backlog is not None:
            yield GaugeMetricFamily(
                "orders_outbox_undelivered",
                "Outbox rows not delivered yet.",
                value=backlog.undelivered,
            )
            age = 0.0
            if backlog.oldest_created_at is not None:
                age = max((self._now() - backlog.oldest_created_at).total_seconds(), 0.0)
            yield GaugeMetricFamily(
                "orders_outbox_oldest_undelivered_age_seconds",
                "Seconds since the oldest undelivered order was taken (0 when none waits).",
                value=age,
            )

    def _executor_families(self) -> Iterator[Metric]:
        stats = self._executor_stats()
        for name, family_type, documentation, value in (
            (
                "orders_event_executor_pool_size",
                GaugeMetricFamily,
                "Threads in the pool.",
                stats.pool_size,
            ),
            (
                "orders_event_executor_active_threads",
                GaugeMetricFamily,
                "Threads running a task.",
                stats.active_threads,
            ),
            (
                "orders_event_executor_queue_size",
                GaugeMetricFamily,
                "Tasks waiting in the queue.",
                stats.queue_size,
            ),
            (
                "orders_event_executor_completed_tasks",
                CounterMetricFamily,
                "Tasks finished.",
                stats.completed_tasks,
            ),
            (
                "orders_event_executor_rejected_tasks",
                CounterMetricFamily,
                "Tasks rejected.",
                stats.rejected_tasks,
            ),
        ):
            family = family_type(name, documentation, labels=["executor"])
            family.add_metric([self._executor_name], value)
            yield family
