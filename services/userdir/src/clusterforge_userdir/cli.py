"""``clusterforge-userdir``: run the user-directory service standalone.

    clusterforge-userdir --host 127.0.0.1 --port 8081 --database-url sqlite:///./userdir.db

Bearer tokens never go on the command line: set ``CLUSTERFORGE_USERDIR_AUTH_TOKENS``, or
pass ``--auth-tokens-file`` or ``--settings-file``.

A bad setting stops the start with one line on stderr that names the setting and the fix,
and exit status 2: no traceback, and never the value of a secret (a token, or the database
URL, which may hold a password).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

try:
    import uvicorn
    from alembic.util.exc import CommandError
    from clusterforge_service_kit import TOKEN_RECIPE, is_loopback_host
    from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol
    from dotenv import dotenv_values
    from pydantic import ValidationError
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    from .migrate import upgrade_database
    from .settings import (
        DEFAULT_PORT,
        ServerSettings,
        SettingsFileError,
        read_private_text,
    )
    from .storage import DatabaseLocationError, create_database_engine
except ModuleNotFoundError as error:  # the client-only install has no server
    raise SystemExit(
        f"clusterforge-userdir: the server needs the 'server' extra ({error.name} is "
        "missing); install it with: pip install 'clusterforge-userdir[server]'"
    ) from error


EXIT_BAD_SETTINGS = 2
ENVIRONMENT_PREFIX = "CLUSTERFORGE_USERDIR_"
SETTINGS_FILE_VARIABLE = f"{ENVIRONMENT_PREFIX}SETTINGS_FILE"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# Where each setting can come from, for messages that name what the operator set.
_OPTION_OF_FIELD = {"database_url": "--database-url", "auth_tokens_file": "--auth-tokens-file"}


class SettingsError(Exception):
    """A setting the service cannot start with; the message names it and the fix."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option ends in one line (and status 2) without the usage."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message}; see clusterforge-userdir --help")


def _fail(message: str) -> NoReturn:
    print(f"clusterforge-userdir: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_SETTINGS)


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="clusterforge-userdir", description="Run the clusterforge user-directory service."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (8081)")
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL: sqlite:///path.db (default: userdir.db in the working "
        f"directory) or postgresql+psycopg://user@host/db (or {ENVIRONMENT_PREFIX}DATABASE_URL)",
    )
    parser.add_argument(
        "--auth-tokens-file", type=Path, help="file with accepted bearer tokens, one a line"
    )
    parser.add_argument(
        "--settings-file",
        type=Path,
        help=f"file of {ENVIRONMENT_PREFIX}*=value lines (the role's userdir.env); the "
        f"environment wins over it (or {SETTINGS_FILE_VARIABLE})",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (1)")
    parser.add_argument(
        "--log-level", default="info", choices=LOG_LEVELS, help="uvicorn log level (info)"
    )
    parser.add_argument(
        "--no-access-log", action="store_true", help="do not log one line per request"
    )
    return parser


def load_settings_file(path: Path) -> None:
    """Put the file's settings into the environment, where workers find them too.

    Variables already in the environment win. Only the permissions and names are
    checked here; the values are ServerSettings' to judge.
    """
    text = read_private_text(path, setting="settings file")
    # Literal values: a token may hold "${...}", which is not a variable to expand.
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    for name, value in values.items():
        if not name.startswith(ENVIRONMENT_PREFIX) or name == SETTINGS_FILE_VARIABLE:
            raise SettingsError(
                f"settings file {path}: {name} is not a setting of this service; use "
                f"{ENVIRONMENT_PREFIX}<SETTING> names (docs/userdir.md) or remove the line"
            )
        if value is not None:
            os.environ.setdefault(name, value)


def _describe_settings_error(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        field = str(item["loc"][0]) if item["loc"] else ""
        where = f"{ENVIRONMENT_PREFIX}{field.upper()}"
        if field in _OPTION_OF_FIELD:
            where = f"{_OPTION_OF_FIELD[field]} / {where}"
        message = str(item["msg"]).removeprefix("Value error, ")
        fix = "" if item["type"] == "value_error" else "; correct it"
        problems.append(f"{where}: {message}{fix}")
    return "; ".join(problems)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def read_settings(arguments: argparse.Namespace) -> ServerSettings:
    """The settings from file, environment and arguments (in rising order of weight)."""
    settings_file = arguments.settings_file or os.environ.get(SETTINGS_FILE_VARIABLE)
    if settings_file:
        load_settings_file(Path(settings_file))
    if arguments.database_url is not None:
        os.environ[f"{ENVIRONMENT_PREFIX}DATABASE_URL"] = arguments.database_url
    if arguments.auth_tokens_file is not None:
        os.environ[f"{ENVIRONMENT_PREFIX}AUTH_TOKENS_FILE"] = str(arguments.auth_tokens_file)
    if not 1 <= arguments.port <= 65535:
        raise SettingsError(f"--port {arguments.port} is not a port; set 1 to 65535")
    if arguments.workers < 1:
        raise SettingsError(f"--workers {arguments.workers} must be at least 1; set e.g. 1")
    try:
        settings = ServerSettings()
    except ValidationError as error:
        raise SettingsError(_describe_settings_error(error)) from None
    # A bad token file stops the start here, with its reason.
    if not settings.accepted_tokens() and not is_loopback_host(arguments.host):
        # Whoever reaches the port could read and change every user; the toolkit's
        # preflight refuses this too, but the service run on its own must as well.
        raise SettingsError(
            f"--host {arguments.host or '(every address)'!r} is not a loopback address and "
            f"no bearer token is set, so anyone who reaches the port could read and change "
            f"every user; set {ENVIRONMENT_PREFIX}AUTH_TOKENS (or --auth-tokens-file) to a "
            f"token made by {TOKEN_RECIPE}, or bind --host 127.0.0.1"
        )
    return settings


def migrate(settings: ServerSettings) -> None:
    """Migrate once here, so several workers never race to create the schema."""
    database = f"--database-url / {ENVIRONMENT_PREFIX}DATABASE_URL"
    try:
        engine = create_database_engine(
            settings.database_url, connect_timeout=settings.database_connect_timeout
        )
    except DatabaseLocationError as error:
        raise SettingsError(f"{database}: {error}") from None
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as error:
        # SQLAlchemy's messages quote the URL, which may hold a password.
        raise SettingsError(
            f"{database}: the URL cannot be used ({type(error).__name__}); set "
            "sqlite:///<path> or postgresql+psycopg://<user>@<host>/<database>"
        ) from None
    try:
        upgrade_database(engine)
    except DBAPIError as error:
        # The driver's own message names host and port, never the password;
        # SQLAlchemy's wrapper would add the statement and a link.
        raise SettingsError(
            f"{database}: cannot reach the database or migrate it (waited at most "
            f"{settings.database_connect_timeout} s to connect, "
            f"{ENVIRONMENT_PREFIX}DATABASE_CONNECT_TIMEOUT): {_one_line(error.orig)}; "
            "check the URL, the server and the account"
        ) from None
    except CommandError as error:
        raise SettingsError(
            f"{database}: the database's schema is not one this version knows "
            f"({_one_line(error)}); point the URL to this service's database"
        ) from None
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> None:
    arguments = build_parser().parse_args(argv)
    logging.basicConfig(
        level=arguments.log_level.upper().replace("TRACE", "DEBUG"),
        format="%(levelname)s %(name)s %(message)s",
    )
    try:
        settings = read_settings(arguments)
        migrate(settings)
    except (SettingsError, SettingsFileError) as problem:
        _fail(_one_line(problem))
    except ValueError as problem:
        # The settings' own checks (weak tokens) name the setting and the fix.
        _fail(_one_line(problem))
    os.environ[f"{ENVIRONMENT_PREFIX}MIGRATE_ON_START"] = "false"

    uvicorn.run(
        "clusterforge_userdir.server:create_app_from_environment",
        factory=True,
        host=arguments.host,
        port=arguments.port,
        workers=arguments.workers,
        log_level=arguments.log_level,
        access_log=not arguments.no_access_log,
        # The kit's guard; it reads the limits from the app (app.state.http_edge).
        http=GuardedHttpToolsProtocol,
    )


if __name__ == "__main__":
    main()
