"""Wire models: camelCase names and local date-times without zone or fraction."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from clusterforge_userdir import (
    ThirdUserResponse,
    UserResponse,
    UserSearchRequest,
)


@given(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)))
def test_local_date_time_round_trips_as_yyyy_mm_dd_t_hh_mm_ss(moment: datetime) -> None:
    moment = moment.replace(microsecond=0)
    user = UserResponse(id=1, username="u", status=1, created_at=moment)
    wire = user.to_wire()
    assert wire["createdAt"] == moment.strftime("%Y-%m-%dT%H:%M:%S")
    assert UserResponse.model_validate(wire) == user


def test_wire_names_are_camel_case_and_nulls_are_sent() -> None:
    request = UserSearchRequest(keyword="k", status_list=[1], include_locked=True)
    assert request.to_wire() == {
        "keyword": "k",
        "statusList": [1],
        "startTime": None,
        "endTime": None,
        "includeLocked": True,
    }


@pytest.mark.parametrize(
    "value", ["2024-05-01T08:30:00Z", "2024-05-01T08:30:00+08:00", "2024-05-01 08:30", "2024-05-01"]
)
def test_zoned_or_other_formats_are_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        UserSearchRequest.model_validate({"startTime": value})


def test_third_user_response_is_snake_case() -> None:
    third = ThirdUserResponse.model_validate_json(
        '{"user_id": 9007199254740993, "user_name": "x", "created_at": "2024-05-01T08:30:00"}'
    )
    assert third.user_id == 9007199254740993
    assert third.model_dump(mode="json") == {
        "user_id": 9007199254740993,
        "user_name": "x",
        "created_at": "2024-05-01T08:30:00",
    }
