"""The order service: POST /orders with in-process events, listeners and an executor.

See ``docs/orders.md``. The pieces, each in its own module:

- :mod:`.models`: request, response, ``OrderCreatedEvent`` and validation;
- :mod:`.storage` and :mod:`.transactions`: tables, migrations, transactions;
- :mod:`.events`: the event bus; :mod:`.executor`: ``eventTaskExecutor``;
- :mod:`.listeners` and :mod:`.senders`: the three listeners and notification senders;
- :mod:`.outbox` and :mod:`.sinks`: the transactional outbox, its relay, the OpenSearch sink;
- :mod:`.service`, :mod:`.runtime`, :mod:`.app`, :mod:`.cli`: the operation and its wiring.

The names below are imported on first use, so importing the package (or its
:mod:`.settings` alone, as the toolkit's plan does on a control node without the web
framework) never imports FastAPI or SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .app import (
        create_app,
    )
    from .events import (
        EventBus,
        ListenerRegistration,
        TransactionPhase,
    )
    from .executor import (
        ExecutorStats,
        ShutdownReport,
        ThreadPoolTaskExecutor,
    )
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
    from .metrics import (
        OrderMetrics,
    )
    from .models import (
        OrderCreatedEvent,
        OrderCreateRequest,
        OrderCreateResponse,
        parse_order_create_request,
    )
    from .outbox import (
        Outbox,
        OutboxRelay,
    )
    from .runtime import (
        EVENT_TASK_EXECUTOR_NAME,
        OrderServiceRuntime,
    )
    from .senders import (
        LoggingNotificationSender,
        NotificationSender,
        WebhookNotificationSender,
    )
    from .service import (
        OrderService,
    )
    from .settings import (
        OrderServiceSettings,
        environment_variable_for,
        load_settings,
    )
    from .sinks import (
        DeliveryResult,
        DeliverySink,
        OpenSearchBulkSink,
        OrderDocument,
    )
    from .storage import (
        Database,
    )
    from .transactions import (
        TransactionContext,
        TransactionManager,
        current_transaction,
    )

# name -> module (relative) of the names imported on first use
_LAZY_NAMES = {
    "create_app": ".app",
    "EventBus": ".events",
    "ListenerRegistration": ".events",
    "TransactionPhase": ".events",
    "ExecutorStats": ".executor",
    "ShutdownReport": ".executor",
    "ThreadPoolTaskExecutor": ".executor",
    "AFTER_COMMIT_SYNC_LISTENER": ".listeners",
    "AUDIT_LOG_LISTENER": ".listeners",
    "NOTIFICATION_LISTENER": ".listeners",
    "AfterCommitSyncListener": ".listeners",
    "AuditLogListener": ".listeners",
    "NotificationListener": ".listeners",
    "notification_text": ".listeners",
    "subscribe_order_listeners": ".listeners",
    "OrderMetrics": ".metrics",
    "OrderCreatedEvent": ".models",
    "OrderCreateRequest": ".models",
    "OrderCreateResponse": ".models",
    "parse_order_create_request": ".models",
    "Outbox": ".outbox",
    "OutboxRelay": ".outbox",
    "EVENT_TASK_EXECUTOR_NAME": ".runtime",
    "OrderServiceRuntime": ".runtime",
    "LoggingNotificationSender": ".senders",
    "NotificationSender": ".senders",
    "WebhookNotificationSender": ".senders",
    "OrderService": ".service",
    "OrderServiceSettings": ".settings",
    "environment_variable_for": ".settings",
    "load_settings": ".settings",
    "DeliveryResult": ".sinks",
    "DeliverySink": ".sinks",
    "OpenSearchBulkSink": ".sinks",
    "OrderDocument": ".sinks",
    "Database": ".storage",
    "TransactionContext": ".transactions",
    "TransactionManager": ".transactions",
    "current_transaction": ".transactions",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value


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
