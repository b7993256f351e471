"""Server settings, from arguments or ``CLUSTERFORGE_USERDIR_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .private_files import SettingsFileError, check_private_file, read_private_text

__all__ = [
    "ServerSettings",
    "SettingsFileError",
    "check_database_url",
    "check_private_file",
    "read_private_text",
]

DEFAULT_PORT = 8081
DEFAULT_DATABASE_URL = "sqlite:///./userdir.db"
MAX_PAGE_SIZE = 100
LIST_LIMIT = 1000
MAX_REQUEST_BODY_BYTES = 64 * 1024
# The request line and headers: a bearer token and the usual headers take well under
# 2 KiB. Stock uvicorn (httptools) took 64 MB before authentication.
DEFAULT_MAX_REQUEST_HEADER_BYTES = 16 * 1024
# Seconds for the request line and headers, and again for the body: a client that sends
# half a request held the connection (and a worker's memory) as long as it liked.
DEFAULT_REQUEST_READ_TIMEOUT = 10.0
MIN_TOKEN_LENGTH = 16
# Seconds to wait for PostgreSQL to accept a connection. Without a bound, psycopg waits
# 130 s for an address that drops packets, far past the role's health check, while
# each request holds its worker. libpq counts whole seconds and treats less than 2 as 2.
DEFAULT_DATABASE_CONNECT_TIMEOUT = 5
MAX_DATABASE_CONNECT_TIMEOUT = 300
_PLACEHOLDER_TOKENS = {"changeme", "change-me", "secret", "token", "password", "example"}
DATABASE_URL_PREFIXES = ("sqlite:///", "postgresql+psycopg://")
_DATABASE_URL_FIX = (
    "set it to sqlite:///<path of the database file> or "
    "postgresql+psycopg://<user>[:<password>]@<host>[:<port>]/<database>"
)


def check_database_url(url: str) -> None:
    """Refuse a URL the service cannot use, in a message that never shows the URL.

    The URL is the one setting allowed to carry a password (it is how libpq takes one), so
    it never appears in a message, a log line or a validation error.
    """
    if not url.startswith(DATABASE_URL_PREFIXES):
        raise ValueError(f"the database URL has an unsupported scheme; {_DATABASE_URL_FIX}")
    if url.startswith("sqlite:///"):
        if url == "sqlite:///" or url.startswith("sqlite:///:memory:"):
            raise ValueError(
                "the database URL names no SQLite file (an in-memory database is lost at "
                f"each start and not shared between workers); {_DATABASE_URL_FIX}"
            )
        return
    # Host and database may both be absent (libpq then takes the Unix socket and the
    # user's name, or ?host=/run/postgresql), so only the syntax is checked here.
    try:
        port = urlsplit(url).port
    except ValueError:
        raise ValueError(f"the database URL cannot be parsed; {_DATABASE_URL_FIX}") from None
    if port == 0:
        raise ValueError(f"the database URL has port 0; {_DATABASE_URL_FIX}")


class ServerSettings(BaseSettings):
    """How one service instance runs.

    ``auth_tokens`` is a comma-separated list of accepted bearer tokens; empty means auth
    is off. It is read from ``CLUSTERFORGE_USERDIR_AUTH_TOKENS`` or from the file named by
    ``auth_tokens_file`` (one token a line), never from a command-line argument.
    """

    # Inputs stay out of validation errors: one of them may be a token.
    model_config = SettingsConfigDict(
        env_prefix="CLUSTERFORGE_USERDIR_", extra="ignore", hide_input_in_errors=True
    )

    # Out of repr: it may carry the PostgreSQL password.
    database_url: str = Field(default=DEFAULT_DATABASE_URL, repr=False)
    database_connect_timeout: int = Field(
        default=DEFAULT_DATABASE_CONNECT_TIMEOUT, ge=2, le=MAX_DATABASE_CONNECT_TIMEOUT
    )
    auth_tokens: SecretStr = SecretStr("")
    auth_tokens_file: Path | None = None
    max_page_size: int = Field(default=MAX_PAGE_SIZE, ge=100)
    list_limit: int = Field(default=LIST_LIMIT, ge=1)
    max_request_body_bytes: int = Field(default=MAX_REQUEST_BODY_BYTES, ge=1024)
    max_request_header_bytes: int = Field(
        default=DEFAULT_MAX_REQUEST_HEADER_BYTES, ge=1024, le=1024 * 1024
    )
    request_read_timeout: float = Field(default=DEFAULT_REQUEST_READ_TIMEOUT, gt=0, le=300)
    migrate_on_start: bool = True

    @field_validator("auth_tokens")
    @classmethod
    def _refuse_weak_tokens(cls, value: SecretStr) -> SecretStr:
        _check_tokens(_split_tokens(value.get_secret_value()), source="auth_tokens")
        return value

    @field_validator("database_url")
    @classmethod
    def _refuse_unusable_database_url(cls, value: str) -> str:
        check_database_url(value)
        return value

    def accepted_tokens(self) -> frozenset[str]:
        """The configured tokens; reading the token file checks its permissions first."""
        tokens = _split_tokens(self.auth_tokens.get_secret_value())
        if self.auth_tokens_file is not None:
            text = read_private_text(
                self.auth_tokens_file,
                setting="auth_tokens_file (--auth-tokens-file, "
                "CLUSTERFORGE_USERDIR_AUTH_TOKENS_FILE)",
            )
            from_file = _split_tokens(text)
            _check_tokens(from_file, source=str(self.auth_tokens_file))
            tokens.extend(from_file)
        return frozenset(tokens)


def _split_tokens(raw: str) -> list[str]:
    return [token.strip() for token in raw.replace("\n", ",").split(",") if token.strip()]


def _check_tokens(tokens: list[str], *, source: str) -> None:
    for position, token in enumerate(tokens, start=1):
        if token.lower() in _PLACEHOLDER_TOKENS or len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"token #{position} in {source} is a placeholder or shorter than "
                f"{MIN_TOKEN_LENGTH} characters; generate one, e.g. "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
