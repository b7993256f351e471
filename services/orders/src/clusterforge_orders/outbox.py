"""The transactional outbox of order synchronization, and its relay.

1. ``create_order`` inserts the order's outbox row in the order's own transaction
   (:meth:`Outbox.add`): an order and its sync record commit or roll back together.
2. After the commit, the AFTER_COMMIT listener hands the order to :class:`DeliveryWorker`,
   one thread that coalesces every order handed to it meanwhile into one bulk request
   and marks the delivered rows in one UPDATE (:meth:`Outbox.deliver_documents`). The
   hand-off only appends to a bounded in-memory queue, so a listener task takes
   microseconds and the executor is not held by the target's latency.
3. :class:`OutboxRelay`, a thread of the service, delivers whatever is still undelivered:
   once at start, then every ``relay-interval-seconds``. A row is due ``relay-grace``
   after its order (the listener's turn first) and, after each failed delivery, again
   after an exponential backoff with a cap and jitter.

So executor saturation (a rejected listener task), a full hand-off queue, a shutdown (a
queued or abandoned task, or orders still in the worker's queue) or a target outage only
delays delivery: the row stays until the target has the order. Delivery is at least
once; the document id is the orderId, so a second delivery overwrites the same document.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, and_, bindparam, func, select, update

from .metrics import OrderMetrics
from .models import OrderCreatedEvent, decimal_to_json_number, format_create_time
from .settings import OutboxSettings
from .sinks import DeliverySink, OrderDocument, backoff_seconds
from .storage import Database, PreparedInsert, order_sync_outbox_table, orders_table
from .transactions import TransactionManager

logger = logging.getLogger(__name__)

# On every order's path, in its transaction: compiled once, run as driver SQL.
# delivered_at and last_error start NULL (the columns' default).
_INSERT_ROW = PreparedInsert(
    order_sync_outbox_table, ("order_id", "created_at", "attempts", "next_attempt_at")
)
# The one row of an order, while it is still undelivered: every per-row update below
# narrows to it, so a row delivered meanwhile (by the listener or the relay) is left alone.
_UPDATE_UNDELIVERED_ROW = update(order_sync_outbox_table).where(
    and_(
        order_sync_outbox_table.c.order_id == bindparam("b_order_id"),
        order_sync_outbox_table.c.delivered_at.is_(None),
    )
)
# All the delivered rows of one bulk request in one statement: one UPDATE and one commit
# per batch rather than one execution per row. Rows delivered meanwhile are left alone.
_MARK_DELIVERED = (
    update(order_sync_outbox_table)
    .where(
        and_(
            order_sync_outbox_table.c.order_id.in_(bindparam("b_order_ids", expanding=True)),
            order_sync_outbox_table.c.delivered_at.is_(None),
        )
    )
    .values(
        delivered_at=bindparam("b_delivered_at"),
        attempts=order_sync_outbox_table.c.attempts + 1,
        last_error=None,
    )
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
        self.worker: DeliveryWorker | None = None
        self._relay_grace = timedelta(seconds=settings.relay_grace_seconds)

    def add(self, connection: Connection, *, order_id: str, created_at: datetime) -> None:
        """Queue ``order_id``; call with the connection of the order's transaction."""
        _INSERT_ROW.execute(connection, (order_id, created_at, 0, created_at + self._relay_grace))

    def deliver_event(self, event: OrderCreatedEvent) -> None:
        """The after-commit listener's work: hand the order to the delivery worker.

        Without a worker (tests that drive the outbox alone) it delivers the one order
        here. Either way one try: the relay is the retry path.
        """
        if self.sink is None:
            return  # delivery is off: the row waits for a target to be configured
        document = OrderDocument.from_event(event)
        if self.worker is not None:
            self.worker.offer(document)
            return
        self.deliver_documents([document], attempts={}, tries=1)

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
        self._metrics.outbox_batch_sent()
        result = self.sink.deliver(documents, attempts=tries)
        now = datetime.now()
        delivered = sorted(result.delivered)
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
                transaction.connection.execute(
                    _MARK_DELIVERED, {"b_order_ids": delivered, "b_delivered_at": now}
                )
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
        return self.backlog()[0]

    def backlog(self) -> tuple[int, datetime | None]:
        """Rows not delivered yet, and when the oldest of them was created (None: none)."""
        table = order_sync_outbox_table
        query = select(func.count(), func.min(table.c.created_at)).where(
            table.c.delivered_at.is_(None)
        )
        with self._database.engine.connect() as connection:
            count, oldest = connection.execute(query).one()
        return int(count), oldest


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


class DeliveryWorker:
    """The after-commit listener's delivery path: one thread, many orders per request.

    :meth:`offer` appends an order to a bounded queue and returns at once. The thread
    takes everything queued (at most ``batch_size``), sends it in one bulk request with
    one try, and records the outcome in one transaction (:meth:`Outbox.deliver_documents`).
    While a request is in flight the next orders pile up, so the batch grows with the
    load and the target's latency. Requests also start at most one per ``linger_seconds``
    (unless a full batch is waiting): an order arriving after a quiet spell goes at once,
    while under load each request carries everything of the last interval. Per request
    the HTTP client and the UPDATE cost as much interpreter time as dozens of orders, so
    without the linger the worker spent a tenth of the service's CPU on small batches.

    The queue is only a shortcut: each order's outbox row is already committed. An order
    refused (queue full, worker stopped), still queued when :meth:`stop` gives up, or
    whose request fails stays undelivered, and the relay delivers it.
    """

    def __init__(
        self,
        *,
        outbox: Outbox,
        metrics: OrderMetrics,
        batch_size: int,
        queue_capacity: int,
        linger_seconds: float = 0.0,
    ) -> None:
        self._outbox = outbox
        self._linger = linger_seconds
        self._last_batch_at = float("-inf")
        self._metrics = metrics
        self._batch_size = batch_size
        self._capacity = queue_capacity
        self._queue: deque[OrderDocument] = deque()
        self._condition = threading.Condition()
        self._stopping = False
        self._abandon = False
        self._thread = threading.Thread(target=self._run, name="outbox-delivery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer(self, document: OrderDocument) -> bool:
        """Queue ``document``; False (counted) when refused: the relay will deliver it."""
        with self._condition:
            if self._stopping or len(self._queue) >= self._capacity:
                refused = True
            else:
                refused = False
                self._queue.append(document)
                if len(self._queue) in (1, self._batch_size):
                    self._condition.notify()
        if refused:
            self._metrics.outbox_handoff_refused()
        return not refused

    @property
    def queued(self) -> int:
        with self._condition:
            return len(self._queue)

    def _take(self) -> list[OrderDocument] | None:
        """The next batch; None tells the thread to exit."""
        with self._condition:
            while not self._queue and not self._stopping:
                self._condition.wait()
            # At most one request per linger interval; a stop or a full batch goes at once.
            send_at = self._last_batch_at + self._linger
            while not self._stopping and len(self._queue) < self._batch_size:
                remaining = send_at - time.monotonic()
                if remaining <= 0:
                    break
                self._condition.wait(remaining)
            if self._abandon or not self._queue:
                return None
            self._last_batch_at = time.monotonic()
            count = min(len(self._queue), self._batch_size)
            return [self._queue.popleft() for _taken in range(count)]

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            try:
                self._outbox.deliver_documents(batch, attempts={}, tries=1)
            except Exception:
                # A database error after the send: the rows stay undelivered and the
                # relay sends them again (same ids, so the target overwrites).
                logger.exception(
                    "outbox delivery of %d order(s) failed; the relay retries", len(batch)
                )

    def stop(self, *, timeout_seconds: float = 10.0) -> int:
        """Refuse new orders, send what is queued within the limit; the orders left.

        Orders left behind keep their undelivered rows for the next start's relay.
        """
        deadline = time.monotonic() + timeout_seconds
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._condition:
            self._abandon = True
            left = len(self._queue)
            self._queue.clear()
            self._condition.notify_all()
        if left:
            logger.warning(
                "outbox delivery stopped with %d order(s) queued; the next start's relay "
                "delivers them",
                left,
            )
        return left

    @property
    def running(self) -> bool:
        return self._thread.is_alive()
