"""What the clusterforge services share, held once (issue 40).

Standard library only at this level, so the user directory's client and the toolkit's
plan import these rules without a web framework:

- :func:`is_loopback_host`: whether a bind keeps the port on this machine;
- :func:`check_tokens`, :func:`split_tokens`, :class:`BearerTokens`: one token rule and
  a constant-time comparison;
- :func:`check_private_file`, :func:`read_private_text`: one rule for secret files;
- :func:`check_database_url`: the database URLs both take;
- :mod:`.request_ids`: the ids every answer carries;
- :func:`utf8_json_text`: one rule for JSON bodies, strict UTF-8 throughout.

With the ``server`` extra: :mod:`.sqlite` (one SQLite setup and busy timeout),
:mod:`.metrics` (Prometheus through ``prometheus_client``) and :mod:`.http_edge` (the one
guard of the HTTP edge).
"""

from .addresses import is_loopback_host
from .database_urls import DATABASE_URL_FIX, DATABASE_URL_PREFIXES, check_database_url
from .json_bodies import NotUtf8BodyError, utf8_json_text
from .private_files import PrivateFileError, check_private_file, read_private_text
from .request_ids import ACCEPTABLE_TRACE_ID, new_id, trace_id_for
from .tokens import (
    MIN_TOKEN_LENGTH,
    PLACEHOLDER_TOKENS,
    TOKEN_RECIPE,
    BearerTokens,
    check_tokens,
    split_tokens,
)

__all__ = [
    "ACCEPTABLE_TRACE_ID",
    "DATABASE_URL_FIX",
    "DATABASE_URL_PREFIXES",
    "MIN_TOKEN_LENGTH",
    "PLACEHOLDER_TOKENS",
    "TOKEN_RECIPE",
    "BearerTokens",
    "NotUtf8BodyError",
    "PrivateFileError",
    "check_database_url",
    "check_private_file",
    "check_tokens",
    "is_loopback_host",
    "new_id",
    "read_private_text",
    "split_tokens",
    "trace_id_for",
    "utf8_json_text",
]
