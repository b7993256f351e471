"""POST /orders, /health and /metrics through a real server on loopback."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from clusterforge_orders import OrderCreatedEvent, TransactionPhase
from clusterforge_orders.storage import (
    order_audit_log_table,
    order_sync_outbox_table,
    orders_table,
)
from orders_testing import RecordingSender, make_settings, wait_until
from orders_testing import metric_value as _metric


def _count(runtime, table) -> int:  # type: ignore[no-untyped-def]
    with runtime.database.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def test_created_order_is_stored_audited_notified_and_synchronized(
    database_url: str, start_server
) -> None:  # type: ignore[no-untyped-def]
    sender = RecordingSender()
    server = start_server(make_settings(database_url), sender=sender)
    before = datetime.now().replace(microsecond=0)
    answer = server.post_order(
        content='{"userId":"u-7","productName":"茶","amount":19.99}'.encode()
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert '"amount":19.99,' in answer.text
    body = answer.json()
    assert re.fullmatch(r"ORD-[0-9a-f]{32}", body["orderId"])
    assert (body["userId"], body["productName"]) == ("u-7", "茶")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", body["createTime"])
    assert before <= datetime.fromisoformat(body["createTime"]) <= datetime.now()
    assert list(body) == ["orderId", "userId", "productName", "amount", "createTime"]

    runtime = server.runtime
    with runtime.database.engine.connect() as connection:
        stored = connection.execute(select(orders_table)).one()
        audited = connection.execute(select(order_audit_log_table)).one()
    assert stored.order_id == audited.order_id == body["orderId"]
    assert stored.amount == audited.amount == Decimal("19.99")
    assert audited.create_time.isoformat() == body["createTime"]
    wait_until(lambda: len(sender.texts) == 1 and _count(runtime, order_sync_outbox_table) == 1)
    text = sender.texts[0]
    for part in ("u-7", body["orderId"], "茶", "19.99"):
        assert part in text
    assert sender.threads[0].startswith("event-task-")


@pytest.mark.parametrize("amount", ["12345678901234567.89", "1", "1.00", "1.10"])
def test_amount_is_echoed_exactly(database_url: str, start_server, amount: str) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    answer = server.post_order(
        content=f'{{"userId":"u","productName":"p","amount":{amount}}}'.encode()
    )
    assert answer.status_code == 200
    assert f'"amount":{amount},' in answer.text
    with server.runtime.database.engine.connect() as connection:
        stored = connection.execute(select(orders_table.c.amount)).scalar_one()
    assert stored == Decimal(amount)


def test_every_validation_message_and_boundary(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    refused = {
        "0": "订单金额必须大于0",
        "0.99": "订单金额必须大于0",
        "-1": "订单金额必须大于0",
        "-0.5": "订单金额必须大于0",
        '"abc"': "订单金额必须是数字",
        '"5"': "订单金额必须是数字",
        "null": "订单金额不能为空",
        "1e40": "订单金额超出范围",
    }
    for amount, message in refused.items():
        answer = server.post_order(
            content=f'{{"userId":"u","productName":"p","amount":{amount}}}'.encode()
        )
        assert answer.status_code == 400, amount
        assert answer.json() == {
            "error": "validation_failed",
            "message": "order request is invalid",
            "violations": [{"field": "amount", "message": message}],
        }, amount
    for amount in ["1", "1.00", "99999999999999999999999999999999.99", "1000000"]:
        answer = server.post_order(
            content=f'{{"userId":"u","productName":"p","amount":{amount}}}'.encode()
        )
        assert answer.status_code == 200, amount
        assert f'"amount":{amount},' in answer.text
    everything = server.post_order({"userId": "  ", "productName": ""})
    assert everything.status_code == 400
    assert everything.json()["violations"] == [
        {"field": "userId", "message": "用户ID不能为空"},
        {"field": "productName", "message": "商品名称不能为空"},
        {"field": "amount", "message": "订单金额不能为空"},
    ]
    assert _count(server.runtime, orders_table) == 4, "only the accepted ones were stored"


def test_malformed_requests_get_clear_answers(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    broken = server.post_order(content=b'{"userId": "u",')
    assert broken.status_code == 400
    assert broken.json()["error"] == "malformed_json"
    assert "line 1 column 16" in broken.json()["message"]
    array = server.post_order(content=b"[]")
    assert (array.status_code, array.json()["error"]) == (400, "malformed_json")
    text_body = server.client.post("/orders", content=b"{}", headers={"Content-Type": "text/plain"})
    assert (text_body.status_code, text_body.json()["error"]) == (415, "unsupported_media_type")
    huge = server.post_order(content=b'{"userId":"' + b"x" * 70_000 + b'"}')
    assert (huge.status_code, huge.json()["error"]) == (413, "payload_too_large")
    assert _count(server.runtime, orders_table) == 0


def test_failing_sync_listener_gives_500_and_stores_nothing(
    database_url: str, start_server
) -> None:  # type: ignore[no-untyped-def]
    sender = RecordingSender()
    after_commit_calls: list[str] = []

    def fail(event: OrderCreatedEvent) -> None:
        raise RuntimeError("inventory check failed")

    def subscribe(runtime) -> None:  # type: ignore[no-untyped-def]
        runtime.bus.subscribe(OrderCreatedEvent, fail, name="inventory", priority=1)
        runtime.bus.subscribe(
            OrderCreatedEvent,
            lambda event: after_commit_calls.append(event.order_id),
            name="extra-after-commit",
            phase=TransactionPhase.AFTER_COMMIT,
        )

    server = start_server(make_settings(database_url), sender=sender, before_start=subscribe)
    answer = server.post_order({"userId": "u", "productName": "p", "amount": 5})
    assert answer.status_code == 500
    assert answer.json()["error"] == "order_not_created"
    assert "inventory check failed" not in answer.text
    runtime = server.runtime
    runtime.executor.shutdown(timeout_seconds=5)
    for table in (orders_table, order_audit_log_table, order_sync_outbox_table):
        assert _count(runtime, table) == 0, table.name
    assert after_commit_calls == []
    assert sender.texts == [], "listeners after the failing one never ran"
    metrics = server.client.get("/metrics").text
    assert _metric(metrics, 'orders_listener_failures_total{listener="inventory"}') == 1
    assert _metric(metrics, "orders_created_total") == 0


def test_failing_async_listener_still_gives_200(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    def fail(event: OrderCreatedEvent) -> None:
        raise RuntimeError("mail server down")

    def subscribe(runtime) -> None:  # type: ignore[no-untyped-def]
        runtime.bus.subscribe(OrderCreatedEvent, fail, name="mailer", asynchronous=True)

    server = start_server(make_settings(database_url), before_start=subscribe)
    for _ in range(3):
        assert (
            server.post_order({"userId": "u", "productName": "p", "amount": 5}).status_code == 200
        )
    wait_until(lambda: server.runtime.metrics.listener_failures("mailer") == 3)
    metrics = server.client.get("/metrics").text
    assert _metric(metrics, 'orders_listener_failures_total{listener="mailer"}') == 3
    assert _metric(metrics, 'orders_events_published_total{event="OrderCreatedEvent"}') == 3
    assert _count(server.runtime, orders_table) == 3


def test_sync_listeners_run_in_order_on_the_request_thread(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    calls: list[tuple[str, str]] = []
    async_threads: list[str] = []

    def record(name: str):  # type: ignore[no-untyped-def]
        return lambda event: calls.append((name, threading.current_thread().name))

    def subscribe(runtime) -> None:  # type: ignore[no-untyped-def]
        runtime.bus.subscribe(OrderCreatedEvent, record("late"), name="late", priority=20)
        runtime.bus.subscribe(OrderCreatedEvent, record("early"), name="early", priority=10)
        runtime.bus.subscribe(
            OrderCreatedEvent,
            lambda event: async_threads.append(threading.current_thread().name),
            name="async-probe",
            asynchronous=True,
        )

    server = start_server(make_settings(database_url), before_start=subscribe)
    assert server.post_order({"userId": "u", "productName": "p", "amount": 5}).status_code == 200
    assert [name for name, _ in calls] == ["early", "late"]
    assert calls[0][1] == calls[1][1], "both on the one request thread"
    assert not calls[0][1].startswith("event-task-")
    wait_until(lambda: len(async_threads) == 1)
    assert async_threads[0].startswith("event-task-")


def test_thread_name_prefix_comes_from_settings(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    sender = RecordingSender()
    settings = make_settings(database_url, **{"event.async.thread-name-prefix": "orders-ev-"})
    server = start_server(settings, sender=sender)
    assert server.post_order({"userId": "u", "productName": "p", "amount": 5}).status_code == 200
    wait_until(lambda: len(sender.threads) == 1)
    assert re.fullmatch(r"orders-ev-\d+", sender.threads[0])


def test_saturated_pool_counts_rejections_and_responses_stay_200(
    database_url: str, start_server
) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    blocked = threading.Semaphore(0)

    def block(event: OrderCreatedEvent) -> None:
        blocked.release()
        release.wait(30)

    def subscribe(runtime) -> None:  # type: ignore[no-untyped-def]
        runtime.bus.subscribe(OrderCreatedEvent, block, name="blocking", asynchronous=True)

    settings = make_settings(
        database_url,
        **{
            "event.async.core-pool-size": 1,
            "event.async.max-pool-size": 2,
            "event.async.queue-capacity": 2,
            "orders.listeners.notification.enabled": False,
            "orders.listeners.after-commit-sync.enabled": False,
        },
    )
    server = start_server(settings, before_start=subscribe)
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as clients:
            answers = list(
                clients.map(
                    lambda number: server.post_order(
                        {"userId": f"u{number}", "productName": "p", "amount": 5}
                    ),
                    range(12),
                )
            )
        elapsed = time.monotonic() - started
        assert [answer.status_code for answer in answers] == [200] * 12
        assert elapsed < 10, "requests never waited for the blocked listener"
        # 2 threads run, 2 tasks queue, the other 8 are rejected.
        assert server.runtime.metrics.task_rejections("blocking") == 8
        metrics = server.client.get("/metrics").text
        assert _metric(metrics, 'orders_event_task_rejections_total{listener="blocking"}') == 8
        assert (
            _metric(metrics, 'orders_event_executor_queue_size{executor="eventTaskExecutor"}') == 2
        )
        assert _count(server.runtime, orders_table) == 12
    finally:
        release.set()


def test_graceful_shutdown_runs_queued_work(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    finished: list[str] = []

    def slow(event: OrderCreatedEvent) -> None:
        time.sleep(0.2)
        finished.append(event.order_id)

    def subscribe(runtime) -> None:  # type: ignore[no-untyped-def]
        runtime.bus.subscribe(OrderCreatedEvent, slow, name="slow", asynchronous=True)

    settings = make_settings(
        database_url,
        **{"event.async.core-pool-size": 1, "event.async.max-pool-size": 1},
    )
    server = start_server(settings, before_start=subscribe)
    for _ in range(5):
        assert (
            server.post_order({"userId": "u", "productName": "p", "amount": 5}).status_code == 200
        )
    assert server.runtime.executor.stats().queue_size > 0, "work is still queued"
    server.stop()
    assert len(finished) == 5
    assert _count(server.runtime, order_sync_outbox_table) == 5


def test_health(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    answer = server.client.get("/health")
    assert answer.status_code == 200
    assert answer.json() == {"status": "UP", "database": "UP", "eventTaskExecutor": "UP"}
    server.runtime.executor.shutdown(timeout_seconds=1)
    assert server.client.get("/health").status_code == 503


def test_text_that_cannot_be_stored_is_a_400_not_a_500(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    cases = {
        # A lone surrogate: valid JSON escape, no UTF-8 form.
        b'{"userId":"u","productName":"\\ud800","amount":5}': (
            "productName",
            "商品名称包含无效字符",
        ),
        b'{"userId":"\\udfff x","productName":"p","amount":5}': ("userId", "用户ID包含无效字符"),
        # NUL: PostgreSQL refuses it in text columns.
        b'{"userId":"u","productName":"a\\u0000b","amount":5}': (
            "productName",
            "商品名称包含无效字符",
        ),
        b'{"userId":"u\\u0000","productName":"p","amount":5}': ("userId", "用户ID包含无效字符"),
    }
    for body, (field, message) in cases.items():
        answer = server.post_order(content=body)
        assert answer.status_code == 400, body
        assert answer.json()["violations"] == [{"field": field, "message": message}], body
    # A surrogate pair is an ordinary character (U+1F600) and is accepted.
    emoji = server.post_order(content=b'{"userId":"u","productName":"\\ud83d\\ude00","amount":5}')
    assert emoji.status_code == 200
    assert emoji.json()["productName"] == "\U0001f600"
    assert _count(server.runtime, orders_table) == 1


def test_product_name_has_a_length_limit(database_url: str, start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server(make_settings(database_url))
    at_limit = server.post_order({"userId": "u", "productName": "键" * 200, "amount": 5})
    assert at_limit.status_code == 200
    assert at_limit.json()["productName"] == "键" * 200
    beyond = server.post_order({"userId": "u", "productName": "键" * 201, "amount": 5})
    assert beyond.status_code == 400
    assert beyond.json()["violations"] == [
        {"field": "productName", "message": "商品名称不能超过200个字符"}
    ]
    assert _count(server.runtime, orders_table) == 1
