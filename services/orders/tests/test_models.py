"""Validation, exact decimals and the shapes of response and event, without a server."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime
from decimal import Decimal

import pytest

from clusterforge_orders import (
    InvalidOrderRequestError,
    MalformedRequestBodyError,
    OrderCreatedEvent,
    OrderCreateResponse,
    parse_order_create_request,
)
from clusterforge_orders.models import CREATE_TIME_FORMAT, format_create_time, new_order_id


def _violations(body: bytes) -> list[tuple[str, str]]:
    with pytest.raises(InvalidOrderRequestError) as caught:
        parse_order_create_request(body)
    return [(item.field, item.message) for item in caught.value.violations]


def test_empty_object_reports_every_field_at_once() -> None:
    assert _violations(b"{}") == [
        ("userId", "用户ID不能为空"),
        ("productName", "商品名称不能为空"),
        ("amount", "订单金额不能为空"),
    ]


@pytest.mark.parametrize("blank", ['""', '"   "', '"\\t\\n"', "null"])
def test_blank_user_id_and_product_name(blank: str) -> None:
    body = f'{{"userId": {blank}, "productName": {blank}, "amount": 5}}'.encode()
    assert _violations(body) == [("userId", "用户ID不能为空"), ("productName", "商品名称不能为空")]


@pytest.mark.parametrize(
    ("amount_json", "message"),
    [
        ("0", "订单金额必须大于0"),
        ("0.99", "订单金额必须大于0"),
        ("0.999999999999999999999", "订单金额必须大于0"),
        ("-1", "订单金额必须大于0"),
        ("-12345678901234567.89", "订单金额必须大于0"),
        ("null", "订单金额不能为空"),
        ('"abc"', "订单金额必须是数字"),
        ('"12.5"', "订单金额必须是数字"),
        ("true", "订单金额必须是数字"),
        ("[1]", "订单金额必须是数字"),
        ("1e40", "订单金额超出范围"),
        ("1." + "0" * 33, "订单金额超出范围"),
    ],
)
def test_refused_amounts(amount_json: str, message: str) -> None:
    body = f'{{"userId": "u", "productName": "p", "amount": {amount_json}}}'.encode()
    assert _violations(body) == [("amount", message)]


@pytest.mark.parametrize(
    "amount_json",
    [
        "1",
        "1.00",
        "1.0000000001",
        "19.99",
        "12345678901234567.89",
        "99999999999999999999999999999999",
    ],
)
def test_accepted_amounts_keep_every_digit(amount_json: str) -> None:
    body = f'{{"userId": "u", "productName": "p", "amount": {amount_json}}}'.encode()
    request = parse_order_create_request(body)
    assert request.amount == Decimal(amount_json)
    assert str(request.amount) == amount_json


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   ",
        b"{",
        b'{"userId": }',
        b"NaN",
        b'{"amount": NaN}',
        b'{"amount": Infinity}',
        b"\xff",
    ],
)
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises(MalformedRequestBodyError) as caught:
        parse_order_create_request(body)
    assert "JSON" in caught.value.message or "UTF-8" in caught.value.message


@pytest.mark.parametrize(("body", "kind"), [(b"[]", "array"), (b'"x"', "string"), (b"3", "number")])
def test_json_that_is_not_an_object(body: bytes, kind: str) -> None:
    with pytest.raises(
        MalformedRequestBodyError, match=f"must be a JSON object, not a JSON {kind}"
    ):
        parse_order_create_request(body)


def test_deep_nesting_is_malformed_not_a_crash() -> None:
    with pytest.raises(MalformedRequestBodyError):
        parse_order_create_request(b"[" * 100_000)


def test_response_json_echoes_the_amount_digit_for_digit() -> None:
    response = OrderCreateResponse(
        order_id=new_order_id(),
        user_id="用户1",
        product_name='book "A"',
        amount=Decimal("12345678901234567.89"),
        create_time=datetime(2024, 3, 5, 7, 8, 9),
    )
    raw = response.to_json().decode()
    assert '"amount":12345678901234567.89,' in raw
    assert '"createTime":"2024-03-05T07:08:09"' in raw
    document = json.loads(raw, parse_float=Decimal)
    assert document["amount"] == Decimal("12345678901234567.89")
    assert document["userId"] == "用户1"
    assert document["productName"] == 'book "A"'


def test_order_id_is_ord_and_32_lowercase_hex() -> None:
    identifiers = {new_order_id() for _ in range(100)}
    assert len(identifiers) == 100
    assert all(re.fullmatch(r"ORD-[0-9a-f]{32}", item) for item in identifiers)


def test_event_is_an_immutable_snapshot_of_the_response() -> None:
    response = OrderCreateResponse(
        order_id=new_order_id(),
        user_id="u",
        product_name="p",
        amount=Decimal("1.00"),
        create_time=datetime(2024, 1, 1, 0, 0, 0),
    )
    event = OrderCreatedEvent.from_response(response)
    assert dataclasses.astuple(event) == dataclasses.astuple(response)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.amount = Decimal(2)  # type: ignore[misc]
    assert OrderCreatedEvent.__name__.endswith("edEvent")


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 23, 7, 0, 0),
        datetime(2026, 11, 23, 7, 0, 0, 999999),
        datetime(1999, 1, 2, 3, 4, 5, 1),
    ],
)
def test_create_time_is_written_as_the_format_says(moment: datetime) -> None:
    assert format_create_time(moment) == moment.strftime(CREATE_TIME_FORMAT)
