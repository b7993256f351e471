"""Tables, engine and schema migrations of the order service.

The schema is versioned with Alembic; the migrations live inside the package and run
programmatically when the service starts (:meth:`Database.migrate`). Their version table
has its own name, so the service can share a database with another application.

Amounts are stored exactly: PostgreSQL gets an unconstrained ``NUMERIC``; SQLite, whose
``NUMERIC`` affinity would round through a binary float, gets the decimal's text.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from decimal import Decimal
from importlib import resources
from typing import Any

from alembic import command
from alembic.config import Config
from clusterforge_service_kit.sqlite import (
    SqliteLocationError,
    create_private_sqlite_file,
    sqlite_connect_arguments,
    tune_sqlite_engine,
)
from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Text,
    create_engine,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.types import TypeDecorator, TypeEngine

from .errors import ConfigurationError

ALEMBIC_VERSION_TABLE = "clusterforge_orders_alembic_version"
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0


class ExactDecimal(TypeDecorator[Decimal]):
    """A decimal column that never loses a digit, on PostgreSQL and on SQLite."""

    impl = String(80)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(asdecimal=True))
        return dialect.type_descriptor(String(80))

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> Any:
        if value is None or dialect.name == "postgresql":
            return value
        return str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None or isinstance(value, Decimal):
            return value
        return Decimal(str(value))


metadata = MetaData()


def _order_fields() -> list[Column[Any]]:
    """An order's fields after its id, as the orders table stores them.

    The audit log records each order with the same fields, stored the same way (an exact
    amount above all); a column belongs to one table, so each table gets its own copies.
    """
    return [
        Column("user_id", Text, nullable=False),
        Column("product_name", Text, nullable=False),
        Column("amount", ExactDecimal(), nullable=False),
        Column("create_time", DateTime, nullable=False),
    ]


orders_table = Table(
    "orders",
    metadata,
    Column("order_id", String(36), primary_key=True),
    *_order_fields(),
)

order_audit_log_table = Table(
    "order_audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("order_id", String(36), nullable=False, index=True),
    *_order_fields(),
    Column("recorded_at", DateTime, nullable=False),
)

# The transactional outbox: one row per order, inserted in the order's own transaction
# (so an order and its sync record commit or roll back together), marked delivered once
# the delivery target has the order. See outbox.py.
order_sync_outbox_table = Table(
    "order_sync_outbox",
    metadata,
    Column("order_id", String(36), primary_key=True),
    Column("created_at", DateTime, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", DateTime, nullable=False),
    Column("delivered_at", DateTime, nullable=True),
    Column("last_error", Text, nullable=True),
)


class PreparedInsert:
    """An INSERT of fixed columns, compiled once per dialect and run on the driver's cursor.

    ``Connection.execute(table.insert(), {...})`` costs about 70 us of interpreter time
    per row even with SQLAlchemy's statement cache (cache key, parameter dictionary,
    execution context, result object), and ``exec_driver_sql`` still about 20 us of it
    (execution context, result object); measured on the order path, the rows were a
    third of the listeners' cost. This compiles the statement once, keeps the column
    types' bind processors (``ExactDecimal`` and SQLite's ``DateTime`` text, exactly as
    ``execute`` would apply them) and runs it on a cursor of the connection's own DBAPI
    connection: same transaction, same SQL, same values in the database. A driver error
    is raised as SQLAlchemy's wrapper of it (``IntegrityError`` and so on), as
    ``execute`` raises it.
    """

    def __init__(self, table: Table, columns: Sequence[str]) -> None:
        self._table = table
        self._columns = tuple(columns)
        self._compiled: dict[
            Dialect, tuple[str, bool, tuple[Callable[[Any], Any] | None, ...]]
        ] = {}

    def _prepare(
        self, dialect: Dialect
    ) -> tuple[str, bool, tuple[Callable[[Any], Any] | None, ...]]:
        compiled = self._table.insert().compile(dialect=dialect, column_keys=list(self._columns))
        if dialect.positional and list(compiled.positiontup or ()) != list(self._columns):
            raise RuntimeError(f"unexpected parameter order in {compiled.string!r}")
        processors = tuple(
            _bind_processor(self._table.c[name].type, dialect) for name in self._columns
        )
        prepared = (compiled.string, dialect.positional, processors)
        self._compiled[dialect] = prepared
        return prepared

    def execute(self, connection: Connection, values: Sequence[Any]) -> None:
        """Insert one row; ``values`` in the order of ``columns``."""
        dialect = connection.dialect
        prepared = self._compiled.get(dialect) or self._prepare(dialect)
        sql, positional, processors = prepared
        row = tuple(
            value if processor is None else processor(value)
            for value, processor in zip(values, processors, strict=True)
        )
        parameters: Sequence[Any] | dict[str, Any] = (
            row if positional else dict(zip(self._columns, row, strict=True))
        )
        cursor = connection.connection.cursor()
        try:
            cursor.execute(sql, parameters)
        except dialect.loaded_dbapi.Error as error:
            raise DBAPIError.instance(
                sql, parameters, error, dialect.loaded_dbapi.Error, dialect=dialect
            ) from error
        finally:
            cursor.close()


def _bind_processor(column_type: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    processor = column_type.dialect_impl(dialect).bind_processor(dialect)
    if processor is not None and dialect.name == "sqlite" and isinstance(column_type, DateTime):
        return _fast_sqlite_datetime(processor)
    return processor


def _fast_sqlite_datetime(general: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """SQLite's ``DateTime`` text for a naive datetime, written by ``isoformat``.

    SQLAlchemy writes ``2026-01-02 03:04:05.000006`` through a %-format of eight fields
    (3.6 us); ``isoformat(" ", "microseconds")`` writes the same text in a third of it,
    and the order path binds four of them per order. Anything else (None, a date, an
    aware datetime, a subclass) goes to SQLAlchemy's own processor.
    """

    def process(value: Any) -> Any:
        if value.__class__ is datetime and value.tzinfo is None:
            return value.isoformat(" ", "microseconds")
        return general(value)

    return process


class Database:
    """The engine plus what the service needs around it: migrations and a write lock."""

    def __init__(
        self, *, url: str, connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    ) -> None:
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            # from None: the parser's message quotes the URL, password included.
            raise ConfigurationError(
                "orders.database-url is not a valid database URL; set it to e.g. "
                "sqlite:////var/lib/clusterforge-orders/orders.db or "
                "postgresql+psycopg://user@host/dbname"
            ) from None
        self.url = parsed
        self.dialect_name = parsed.get_backend_name()
        if self.dialect_name in ("sqlite", "postgresql") and parsed.drivername not in (
            "sqlite",
            "sqlite+pysqlite",
            "postgresql+psycopg",
        ):
            raise ConfigurationError(
                f"orders.database-url uses the driver {parsed.drivername!r}, which the service "
                "does not ship; set it to a sqlite:/// or postgresql+psycopg:// URL"
            )
        if self.dialect_name == "sqlite":
            try:
                create_private_sqlite_file(parsed.database)
            except SqliteLocationError as error:
                raise ConfigurationError(f"orders.database-url: {error}") from None
            self.engine: Engine = create_engine(
                parsed,
                connect_args=sqlite_connect_arguments(),
                pool_size=16,
                max_overflow=48,
            )
            tune_sqlite_engine(self.engine)
            # SQLite admits one writer per file. Queueing writers on an in-process lock
            # is fairer and faster than SQLite's busy handler, which sleeps and retries.
            self._writer_lock: contextlib.AbstractContextManager[Any] = threading.Lock()
        elif self.dialect_name == "postgresql":
            # Without a connect timeout a host that drops packets holds a request thread (and
            # the start) for the kernel's TCP timeout, minutes. A timeout in the URL's query
            # (?connect_timeout=N) wins over the setting.
            connect_args: dict[str, Any] = {}
            if "connect_timeout" not in parsed.query:
                connect_args["connect_timeout"] = max(1, math.ceil(connect_timeout_seconds))
            self.engine = create_engine(
                parsed,
                pool_size=16,
                max_overflow=48,
                pool_pre_ping=True,
                connect_args=connect_args,
            )
            self._writer_lock = contextlib.nullcontext()
        else:
            raise ConfigurationError(
                f"database backend {self.dialect_name!r} is not supported; "
                "use a sqlite:/// or postgresql+psycopg:// URL"
            )

    @property
    def display_url(self) -> str:
        """The URL without its password and query (which may carry one), for logs."""
        return self.url.set(query={}).render_as_string(hide_password=True)

    @contextlib.contextmanager
    def writer_slot(self) -> Iterator[None]:
        with self._writer_lock:
            yield

    def migrate(self, *, revision: str = "head") -> None:
        """Bring the schema to ``revision``, the newest by default (Alembic ``upgrade``).

        A database that cannot be reached or opened raises ConfigurationError, one line.
        """
        config = Config()
        location = resources.files(__package__).joinpath("migrations")
        config.set_main_option("script_location", str(location))
        config.set_main_option("version_table", ALEMBIC_VERSION_TABLE)
        try:
            with self.writer_slot(), self.engine.begin() as connection:
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
        except DBAPIError as error:
            # Unreachable, refused, or a file that is not a database: the driver's own
            # message (psycopg names host and port, never the password; SQLite says what
            # it could not open or read), on one line, without SQLAlchemy's statement.
            reason = " ".join(str(error.orig).split())
            raise ConfigurationError(
                f"cannot open the order database {self.display_url} (orders.database-url, "
                f"waited at most orders.database-connect-timeout-seconds to connect): "
                f"{reason}; check that it runs and accepts this URL"
            ) from None

    def is_reachable(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError:
            return False
        return True

    def dispose(self) -> None:
        self.engine.dispose()
