"""The lenient and strict success rules of ApiResult, and the errors they raise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterforge_userdir import (
    ApiResult,
    RemoteCallError,
    is_success_lenient,
    is_success_strict,
    unwrap_lenient,
    unwrap_strict,
)


def case_variants(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda flags: "".join(
            c.upper() if f else c.lower() for c, f in zip(word, flags, strict=True)
        )
    )


@given(st.integers(), st.one_of(st.none(), st.text(max_size=10)))
def test_code_200_is_always_success(_: int, message: str | None) -> None:
    result = ApiResult[int](code=200, message=message, data=1)
    assert is_success_lenient(result) and is_success_strict(result)
    assert unwrap_lenient(result) == 1 and unwrap_strict(result) == 1


@given(st.integers().filter(lambda code: code != 200), case_variants("success"))
def test_message_success_in_any_case_is_success(code: int, message: str) -> None:
    assert is_success_lenient(ApiResult[int](code=code, message=message))
    assert is_success_strict(ApiResult[int](code=code, message=message))


@given(
    st.integers().filter(lambda code: code != 200), st.sampled_from(["ok", "OK", "Ok", "操作成功"])
)
def test_only_the_strict_rule_accepts_ok_and_chinese_success(code: int, message: str) -> None:
    result = ApiResult[int](code=code, message=message, data=5)
    assert not is_success_lenient(result)
    assert is_success_strict(result)
    assert unwrap_strict(result) == 5
    with pytest.raises(RemoteCallError) as failure:
        unwrap_lenient(result)
    assert (failure.value.status_code, failure.value.message) == (200, message)


@pytest.mark.parametrize("unwrap", [unwrap_lenient, unwrap_strict])
def test_null_envelope_is_500_and_blank_message_gets_the_default(unwrap: object) -> None:
    assert callable(unwrap)
    with pytest.raises(RemoteCallError) as missing:
        unwrap(None)
    assert missing.value.status_code == 500
    for blank in (None, "", "   "):
        with pytest.raises(RemoteCallError) as failed:
            unwrap(ApiResult[int](code=500, message=blank))
        assert (failed.value.status_code, failed.value.message) == (200, "远程接口业务处理失败")


@pytest.mark.parametrize(
    "message",
    [
        " ok ",
        "ok ",
        " ok",
        "ok\n",
        "\tOK",
        " success ",
        "success\n",
        " 操作成功",
        "操作成功 ",
        "o\u212a",  # KELVIN SIGN, which Unicode case folding turns into k
        "\u017fuccess",  # LATIN SMALL LETTER LONG S, folded to s
        "ｏｋ",  # fullwidth
    ],
)
def test_the_words_must_match_exactly_but_for_ascii_case(message: str) -> None:
    result = ApiResult[int](code=0, message=message, data=5)
    assert not is_success_strict(result)
    assert not is_success_lenient(result)
    with pytest.raises(RemoteCallError) as failure:
        unwrap_strict(result)
    assert failure.value.status_code == 200
