"""The create-order operation."""

from __future__ import annotations

from datetime import datetime

from .events import EventBus
from .metrics import OrderMetrics
from .models import (
    OrderCreatedEvent,
    OrderCreateRequest,
    OrderCreateResponse,
    new_order_id,
)
from .outbox import Outbox
from .storage import PreparedInsert, orders_table
from .transactions import TransactionManager

# Compiled once and run as driver SQL, like the audit and outbox rows: it runs under
# SQLite's writer lock on every order, so its interpreter time is every writer's wait.
_INSERT_ORDER = PreparedInsert(
    orders_table, ("order_id", "user_id", "product_name", "amount", "create_time")
)


class OrderService:
    def __init__(
        self,
        *,
        transactions: TransactionManager,
        bus: EventBus,
        metrics: OrderMetrics,
        outbox: Outbox | None = None,
    ) -> None:
        """``outbox``: where the order's sync row goes, in its transaction (None: no sync)."""
        self._outbox = outbox
        self._transactions = transactions
        self._bus = bus
        self._metrics = metrics

    @property
    def queues_sync(self) -> bool:
        """Whether each order gets an outbox row (the after-commit sync is on)."""
        return self._outbox is not None

    def create_order(self, request: OrderCreateRequest) -> OrderCreateResponse:
        """Store the order and publish ``OrderCreatedEvent``, in one transaction.

        The event is published after the response is built and before this returns.
        A synchronous listener's failure propagates and rolls everything back;
        after-commit listeners are dispatched only once the commit has happened.
        """
        with self._transactions.begin() as transaction:
            response = OrderCreateResponse(
                order_id=new_order_id(),
                user_id=request.user_id,
                product_name=request.product_name,
                amount=request.amount,
                create_time=datetime.now().replace(microsecond=0),
            )
            _INSERT_ORDER.execute(
                transaction.connection,
                (
                    response.order_id,
                    response.user_id,
                    response.product_name,
                    response.amount,
                    response.create_time,
                ),
            )
            if self._outbox is not None:
                # In the order's transaction: the order and its sync record commit or
                # roll back together, whatever becomes of the after-commit listener.
                self._outbox.add(
                    transaction.connection, order_id=response.order_id, created_at=datetime.now()
                )
            self._bus.publish(OrderCreatedEvent.from_response(response))
        self._metrics.order_created()
        return response
