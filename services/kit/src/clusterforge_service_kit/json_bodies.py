"""One rule for JSON bodies in both services: UTF-8, the whole body, strictly (RFC 8259, 8.1).

``json.loads`` on bytes guesses UTF-16 and UTF-32 from the first bytes and decodes UTF-8
with ``surrogatepass``, so an encoded lone surrogate (``ED A0 80``) passed in a field the
service never reads; :func:`utf8_json_text` refuses a body with any byte sequence that is
not UTF-8, wherever it is, before the JSON is parsed. Standard library only.
"""

from __future__ import annotations

import codecs
import json

FIX = "send the JSON body in UTF-8"


class NotUtf8BodyError(ValueError):
    """A JSON body that is not UTF-8; the message says where and what to send instead."""


def utf8_json_text(body: bytes) -> str:
    """``body`` decoded as strict UTF-8 (no BOM, no UTF-16 or UTF-32, no surrogates)."""
    if body.startswith(codecs.BOM_UTF8):
        raise NotUtf8BodyError(f"the body starts with a byte order mark; {FIX}, without one")
    if body and json.detect_encoding(body) != "utf-8":
        raise NotUtf8BodyError(f"the body looks like UTF-16 or UTF-32; {FIX}")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotUtf8BodyError(
            f"the body is not UTF-8 at byte {error.start} ({error.reason}); {FIX}"
        ) from error
