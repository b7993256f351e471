"""Schema-driven fuzz: schemathesis generates requests from the served OpenAPI document.

The real server on a real socket, with a bearer token configured: every generated request
(with the token, and schemathesis' own check that a request without it is refused) must
get no 5xx and an answer that matches the status and schema the document declares.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from clusterforge_orders import OrderServiceRuntime
from orders_testing import RecordingSender, RunningServer, make_settings, serve_in_thread

TOKEN = "orders-fuzz-token-0123456789abcdef"
AUTHORIZATION = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    database: Path = tmp_path_factory.mktemp("schemathesis") / "orders.db"
    runtime = OrderServiceRuntime.open(
        make_settings(f"sqlite:///{database}", **{"orders.auth-tokens": [TOKEN]}),
        sender=RecordingSender(),
        executor_await_termination_seconds=5.0,
    )
    running = serve_in_thread(runtime)
    yield running
    running.stop()
    runtime.close()


@pytest.fixture(scope="module")
def served_schema(fuzzed_server: RunningServer) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed_server.base_url}/openapi.json")


OPERATIONS = [("POST", "/orders"), ("GET", "/health"), ("GET", "/metrics")]


# schemathesis' own pytest loader (from_fixture) does not work with this pytest, so each
# operation's strategy is driven by hypothesis directly, one test per operation (as the
# user directory's test does).
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_operation_conforms_to_the_served_schema(
    served_schema: schemathesis.BaseSchema, method: str, path: str
) -> None:
    operation = served_schema[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=60 if method == "POST" else 10,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def conforms(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=AUTHORIZATION)

    conforms()


@pytest.mark.parametrize(
    "body",
    [
        b'{"userId": "\\ud800", "productName": "\\udfff", "amount": 1}',
        b'{"userId": "u", "productName": "p", "amount": 1e999999}',
        b'{"userId": "u", "productName": "p", "amount": -0}',
        b'{"userId": "u", "productName": "p", "amount": 1, "userId": "\\u0000"}',
        b'{"userId": ["u"], "productName": {"a": 1}, "amount": "1"}',
        b"[" * 100_000,
        b"\xff\xfe\x00",
        b'"\\ud800"',
    ],
)
def test_hostile_bodies_and_queries_never_get_a_500(
    fuzzed_server: RunningServer, body: bytes
) -> None:
    answer = fuzzed_server.client.post(
        "/orders?x=%ED%A0%80&%FF=%00",
        content=body,
        headers={**AUTHORIZATION, "Content-Type": "application/json"},
    )
    assert answer.status_code in (400, 413), (answer.status_code, answer.text)
    assert answer.json()["error"]
