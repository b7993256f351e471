"""Server settings, from arguments or ``CLUSTERFORGE_USERDIR_*`` environment variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_PORT = 8081
DEFAULT_DATABASE_URL = "sqlite:///./userdir.db"
MAX_PAGE_SIZE = 100
LIST_LIMIT = 1000
MAX_REQUEST_BODY_BYTES = 64 * 1024
MIN_TOKEN_LENGTH = 16
# Seconds to wait for PostgreSQL to accept a connection. Without a bound, psycopg waits
# 130 s for an address that drops packets, far past the role's health check, while
# each request holds its worker. libpq counts whole seconds and treats less than 2 as 2.
DEFAULT_DATABASE_CONNECT_TIMEOUT = 5
MAX_DATABASE_CONNECT_TIMEOUT = 300
_PLACEHOLDER_TOKENS = {"changeme", "change-me", "secret", "token", "password", "example"}


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

    database_url: str = DEFAULT_DATABASE_URL
    database_connect_timeout: int = Field(
        default=DEFAULT_DATABASE_CONNECT_TIMEOUT, ge=2, le=MAX_DATABASE_CONNECT_TIMEOUT
    )
    auth_tokens: SecretStr = SecretStr("")
    auth_tokens_file: Path | None = None
    max_page_size: int = Field(default=MAX_PAGE_SIZE, ge=100)
    list_limit: int = Field(default=LIST_LIMIT, ge=1)
    max_request_body_bytes: int = Field(default=MAX_REQUEST_BODY_BYTES, ge=1024)
    migrate_on_start: bool = True

    @field_validator("auth_tokens")
    @classmethod
    def _refuse_weak_tokens(cls, value: SecretStr) -> SecretStr:
        _check_tokens(_split_tokens(value.get_secret_value()), source="auth_tokens")
        return value

    def accepted_tokens(self) -> frozenset[str]:
        tokens = _split_tokens(self.auth_tokens.get_secret_value())
        if self.auth_tokens_file is not None:
            from_file = _split_tokens(self.auth_tokens_file.read_text(encoding="utf-8"))
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
