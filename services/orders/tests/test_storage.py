"""Migrations and exact decimals on a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from sqlalchemy import DateTime, func, inspect, select, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError

from clusterforge_orders import ConfigurationError, Database
from clusterforge_orders.storage import (
    ALEMBIC_VERSION_TABLE,
    PreparedInsert,
    _bind_processor,
    order_audit_log_table,
    order_sync_outbox_table,
    orders_table,
)


def test_migrations_create_the_schema_once(database_url: str) -> None:
    database = Database(url=database_url)
    try:
        database.migrate()
        database.migrate()
        tables = set(inspect(database.engine).get_table_names())
        assert {"orders", "order_audit_log", "order_sync_outbox", ALEMBIC_VERSION_TABLE} <= tables
        with database.engine.connect() as connection:
            version = connection.execute(text(f"SELECT version_num FROM {ALEMBIC_VERSION_TABLE}"))  # noqa: S608
            assert version.scalar_one() == "0002"
    finally:
        database.dispose()


@pytest.mark.parametrize(
    "amount", ["1", "1.00", "19.99", "12345678901234567.89", "0.00000000000000000000000000000001"]
)
def test_amounts_round_trip_exactly(database_url: str, amount: str) -> None:
    database = Database(url=database_url)
    try:
        database.migrate()
        with database.engine.begin() as connection:
            connection.execute(
                orders_table.insert().values(
                    order_id="ORD-1",
                    user_id="u",
                    product_name="p",
                    amount=Decimal(amount),
                    create_time=datetime(2024, 1, 1),
                )
            )
        with database.engine.connect() as connection:
            stored = connection.execute(select(orders_table.c.amount)).scalar_one()
        assert isinstance(stored, Decimal)
        assert stored == Decimal(amount)
        assert stored.as_tuple() == Decimal(amount).as_tuple(), "same digits and scale"
    finally:
        database.dispose()


@pytest.mark.parametrize("amount", ["1", "1.00", "19.99", "1E+5", "12345678901234567.89"])
def test_prepared_insert_stores_what_execute_stores(database_url: str, amount: str) -> None:
    """The audit and outbox rows' fast path writes the same bytes as Connection.execute."""
    columns = ("order_id", "user_id", "product_name", "amount", "create_time", "recorded_at")
    moment = datetime(2026, 11, 23, 7, 0, 0)
    recorded = datetime(2026, 11, 23, 7, 0, 0, 123456)
    database = Database(url=database_url)
    try:
        database.migrate()
        with database.engine.begin() as connection:
            values = ("x", "用户", "机械键盘", Decimal(amount), moment, recorded)
            connection.execute(
                order_audit_log_table.insert(),
                dict(zip(columns, ("by-execute", *values[1:]), strict=True)),
            )
            PreparedInsert(order_audit_log_table, columns).execute(
                connection, ("by-prepared", *values[1:])
            )
            PreparedInsert(
                order_sync_outbox_table, ("order_id", "created_at", "attempts", "next_attempt_at")
            ).execute(connection, ("by-prepared", recorded, 0, moment))
        with database.engine.connect() as connection:
            # As text: the stored representation, not what the types make of it.
            rows = connection.execute(
                text(
                    "SELECT order_id, user_id, product_name, CAST(amount AS TEXT),"
                    " CAST(create_time AS TEXT), CAST(recorded_at AS TEXT)"
                    " FROM order_audit_log ORDER BY order_id"
                )
            ).all()
            outbox = connection.execute(select(order_sync_outbox_table)).one()
            typed = connection.execute(
                select(order_audit_log_table.c.amount, order_audit_log_table.c.create_time)
            ).all()
        assert tuple(rows[0][1:]) == tuple(rows[1][1:])
        assert [row[0] for row in rows] == ["by-execute", "by-prepared"]
        # Same value on both paths; PostgreSQL's NUMERIC writes 1E+5 as 100000 on both.
        assert typed[0].amount.as_tuple() == typed[1].amount.as_tuple()
        assert all(row.amount == Decimal(amount) for row in typed)
        assert all(row.create_time == moment for row in typed)
        assert tuple(outbox) == ("by-prepared", recorded, 0, moment, None, None)
    finally:
        database.dispose()


def test_password_is_hidden_from_the_display_url() -> None:
    database = Database(url="postgresql+psycopg://orders:s3cret@db.invalid/orders")
    assert "s3cret" not in database.display_url


@pytest.mark.parametrize("url", ["not a url", "mysql://localhost/orders"])
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        Database(url=url)


def test_postgresql_connect_has_a_timeout() -> None:
    # A server that completes the TCP handshake (the kernel does) and then never speaks:
    # without a connect timeout, libpq waits for it forever.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    database = Database(
        url=f"postgresql+psycopg://orders@127.0.0.1:{port}/orders", connect_timeout_seconds=2
    )
    outcome: list[bool] = []
    try:
        worker = threading.Thread(target=lambda: outcome.append(database.is_reachable()))
        started = time.monotonic()
        worker.start()
        worker.join(30)
        elapsed = time.monotonic() - started
        assert outcome == [False], "gave up instead of hanging"
        assert elapsed < 10, f"took {elapsed:.1f} s"
    finally:
        database.dispose()
        silent.close()


def test_connect_timeout_in_the_url_wins() -> None:
    database = Database(
        url="postgresql+psycopg://orders@db.invalid/orders?connect_timeout=7",
        connect_timeout_seconds=2,
    )
    try:
        _, options = database.engine.dialect.create_connect_args(database.engine.url)
        assert str(options.get("connect_timeout")) == "7"
    finally:
        database.dispose()


def test_upgrade_to_0002_queues_every_existing_order(database_url: str) -> None:
    database = Database(url=database_url)
    try:
        database.migrate(revision="0001")
        with database.engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO orders (order_id, user_id, product_name, amount, create_time) "
                    "VALUES ('ORD-old', 'u', '键盘', '5', :moment)"
                ),
                {"moment": datetime(2026, 1, 2, 3, 4, 5)},
            )
            connection.execute(
                text(
                    "INSERT INTO order_sync_outbox (order_id, synchronized_at) "
                    "VALUES ('ORD-old', :moment)"
                ),
                {"moment": datetime(2026, 1, 2, 3, 4, 6)},
            )
        database.migrate()
        with database.engine.connect() as connection:
            row = connection.execute(select(order_sync_outbox_table)).one()
        assert row.order_id == "ORD-old"
        assert row.delivered_at is None, "0001's rows delivered nothing; queued again"
        assert row.next_attempt_at == datetime(2026, 1, 2, 3, 4, 5)
        assert row.attempts == 0
    finally:
        database.dispose()


@pytest.mark.parametrize("amount", ["1", "19.99", "1E+5", "12345678901234567.89"])
def test_prepared_order_insert_stores_what_execute_stores(database_url: str, amount: str) -> None:
    """The order row's fast path (OrderService) writes the same bytes as Connection.execute."""
    columns = ("order_id", "user_id", "product_name", "amount", "create_time")
    values = ("用户", "机械键盘", Decimal(amount), datetime(2026, 11, 23, 7, 0, 0))
    database = Database(url=database_url)
    try:
        database.migrate()
        with database.engine.begin() as connection:
            connection.execute(
                orders_table.insert(), dict(zip(columns, ("by-execute", *values), strict=True))
            )
            PreparedInsert(orders_table, columns).execute(connection, ("by-prepared", *values))
        with database.engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT order_id, user_id, product_name, CAST(amount AS TEXT),"
                    " CAST(create_time AS TEXT) FROM orders ORDER BY order_id"
                )
            ).all()
            typed = connection.execute(select(orders_table).order_by(orders_table.c.order_id)).all()
        assert [row[0] for row in rows] == ["by-execute", "by-prepared"]
        assert tuple(rows[0][1:]) == tuple(rows[1][1:])
        assert typed[0].amount.as_tuple() == typed[1].amount.as_tuple()
        assert tuple(typed[1][1:]) == values
    finally:
        database.dispose()


def test_prepared_insert_raises_sqlalchemys_error_and_the_transaction_rolls_back(
    database_url: str,
) -> None:
    """A driver error is SQLAlchemy's wrapper, as from execute(), and nothing stays."""
    columns = ("order_id", "user_id", "product_name", "amount", "create_time")
    values = ("u", "p", Decimal(3), datetime(2026, 11, 23, 7, 0, 0))
    insert = PreparedInsert(orders_table, columns)
    database = Database(url=database_url)
    try:
        database.migrate()
        with pytest.raises(IntegrityError), database.engine.begin() as connection:
            insert.execute(connection, ("ORD-dup", *values))
            insert.execute(connection, ("ORD-dup", *values))
        with database.engine.connect() as connection:
            count = connection.execute(select(func.count()).select_from(orders_table))
            assert count.scalar_one() == 0
    finally:
        database.dispose()


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 23, 7, 0, 0),
        datetime(2026, 11, 23, 7, 0, 0, 6),
        datetime(5, 1, 2, 3, 4, 5, 999999),
        datetime(9999, 12, 31, 23, 59, 59, 999999),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=8))),
        date(2026, 1, 2),
        None,
    ],
)
def test_sqlite_datetime_bind_writes_sqlalchemys_text(value: datetime | date | None) -> None:
    """The fast path for naive datetimes writes exactly SQLAlchemy's own SQLite text."""
    dialect = sqlite.dialect()
    general = DateTime().dialect_impl(dialect).bind_processor(dialect)
    fast = _bind_processor(DateTime(), dialect)
    assert general is not None and fast is not None and fast is not general
    assert fast(value) == general(value)
