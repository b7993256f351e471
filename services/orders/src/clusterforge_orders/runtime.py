"""Wires settings into a running service: database, executor, bus, listeners, service."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from clusterforge_service_kit.metrics import RequestMetrics, render_metrics
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError

from .events import EventBus
from .executor import DEFAULT_AWAIT_TERMINATION_SECONDS, ShutdownReport, ThreadPoolTaskExecutor
from .listeners import subscribe_order_listeners
from .metrics import OrderMetrics, OrderMetricsCollector, OutboxBacklog
from .outbox import DeliveryWorker, Outbox, OutboxRelay
from .senders import LoggingNotificationSender, NotificationSender, WebhookNotificationSender
from .service import OrderService
from .settings import NotificationSenderKind, OrderServiceSettings
from .sinks import DeliverySink, OpenSearchBulkSink
from .storage import Database
from .transactions import TransactionManager

logger = logging.getLogger(__name__)

EVENT_TASK_EXECUTOR_NAME = "eventTaskExecutor"
# How long shutdown lets the delivery worker send what it holds; what is left keeps its
# undelivered row for the next start's relay, so the limit only bounds the shutdown.
DEFAULT_DELIVERY_STOP_SECONDS = 10.0


def build_notification_sender(settings: OrderServiceSettings) -> NotificationSender:
    notification = settings.orders.listeners.notification
    if notification.sender is NotificationSenderKind.WEBHOOK and notification.webhook_url:
        return WebhookNotificationSender(
            url=notification.webhook_url, timeout_seconds=notification.webhook_timeout_seconds
        )
    return LoggingNotificationSender()


def build_delivery_sink(settings: OrderServiceSettings) -> DeliverySink | None:
    """The OpenSearch sink the settings describe, or None when delivery is off."""
    search = settings.orders.search
    if not search.enabled or search.ca_file is None:
        return None
    return OpenSearchBulkSink(
        urls=search.urls,
        ca_file=search.ca_file,
        username=search.username,
        password=search.password,
        index=search.index,
        timeout_seconds=search.timeout_seconds,
        attempts=search.bulk_attempts,
    )


@dataclass
class OrderServiceRuntime:
    """Everything the HTTP layer needs; :meth:`close` shuts it down in order."""

    settings: OrderServiceSettings
    database: Database
    transactions: TransactionManager
    metrics: OrderMetrics
    executor: ThreadPoolTaskExecutor
    bus: EventBus
    service: OrderService
    sender: NotificationSender
    outbox: Outbox
    relay: OutboxRelay | None
    # Bearer tokens POST /orders and GET /metrics require (empty: open, loopback only).
    accepted_tokens: frozenset[str] = frozenset()
    delivery_stop_seconds: float = DEFAULT_DELIVERY_STOP_SECONDS
    # What GET /metrics renders: the kit's request metrics and OrderMetricsCollector.
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    request_metrics: RequestMetrics = field(init=False)
    _closed: bool = field(default=False, init=False)
    _close_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @classmethod
    def open(
        cls,
        settings: OrderServiceSettings,
        *,
        sender: NotificationSender | None = None,
        sink: DeliverySink | None = None,
        executor_await_termination_seconds: float = DEFAULT_AWAIT_TERMINATION_SECONDS,
        delivery_stop_seconds: float = DEFAULT_DELIVERY_STOP_SECONDS,
    ) -> OrderServiceRuntime:
        """Migrate the database, start the executor and the outbox relay.

        ``executor_await_termination_seconds`` is the spec's fixed 30 s; only tests
        shorten it, and ``delivery_stop_seconds``. ``sink`` replaces the one the settings
        describe (tests).
        """
        # First: a token file that cannot be used stops the start before anything is opened.
        accepted_tokens = settings.orders.accepted_tokens()
        database = Database(
            url=settings.orders.database_url,
            connect_timeout_seconds=settings.orders.database_connect_timeout_seconds,
        )
        try:
            database.migrate()
        except BaseException:
            database.dispose()
            raise
        logger.info("order database ready at %s", database.display_url)
        sync_on = settings.orders.listeners.after_commit_sync.enabled
        try:
            # Before any thread starts: a CA file that cannot be used stops the start cleanly.
            configured_sink = build_delivery_sink(settings) if sync_on and sink is None else None
        except BaseException:
            database.dispose()
            raise
        pool = settings.event_async
        executor = ThreadPoolTaskExecutor(
            name=EVENT_TASK_EXECUTOR_NAME,
            core_pool_size=pool.core_pool_size,
            max_pool_size=pool.max_pool_size,
            queue_capacity=pool.queue_capacity,
            thread_name_prefix=pool.thread_name_prefix,
            await_termination_seconds=executor_await_termination_seconds,
        )
        metrics = OrderMetrics()
        transactions = TransactionManager(database=database)
        bus = EventBus(executor=executor, metrics=metrics)
        sender = sender or build_notification_sender(settings)
        sink = sink if sink is not None else configured_sink
        outbox = Outbox(
            database=database,
            transactions=transactions,
            settings=settings.orders.outbox,
            metrics=metrics,
            sink=sink,
        )
        if sync_on and sink is None:
            logger.warning(
                "orders.search.urls is not set: orders are queued in the outbox but not "
                "delivered until a delivery target is configured"
            )
        subscribe_order_listeners(
            bus,
            settings=settings.orders.listeners,
            transactions=transactions,
            sender=sender,
            outbox=outbox,
        )
        relay = None
        if sink is not None:
            outbox.worker = DeliveryWorker(
                outbox=outbox,
                metrics=metrics,
                batch_size=settings.orders.outbox.batch_size,
                queue_capacity=settings.orders.outbox.handoff_capacity,
                linger_seconds=settings.orders.outbox.delivery_linger_seconds,
            )
            outbox.worker.start()
            relay = OutboxRelay(outbox=outbox, settings=settings.orders.outbox)
            relay.start()
        runtime = cls(
            settings=settings,
            database=database,
            transactions=transactions,
            metrics=metrics,
            executor=executor,
            bus=bus,
            service=OrderService(
                transactions=transactions,
                bus=bus,
                metrics=metrics,
                outbox=outbox if sync_on else None,
            ),
            sender=sender,
            outbox=outbox,
            relay=relay,
            accepted_tokens=accepted_tokens,
            delivery_stop_seconds=delivery_stop_seconds,
        )
        runtime.request_metrics = RequestMetrics(namespace="orders", registry=runtime.registry)
        runtime.registry.register(
            OrderMetricsCollector(
                metrics=metrics,
                executor_name=executor.name,
                executor_stats=executor.stats,
                outbox_backlog=runtime.outbox_backlog,
            )
        )
        return runtime

    def outbox_backlog(self) -> OutboxBacklog | None:
        """The outbox's backlog, or None when orders are not queued or it cannot be read."""
        if not self.service.queues_sync:
            return None
        try:
            count, oldest = self.outbox.backlog()
        except SQLAlchemyError:
            return None  # /health reports the database; metrics still answer
        return OutboxBacklog(undelivered=count, oldest_created_at=oldest)

    def render_metrics(self) -> bytes:
        """Everything in :attr:`registry`, in the Prometheus text format."""
        return render_metrics(self.registry)

    def close(self) -> ShutdownReport | None:
        """Stop the relay, drain the executor (at most 30 s), flush the delivery worker (at
        most ``delivery_stop_seconds``, 10 s), release sender, sink, database.

        Undelivered outbox rows stay in the database for the next start's relay.
        Returns None when already closed.
        """
        with self._close_lock:
            if self._closed:
                return None
            self._closed = True
        if self.relay is not None:
            self.relay.stop()
        report = self.executor.shutdown()
        if self.outbox.worker is not None:
            # After the executor: its last after-commit tasks hand their orders over first.
            self.outbox.worker.stop(timeout_seconds=self.delivery_stop_seconds)
        self.sender.close()
        if self.outbox.sink is not None:
            self.outbox.sink.close()
        self.database.dispose()
        return report
