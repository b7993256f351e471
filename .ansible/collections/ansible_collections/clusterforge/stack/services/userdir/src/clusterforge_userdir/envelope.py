"""Parsing of ``ApiResult`` envelopes: an HTTP 200 is not yet business success.

Two rules, as the spec has them:

- lenient: successful when ``code == 200`` or ``message`` equals ``success`` (any case);
- strict: the same, and ``message`` may also be ``ok`` or ``操作成功`` (any case).

"Equals" is exact but for ASCII letter case: no surrounding spaces, no look-alikes.

Both turn a missing envelope into ``RemoteCallError`` 500 and an unsuccessful one into
``RemoteCallError`` 200 carrying its message (or 远程接口业务处理失败 when blank).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import DEFAULT_BUSINESS_FAILURE_MESSAGE, RemoteCallError
from .models import ApiResult

T = TypeVar("T")

_LENIENT_MESSAGES = frozenset({"success"})
_STRICT_MESSAGES = frozenset({"success", "ok", "操作成功"})


def _message_in(message: str | None, accepted: frozenset[str]) -> bool:
    """Whether ``message`` equals one of ``accepted``, ignoring ASCII case only.

    Nothing is trimmed: " ok " is not "ok". Case is folded for ASCII text only, because
    full Unicode folding would take look-alikes for the words (the Kelvin sign K folds to
    k, the long s to s).
    """
    if message is None:
        return False
    return (message.lower() if message.isascii() else message) in accepted


def is_success_lenient(result: ApiResult[Any]) -> bool:
    return result.code == 200 or _message_in(result.message, _LENIENT_MESSAGES)


def is_success_strict(result: ApiResult[Any]) -> bool:
    return result.code == 200 or _message_in(result.message, _STRICT_MESSAGES)


def _unwrap(
    result: ApiResult[T] | None, *, is_success: Callable[[ApiResult[Any]], bool]
) -> T | None:
    if result is None:
        raise RemoteCallError(
            status_code=500, response_body=None, message="remote envelope response is null"
        )
    if not is_success(result):
        message = (result.message or "").strip() or DEFAULT_BUSINESS_FAILURE_MESSAGE
        raise RemoteCallError(
            status_code=200,
            response_body=json.dumps(result.model_dump(mode="json"), ensure_ascii=False),
            message=message,
        )
    return result.data


def unwrap_lenient(result: ApiResult[T] | None) -> T | None:
    """``data`` of a successful envelope (lenient rule); raises RemoteCallError otherwise."""
    return _unwrap(result, is_success=is_success_lenient)


def unwrap_strict(result: ApiResult[T] | None) -> T | None:
    """``data`` of a successful envelope (strict rule); raises RemoteCallError otherwise."""
    return _unwrap(result, is_success=is_success_strict)
