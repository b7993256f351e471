"""The event bus over real transactions and the real executor."""

from __future__ import annotations

import threading
from datetime import datetime
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from clusterforge_orders import (
    AFTER_COMMIT_SYNC_LISTENER,
    OrderCreatedEvent,
    OrderCreateRequest,
    SynchronousListenerError,
    TransactionPhase,
)
from clusterforge_orders.storage import (
    order_audit_log_table,
    order_sync_outbox_table,
    orders_table,
)
from clusterforge_orders.transactions import current_transaction
from orders_testing import RecordingSender, RecordingSink, make_settings, wait_until

pytestmark = pytest.mark.usefixtures("database_url")


def _event(order_id: str = "ORD-" + "0" * 32) -> OrderCreatedEvent:
    return OrderCreatedEvent(
        order_id=order_id,
        user_id="u1",
        product_name="p1",
        amount=Decimal("19.99"),
        create_time=datetime(2024, 1, 1, 12, 0, 0),
    )


def _count(runtime, table) -> int:  # type: ignore[no-untyped-def]
    with runtime.database.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.called = threading.Event()

    def listener(self, name: str, *, fail: bool = False):  # type: ignore[no-untyped-def]
        def listen(event: OrderCreatedEvent) -> None:
            with self.lock:
                self.calls.append((name, threading.current_thread().name))
            self.called.set()
            if fail:
                raise RuntimeError(f"{name} failed on purpose")

        return listen


def _recording_runtime(database_url: str, open_runtime):  # type: ignore[no-untyped-def]
    """A runtime whose notifications are recorded, and a recorder for more listeners."""
    sender = RecordingSender()
    return open_runtime(make_settings(database_url), sender=sender), sender, Recorder()


def test_sync_listeners_run_in_priority_order_in_the_publishing_thread(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    recorder = Recorder()
    runtime.bus.subscribe(OrderCreatedEvent, recorder.listener("third"), name="third", priority=9)
    runtime.bus.subscribe(OrderCreatedEvent, recorder.listener("first"), name="first", priority=1)
    runtime.bus.subscribe(OrderCreatedEvent, recorder.listener("second"), name="second", priority=5)
    response = runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    here = threading.current_thread().name
    assert recorder.calls == [("first", here), ("second", here), ("third", here)]
    names = [item.name for item in runtime.bus.listeners_for(OrderCreatedEvent)]
    assert names.index("audit-log") < names.index("first"), "audit (1) subscribed before ties"
    with runtime.database.engine.connect() as connection:
        audited = connection.execute(
            select(order_audit_log_table).where(
                order_audit_log_table.c.order_id == response.order_id
            )
        ).one()
    assert (audited.user_id, audited.product_name, audited.amount) == ("u", "p", Decimal(3))
    assert audited.create_time == response.create_time


def test_failing_sync_listener_rolls_back_and_skips_after_commit(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    recorder = Recorder()
    runtime.bus.subscribe(
        OrderCreatedEvent, recorder.listener("broken", fail=True), name="broken", priority=1
    )
    runtime.bus.subscribe(
        OrderCreatedEvent,
        recorder.listener("after-commit"),
        name="after-commit",
        asynchronous=True,
        phase=TransactionPhase.AFTER_COMMIT,
    )
    with pytest.raises(SynchronousListenerError) as caught:
        runtime.service.create_order(
            OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
        )
    assert isinstance(caught.value.__cause__, RuntimeError)
    runtime.executor.shutdown(timeout_seconds=5)
    assert [name for name, _ in recorder.calls] == ["broken"]
    assert _count(runtime, orders_table) == 0
    assert _count(runtime, order_audit_log_table) == 0, "the audit row rolled back too"
    assert _count(runtime, order_sync_outbox_table) == 0
    assert runtime.metrics.listener_failures("broken") == 1


def test_rollback_skips_after_commit_listeners(database_url: str, open_runtime) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    recorder = Recorder()
    runtime.bus.subscribe(
        OrderCreatedEvent,
        recorder.listener("sync-after-commit"),
        name="sync-after-commit",
        phase=TransactionPhase.AFTER_COMMIT,
        fallback_execution=True,
    )
    with pytest.raises(RuntimeError, match="abort"), runtime.transactions.begin():
        runtime.bus.publish(_event())
        raise RuntimeError("abort")
    runtime.executor.shutdown(timeout_seconds=5)
    assert recorder.calls == [], "fallback does not apply to a rollback"
    assert _count(runtime, order_sync_outbox_table) == 0


def test_commit_runs_after_commit_listeners_after_the_commit(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    seen_committed: list[int] = []

    def check_commit(event: OrderCreatedEvent) -> None:
        seen_committed.append(_count(runtime, orders_table))

    runtime.bus.subscribe(
        OrderCreatedEvent, check_commit, name="check", phase=TransactionPhase.AFTER_COMMIT
    )
    response = runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    assert seen_committed == [1], "ran synchronously, after the order was committed"
    wait_until(lambda: _count(runtime, order_sync_outbox_table) == 1)
    with runtime.database.engine.connect() as connection:
        synced = connection.execute(select(order_sync_outbox_table.c.order_id)).scalar_one()
    assert synced == response.order_id


def test_without_transaction_after_commit_is_skipped_unless_fallback(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    sink = RecordingSink()
    runtime = open_runtime(make_settings(database_url), sink=sink)
    runtime.bus.publish(_event("ORD-" + "1" * 32))
    runtime.executor.shutdown(timeout_seconds=5)
    assert sink.documents == {}, "the after-commit sync listener did not run"
    assert runtime.metrics.after_commit_skips(AFTER_COMMIT_SYNC_LISTENER) == 1
    assert _count(runtime, order_audit_log_table) == 1, "audit opened its own transaction"

    fallback_sink = RecordingSink()
    fallback = open_runtime(
        make_settings(
            database_url, **{"orders.listeners.after-commit-sync.fallback-execution": True}
        ),
        sink=fallback_sink,
    )
    fallback.bus.publish(_event("ORD-" + "2" * 32))
    fallback.executor.shutdown(timeout_seconds=5)
    assert fallback.metrics.after_commit_skips(AFTER_COMMIT_SYNC_LISTENER) == 0
    # The listener hands the order to the delivery worker, which sends it on its thread.
    wait_until(lambda: list(fallback_sink.documents) == ["ORD-" + "2" * 32])
    # Published outside create_order, so no order and no outbox row: nothing to mark.
    assert _count(fallback, order_sync_outbox_table) == 0


def test_async_failure_is_counted_and_never_reaches_the_publisher(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    recorder = Recorder()
    runtime.bus.subscribe(
        OrderCreatedEvent,
        recorder.listener("flaky", fail=True),
        name="flaky",
        asynchronous=True,
    )
    runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    wait_until(lambda: runtime.metrics.listener_failures("flaky") == 1)
    assert recorder.calls[0][1].startswith("event-task-")
    assert _count(runtime, orders_table) == 1


def test_duplicate_listener_names_are_refused(database_url: str, open_runtime) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    with pytest.raises(ValueError, match="audit-log"):
        runtime.bus.subscribe(OrderCreatedEvent, lambda event: None, name="audit-log")


def test_async_listener_is_handed_over_once_the_transaction_has_ended(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    """Not while the transaction (and SQLite's writer lock) is held; before create returns."""
    runtime = open_runtime(make_settings(database_url))
    recorder = Recorder()
    runtime.bus.subscribe(
        OrderCreatedEvent, recorder.listener("async"), name="async", asynchronous=True
    )
    writer_lock = runtime.database._writer_lock
    submitted: list[tuple[bool, bool, int]] = []
    execute = runtime.executor.execute

    def watching_execute(task):  # type: ignore[no-untyped-def]
        locked = getattr(writer_lock, "locked", lambda: False)()
        submitted.append((current_transaction() is None, locked, _count(runtime, orders_table)))
        execute(task)

    runtime.executor.execute = watching_execute
    runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    # This listener, the notification and the after-commit sync: one hand-off, after the
    # commit (see the next test).
    assert submitted == [(True, False, 1)]
    wait_until(lambda: [name for name, _ in recorder.calls] == ["async"])
    assert recorder.calls[0][1].startswith("event-task-")


def test_async_listeners_of_one_event_run_as_one_task_each_failing_alone(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime, sender, recorder = _recording_runtime(database_url, open_runtime)
    runtime.bus.subscribe(
        OrderCreatedEvent,
        recorder.listener("late-after-commit"),
        name="late-after-commit",
        asynchronous=True,
        priority=9,
        phase=TransactionPhase.AFTER_COMMIT,
    )
    runtime.bus.subscribe(
        OrderCreatedEvent,
        recorder.listener("first", fail=True),
        name="first",
        asynchronous=True,
        priority=0,
    )
    before = runtime.executor.stats().completed_tasks
    runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    assert runtime.executor.shutdown(timeout_seconds=5).terminated
    assert runtime.executor.stats().completed_tasks == before + 1, "one task for all four"
    # After-commit listeners (3 and 9) first, then the plain ones (0, then the
    # notification at 2); the failure of "first" did not stop the notification, and it
    # is counted as its own.
    assert [name for name, _ in recorder.calls] == ["late-after-commit", "first"]
    assert recorder.calls[0][1] == recorder.calls[1][1]
    assert recorder.calls[0][1].startswith("event-task-")
    assert len(sender.texts) == 1
    assert runtime.metrics.listener_failures("first") == 1
    assert runtime.metrics.listener_failures("late-after-commit") == 0


def test_a_rejected_hand_off_counts_for_each_of_its_listeners(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    runtime = open_runtime(make_settings(database_url))
    runtime.executor.shutdown(timeout_seconds=5)  # rejects every task from now on
    runtime.service.create_order(
        OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
    )
    assert runtime.metrics.task_rejections("notification") == 1
    assert runtime.metrics.task_rejections(AFTER_COMMIT_SYNC_LISTENER) == 1
    assert _count(runtime, orders_table) == 1, "the order itself is not affected"


def test_async_listener_runs_when_the_transaction_rolls_back(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    """Like Spring's plain @Async @EventListener: the outcome does not matter."""
    runtime, sender, recorder = _recording_runtime(database_url, open_runtime)
    runtime.bus.subscribe(
        OrderCreatedEvent, recorder.listener("early"), name="early", asynchronous=True
    )
    runtime.bus.subscribe(
        OrderCreatedEvent, recorder.listener("broken", fail=True), name="broken", priority=5
    )
    with pytest.raises(SynchronousListenerError):
        runtime.service.create_order(
            OrderCreateRequest(user_id="u", product_name="p", amount=Decimal(3))
        )
    runtime.executor.shutdown(timeout_seconds=5)
    assert sorted(name for name, _ in recorder.calls) == ["broken", "early"]
    assert len(sender.texts) == 1, "the notification ran for the rolled-back order"
    assert _count(runtime, orders_table) == 0
    assert _count(runtime, order_audit_log_table) == 0

    # Rolled back by the publisher itself, after publish returned.
    plain_sender = RecordingSender()
    plain = open_runtime(make_settings(database_url), sender=plain_sender)
    with pytest.raises(RuntimeError, match="abort"), plain.transactions.begin():
        plain.bus.publish(_event())
        assert plain_sender.texts == [], "not handed over inside the transaction"
        raise RuntimeError("abort")
    plain.executor.shutdown(timeout_seconds=5)
    assert len(plain_sender.texts) == 1
    assert _count(plain, order_audit_log_table) == 0


def test_async_listener_without_transaction_is_handed_over_at_once(
    database_url: str, open_runtime
) -> None:  # type: ignore[no-untyped-def]
    sender = RecordingSender()
    runtime = open_runtime(make_settings(database_url), sender=sender)
    runtime.bus.publish(_event("ORD-" + "3" * 32))
    wait_until(lambda: len(sender.texts) == 1)
    assert "ORD-" + "3" * 32 in sender.texts[0]
