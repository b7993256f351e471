"""``clusterforge-userdir``: run the user-directory service standalone.

    clusterforge-userdir --host 127.0.0.1 --port 8081 --database-url sqlite:///./userdir.db

Bearer tokens never go on the command line: set ``CLUSTERFORGE_USERDIR_AUTH_TOKENS`` or
pass ``--auth-tokens-file``.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path

try:
    import uvicorn
    from sqlalchemy.exc import OperationalError

    from .migrate import upgrade_database
    from .settings import DEFAULT_DATABASE_URL, DEFAULT_PORT, ServerSettings
    from .storage import create_database_engine
except ModuleNotFoundError as error:  # the client-only install has no server
    raise SystemExit(
        f"clusterforge-userdir: the server needs the 'server' extra ({error.name} is "
        "missing); install it with: pip install 'clusterforge-userdir[server]'"
    ) from error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterforge-userdir", description="Run the clusterforge user-directory service."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (8081)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("CLUSTERFORGE_USERDIR_DATABASE_URL", DEFAULT_DATABASE_URL),
        help="SQLAlchemy URL: sqlite:///path.db (default: userdir.db in the working "
        "directory) or postgresql+psycopg://user@host/db",
    )
    parser.add_argument(
        "--auth-tokens-file", type=Path, help="file with accepted bearer tokens, one a line"
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (1)")
    parser.add_argument("--log-level", default="info", help="uvicorn log level (info)")
    parser.add_argument(
        "--no-access-log", action="store_true", help="do not log one line per request"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    arguments = build_parser().parse_args(argv)
    logging.basicConfig(
        level=arguments.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
    )
    os.environ["CLUSTERFORGE_USERDIR_DATABASE_URL"] = arguments.database_url
    if arguments.auth_tokens_file is not None:
        os.environ["CLUSTERFORGE_USERDIR_AUTH_TOKENS_FILE"] = str(arguments.auth_tokens_file)
    try:
        settings = ServerSettings()
        settings.accepted_tokens()  # a bad token file stops the start here, with its reason
    except (ValueError, OSError) as problem:
        raise SystemExit(f"clusterforge-userdir: {problem}") from None

    # Migrate once here, so several workers never race to create the schema.
    engine = create_database_engine(
        settings.database_url, connect_timeout=settings.database_connect_timeout
    )
    try:
        upgrade_database(engine)
    except OperationalError as error:
        # psycopg's own message names host and port, never the password; SQLAlchemy's
        # wrapper would add the statement and a link.
        raise SystemExit(
            f"clusterforge-userdir: cannot reach the database to migrate it (waited at most "
            f"{settings.database_connect_timeout} s to connect, "
            f"CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT): {error.orig}"
        ) from None
    finally:
        engine.dispose()
    os.environ["CLUSTERFORGE_USERDIR_MIGRATE_ON_START"] = "false"

    uvicorn.run(
        "clusterforge_userdir.server:create_app_from_environment",
        factory=True,
        host=arguments.host,
        port=arguments.port,
        workers=arguments.workers,
        log_level=arguments.log_level,
        access_log=not arguments.no_access_log,
    )


if __name__ == "__main__":
    main()
