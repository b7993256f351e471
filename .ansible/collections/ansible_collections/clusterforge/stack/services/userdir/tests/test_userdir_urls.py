"""URL rules 1 to 4, by example and by property."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterforge_userdir import (
    StatusStyle,
    UrlTemplateError,
    encode_query,
    expand_path,
    query_pairs,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
values = st.text(min_size=1, max_size=20).filter(lambda text: text.strip() != "")


@given(st.dictionaries(names, values, max_size=5))
def test_query_round_trips_through_url_encoding(parameters: dict[str, str]) -> None:
    encoded = encode_query(parameters)
    assert parse_qsl(encoded, keep_blank_values=True) == list(parameters.items())
    assert " " not in encoded and "+" not in encoded.replace("%2B", "")


@given(st.dictionaries(names, st.sampled_from([None, "", " ", "\t\n"]), max_size=5))
def test_none_and_blank_values_are_left_out(parameters: dict[str, str | None]) -> None:
    assert encode_query(parameters) == ""


@given(st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=5))
def test_multi_valued_status_forms(statuses: list[int]) -> None:
    repeated = query_pairs({"status": statuses}, status_style=StatusStyle.REPEATED)
    assert repeated == [("status", str(s)) for s in statuses]
    joined = query_pairs({"status": statuses}, status_style=StatusStyle.COMMA_JOINED)
    assert joined == [("status", ",".join(str(s) for s in statuses))]


@given(st.text(min_size=1, max_size=30).filter(lambda text: text not in {".", ".."}))
def test_single_path_variable_is_one_encoded_segment(value: str) -> None:
    path = expand_path("/mock-api/users/{id}", value)
    segment = path.removeprefix("/mock-api/users/")
    assert "/" not in segment and "?" not in segment and "#" not in segment
    assert segment not in {".", ".."}
    assert unquote(segment) == value


@pytest.mark.parametrize("value", [".", ".."])
def test_dot_segments_are_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(UrlTemplateError, match=r"'orgId'.*dot segment"):
        expand_path("/mock-api/orgs/{orgId}/users/{userId}", named={"orgId": value, "userId": 1})


def test_several_path_variables_by_name_in_any_order() -> None:
    template = "/mock-api/orgs/{orgId}/users/{userId}"
    assert expand_path(template, named={"userId": 2, "orgId": 1}) == "/mock-api/orgs/1/users/2"


@pytest.mark.parametrize(
    ("positional", "named"),
    [
        ((1, 2), None),
        ((1,), None),
        ((), {"orgId": 1}),
        ((), {"orgId": 1, "userId": 2, "extra": 3}),
        ((), {"orgId": 1, "userid": 2}),
        ((), {"orgId": 1, "userId": None}),
    ],
)
def test_mismatched_path_variables_raise(
    positional: tuple[int, ...], named: dict[str, int | None] | None
) -> None:
    with pytest.raises(UrlTemplateError):
        expand_path("/mock-api/orgs/{orgId}/users/{userId}", *positional, named=named)
