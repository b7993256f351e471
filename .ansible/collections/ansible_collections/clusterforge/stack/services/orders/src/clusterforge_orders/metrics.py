"""Counters of the order service, rendered in the Prometheus text format (0.0.4)."""

from __future__ import annotations

import threading
from collections import Counter

from .executor import ExecutorStats

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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

    def render_prometheus(
        self, *, executor_name: str, executor: ExecutorStats, outbox_undelivered: int | None = None
    ) -> str:
        with self._lock:
            listeners = list(self._listeners)
            lines = [
                "# HELP orders_created_total Orders committed.",
                "# TYPE orders_created_total counter",
                f"orders_created_total {self._orders_created}",
                "# HELP orders_events_published_total Events published on the bus.",
                "# TYPE orders_events_published_total counter",
            ]
            event_types = sorted(self._events_published) or ["OrderCreatedEvent"]
            lines += [
                f'orders_events_published_total{{event="{name}"}} {self._events_published[name]}'
                for name in event_types
            ]
            for metric, help_text, counts in (
                (
                    "orders_listener_failures_total",
                    "Listener invocations that raised.",
                    self._listener_failures,
                ),
                (
                    "orders_event_task_rejections_total",
                    "Asynchronous listener tasks the executor rejected.",
                    self._task_rejections,
                ),
                (
                    "orders_after_commit_skipped_total",
                    "After-commit listeners skipped for lack of a transaction.",
                    self._after_commit_skipped,
                ),
            ):
                lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter"]
                lines += [f'{metric}{{listener="{name}"}} {counts[name]}' for name in listeners]
            for metric, help_text, value in (
                (
                    "orders_outbox_delivered_total",
                    "Outbox deliveries the target confirmed (listener and relay).",
                    self._outbox_delivered,
                ),
                (
                    "orders_outbox_delivery_failures_total",
                    "Outbox deliveries that failed and were left for the relay.",
                    self._outbox_delivery_failures,
                ),
                (
                    "orders_outbox_relayed_total",
                    "Outbox rows the relay delivered.",
                    self._outbox_relayed,
                ),
                (
                    "orders_outbox_batches_total",
                    "Batches of orders sent to the target (listener and relay).",
                    self._outbox_batches,
                ),
                (
                    "orders_outbox_handoffs_refused_total",
                    "Orders the delivery worker's full or stopped queue left to the relay.",
                    self._outbox_handoffs_refused,
                ),
            ):
                lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter"]
                lines.append(f"{metric} {value}")
        label = f'{{executor="{executor_name}"}}'
        for metric, kind, help_text, value in (
            (
                "orders_event_executor_pool_size",
                "gauge",
                "Threads in the pool.",
                executor.pool_size,
            ),
            (
                "orders_event_executor_active_threads",
                "gauge",
                "Threads running a task.",
                executor.active_threads,
            ),
            (
                "orders_event_executor_queue_size",
                "gauge",
                "Tasks waiting in the queue.",
                executor.queue_size,
            ),
            (
                "orders_event_executor_completed_tasks_total",
                "counter",
                "Tasks finished.",
                executor.completed_tasks,
            ),
            (
                "orders_event_executor_rejected_tasks_total",
                "counter",
                "Tasks rejected.",
                executor.rejected_tasks,
            ),
        ):
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
            lines.append(f"{metric}{label} {value}")
        if outbox_undelivered is not None:
            lines += [
                "# HELP orders_outbox_undelivered Outbox rows not delivered yet.",
                "# TYPE orders_outbox_undelivered gauge",
                f"orders_outbox_undelivered {outbox_undelivered}",
            ]
        return "\n".join(lines) + "\n"
