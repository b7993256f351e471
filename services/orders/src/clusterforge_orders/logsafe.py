"""Log text that a client chose without letting it forge log lines.

A ``productName`` with a newline, logged as it is, starts what looks like a new line of
the journal (``...\\n2026-01-01 ERROR ...``). Every control character (C0, DEL, C1) and
the Unicode line and paragraph separators are written as escapes instead; every other
character, Chinese included, is kept as it is.
"""

from __future__ import annotations

import logging
import re

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


class SingleLineFormatter(logging.Formatter):
    """Escapes the message (the part callers fill with data) so it stays on its line.

    A traceback, which the logging module appends after the message, keeps its lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = escape_for_log(record.message)
        return super().formatMessage(record)
