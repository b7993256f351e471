"""The transactional outbox, its relay and the OpenSearch sink, against real things.

The cluster is :class:`orders_testing.StandInCluster`, a stand-in for OpenSearch: a real
HTTPS server on 127.0.0.1 (certificate from a throwaway CA, for ``localhost``) that
speaks ``POST /_bulk``. The database is a real SQLite file or PostgreSQL schema.
The loss cases are those of issue 13: a slow target, a saturated executor, a shutdown
while saturated, and a target outage.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import event, func, select

from clusterforge_orders.sinks import OpenSearchBulkSink, OrderDocument
from clusterforge_orders.storage import order_sync_outbox_table, orders_table
from orders_testing import (
    STAND_IN_PASSWORD,
    STAND_IN_USER,
    SlowSender,
    StandInCertificates,
    StandInCluster,
    make_settings,
    search_settings,
    wait_until,
)

# A relay that looks often and backs off briefly, so the tests take seconds.
FAST_RELAY = {
    "orders.outbox.relay-interval-seconds": 0.2,
    "orders.outbox.relay-grace-seconds": 0.5,
    "orders.outbox.retry-initial-seconds": 0.2,
    "orders.outbox.retry-max-seconds": 1.0,
}
# A small pool, saturated by a handful of orders.
SMALL_POOL = {
    "event.async.core-pool-size": 1,
    "event.async.max-pool-size": 2,
    "event.async.queue-capacity": 2,
    "orders.listeners.notification.enabled": False,
}
# The after-commit listener only hands an order to the delivery worker, so on its own it
# no longer fills a pool; a slow notification (0.5 s a send, as a slow webhook) does.
SATURATING = {**SMALL_POOL, "orders.listeners.notification.enabled": True}


def _document(order_id: str, name: str = "机械键盘") -> OrderDocument:
    return OrderDocument.from_values(
        order_id=order_id,
        user_id="u1",
        product_name=name,
        amount_json="19.99",
        create_time="2026-11-23T01:02:03",
    )


def _sink(
    cluster: StandInCluster, certificates: StandInCertificates, **options
) -> OpenSearchBulkSink:  # type: ignore[no-untyped-def]
    values = {
        "urls": [cluster.url],
        "ca_file": str(certificates.ca_file),
        "username": STAND_IN_USER,
        "password": STAND_IN_PASSWORD,
        "retry_initial_seconds": 0.05,
        "retry_max_seconds": 0.1,
    }
    values.update(options)
    return OpenSearchBulkSink(**values)  # type: ignore[arg-type]


def _outbox_rows(runtime) -> dict[str, object]:  # type: ignore[no-untyped-def]
    with runtime.database.engine.connect() as connection:
        rows = connection.execute(
            select(order_sync_outbox_table.c.order_id, order_sync_outbox_table.c.delivered_at)
        ).all()
    return {row.order_id: row.delivered_at for row in rows}


def _count_orders(runtime) -> int:  # type: ignore[no-untyped-def]
    with runtime.database.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(orders_table)).scalar_one())


def _post_many(server, count: int) -> list[str]:  # type: ignore[no-untyped-def]
    def post(number: int) -> str:
        answer = server.post_order({"userId": f"u{number}", "productName": "键盘", "amount": 5})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["orderId"])

    with ThreadPoolExecutor(max_workers=8) as clients:
        return list(clients.map(post, range(count)))


# --- the sink ---------------------------------------------------------------------------


def test_sink_indexes_by_order_id_with_tls_and_basic_auth(
    cluster: StandInCluster, certificates: StandInCertificates, caplog: pytest.LogCaptureFixture
) -> None:
    sink = _sink(cluster, certificates)
    try:
        result = sink.deliver([_document("ORD-a"), _document("ORD-b", "茶")])
        again = sink.deliver([_document("ORD-a")])
    finally:
        sink.close()
    assert result.delivered == {"ORD-a", "ORD-b"} and result.failed == {}
    assert again.delivered == {"ORD-a"}
    assert cluster.ids() == {"ORD-a", "ORD-b"}, "re-delivery overwrote the same document"
    assert cluster.documents[("orders", "ORD-b")] == {
        "orderId": "ORD-b",
        "userId": "u1",
        "productName": "茶",
        "amount": 19.99,
        "createTime": "2026-11-23T01:02:03",
    }
    assert STAND_IN_PASSWORD not in caplog.text


def test_bulk_200_with_item_errors_retries_only_the_failed_items(
    cluster: StandInCluster, certificates: StandInCertificates
) -> None:
    cluster.fail_items = {"ORD-b": 2}
    sink = _sink(cluster, certificates, attempts=3)
    try:
        result = sink.deliver([_document("ORD-a"), _document("ORD-b"), _document("ORD-c")])
    finally:
        sink.close()
    assert result.delivered == {"ORD-a", "ORD-b", "ORD-c"}
    assert result.failed == {}
    assert cluster.bulk_requests == 3, "two retries, each with only the failed item"

    cluster.fail_items = {"ORD-d": 5}
    sink = _sink(cluster, certificates, attempts=2)
    try:
        partial = sink.deliver([_document("ORD-d"), _document("ORD-e")])
    finally:
        sink.close()
    assert partial.delivered == {"ORD-e"}
    assert partial.failed == {"ORD-d": "item HTTP 429: es_rejected_execution_exception"}


def test_sink_verifies_the_ca_and_the_hostname(
    cluster: StandInCluster, certificates: StandInCertificates, tmp_path: Path
) -> None:
    # The certificate names localhost, not 127.0.0.1: full hostname verification refuses.
    by_address = _sink(cluster, certificates, urls=[f"https://127.0.0.1:{cluster.port}"])
    try:
        refused = by_address.deliver([_document("ORD-a")], attempts=1)
    finally:
        by_address.close()
    assert refused.delivered == set()
    assert "ConnectError" in refused.failed["ORD-a"]
    # The system's CAs are not trusted for the cluster: only the configured CA file.
    from orders_testing import make_test_certificates

    other_ca = make_test_certificates(tmp_path).ca_file
    untrusted = _sink(cluster, certificates, ca_file=str(other_ca))
    try:
        assert untrusted.deliver([_document("ORD-a")], attempts=1).delivered == set()
    finally:
        untrusted.close()
    assert cluster.ids() == set()


def test_wrong_password_is_a_failure_and_never_logged(
    cluster: StandInCluster, certificates: StandInCertificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sink = _sink(cluster, certificates, password="not-the-password-4711")
    try:
        result = sink.deliver([_document("ORD-a")], attempts=2)
    finally:
        sink.close()
    assert result.failed == {"ORD-a": f"{cluster.url} answered HTTP 401"}
    assert "not-the-password-4711" not in caplog.text
    assert "not-the-password-4711" not in repr(sink.__dict__)


# --- the service: outbox, listener and relay ----------------------------------------------


def test_order_is_delivered_by_the_after_commit_listener(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    settings = make_settings(database_url, **search_settings(cluster, certificates.ca_file))
    server = start_server(settings)
    answer = server.post_order({"userId": "u", "productName": "机械键盘", "amount": 19.99})
    order_id = answer.json()["orderId"]
    assert order_id in _outbox_rows(server.runtime), "written in the order's transaction"
    wait_until(lambda: _outbox_rows(server.runtime)[order_id] is not None)
    assert cluster.documents[("orders", order_id)]["productName"] == "机械键盘"
    assert server.runtime.metrics.outbox_counts[0] == 1
    metrics = server.client.get("/metrics").text
    assert "orders_outbox_undelivered 0" in metrics
    assert "orders_outbox_delivered_total 1" in metrics


@pytest.mark.slow
def test_slow_target_every_order_gets_its_row_and_is_delivered(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.delay_seconds = 3.0
    settings = make_settings(
        database_url,
        **search_settings(cluster, certificates.ca_file),
        **FAST_RELAY,
        **SATURATING,
        **{"orders.search.timeout-seconds": 10},
    )
    server = start_server(settings, sender=SlowSender(0.5))
    started = time.monotonic()
    order_ids = _post_many(server, 40)
    posting = time.monotonic() - started
    assert posting < 3.0, f"POST /orders waited for the slow target ({posting:.1f} s)"
    rows = _outbox_rows(server.runtime)
    assert set(rows) == set(order_ids), "every committed order has its outbox row at once"
    assert server.runtime.metrics.task_rejections() > 0, "the pool was saturated"
    wait_until(lambda: cluster.ids() == set(order_ids), timeout=40)
    wait_until(lambda: None not in _outbox_rows(server.runtime).values(), timeout=20)
    assert server.runtime.outbox.undelivered() == 0


@pytest.mark.slow
def test_saturated_executor_rejected_listener_tasks_lose_nothing(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.delay_seconds = 0.5
    settings = make_settings(
        database_url, **search_settings(cluster, certificates.ca_file), **FAST_RELAY, **SATURATING
    )
    server = start_server(settings, sender=SlowSender(0.5))
    order_ids = _post_many(server, 60)
    rejected = server.runtime.metrics.task_rejections("after-commit-sync")
    assert rejected > 0
    wait_until(lambda: server.runtime.outbox.undelivered() == 0, timeout=30)
    assert cluster.ids() == set(order_ids)
    _delivered, _failures, relayed = server.runtime.metrics.outbox_counts
    assert relayed >= rejected, "the relay delivered what the rejected tasks did not"


@pytest.mark.slow
def test_shutdown_while_saturated_loses_nothing_and_the_next_start_delivers(
    database_url: str,
    open_runtime,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.delay_seconds = 3.0
    target = search_settings(cluster, certificates.ca_file)
    settings = make_settings(database_url, **target, **FAST_RELAY, **SMALL_POOL)
    # The delivery worker gets 1 s to flush: one 3 s request is in flight at the stop.
    server = start_server(settings, delivery_stop_seconds=1.0)
    order_ids = _post_many(server, 30)
    server.stop()  # drains the executor for at most TEST_AWAIT_TERMINATION_SECONDS
    runtime = server.runtime
    assert set(_outbox_rows(runtime)) == set(order_ids), "every order kept its row"
    assert _count_orders(runtime) == 30
    undelivered = [order_id for order_id, at in _outbox_rows(runtime).items() if at is None]
    assert undelivered, "the shutdown left deliveries undone (else the test proves nothing)"

    cluster.delay_seconds = 0.0
    restarted = open_runtime(settings)
    wait_until(lambda: restarted.outbox.undelivered() == 0, timeout=30)
    assert cluster.ids() == set(order_ids)


@pytest.mark.slow
def test_target_outage_delays_delivery_and_post_still_answers(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.down = True
    settings = make_settings(
        database_url, **search_settings(cluster, certificates.ca_file), **FAST_RELAY
    )
    server = start_server(settings)
    order_ids = _post_many(server, 10)
    wait_until(lambda: server.runtime.metrics.outbox_counts[1] >= 10)
    assert server.runtime.outbox.undelivered() == 10
    with server.runtime.database.engine.connect() as connection:
        errors = connection.execute(select(order_sync_outbox_table.c.last_error)).scalars().all()
    assert all("HTTP 503" in str(error) for error in errors)
    cluster.down = False
    wait_until(lambda: server.runtime.outbox.undelivered() == 0, timeout=20)
    assert cluster.ids() == set(order_ids)


def test_without_a_target_rows_wait_and_a_later_start_delivers_them(
    database_url: str,
    start_server,
    open_runtime,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    server = start_server(make_settings(database_url))
    order_ids = _post_many(server, 3)
    server.stop()
    assert server.runtime.relay is None
    assert set(_outbox_rows(server.runtime)) == set(order_ids)
    assert None in _outbox_rows(server.runtime).values()
    settings = make_settings(
        database_url,
        **search_settings(cluster, certificates.ca_file),
        **{"orders.outbox.relay-grace-seconds": 0},
    )
    runtime = open_runtime(settings)
    wait_until(lambda: runtime.outbox.undelivered() == 0)
    assert cluster.ids() == set(order_ids)


# --- the delivery worker: many orders per bulk request -------------------------------------

# The relay never takes a row in these tests unless they say so: what is delivered, the
# worker delivered.
NO_RELAY = {"orders.outbox.relay-grace-seconds": 600, "orders.outbox.relay-interval-seconds": 600}


def test_worker_coalesces_many_orders_into_few_bulk_requests(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    # While one request is in flight (0.3 s) the next orders pile up in the worker's queue.
    cluster.delay_seconds = 0.3
    settings = make_settings(
        database_url, **search_settings(cluster, certificates.ca_file), **NO_RELAY
    )
    server = start_server(settings)
    order_ids = _post_many(server, 120)
    wait_until(lambda: server.runtime.outbox.undelivered() == 0, timeout=30)
    assert cluster.ids() == set(order_ids)
    assert cluster.bulk_requests <= 30, f"{cluster.bulk_requests} requests for 120 orders"
    delivered, failures, relayed = server.runtime.metrics.outbox_counts
    assert (delivered, failures, relayed) == (120, 0, 0)
    assert server.runtime.metrics.outbox_batches == cluster.bulk_requests
    assert "orders_outbox_batches_total" in server.client.get("/metrics").text


def test_worker_marks_a_batch_delivered_in_one_update(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    settings = make_settings(
        database_url, **search_settings(cluster, certificates.ca_file), **NO_RELAY
    )
    server = start_server(settings)
    outbox = server.runtime.outbox
    assert outbox.worker is not None
    order_ids = _post_many(server, 5)
    wait_until(lambda: outbox.undelivered() == 0)
    # Then a batch of 50 re-sent by hand (already delivered rows stay as they are) and 50
    # new rows: one UPDATE statement marks them, whatever the batch size.
    fresh = [f"ORD-batch-{number}" for number in range(50)]
    now = datetime.now()
    with server.runtime.transactions.begin() as transaction:
        for order_id in fresh:
            transaction.connection.execute(
                orders_table.insert(),
                {
                    "order_id": order_id,
                    "user_id": "u",
                    "product_name": "键盘",
                    "amount": Decimal("1"),
                    "create_time": now,
                },
            )
            outbox.add(transaction.connection, order_id=order_id, created_at=now)
    updates: list[str] = []

    def count(_conn, _cursor, statement, _parameters, _context, _many) -> None:  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("UPDATE ORDER_SYNC_OUTBOX"):
            updates.append(statement)

    engine = server.runtime.database.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        assert (
            outbox.deliver_documents(
                [_document(order_id) for order_id in fresh + order_ids], attempts={}
            )
            == 55
        )
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(updates) == 1, updates
    assert outbox.undelivered() == 0
    rows = _outbox_rows(server.runtime)
    assert all(rows[order_id] is not None for order_id in fresh)


def test_worker_leaves_rows_undelivered_when_the_sink_fails(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.down = True
    settings = make_settings(
        database_url, **search_settings(cluster, certificates.ca_file), **NO_RELAY
    )
    server = start_server(settings)
    order_ids = _post_many(server, 20)
    wait_until(lambda: server.runtime.metrics.outbox_counts[1] == 20)
    wait_until(lambda: server.runtime.outbox.worker.queued == 0)  # type: ignore[union-attr]
    assert server.runtime.outbox.undelivered() == 20
    assert set(_outbox_rows(server.runtime)) == set(order_ids)
    with server.runtime.database.engine.connect() as connection:
        errors = connection.execute(select(order_sync_outbox_table.c.last_error)).scalars().all()
    assert all("HTTP 503" in str(error) for error in errors)
    assert cluster.ids() == set()


def test_worker_full_queue_leaves_orders_to_the_relay(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.delay_seconds = 0.5
    settings = make_settings(
        database_url,
        **search_settings(cluster, certificates.ca_file),
        **FAST_RELAY,
        **{"orders.outbox.handoff-capacity": 1},
    )
    server = start_server(settings)
    order_ids = _post_many(server, 30)
    assert server.runtime.metrics.outbox_handoffs_refused > 0
    wait_until(lambda: server.runtime.outbox.undelivered() == 0, timeout=30)
    assert cluster.ids() == set(order_ids)
    assert server.runtime.metrics.outbox_counts[2] > 0, "the relay delivered the refused ones"
    assert "orders_outbox_handoffs_refused_total" in server.client.get("/metrics").text


def test_worker_stop_leaves_queued_orders_for_the_next_start(
    database_url: str,
    open_runtime,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    cluster.delay_seconds = 2.0
    target = search_settings(cluster, certificates.ca_file)
    settings = make_settings(database_url, **target, **NO_RELAY)
    server = start_server(settings, delivery_stop_seconds=0.5)
    order_ids = _post_many(server, 40)
    worker = server.runtime.outbox.worker
    assert worker is not None
    wait_until(lambda: worker.queued > 0)  # one request in flight, the rest queued
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 8.0, "the stop limit bounded the shutdown"
    assert not worker.offer(_document("ORD-late")), "a stopped worker refuses"
    assert worker.queued == 0
    rows = _outbox_rows(server.runtime)
    assert set(rows) == set(order_ids), "every order kept its row"
    assert None in rows.values(), "the stop left deliveries undone (else nothing is proved)"

    cluster.delay_seconds = 0.0
    restarted = open_runtime(make_settings(database_url, **target, **FAST_RELAY))
    wait_until(lambda: restarted.outbox.undelivered() == 0, timeout=30)
    assert cluster.ids() == set(order_ids)


def test_worker_linger_sends_one_request_per_interval_under_load(
    database_url: str,
    start_server,
    cluster: StandInCluster,
    certificates: StandInCertificates,  # type: ignore[no-untyped-def]
) -> None:
    # A fast target: without the linger nearly every order would get its own request.
    settings = make_settings(
        database_url,
        **search_settings(cluster, certificates.ca_file),
        **NO_RELAY,
        **{"orders.outbox.delivery-linger-seconds": 1.0},
    )
    server = start_server(settings)
    first = _post_many(server, 1)
    wait_until(lambda: cluster.ids() == set(first))  # after a quiet spell: sent at once
    order_ids = _post_many(server, 60)
    started = time.monotonic()
    wait_until(lambda: server.runtime.outbox.undelivered() == 0, timeout=20)
    assert cluster.ids() == set(first + order_ids)
    assert cluster.bulk_requests <= 4, f"{cluster.bulk_requests} requests for 61 orders"
    assert time.monotonic() - started < 5.0
