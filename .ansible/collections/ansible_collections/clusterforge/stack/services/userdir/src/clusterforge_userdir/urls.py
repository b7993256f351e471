"""URL rules 1 to 4 of the spec: query encoding and path-variable substitution."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from .client_config import StatusStyle
from .errors import UrlTemplateError

_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
_DOT_SEGMENTS = frozenset({".", ".."})

QueryValue = str | int | float | bool | Sequence[str | int] | None


def placeholders(template: str) -> list[str]:
    return _PLACEHOLDER.findall(template)


def expand_path(
    template: str,
    *positional: Any,
    named: Mapping[str, Any] | None = None,
) -> str:
    """Fill ``{name}`` placeholders, each value percent-encoded as one path segment.

    A value of ``.`` or ``..`` is refused: it would not stay one segment.

    A single placeholder may be filled by position; several must be filled by name, and
    the names must be exactly the template's. Raises :class:`UrlTemplateError` otherwise,
    before anything is sent.
    """
    names = placeholders(template)
    if positional and named:
        raise UrlTemplateError(f"fill {template} either by position or by name, not both")
    if positional:
        if len(names) != 1 or len(positional) != 1:
            raise UrlTemplateError(
                f"{template} has {len(names)} placeholders; by position only a single "
                "path variable is substituted, pass several by name"
            )
        values = {names[0]: positional[0]}
    else:
        values = dict(named or {})
        unknown = sorted(set(values) - set(names))
        missing = sorted(set(names) - set(values))
        if unknown or missing:
            raise UrlTemplateError(
                f"path variables do not match {template}: "
                f"unknown {unknown or 'none'}, missing {missing or 'none'}"
            )
    for name, value in values.items():
        if value is None or str(value) == "":
            raise UrlTemplateError(f"path variable '{name}' of {template} has no value")
        if str(value) in _DOT_SEGMENTS:
            # Percent-encoding does not help: "." and ".." are unreserved characters, so
            # the URL is normalised (by httpx; by proxies even when sent as %2E) and the
            # segment moves the request: get_org_user("..", 1) sent GET /mock-api/users/1.
            raise UrlTemplateError(
                f"path variable '{name}' of {template} is {str(value)!r}, a dot segment "
                "that would change the path; pass the id itself"
            )
    return _PLACEHOLDER.sub(lambda match: quote(str(values[match.group(1)]), safe=""), template)


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def query_pairs(
    parameters: Mapping[str, QueryValue], *, status_style: StatusStyle = StatusStyle.REPEATED
) -> list[tuple[str, str]]:
    """Name/value pairs with None and blank values left out.

    A list or tuple value is sent repeated (``a=1&a=2``) or comma-joined (``a=1,2``)
    according to ``status_style``.
    """
    pairs: list[tuple[str, str]] = []
    for name, value in parameters.items():
        if _is_blank(value):
            continue
        if isinstance(value, list | tuple | set | frozenset):
            items = [_text(item) for item in _ordered(value) if not _is_blank(item)]
            if not items:
                continue
            if status_style is StatusStyle.COMMA_JOINED:
                pairs.append((name, ",".join(items)))
            else:
                pairs.extend((name, item) for item in items)
        else:
            pairs.append((name, _text(value)))
    return pairs


def _ordered(values: Iterable[Any]) -> list[Any]:
    return sorted(values) if isinstance(values, set | frozenset) else list(values)


def encode_query(
    parameters: Mapping[str, QueryValue], *, status_style: StatusStyle = StatusStyle.REPEATED
) -> str:
    """The URL-encoded query string (without ``?``); empty when nothing is left."""
    return urlencode(query_pairs(parameters, status_style=status_style), quote_via=quote)
