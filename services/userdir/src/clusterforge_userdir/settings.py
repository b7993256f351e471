"""Server settings, from a settings file, ``CLUSTERFORGE_USERDIR_*`` variables and options.

Every source is read strictly (issue 49): a settings-file line that is not
``NAME=value`` with balanced quotes, a name with the service's prefix that is no setting
(in the file or the environment), a setting given twice, a number that is not finite or
outside its range, stop the start with one line naming the setting and the fix. A
misspelled or missing token is never read as "no authentication": a token setting that is
named must hold a token, and a settings file must say how clients authenticate (a token
setting, or ``CLUSTERFORGE_USERDIR_ALLOW_UNAUTHENTICATED=true`` for a loopback bind).

Standard library, pydantic and pydantic-settings only: the toolkit's plan loads this
module on the control node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterforge_service_kit import (
    DATABASE_URL_PREFIXES,
    MIN_TOKEN_LENGTH,
    TOKEN_RECIPE,
    check_database_url,
    check_tokens,
    split_tokens,
)
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .private_files import SettingsFileError, check_private_file, read_private_text

__all__ = [
    "DATABASE_URL_PREFIXES",
    "ENVIRONMENT_PREFIX",
    "MIN_TOKEN_LENGTH",
    "SETTINGS_FILE_VARIABLE",
    "ServerSettings",
    "SettingsError",
    "SettingsFileError",
    "check_database_url",
    "check_private_file",
    "load_server_settings",
    "parse_settings_file",
    "read_private_text",
    "settings_from_environment",
]

ENVIRONMENT_PREFIX = "CLUSTERFORGE_USERDIR_"
SETTINGS_FILE_VARIABLE = f"{ENVIRONMENT_PREFIX}SETTINGS_FILE"

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
# The upper ends of the ranges (docs/userdir.md): past them a value is a typo or a way to
# let one request hold a worker or its memory, never a deployment's choice.
MAX_MAX_PAGE_SIZE = 10_000
MAX_LIST_LIMIT = 100_000
MAX_MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024
MAX_REQUEST_HEADER_BYTES_LIMIT = 1024 * 1024
MAX_REQUEST_READ_TIMEOUT = 300.0
# The options' ranges (cli.py); here so that one table documents every number.
PORT_RANGE = (1, 65535)
WORKERS_RANGE = (1, 64)


class SettingsError(ValueError):
    """A setting the service cannot start with; the message names it and the fix."""


class ServerSettings(BaseSettings):
    """How one service instance runs.

    ``auth_tokens`` is a comma-separated list of accepted bearer tokens, read from
    ``CLUSTERFORGE_USERDIR_AUTH_TOKENS`` or from the file named by ``auth_tokens_file``
    (one token a line), never from a command-line argument. Neither set means no
    authentication, which a start from a settings file must ask for by name
    (``allow_unauthenticated``) and which a bind off loopback never gets.
    """

    # Inputs stay out of validation errors: one of them may be a token. No infinity or
    # NaN in any number: each would pass or break a range check in its own way.
    model_config = SettingsConfigDict(
        env_prefix=ENVIRONMENT_PREFIX,
        extra="ignore",
        hide_input_in_errors=True,
        allow_inf_nan=False,
    )

    # Out of repr: it may carry the PostgreSQL password.
    database_url: str = Field(default=DEFAULT_DATABASE_URL, repr=False)
    database_connect_timeout: int = Field(
        default=DEFAULT_DATABASE_CONNECT_TIMEOUT, ge=2, le=MAX_DATABASE_CONNECT_TIMEOUT
    )
    # The default is not validated (BaseSettings validates defaults): only a value given
    # must hold a token.
    auth_tokens: SecretStr = Field(default=SecretStr(""), validate_default=False)
    auth_tokens_file: Path | None = None
    # Authentication off, asked for by name: a deleted or mangled token line never is.
    allow_unauthenticated: bool = False
    max_page_size: int = Field(default=MAX_PAGE_SIZE, ge=100, le=MAX_MAX_PAGE_SIZE)
    list_limit: int = Field(default=LIST_LIMIT, ge=1, le=MAX_LIST_LIMIT)
    max_request_body_bytes: int = Field(
        default=MAX_REQUEST_BODY_BYTES, ge=1024, le=MAX_MAX_REQUEST_BODY_BYTES
    )
    max_request_header_bytes: int = Field(
        default=DEFAULT_MAX_REQUEST_HEADER_BYTES, ge=1024, le=MAX_REQUEST_HEADER_BYTES_LIMIT
    )
    request_read_timeout: float = Field(
        default=DEFAULT_REQUEST_READ_TIMEOUT, gt=0, le=MAX_REQUEST_READ_TIMEOUT
    )
    migrate_on_start: bool = True

    @field_validator("auth_tokens")
    @classmethod
    def _refuse_weak_or_no_tokens(cls, value: SecretStr) -> SecretStr:
        # Runs only for a value given: the setting named with no token in it (an empty
        # line, "," or blanks) is a mistake, never "no authentication".
        tokens = split_tokens(value.get_secret_value())
        if not tokens:
            raise ValueError(
                f"{ENVIRONMENT_PREFIX}AUTH_TOKENS is set but holds no token; set it to a "
                f"token made by {TOKEN_RECIPE}, or remove it and set "
                f"{ENVIRONMENT_PREFIX}ALLOW_UNAUTHENTICATED=true to run on loopback "
                "without authentication"
            )
        check_tokens(tokens, source=f"{ENVIRONMENT_PREFIX}AUTH_TOKENS")
        return value

    @field_validator("auth_tokens_file", mode="before")
    @classmethod
    def _refuse_an_empty_path(cls, value: object) -> object:
        # Path("") is Path("."): the working directory, not "no file".
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                f"{ENVIRONMENT_PREFIX}AUTH_TOKENS_FILE is set but empty; set it to the path "
                "of a private file of tokens, one a line, or remove it"
            )
        return value

    @field_validator("database_url")
    @classmethod
    def _refuse_unusable_database_url(cls, value: str) -> str:
        check_database_url(value)
        return value

    @model_validator(mode="after")
    def _authentication_is_one_thing(self) -> ServerSettings:
        names_a_token = "auth_tokens" in self.model_fields_set or self.auth_tokens_file
        if self.allow_unauthenticated and names_a_token:
            raise ValueError(
                f"{ENVIRONMENT_PREFIX}ALLOW_UNAUTHENTICATED is true while a token setting "
                f"({ENVIRONMENT_PREFIX}AUTH_TOKENS or AUTH_TOKENS_FILE) is set; remove "
                f"{ENVIRONMENT_PREFIX}ALLOW_UNAUTHENTICATED to keep authentication on"
            )
        return self

    def accepted_tokens(self) -> frozenset[str]:
        """The configured tokens; reading the token file checks its permissions first."""
        tokens = split_tokens(self.auth_tokens.get_secret_value())
        if self.auth_tokens_file is not None:
            text = read_private_text(
                self.auth_tokens_file,
                setting="auth_tokens_file (--auth-tokens-file, "
                f"{ENVIRONMENT_PREFIX}AUTH_TOKENS_FILE)",
            )
            from_file = split_tokens(text)
            if not from_file:
                # A token file named is a token asked for: empty, it is a mistake.
                raise SettingsFileError(
                    f"auth_tokens_file (--auth-tokens-file, {ENVIRONMENT_PREFIX}"
                    f"AUTH_TOKENS_FILE) {self.auth_tokens_file} holds no token; write one "
                    f"token a line, e.g. made by {TOKEN_RECIPE}"
                )
            check_tokens(from_file, source=str(self.auth_tokens_file))
            tokens.extend(from_file)
        return frozenset(tokens)


# --- reading the sources strictly ---------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The longest name worth repeating in a message: a longer "name" is more likely a value
# glued to it (a line whose "=" went missing), and the value may be a token.
_LONGEST_NAME_SHOWN = len(ENVIRONMENT_PREFIX) + 32
_QUOTES = "\"'"


def variable_of(field_name: str) -> str:
    """``max_page_size`` -> ``CLUSTERFORGE_USERDIR_MAX_PAGE_SIZE``."""
    return f"{ENVIRONMENT_PREFIX}{field_name.upper()}"


def _field_of_variable() -> dict[str, str]:
    return {variable_of(name): name for name in ServerSettings.model_fields}


def _shown_name(name: str) -> str:
    return name if len(name) <= _LONGEST_NAME_SHOWN else "a name"


def _unknown_name(name: str, where: str) -> SettingsError:
    return SettingsError(
        f"{where}: {_shown_name(name)} is not a setting of this service; correct the name "
        f"({ENVIRONMENT_PREFIX}<SETTING>, see docs/userdir.md) or remove it"
    )


def _unquote(raw: str, *, name: str, where: str) -> str:
    """A value as systemd's EnvironmentFile and python-dotenv both read it, or an error.

    Taken: a bare word (no blank, quote or backslash), ``"..."`` with ``\\\\`` and ``\\"``
    as the only escapes (what the toolkit's plan writes), or ``'...'`` taken literally.
    """
    fix = f'; write {name}="<value>" with both quotes (\\" and \\\\ inside)'
    if not raw:
        return ""
    if raw[0] == "'":
        if len(raw) < 2 or raw[-1] != "'" or "'" in raw[1:-1]:
            raise SettingsError(f"{where}: {name} has an unbalanced single quote{fix}")
        return raw[1:-1]
    if raw[0] == '"':
        value: list[str] = []
        position = 1
        while position < len(raw):
            character = raw[position]
            if character == "\\":
                following = raw[position + 1 : position + 2]
                if following not in ('"', "\\"):
                    raise SettingsError(
                        f"{where}: {name} has a backslash that escapes neither a quote nor a "
                        f"backslash{fix}"
                    )
                value.append(following)
                position += 2
                continue
            if character == '"':
                if position != len(raw) - 1:
                    raise SettingsError(f"{where}: {name} has text after its closing quote{fix}")
                return "".join(value)
            value.append(character)
            position += 1
        raise SettingsError(f"{where}: {name} has an unbalanced double quote{fix}")
    if any(character.isspace() or character in _QUOTES or character == "\\" for character in raw):
        raise SettingsError(
            f"{where}: {name} has a blank, quote or backslash in an unquoted value (an "
            f"unbalanced quote?){fix}"
        )
    return raw


def parse_settings_file(text: str, *, path: Path) -> dict[str, str]:
    """The settings of a file of ``CLUSTERFORGE_USERDIR_<SETTING>=value`` lines, by field.

    Blank lines and ``#`` comment lines are skipped; anything else must be one known
    setting, once, with a value :func:`_unquote` takes. Messages name the line and the
    setting, never the value.
    """
    fields = _field_of_variable()
    settings: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"settings file {path} line {number}"
        name, equals, raw = stripped.partition("=")
        name = name.strip()
        if not equals:
            known = next((variable for variable in fields if stripped == variable), None)
            subject = known or "the line"
            raise SettingsError(
                f"{where}: {subject} has no '='; write {known or 'NAME'}=\"<value>\", or "
                "remove the line"
            )
        if not _NAME.fullmatch(name):
            raise SettingsError(
                f"{where}: the line does not start with a setting's name (NAME=value, no "
                f"'export'); write {ENVIRONMENT_PREFIX}<SETTING>=\"<value>\" or remove it"
            )
        field = fields.get(name)
        if field is None:
            raise _unknown_name(name, where)
        if field in first_line:
            raise SettingsError(
                f"{where}: {name} is set twice (first on line {first_line[field]}); keep one"
            )
        value = _unquote(raw.strip(), name=name, where=where)
        if any(not character.isprintable() for character in value):
            raise SettingsError(
                f"{where}: {name} holds a control character; remove it from the value"
            )
        first_line[field] = number
        settings[field] = value
    return settings


def settings_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings the environment gives, by field; a prefixed name that is none is refused."""
    fields = _field_of_variable()
    settings: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENVIRONMENT_PREFIX) or name == SETTINGS_FILE_VARIABLE:
            continue
        field = fields.get(name)
        if field is None:
            raise _unknown_name(name, "environment")
        settings[field] = value
    return settings


def _number(value: float) -> str:
    """1048576 as written, 0.25 as 0.25 (not :g's 1.04858e+06)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _range_of(field_name: str) -> str | None:
    low: Any = None
    high: Any = None
    for constraint in ServerSettings.model_fields[field_name].metadata:
        for attribute in ("ge", "gt"):
            if getattr(constraint, attribute, None) is not None:
                low = getattr(constraint, attribute)
                low = f"above {_number(low)}" if attribute == "gt" else _number(low)
        if getattr(constraint, "le", None) is not None:
            high = constraint.le
    if low is None or high is None:
        return None
    return f"set a finite number from {low} to {_number(high)} (docs/userdir.md)"


def describe_settings_error(
    error: ValidationError, *, options: Mapping[str, str] | None = None
) -> str:
    """One line for every problem, each naming the variable (and option) and the fix."""
    options = options or {}
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        field = str(item["loc"][0]) if item["loc"] else ""
        message = str(item["msg"]).removeprefix("Value error, ")
        if not field:
            problems.append(message)
            continue
        where = variable_of(field)
        if field in options:
            where = f"{options[field]} / {where}"
        fix = "" if item["type"] == "value_error" else f"; {_range_of(field) or 'correct it'}"
        problems.append(f"{where}: {message}{fix}")
    return "; ".join(problems)


def load_server_settings(
    *,
    settings_file: Path | None,
    environ: Mapping[str, str],
    options: Mapping[str, str],
    option_names: Mapping[str, str] | None = None,
) -> ServerSettings:
    """The settings from the file, the environment and the options (in rising weight).

    Raises :class:`SettingsError` (or :class:`SettingsFileError` for the file itself)
    with one line naming the setting and the fix. ``option_names`` maps a field to its
    command-line option, for the messages.
    """
    values: dict[str, str] = {}
    if settings_file is not None:
        text = read_private_text(settings_file, setting="settings file")
        values.update(parse_settings_file(text, path=settings_file))
    values.update(settings_from_environment(environ))
    values.update(options)
    try:
        settings = ServerSettings.model_validate(values)
    except ValidationError as error:
        raise SettingsError(describe_settings_error(error, options=option_names)) from None
    named_tokens = {"auth_tokens", "auth_tokens_file"} & values.keys()
    if settings_file is not None and not named_tokens and not settings.allow_unauthenticated:
        # A file is a deployment's whole statement: a token line deleted or mangled must
        # not read as "no authentication".
        raise SettingsError(
            f"settings file {settings_file} names no token: set {ENVIRONMENT_PREFIX}"
            f"AUTH_TOKENS (or {ENVIRONMENT_PREFIX}AUTH_TOKENS_FILE) to a token made by "
            f"{TOKEN_RECIPE}, or, to run on loopback without authentication, set "
            f"{ENVIRONMENT_PREFIX}ALLOW_UNAUTHENTICATED=true"
        )
    return settings
