"""Server settings, from arguments or ``CLUSTERFORGE_USERDIR_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from clusterforge_service_kit import (
    DATABASE_URL_PREFIXES,
    MIN_TOKEN_LENGTH,
    check_database_url,
    check_tokens,
    split_tokens,
)
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .private_files import SettingsFileError, check_private_file, read_private_text

__all__ = [
    "DATABASE_URL_PREFIXES",
    "MIN_TOKEN_LENGTH",
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
# Seconds for a request to arrive whole, head and body, from its first byte (the kit's
# edge guard): a client that sent half a request, or dripped a body after the answer,
# held the connection (and a worker's memory) as long as it liked.
DEFAULT_REQUEST_READ_TIMEOUT = 10.0
# Seconds to wait for PostgreSQL to accept a connection. Without a bound, psycopg waits
# 130 s for an address that drops packets, far past the role's health check, while
# each request holds its worker. libpq counts whole seconds and treats less than 2 as 2.
DEFAULT_DATABASE_CONNECT_TIMEOUT = 5
MAX_DATABASE_CONNECT_TIMEOUT = 300


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
        check_tokens(split_tokens(value.get_secret_value()), source="auth_tokens")
        return value

    @field_validator("database_url")
    @classmethod
    def _refuse_unusable_database_url(cls, value: str) -> str:
        check_database_url(value)
        return value

    def accepted_tokens(self) -> frozenset[str]:
        """The configured tokens; reading the token file checks its permissions first."""
        tokens = split_tokens(self.auth_tokens.get_secret_value())
        if self.auth_tokens_file is not None:
            text = read_private_text(
                self.auth_tokens_file,
                setting="auth_tokens_file (--auth-tokens-file, "
                "CLUSTERFORGE_USERDIR_AUTH_TOKENS_FILE)",
            )
            from_file = split_tokens(text)
            check_tokens(from_file, source=str(self.auth_tokens_file))
            tokens.extend(from_file)
        return frozenset(tokens)
