"""Wire models of the user directory: camelCase JSON, local date-times without zone.

Separate classes for create, update, search and the public user, as the spec names them.
The same classes serve the server (validation, OpenAPI) and the client (decoding).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import IntEnum
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

LOCAL_DATE_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
LOCAL_DATE_TIME_PATTERN = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$"
)

USERNAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
USERNAME_MAX_LENGTH = 64
NICKNAME_MAX_LENGTH = 64
MOBILE_PATTERN = r"^\+?[0-9]{5,15}$"
KEYWORD_MAX_LENGTH = 64
STATUS_LIST_MAX_ITEMS = 10


class UserStatus(IntEnum):
    """Meaning of ``status``. Every move between the three values is allowed.

    DISABLED: the account is switched off and is left out of nothing but a status filter.
    ACTIVE: the default for a new user.
    LOCKED: temporarily blocked; left out of search results unless ``includeLocked``.
    """

    DISABLED = 0
    ACTIVE = 1
    LOCKED = 2


def format_local_date_time(value: datetime) -> str:
    return value.strftime(LOCAL_DATE_TIME_FORMAT)


_LOCAL_DATE_TIME_SHAPE = re.compile(LOCAL_DATE_TIME_PATTERN)
_NOT_A_LOCAL_DATE_TIME = (
    "must be a string in the form yyyy-MM-ddTHH:mm:ss with a real calendar date "
    "(no zone, no fraction), e.g. 2024-05-01T08:30:00"
)


def _parse_local_date_time(value: Any) -> Any:
    # Only the documented string form: lax parsing took the numbers 0 and 1.5e9 as Unix
    # times and strptime alone takes "2024-5-1T8:30:00". The message never repeats the
    # input: it may hold a lone surrogate, which no UTF-8 answer can carry.
    if isinstance(value, str):
        if not _LOCAL_DATE_TIME_SHAPE.fullmatch(value):
            raise ValueError(_NOT_A_LOCAL_DATE_TIME)
        try:
            return datetime.strptime(value, LOCAL_DATE_TIME_FORMAT)
        except ValueError:
            raise ValueError(_NOT_A_LOCAL_DATE_TIME) from None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ValueError("local date-times carry no zone; use yyyy-MM-ddTHH:mm:ss")
        return value
    raise ValueError(_NOT_A_LOCAL_DATE_TIME)


LocalDateTime = Annotated[
    datetime,
    BeforeValidator(_parse_local_date_time),
    PlainSerializer(format_local_date_time, return_type=str),
    WithJsonSchema(
        {"type": "string", "pattern": LOCAL_DATE_TIME_PATTERN, "example": "2024-05-01T08:30:00"}
    ),
]
"""A local date-time written ``yyyy-MM-ddTHH:mm:ss`` (no fraction, no zone)."""


def refuse_unstorable_text(value: str) -> str:
    """Refuse text a database cannot store, so that it gets 400 instead of a 500.

    PostgreSQL refuses the NUL character in any text value, and neither backend can
    encode a lone surrogate (half of a UTF-16 pair) as UTF-8. The JSON parser already
    refuses lone surrogates in bodies; this also covers text from any other source.
    """
    if "\x00" in value:
        raise ValueError("must not contain the NUL character (U+0000); remove it")
    if any("\ud800" <= character <= "\udfff" for character in value):
        raise ValueError("must not contain a lone surrogate (U+D800 to U+DFFF); send valid UTF-8")
    return value


# Documents the NUL rule in the OpenAPI document, so that schema-driven clients (and
# tests) know it; lone surrogates are no valid JSON Schema string to begin with.
NO_NUL_PATTERN = r"^[^\u0000]*$"

StorableText = Annotated[
    str,
    AfterValidator(refuse_unstorable_text),
    Field(json_schema_extra={"pattern": NO_NUL_PATTERN}),
]
"""Free text the server stores or compares in a query (nickname, keyword)."""

Username = Annotated[str, StringConstraints(pattern=USERNAME_PATTERN)]
Nickname = Annotated[StorableText, StringConstraints(max_length=NICKNAME_MAX_LENGTH)]
Keyword = Annotated[StorableText, StringConstraints(max_length=KEYWORD_MAX_LENGTH)]
Mobile = Annotated[str, StringConstraints(pattern=MOBILE_PATTERN)]


def _refuse_strings_and_booleans(value: Any) -> Any:
    # Lax parsing took "1" and true as 1. A JSON number with no fraction (1.0) is the
    # integer 1 to JSON Schema, and so to the OpenAPI document, so it stays accepted.
    if isinstance(value, str | bool):
        raise ValueError("must be a JSON integer (0, 1 or 2), not a string or a boolean")
    return value


StatusValue = Annotated[
    int,
    Field(ge=0, le=2, description="0 disabled, 1 active, 2 locked"),
    BeforeValidator(_refuse_strings_and_booleans),
]


class CamelModel(BaseModel):
    """camelCase on the wire, snake_case in Python; either name is accepted on input."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class UserResponse(CamelModel):
    id: int
    username: str
    nickname: str | None = None
    mobile: str | None = None
    status: int
    created_at: LocalDateTime


class UserCreateRequest(CamelModel):
    """What a caller sends to create a user; the server validates it as :class:`NewUserBody`."""

    username: str | None = None
    nickname: str | None = None
    mobile: str | None = None


class UserUpdateRequest(CamelModel):
    """Fields left null keep their value."""

    nickname: str | None = None
    mobile: str | None = None
    status: int | None = None


class UserSearchRequest(CamelModel):
    keyword: str | None = None
    status_list: list[int] | None = None
    start_time: LocalDateTime | None = None
    end_time: LocalDateTime | None = None
    include_locked: bool | None = None


class NewUserBody(UserCreateRequest):
    """The server's rules for a create request: username required, formats checked."""

    model_config = ConfigDict(extra="ignore")

    username: Username
    nickname: Nickname | None = None
    mobile: Mobile | None = None


class UserChangesBody(UserUpdateRequest):
    nickname: Nickname | None = None
    mobile: Mobile | None = None
    status: StatusValue | None = None


class UserSearchBody(UserSearchRequest):
    keyword: Keyword | None = None
    status_list: Annotated[list[StatusValue], Field(max_length=STATUS_LIST_MAX_ITEMS)] | None = None
    # Only JSON true and false: lax parsing took "yes", "on" and 1 as true.
    include_locked: Annotated[bool, Field(strict=True)] | None = None


class ThirdUserResponse(BaseModel):
    """The snake_case variant some third-party services answer with."""

    user_id: int
    user_name: str | None = None
    created_at: LocalDateTime | None = None


T = TypeVar("T")


class ApiResult(BaseModel, Generic[T]):
    code: int
    message: str | None = None
    data: T | None = None


class PageResponse(CamelModel, Generic[T]):
    records: list[T] = Field(default_factory=list)
    total: int = 0
    page_num: int = 1
    page_size: int = 10


class ErrorBody(BaseModel):
    """Body of every 4xx/5xx answer; ``code`` equals the HTTP status."""

    code: int
    message: str
