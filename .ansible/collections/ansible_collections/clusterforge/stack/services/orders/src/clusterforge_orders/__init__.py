"""The order service: POST /orders with in-process events, listeners and an executor.

See ``docs/orders.md``. The pieces, each in its own module:

- :mod:`.models`: request, response, ``OrderCreatedEvent`` and validation;
- :mod:`.storage` and :mod:`.transactions`: tables, migrations, transactions;
- :mod:`.events`: the event bus; :mod:`.executor`: ``eventTaskExecutor``;
- :mod:`.listeners` and :mod:`.senders`: the three listeners and notification senders;
- :mod:`.outbox` and :mod:`.sinks`: the transactional outbox, its relay, the OpenSearch sink;
- :mod:`.service`, :mod:`.runtime`, :mod:`.app`, :mod:`.cli`: the operation and its wiring.
"""

from .app import create_app
from .errors import (
    ConfigurationError,
    FieldViolation,
    InvalidOrderRequestError,
    MalformedRequestBodyError,
    NotificationError,
    OrdersError,
    RequestBodyTooLargeError,
    RequestRejectedError,
    SynchronousListenerError,
    TaskRejectedError,
    UnsupportedMediaTypeError,
)
from .events import EventBus, ListenerRegistration, TransactionPhase
from .executor import ExecutorStats, ShutdownReport, ThreadPoolTaskExecutor
from .listeners import (
    AFTER_COMMIT_SYNC_LISTENER,
    AUDIT_LOG_LISTENER,
    NOTIFICATION_LISTENER,
    AfterCommitSyncListener,
    AuditLogListener,
    NotificationListener,
    notification_text,
    subscribe_order_listeners,
)
from .metrics import OrderMetrics
from .models import (
    OrderCreatedEvent,
    OrderCreateRequest,
    OrderCreateResponse,
    parse_order_create_request,
)
from .outbox import Outbox, OutboxRelay
from .runtime import EVENT_TASK_EXECUTOR_NAME, OrderServiceRuntime
from .senders import LoggingNotificationSender, NotificationSender, WebhookNotificationSender
from .service import OrderService
from .settings import OrderServiceSettings, environment_variable_for, load_settings
from .sinks import DeliveryResult, DeliverySink, OpenSearchBulkSink, OrderDocument
from .storage import Database
from .transactions import TransactionContext, TransactionManager, current_transaction

__all__ = [
    "AFTER_COMMIT_SYNC_LISTENER",
    "AUDIT_LOG_LISTENER",
    "EVENT_TASK_EXECUTOR_NAME",
    "NOTIFICATION_LISTENER",
    "AfterCommitSyncListener",
    "AuditLogListener",
    "ConfigurationError",
    "Database",
    "DeliveryResult",
    "DeliverySink",
    "EventBus",
    "ExecutorStats",
    "FieldViolation",
    "InvalidOrderRequestError",
    "ListenerRegistration",
    "LoggingNotificationSender",
    "MalformedRequestBodyError",
    "NotificationError",
    "NotificationListener",
    "NotificationSender",
    "OpenSearchBulkSink",
    "OrderCreateRequest",
    "OrderCreateResponse",
    "OrderCreatedEvent",
    "OrderDocument",
    "OrderMetrics",
    "OrderService",
    "OrderServiceRuntime",
    "OrderServiceSettings",
    "OrdersError",
    "Outbox",
    "OutboxRelay",
    "RequestBodyTooLargeError",
    "RequestRejectedError",
    "ShutdownReport",
    "SynchronousListenerError",
    "TaskRejectedError",
    "ThreadPoolTaskExecutor",
    "TransactionContext",
    "TransactionManager",
    "TransactionPhase",
    "UnsupportedMediaTypeError",
    "WebhookNotificationSender",
    "create_app",
    "current_transaction",
    "environment_variable_for",
    "load_settings",
    "notification_text",
    "parse_order_create_request",
    "subscribe_order_listeners",
]
