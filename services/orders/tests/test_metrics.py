"""GET /metrics through prometheus_client: the service's counters, the kit's request
metrics, and the age of the oldest undelivered order."""

from __future__ import annotations

import time
from pathlib import Path

from orders_testing import ServerFactory, make_settings
from orders_testing import metric_value as _metric


def test_the_oldest_undelivered_order_has_an_age(
    tmp_path: Path, start_server: ServerFactory
) -> None:
    # No delivery target: every order's outbox row waits, as it would in an outage.
    server = start_server(make_settings(f"sqlite:///{tmp_path}/orders.db"))
    before = server.client.get("/metrics")
    assert before.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert _metric(before.text, "orders_outbox_oldest_undelivered_age_seconds") == 0
    assert server.post_order({"userId": "u", "productName": "p", "amount": 2}).status_code == 200
    time.sleep(1.2)
    text = server.client.get("/metrics").text
    assert _metric(text, "orders_outbox_undelivered") == 1
    assert _metric(text, "orders_outbox_oldest_undelivered_age_seconds") >= 1
    assert "# TYPE orders_outbox_oldest_undelivered_age_seconds gauge" in text


def test_requests_are_counted_by_status_and_timed(
    tmp_path: Path, start_server: ServerFactory
) -> None:
    server = start_server(make_settings(f"sqlite:///{tmp_path}/orders.db"))
    server.post_order({"userId": "u", "productName": "p", "amount": 2})
    server.post_order({"userId": "", "productName": "p", "amount": 2})
    server.client.get("/nowhere")
    text = server.client.get("/metrics").text
    assert _metric(text, 'orders_http_requests_total{method="POST",status="200"}') == 1
    assert _metric(text, 'orders_http_requests_total{method="POST",status="400"}') == 1
    assert _metric(text, 'orders_http_requests_total{method="GET",status="404"}') == 1
    assert _metric(text, 'orders_http_request_duration_seconds_count{method="POST"}') == 2
    assert _metric(text, "orders_created_total") == 1
