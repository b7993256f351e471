"""The request (a pydantic model with the spec's rules), the response and the event.

``amount`` is a :class:`~decimal.Decimal` from the bytes of the body to the bytes of the
response: the body is parsed with ``parse_float=Decimal`` and the response renders the
number itself, so no value ever passes through a binary float.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from clusterforge_service_kit import NotUtf8BodyError, utf8_json_text
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .errors import FieldViolation, InvalidOrderRequestError, MalformedRequestBodyError

USER_ID_BLANK = "用户ID不能为空"
PRODUCT_NAME_BLANK = "商品名称不能为空"
AMOUNT_MISSING = "订单金额不能为空"
AMOUNT_BELOW_MINIMUM = "订单金额必须大于0"
# Not in the spec; our wording for the cases the spec does not show.
USER_ID_NOT_STRING = "用户ID必须是字符串"
PRODUCT_NAME_NOT_STRING = "商品名称必须是字符串"
AMOUNT_NOT_NUMBER = "订单金额必须是数字"
AMOUNT_OUT_OF_RANGE = "订单金额超出范围"
USER_ID_INVALID_CHARACTERS = "用户ID包含无效字符"
PRODUCT_NAME_INVALID_CHARACTERS = "商品名称包含无效字符"
PRODUCT_NAME_TOO_LONG = "商品名称不能超过200个字符"
USER_ID_TOO_LONG = "用户ID不能超过200个字符"

# In characters (code points). Long enough for any real product title or user id, short
# enough that a client cannot store, index, log and notify kilobytes per order.
MAX_PRODUCT_NAME_CHARS = 200
MAX_USER_ID_CHARS = 200

MINIMUM_AMOUNT = Decimal(1)
# Bounds the digits a client can make us store and echo (the spec sets no maximum).
MAX_INTEGER_DIGITS = 32
MAX_FRACTION_DIGITS = 32

CREATE_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# userId and productName: something other than white space, and no NUL anywhere.
TEXT_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


@dataclass(frozen=True, slots=True)
class OrderCreateResponse:
    """The created order as the client sees it."""

    order_id: str
    user_id: str
    product_name: str
    amount: Decimal
    create_time: datetime

    def to_json(self) -> bytes:
        return (
            "{"
            f'"orderId":{json_string(self.order_id)},'
            f'"userId":{json_string(self.user_id)},'
            f'"productName":{json_string(self.product_name)},'
            f'"amount":{decimal_to_json_number(self.amount)},'
            f'"createTime":{json_string(format_create_time(self.create_time))}'
            "}"
        ).encode()


@dataclass(frozen=True, slots=True)
class OrderCreatedEvent:
    """Published once an order is built: a snapshot of the response's five fields.

    It holds values, never a stored entity, so a listener cannot reach back into the
    publisher's state. Frozen, so listeners on several threads can share it.
    """

    order_id: str
    user_id: str
    product_name: str
    amount: Decimal
    create_time: datetime

    @classmethod
    def from_response(cls, response: OrderCreateResponse) -> OrderCreatedEvent:
        return cls(
            order_id=response.order_id,
            user_id=response.user_id,
            product_name=response.product_name,
            amount=response.amount,
            create_time=response.create_time,
        )


def new_order_id() -> str:
    return "ORD-" + uuid.uuid4().hex


def format_create_time(moment: datetime) -> str:
    """``moment`` as ``CREATE_TIME_FORMAT`` writes it (a local date-time, to the second).

    It runs up to three times per order (the response, the notification, the indexed
    document); ``isoformat`` writes the same text in about a third of ``strftime``'s time.
    """
    if moment.tzinfo is None:
        return moment.isoformat(timespec="seconds")
    return moment.strftime(CREATE_TIME_FORMAT)


def decimal_to_json_number(value: Decimal) -> str:
    """The JSON text of ``value``, digit for digit.

    ``str(Decimal)`` keeps the scale the client sent (``1.00`` stays ``1.00``) and its
    exponent form (``1E+5``) is valid JSON; NaN and infinities never get this far.
    """
    if not value.is_finite():
        raise ValueError(f"{value} has no JSON representation")
    return str(value)


# json.dumps with an option builds a new encoder per call, ten times the cost of a
# string's encoding itself; the order path encodes up to six strings per order.
_encode_json_text = json.JSONEncoder(ensure_ascii=False).encode


def json_string(value: str) -> str:
    """``value`` as a JSON string literal, non-ASCII characters kept as they are."""
    return _encode_json_text(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class OverflowingNumber:
    """A JSON number whose exponent no Decimal holds (``1e9999999999999999999``).

    Valid JSON, so it is no reason to refuse the whole body: the field it stands in is
    judged like any other (out of range for ``amount``, not a string for a text field).
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _decimal_or_overflow(text: str) -> Decimal | OverflowingNumber:
    try:
        return Decimal(text)
    except InvalidOperation:
        return OverflowingNumber(text)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """Parse ``body`` as a JSON object whose numbers are all Decimals."""
    if not body.strip():
        raise MalformedRequestBodyError("request body is empty; send a JSON object")
    try:
        text = utf8_json_text(body)
        document = json.loads(
            text,
            parse_float=_decimal_or_overflow,
            parse_int=_decimal_or_overflow,
            parse_constant=_reject_constant,
        )
    except NotUtf8BodyError as error:
        raise MalformedRequestBodyError(f"request body: {error}") from error
    except json.JSONDecodeError as error:
        raise MalformedRequestBodyError(
            f"request body is not valid JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from error
    except ValueError as error:
        raise MalformedRequestBodyError(f"request body is not valid JSON: {error}") from error
    except RecursionError as error:
        raise MalformedRequestBodyError(
            "request body is not valid JSON: nested too deeply"
        ) from error
    if not isinstance(document, dict):
        raise MalformedRequestBodyError(
            f"request body must be a JSON object, not a JSON {_json_type_name(document)}"
        )
    return document


def _json_type_name(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Decimal | OverflowingNumber):
        return "number"
    return "null"


def _is_storable(value: str) -> bool:
    """False for a lone surrogate (JSON's ``\\ud800`` decodes to one; it has no UTF-8 form
    and fails every encoder after us) and for NUL (PostgreSQL refuses it in text)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _rule(message: str) -> PydanticCustomError:
    return PydanticCustomError("order_rule", message)


@dataclass(frozen=True, slots=True)
class _TextRules:
    blank: str
    not_string: str
    invalid: str
    too_long: str
    max_chars: int


_TEXT_RULES = {
    "user_id": _TextRules(
        USER_ID_BLANK,
        USER_ID_NOT_STRING,
        USER_ID_INVALID_CHARACTERS,
        USER_ID_TOO_LONG,
        MAX_USER_ID_CHARS,
    ),
    "product_name": _TextRules(
        PRODUCT_NAME_BLANK,
        PRODUCT_NAME_NOT_STRING,
        PRODUCT_NAME_INVALID_CHARACTERS,
        PRODUCT_NAME_TOO_LONG,
        MAX_PRODUCT_NAME_CHARS,
    ),
}


def _checked_text(value: object, rules: _TextRules) -> str:
    if value is None:
        raise _rule(rules.blank)
    if not isinstance(value, str):
        raise _rule(rules.not_string)
    if not value.strip():
        raise _rule(rules.blank)
    if not _is_storable(value):
        raise _rule(rules.invalid)
    if len(value) > rules.max_chars:
        raise _rule(rules.too_long)
    return value


# The body's names, and the model's (Python code builds requests by the latter).
_REQUEST_FIELDS = {"userId": "user_id", "productName": "product_name", "amount": "amount"}


class OrderCreateRequest(BaseModel):
    """``OrderCreateRequest`` of the spec, and its validation rules with the spec's messages.

    Every rule of the field table is a validator here, with the spec's message
    (``用户ID不能为空``, ``商品名称不能为空``, ``订单金额不能为空``,
    ``订单金额必须大于0``) and our own for what the spec does not show; the JSON
    schema of ``POST /orders`` (its OpenAPI request body) is generated from this model.
    Validate a parsed body with :func:`validate_order_create_request`, which reports
    every broken rule at once.
    ``amount`` stays a :class:`~decimal.Decimal`, digit for digit.
    """

    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        extra="ignore",
        title="OrderCreateRequest",
        json_schema_extra={"additionalProperties": True},
    )

    user_id: str = Field(
        alias="userId",
        title="userId",
        description=f"Not blank ({USER_ID_BLANK}), at most {MAX_USER_ID_CHARS} characters, no NUL",
        json_schema_extra={
            "minLength": 1,
            "maxLength": MAX_USER_ID_CHARS,
            "pattern": TEXT_PATTERN,
        },
    )
    product_name: str = Field(
        alias="productName",
        title="productName",
        description=(
            f"Not blank ({PRODUCT_NAME_BLANK}), at most {MAX_PRODUCT_NAME_CHARS} characters, no NUL"
        ),
        json_schema_extra={
            "minLength": 1,
            "maxLength": MAX_PRODUCT_NAME_CHARS,
            "pattern": TEXT_PATTERN,
        },
    )
    amount: Decimal = Field(
        title="amount",
        description=(
            f"Present ({AMOUNT_MISSING}), at least 1 ({AMOUNT_BELOW_MINIMUM}), at most "
            f"{MAX_INTEGER_DIGITS} integer and {MAX_FRACTION_DIGITS} fraction digits"
        ),
        json_schema_extra={"minimum": 1, "exclusiveMaximum": 10**MAX_INTEGER_DIGITS},
    )

    @model_validator(mode="before")
    @classmethod
    def _absent_fields_are_null(cls, data: Any) -> Any:
        # The spec's "not blank" and "present" messages cover a missing field too.
        if not isinstance(data, dict):
            return data
        absent = {
            alias: None
            for alias, name in _REQUEST_FIELDS.items()
            if alias not in data and name not in data
        }
        return absent | data if absent else data

    @field_validator("user_id", "product_name", mode="plain", json_schema_input_type=str)
    @classmethod
    def _text_rules(cls, value: object, info: ValidationInfo) -> str:
        return _checked_text(value, _TEXT_RULES[str(info.field_name)])

    @field_validator("amount", mode="plain", json_schema_input_type=float)
    @classmethod
    def _amount_rules(cls, value: object) -> Decimal:
        if value is None:
            raise _rule(AMOUNT_MISSING)
        if isinstance(value, OverflowingNumber):
            raise _rule(AMOUNT_OUT_OF_RANGE)
        # bool is no number in JSON; a Decimal is what the parser makes of every number.
        if not isinstance(value, Decimal) or not value.is_finite():
            raise _rule(AMOUNT_NOT_NUMBER)
        if value < MINIMUM_AMOUNT:
            raise _rule(AMOUNT_BELOW_MINIMUM)
        fraction_digits = -int(value.as_tuple().exponent)
        if value.adjusted() >= MAX_INTEGER_DIGITS or fraction_digits > MAX_FRACTION_DIGITS:
            raise _rule(AMOUNT_OUT_OF_RANGE)
        return value


def order_request_json_schema() -> dict[str, Any]:
    """The request body's JSON schema, as the OpenAPI document carries it."""
    return OrderCreateRequest.model_json_schema(by_alias=True, mode="validation")


def validate_order_create_request(document: dict[str, Any]) -> OrderCreateRequest:
    """Check every rule and report every broken one at once."""
    try:
        return OrderCreateRequest.model_validate(document)
    except ValidationError as error:
        violations = tuple(
            FieldViolation(str(item["loc"][0]) if item["loc"] else "(body)", item["msg"])
            for item in error.errors(include_url=False, include_input=False)
        )
        raise InvalidOrderRequestError("order request is invalid", violations=violations) from None


def parse_order_create_request(body: bytes) -> OrderCreateRequest:
    return validate_order_create_request(parse_json_object(body))
