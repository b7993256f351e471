"""The three listeners of ``OrderCreatedEvent`` and their subscription.

Each one only reads the event; none returns anything or calls another.
"""

from __future__ import annotations

from datetime import datetime

from .events import EventBus, TransactionPhase
from .models import OrderCreatedEvent, format_create_time
from .outbox import Outbox
from .senders import NotificationSender
from .settings import ListenersSettings
from .storage import PreparedInsert, order_audit_log_table
from .transactions import TransactionManager

AUDIT_LOG_LISTENER = "audit-log"
NOTIFICATION_LISTENER = "notification"
AFTER_COMMIT_SYNC_LISTENER = "after-commit-sync"

# Compiled once and run as driver SQL: the audit row is on every order's path.
_INSERT_AUDIT_RECORD = PreparedInsert(
    order_audit_log_table,
    ("order_id", "user_id", "product_name", "amount", "create_time", "recorded_at"),
)


class AuditLogListener:
    """Synchronous, priority 1: records the order in the audit table.

    It writes in the publisher's transaction when there is one, so an order and its audit
    record commit or roll back together.
    """

    def __init__(self, *, transactions: TransactionManager) -> None:
        self._transactions = transactions

    def __call__(self, event: OrderCreatedEvent) -> None:
        with self._transactions.begin() as transaction:
            _INSERT_AUDIT_RECORD.execute(
                transaction.connection,
                (
                    event.order_id,
                    event.user_id,
                    event.product_name,
                    event.amount,
                    event.create_time,
                    datetime.now(),
                ),
            )


def notification_text(event: OrderCreatedEvent) -> str:
    return (
        f"用户 {event.user_id} 的订单 {event.order_id} 已创建：商品 {event.product_name}，"
        f"金额 {event.amount}，时间 {format_create_time(event.create_time)}"
    )


class NotificationListener:
    """Asynchronous: tells the user about the order through the configured sender."""

    def __init__(self, *, sender: NotificationSender) -> None:
        self._sender = sender

    def __call__(self, event: OrderCreatedEvent) -> None:
        self._sender.send(notification_text(event))


class AfterCommitSyncListener:
    """Asynchronous, AFTER_COMMIT: delivers the order and marks its outbox row delivered.

    The row itself was written in the order's transaction (``OrderService``); this
    listener is only the fast path. When it is rejected, abandoned at shutdown or fails,
    the row stays undelivered and the outbox relay delivers it (see outbox.py).
    """

    def __init__(self, *, outbox: Outbox) -> None:
        self._outbox = outbox

    def __call__(self, event: OrderCreatedEvent) -> None:
        self._outbox.deliver_event(event)


def subscribe_order_listeners(
    bus: EventBus,
    *,
    settings: ListenersSettings,
    transactions: TransactionManager,
    sender: NotificationSender,
    outbox: Outbox,
) -> None:
    """Subscribe the listeners the settings enable."""
    if settings.audit_log.enabled:
        bus.subscribe(
            OrderCreatedEvent,
            AuditLogListener(transactions=transactions),
            name=AUDIT_LOG_LISTENER,
            priority=1,
        )
    if settings.notification.enabled:
        bus.subscribe(
            OrderCreatedEvent,
            NotificationListener(sender=sender),
            name=NOTIFICATION_LISTENER,
            asynchronous=True,
            priority=2,
        )
    if settings.after_commit_sync.enabled:
        bus.subscribe(
            OrderCreatedEvent,
            AfterCommitSyncListener(outbox=outbox),
            name=AFTER_COMMIT_SYNC_LISTENER,
            asynchronous=True,
            priority=3,
            phase=TransactionPhase.AFTER_COMMIT,
            fallback_execution=settings.after_commit_sync.fallback_execution,
        )
