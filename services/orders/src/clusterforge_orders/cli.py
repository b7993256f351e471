"""``clusterforge-orders``: run the order service standalone.

    clusterforge-orders --host 127.0.0.1 --port 8082 --database-url sqlite:///orders.db

Every flag is optional; the YAML file (``--config`` or ``CLUSTERFORGE_ORDERS_CONFIG``)
and the environment supply the rest. A database password and the bearer tokens belong in
the environment (``ORDERS_DATABASE_URL``, ``ORDERS_AUTH_TOKENS``), the YAML file or the
token file (``orders.auth-tokens-file``), never on the command line. The YAML and token
files must not be readable by others (``chmod 600``; see settings.check_private_file).

Bad settings end the start with one line naming the setting and the fix, exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import uvicorn
from clusterforge_service_kit.http_edge import GuardedHttpToolsProtocol

from .app import create_app
from .errors import OrdersError
from .logsafe import configure_logging
from .runtime import OrderServiceRuntime
from .settings import load_settings

logger = logging.getLogger(__name__)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag ends in one line (and status 2) without the usage."""

    def error(self, message: str) -> NoReturn:
        print(f"clusterforge-orders: {message}; see clusterforge-orders --help", file=sys.stderr)
        raise SystemExit(2)


def _parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _OneLineParser(
        prog="clusterforge-orders",
        description="Run the order service (POST /orders, GET /health, GET /metrics).",
    )
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to bind (default 8082)")
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL (default sqlite:///orders.db in the working directory)",
    )
    parser.add_argument("--config", type=Path, help="YAML settings file")
    parser.add_argument("--log-level", help="debug, info, warning or error (default info)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parse_arguments(argv)
    try:
        settings = load_settings(
            config_file=arguments.config,
            overrides={
                "orders.host": arguments.host,
                "orders.port": arguments.port,
                "orders.database-url": arguments.database_url,
                "orders.log-level": arguments.log_level,
            },
        )
    except OrdersError as error:
        print(f"clusterforge-orders: {error}", file=sys.stderr)
        return 2
    # The logging HOWTO's "Optimization" knobs for what LOG_FORMAT never prints: the
    # caller's file and line (a stack walk per record), the process id and the
    # multiprocessing process name. The default notification sender logs one line per
    # order, so per record this is on the order path.
    logging._srcfile = None
    logging.logProcesses = False
    logging.logMultiprocessing = False
    configure_logging(settings.orders.log_level)
    try:
        runtime = OrderServiceRuntime.open(settings)
    except OrdersError as error:
        print(f"clusterforge-orders: {error}", file=sys.stderr)
        return 2
    try:
        uvicorn.run(
            create_app(runtime=runtime),
            host=settings.orders.host,
            port=settings.orders.port,
            access_log=settings.orders.access_log,
            log_level=settings.orders.log_level,
            # The kit's guard; it reads the limits from the app (app.state.http_edge).
            http=GuardedHttpToolsProtocol,
            log_config=None,
            timeout_graceful_shutdown=None,
        )
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
