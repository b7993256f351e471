"""The defects an audit of the service run on its own found (issue 40), one test each.

Each test reproduces the audit's input over a real socket or a real process and checks
the answer the docs promise: a 400 in the service's one error shape rather than a 500,
one line and exit 2 rather than a traceback, a 404 rather than a redirect.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge_orders.errors import InvalidOrderRequestError
from clusterforge_orders.models import (
    AMOUNT_OUT_OF_RANGE,
    PRODUCT_NAME_NOT_STRING,
    USER_ID_NOT_STRING,
    parse_order_create_request,
)
from orders_testing import RunningServer, ServerFactory, make_settings

SCRIPT = Path(sys.executable).with_name("clusterforge-orders")
ERROR_KEYS = {"error", "message", "violations"}

# Exponents past what Decimal holds: the audit's three forms, and a few more of the kind.
OVERFLOWING_NUMBERS = [
    "1e9999999999999999999",
    "-1e9999999999999999999",
    "1e-9999999999999999999",
    "1E+99999999999999999999999",
    "9.5e999999999999999999",
    "-0.0e-99999999999999999999",
]


@pytest.fixture
def server(tmp_path: Path, start_server: ServerFactory) -> RunningServer:
    return start_server(make_settings(f"sqlite:///{tmp_path}/orders.db"))


@pytest.mark.parametrize("number", OVERFLOWING_NUMBERS)
def test_an_overflowing_amount_is_out_of_range_not_a_crash(number: str) -> None:
    body = f'{{"userId":"u","productName":"p","amount":{number}}}'.encode()
    with pytest.raises(InvalidOrderRequestError) as refused:
        parse_order_create_request(body)
    assert [(item.field, item.message) for item in refused.value.violations] == [
        ("amount", AMOUNT_OUT_OF_RANGE)
    ]


def test_an_overflowing_number_in_a_text_field_is_a_type_violation() -> None:
    body = b'{"userId":1e9999999999999999999,"productName":-1e99999999999999999999,"amount":2}'
    with pytest.raises(InvalidOrderRequestError) as refused:
        parse_order_create_request(body)
    assert [(item.field, item.message) for item in refused.value.violations] == [
        ("userId", USER_ID_NOT_STRING),
        ("productName", PRODUCT_NAME_NOT_STRING),
    ]


@pytest.mark.parametrize("number", OVERFLOWING_NUMBERS[:3])
def test_an_overflowing_amount_is_answered_400_over_http(
    server: RunningServer, number: str
) -> None:
    answer = server.post_order(
        content=f'{{"userId":"u","productName":"p","amount":{number}}}'.encode()
    )
    assert answer.status_code == 400, answer.text
    document = answer.json()
    assert set(document) == ERROR_KEYS
    assert document["violations"] == [{"field": "amount", "message": AMOUNT_OUT_OF_RANGE}]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_only_utf8_json_is_taken(server: RunningServer, encoding: str) -> None:
    body = json.dumps({"userId": "u", "productName": "p", "amount": 2}).encode(encoding)
    answer = server.post_order(content=body)
    assert answer.status_code in (400, 415), answer.text
    assert set(answer.json()) == ERROR_KEYS


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nowhere", 404),
        ("POST", "/orders/", 404),
        ("GET", "/health/", 404),
        ("GET", "/orders", 405),
        ("DELETE", "/health", 405),
    ],
)
def test_every_error_has_the_one_shape(
    server: RunningServer, method: str, path: str, status: int
) -> None:
    answer = server.client.request(method, path, headers={"Host": "attacker.example"})
    assert answer.status_code == status, answer.text
    assert "location" not in answer.headers
    document = answer.json()
    assert set(document) == ERROR_KEYS
    assert document["violations"] == []
    assert isinstance(document["error"], str) and document["error"]


def _start_with(tmp_path: Path, database_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--port", "1", "--database-url", database_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def _not_a_database(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"this is plain text, not an SQLite database\n" * 200)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///:memory:", "orders.database-url"),
        ("sqlite:///", "orders.database-url"),
        ("sqlite://", "orders.database-url"),
        (None, "orders.database-url"),
    ],
)
def test_a_database_url_without_a_usable_file_is_one_line_and_exit_2(
    tmp_path: Path, url: str | None, expected: str
) -> None:
    result = _start_with(tmp_path, url or f"sqlite:///{_not_a_database(tmp_path)}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("clusterforge-orders: ")
    assert expected in lines[0]


def test_a_file_that_is_a_database_of_another_kind_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE unrelated (x)")
    connection.close()
    path.write_bytes(path.read_bytes()[:100] + b"\xff" * 4000)
    result = _start_with(tmp_path, f"sqlite:///{path}")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
