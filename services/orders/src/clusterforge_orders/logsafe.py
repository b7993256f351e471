"""Log text that a client chose without letting it forge log lines.

A ``productName`` with a newline, logged as it is, starts what looks like a new line of
the journal (``...\\n2026-01-01 ERROR ...``). Every control character (C0, DEL, C1) and
the Unicode line and paragraph separators are written as escapes instead; every other
character, Chinese included, is kept as it is.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

# The layout of every line the service logs; the notification lines follow it too (senders.py).
LOG_FORMAT = "%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s"

_UNSAFE = re.compile("[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    return _NAMED.get(character, f"\\u{ord(character):04x}")


def escape_for_log(text: str) -> str:
    """``text`` on one line: control characters and line separators as escapes."""
    return _UNSAFE.sub(_escape, text)


def url_for_log(url: str) -> str:
    """``url`` without user information, query and fragment, which may carry a secret."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparseable URL>"
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


class SingleLineFormatter(logging.Formatter):
    """Escapes the message (the part callers fill with data) so it stays on its line.

    A traceback, which the logging module appends after the message, keeps its lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = escape_for_log(record.message)
        return super().formatMessage(record)


class AccessLogWithoutQuery(logging.Filter):
    """Drops the query string from uvicorn's access line: a client may put a token there.

    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with (client, method, path?query, version,
    status); the path is kept, its query replaced by ``?<query left out>``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        arguments = record.args
        if isinstance(arguments, tuple) and len(arguments) == 5 and isinstance(arguments[2], str):
            path, separator, _query = arguments[2].partition("?")
            if separator:
                record.args = (*arguments[:2], f"{path}?<query left out>", *arguments[3:])
        return True


# Loggers of libraries that write a URL per request: httpx's INFO line is
# 'HTTP Request: POST <url> "HTTP/1.1 200 OK"', the webhook's URL with its token.
QUIET_LIBRARY_LOGGERS = ("httpx", "httpcore")


def configure_logging(level: str) -> None:
    """The service's logging: one line per record, no secret from libraries or clients."""
    handler = logging.StreamHandler()
    handler.setFormatter(SingleLineFormatter(LOG_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    for name in QUIET_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(item, AccessLogWithoutQuery) for item in access.filters):
        access.addFilter(AccessLogWithoutQuery())
