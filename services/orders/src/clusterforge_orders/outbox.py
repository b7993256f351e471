"""The transactional outbox of order synchronization, and its relay.

1. ``create_order`` inserts the order's outbox row in the order's own transaction
   (:meth:`Outbox.add`): an order and its sync record commit or roll back together.
2. After the commit, the AFTER_COMMIT listener delivers the order to the sink and marks
   the row delivered (:meth:`Outbox.deliver_documents`).
3. :class:`OutboxRelay`, a thread of the service, delivers whatever is still undelivered:
   once at start, then every ``relay-interval-seconds``. A row is due ``relay-grace``
   after its order (the listener's turn first) and, after each failed delivery, again
   after an exponential backoff with a cap and jitter.

So executor saturation (a rejected listener task), a shutdown (a queued or abandoned
task) or a target outage only delays delivery: the row stays until the target has the
order. Delivery is at least once; the document id is the orderId, so a second delivery
overwrites the same document.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, and_, bindparam, func, select, update

from .metrics import OrderMetrics
from .models import OrderCreatedEvent, decimal_to_json_number, format_create_time
from .settings import OutboxSettings
from .sinks import DeliverySink, OrderDocument, backoff_seconds
from .storage import Database, order_sync_outbox_table, orders_table
from .transactions import TransactionManager

logger = logging.getLogger(__name__)

_INSERT_ROW = order_sync_outbox_table.insert()
# The one row of an order, while it is still undelivered: every per-row update below
# narrows to it, so a row delivered meanwhile (by the listener or the relay) is left alone.
_UPDATE_UNDELIVERED_ROW = update(order_sync_outbox_table).where(
    and_(
        order_sync_outbox_table.c.order_id == bindparam("b_order_id"),
        order_sync_outbox_table.c.delivered_at.is_(None),
    )
)
_MARK_DELIVERED = _UPDATE_UNDELIVERED_ROW.values(
    delivered_at=bindparam("b_delivered_at"),
    attempts=order_sync_outbox_table.c.attempts + 1,
    last_error=None,
)
_MARK_FAILED = _UPDATE_UNDELIVERED_ROW.values(
    attempts=order_sync_outbox_table.c.attempts + 1,
    next_attempt_at=bindparam("b_next_attempt_at"),
    last_error=bindparam("b_error"),
)
_CLAIM = _UPDATE_UNDELIVERED_ROW.values(next_attempt_at=bindparam("b_next_attempt_at"))


class Outbox:
    """The outbox table's operations; every write goes through the transaction manager."""

    def __init__(
        self,
        *,
        database: Database,
        transactions: TransactionManager,
        settings: OutboxSettings,
        metrics: OrderMetrics,
        sink: DeliverySink | None,
    ) -> None:
        self._database = database
        self._transactions = transactions
        self._settings = settings
        self._metrics = metrics
        self.sink = sink

    def add(self, connection: Connection, *, order_id: str, created_at: datetime) -> None:
        """Queue ``order_id``; call with the connection of the order's transaction."""
        connection.execute(
            _INSERT_ROW,
            {
                "order_id": order_id,
                "created_at": created_at,
                "attempts": 0,
                "next_attempt_at": created_at
                + timedelta(seconds=self._settings.relay_grace_seconds),
                "delivered_at": None,
                "last_error": None,
            },
        )

    def deliver_event(self, event: OrderCreatedEvent) -> None:
        """The after-commit listener's work: deliver one order, record the outcome."""
        if self.sink is None:
            return  # delivery is off: the row waits for a target to be configured
        # One try: the relay is the retry path, and a pool thread held in backoff would
        # only make the executor reject more tasks.
        self.deliver_documents([OrderDocument.from_event(event)], attempts={}, tries=1)

    def deliver_documents(
        self,
        documents: Sequence[OrderDocument],
        *,
        attempts: dict[str, int],
        tries: int | None = None,
    ) -> int:
        """Send ``documents`` and record each outcome; the number delivered.

        ``attempts`` holds the failures each row already had (for its backoff).
        """
        if self.sink is None or not documents:
            return 0
        result = self.sink.deliver(documents, attempts=tries)
        now = datetime.now()
        delivered = [
            {"b_order_id": order_id, "b_delivered_at": now} for order_id in result.delivered
        ]
        failed = []
        for order_id, reason in result.failed.items():
            failures = attempts.get(order_id, 0) + 1
            delay = backoff_seconds(
                failures,
                initial=self._settings.retry_initial_seconds,
                cap=self._settings.retry_max_seconds,
            )
            failed.append(
                {
                    "b_order_id": order_id,
                    "b_next_attempt_at": now + timedelta(seconds=delay),
                    "b_error": reason,
                }
            )
        with self._transactions.begin() as transaction:
            if delivered:
                transaction.connection.execute(_MARK_DELIVERED, delivered)
            if failed:
                transaction.connection.execute(_MARK_FAILED, failed)
        self._metrics.outbox_delivered(len(delivered))
        self._metrics.outbox_delivery_failed(len(failed))
        return len(delivered)

    def relay_once(self) -> int:
        """Deliver one batch of due rows; the number of rows taken (0: nothing due)."""
        if self.sink is None:
            return 0
        now = datetime.now()
        outbox, orders = order_sync_outbox_table, orders_table
        query = (
            select(
                outbox.c.order_id,
                outbox.c.attempts,
                orders.c.user_id,
                orders.c.product_name,
                orders.c.amount,
                orders.c.create_time,
            )
            .join(orders, orders.c.order_id == outbox.c.order_id)
            .where(and_(outbox.c.delivered_at.is_(None), outbox.c.next_attempt_at <= now))
            .order_by(outbox.c.next_attempt_at)
            .limit(self._settings.batch_size)
        )
        with self._transactions.begin() as transaction:
            rows = transaction.connection.execute(query).all()
            if not rows:
                return 0
            # Claim the batch: another relay pass (or process) skips it while it is sent.
            lease = now + timedelta(seconds=self._settings.relay_grace_seconds)
            transaction.connection.execute(
                _CLAIM, [{"b_order_id": row.order_id, "b_next_attempt_at": lease} for row in rows]
            )
        documents = [
            OrderDocument.from_values(
                order_id=row.order_id,
                user_id=row.user_id,
                product_name=row.product_name,
                amount_json=decimal_to_json_number(row.amount),
                create_time=format_create_time(row.create_time),
            )
            for row in rows
        ]
        attempts = {row.order_id: int(row.attempts) for row in rows}
        delivered = self.deliver_documents(documents, attempts=attempts)
        self._metrics.outbox_relayed(delivered)
        return len(rows)

    def make_orphans_due(self, *, started_at: datetime) -> int:
        """Make every undelivered row of an earlier run due now; the number of rows.

        Their listener tasks died with that run (rejected, dropped at shutdown, or the
        process was killed), so neither a grace nor a backoff protects anything.
        """
        statement = (
            update(order_sync_outbox_table)
            .where(
                and_(
                    order_sync_outbox_table.c.delivered_at.is_(None),
                    order_sync_outbox_table.c.created_at < started_at,
                    order_sync_outbox_table.c.next_attempt_at > started_at,
                )
            )
            .values(next_attempt_at=started_at)
        )
        with self._transactions.begin() as transaction:
            return int(transaction.connection.execute(statement).rowcount)

    def undelivered(self) -> int:
        with self._database.engine.connect() as connection:
            query = (
                select(func.count())
                .select_from(order_sync_outbox_table)
                .where(order_sync_outbox_table.c.delivered_at.is_(None))
            )
            return int(connection.execute(query).scalar_one())


class OutboxRelay:
    """A daemon thread that runs :meth:`Outbox.relay_once` at start and periodically."""

    def __init__(self, *, outbox: Outbox, settings: OutboxSettings) -> None:
        self._outbox = outbox
        self._settings = settings
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbox-relay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        started_at = datetime.now()
        try:
            orphans = self._outbox.make_orphans_due(started_at=started_at)
            logger.info("outbox relay started; %d undelivered row(s) from earlier runs", orphans)
        except Exception:
            logger.exception("outbox relay could not read earlier rows; the passes will")
        while not self._stop.is_set():
            try:
                taken = self._outbox.relay_once()
            except Exception:
                # A database hiccup must not end the relay; the rows are still there.
                logger.exception("outbox relay pass failed; retrying")
                taken = 0
            if taken < self._settings.batch_size:
                self._stop.wait(self._settings.relay_interval_seconds)

    def stop(self, *, timeout_seconds: float = 15.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_seconds)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()
