"""The ids every answer carries: ``X-Request-Id`` (new) and ``X-Trace-Id`` (the caller's)."""

from __future__ import annotations

import re
import uuid

REQUEST_ID_HEADER = "X-Request-Id"
TRACE_ID_HEADER = "X-Trace-Id"
# A trace id from the caller is echoed only when it is safe to put back in a header.
ACCEPTABLE_TRACE_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


def new_id() -> str:
    """32 lowercase hex characters (a UUID without dashes)."""
    return uuid.uuid4().hex


def trace_id_for(sent: bytes) -> bytes:
    """The caller's trace id when it is acceptable, else a new one."""
    return sent if ACCEPTABLE_TRACE_ID.match(sent) else new_id().encode()
