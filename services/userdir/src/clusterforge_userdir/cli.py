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
import logging
import os
import re
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import NoReturn

try:
    import uvicorn
    from alembic.util.exc import CommandError
    from clusterforge_service_kit import TOKEN_RECIPE, is_loopback_host
    from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    from .migrate import upgrade_database
    from .settings import (
        DEFAULT_PORT,
        ENVIRONMENT_PREFIX,
        PORT_RANGE,
        SETTINGS_FILE_VARIABLE,
        WORKERS_RANGE,
        ServerSettings,
        SettingsError,
        SettingsFileError,
        load_server_settings,
        variable_of,
    )
    from .storage import DatabaseLocationError, create_database_engine
except ModuleNotFoundError as error:  # the client-only install has no server
    raise SystemExit(
        f"clusterforge-userdir: the server needs the 'server' extra ({error.name} is "
        "missing); install it with: pip install 'clusterforge-userdir[server]'"
    ) from error


EXIT_BAD_SETTINGS = 2
# A host to bind: an IP address, a name, or empty (every address).
_BIND_HOST = re.compile(r"[A-Za-z0-9_.:-]*")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# Where each setting can come from, for messages that name what the operator set.
_OPTION_OF_FIELD = {"database_url": "--database-url", "auth_tokens_file": "--auth-tokens-file"}


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


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def read_settings(
    arguments: argparse.Namespace, environ: MutableMapping[str, str] | None = None
) -> ServerSettings:
    """The settings from file, environment and arguments (in rising order of weight).

    Each source is read strictly (settings.load_server_settings); what was read is put
    into the environment, where uvicorn's worker processes read it again.
    """
    environ = os.environ if environ is None else environ
    if not _BIND_HOST.fullmatch(arguments.host) or len(arguments.host) > 253:
        raise SettingsError(
            "--host is not an address or host name; set an IP address (127.0.0.1), a host "
            "name, or an empty string for every address"
        )
    low_port, high_port = PORT_RANGE
    if not low_port <= arguments.port <= high_port:
        raise SettingsError(f"--port {arguments.port} is not a port; set {low_port} to {high_port}")
    low_workers, high_workers = WORKERS_RANGE
    if not low_workers <= arguments.workers <= high_workers:
        raise SettingsError(
            f"--workers {arguments.workers} is out of range; set {low_workers} to {high_workers}"
        )
    settings_file = arguments.settings_file or environ.get(SETTINGS_FILE_VARIABLE)
    options: dict[str, str] = {}
    if arguments.database_url is not None:
        options["database_url"] = arguments.database_url
    if arguments.auth_tokens_file is not None:
        options["auth_tokens_file"] = str(arguments.auth_tokens_file)
    settings = load_server_settings(
        settings_file=Path(settings_file) if settings_file else None,
        environ=environ,
        options=options,
        option_names=_OPTION_OF_FIELD,
    )
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
    # The workers build their settings from the environment (create_app_from_environment).
    for field in settings.model_fields_set:
        value = getattr(settings, field)
        text = value.get_secret_value() if hasattr(value, "get_secret_value") else value
        environ[variable_of(field)] = str(text).lower() if isinstance(text, bool) else str(text)
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
