"""Storage of user records with SQLAlchemy Core: SQLite by default, PostgreSQL by URL.

The schema itself is owned by the Alembic migrations in ``migrations/``; the table below
only describes it for queries and must match the newest revision.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clusterforge_service_kit.sqlite import (
    SqliteLocationError,
    create_private_sqlite_file,
    sqlite_connect_arguments,
    tune_sqlite_engine,
)
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    bindparam,
    create_engine,
    delete,
    func,
    insert,
    make_url,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from .errors import DuplicateUsernameError, UserNotFoundError
from .models import (
    NICKNAME_MAX_LENGTH,
    USERNAME_MAX_LENGTH,
    UserStatus,
    format_local_date_time,
)
from .settings import DEFAULT_DATABASE_CONNECT_TIMEOUT

metadata = MetaData()

users_table = Table(
    "userdir_users",
    metadata,
    # SQLite only auto-numbers a column declared exactly INTEGER PRIMARY KEY.
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("username", String(USERNAME_MAX_LENGTH), nullable=False),
    Column("nickname", String(NICKNAME_MAX_LENGTH), nullable=True),
    Column("mobile", String(16), nullable=True),
    Column("status", SmallInteger, nullable=False),
    Column("created_at", DateTime(timezone=False), nullable=False),
)

_USER_COLUMNS = (
    users_table.c.id,
    users_table.c.username,
    users_table.c.nickname,
    users_table.c.mobile,
    users_table.c.status,
    users_table.c.created_at,
)


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: int
    username: str
    nickname: str | None
    mobile: str | None
    status: int
    created_at: datetime

    def to_wire(self) -> dict[str, Any]:
        """The UserResponse JSON object, built by hand because this is the hot path."""
        return {
            "id": self.id,
            "username": self.username,
            "nickname": self.nickname,
            "mobile": self.mobile,
            "status": self.status,
            "createdAt": format_local_date_time(self.created_at),
        }


@dataclass(frozen=True, slots=True)
class UserQuery:
    """Filters shared by the list, page and search endpoints (all optional)."""

    keyword: str | None = None
    statuses: Sequence[int] | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    exclude_locked: bool = False


def _record(row: Any) -> UserRecord:
    return UserRecord(
        id=row[0],
        username=row[1],
        nickname=row[2],
        mobile=row[3],
        status=row[4],
        created_at=row[5],
    )


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(query: UserQuery) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    keyword = (query.keyword or "").strip()
    if keyword:
        pattern = f"%{_escape_like(keyword)}%"
        conditions.append(
            users_table.c.username.ilike(pattern, escape="\\")
            | users_table.c.nickname.ilike(pattern, escape="\\")
            | users_table.c.mobile.ilike(pattern, escape="\\")
        )
    if query.statuses:
        conditions.append(users_table.c.status.in_(sorted(set(query.statuses))))
    if query.created_from is not None:
        conditions.append(users_table.c.created_at >= query.created_from)
    if query.created_to is not None:
        conditions.append(users_table.c.created_at <= query.created_to)
    if query.exclude_locked:
        conditions.append(users_table.c.status != int(UserStatus.LOCKED))
    return conditions


def create_database_engine(
    database_url: str, *, connect_timeout: int = DEFAULT_DATABASE_CONNECT_TIMEOUT
) -> Engine:
    """An engine with the settings each backend needs for concurrent writers.

    ``connect_timeout`` (seconds) bounds every new PostgreSQL connection, the migration's
    and the health check's included, and wins over one given in the URL. SQLite opens a
    local file and has nothing to wait for.
    """
    if database_url.startswith("sqlite"):
        prepare_sqlite_file(database_url)
        engine = create_engine(
            database_url,
            connect_args=sqlite_connect_arguments(),
            pool_size=20,
            max_overflow=20,
        )
        tune_sqlite_engine(engine)
        return engine
    return create_engine(
        database_url,
        connect_args={"connect_timeout": connect_timeout},
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
    )


# The kit's error, under the name this module has always raised.
DatabaseLocationError = SqliteLocationError


def prepare_sqlite_file(database_url: str) -> None:
    """Create the SQLite file with mode 0600 before SQLite does (the kit's rule)."""
    create_private_sqlite_file(make_url(database_url).database)


def now_local() -> datetime:
    return datetime.now().replace(microsecond=0)


class UserRepository:
    """Every read and write of user records; one short transaction per call."""

    def __init__(self, *, engine: Engine) -> None:
        self._engine = engine
        self._select_by_id = select(*_USER_COLUMNS).where(
            users_table.c.id == bindparam("user_id", type_=BigInteger())
        )

    @property
    def engine(self) -> Engine:
        return self._engine

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        with self._engine.begin() as connection:
            yield connection

    def create(
        self,
        *,
        username: str,
        nickname: str | None,
        mobile: str | None,
        status: int = int(UserStatus.ACTIVE),
        created_at: datetime | None = None,
    ) -> UserRecord:
        statement = (
            insert(users_table)
            .values(
                username=username,
                nickname=nickname,
                mobile=mobile,
                status=status,
                created_at=created_at or now_local(),
            )
            .returning(*_USER_COLUMNS)
        )
        try:
            with self._transaction() as connection:
                row = connection.execute(statement).one()
        except IntegrityError as error:
            raise DuplicateUsernameError(username=username) from error
        return _record(row)

    def get(self, user_id: int) -> UserRecord:
        with self._engine.connect() as connection:
            row = connection.execute(self._select_by_id, {"user_id": user_id}).first()
        if row is None:
            raise UserNotFoundError(user_id=user_id)
        return _record(row)

    def update(self, user_id: int, changes: dict[str, Any]) -> UserRecord:
        with self._transaction() as connection:
            if changes:
                result = connection.execute(
                    update(users_table).where(users_table.c.id == user_id).values(**changes)
                )
                if result.rowcount == 0:
                    raise UserNotFoundError(user_id=user_id)
            row = connection.execute(self._select_by_id, {"user_id": user_id}).first()
        if row is None:
            raise UserNotFoundError(user_id=user_id)
        return _record(row)

    def delete(self, user_id: int) -> None:
        with self._transaction() as connection:
            result = connection.execute(delete(users_table).where(users_table.c.id == user_id))
        if result.rowcount == 0:
            raise UserNotFoundError(user_id=user_id)

    def find(self, query: UserQuery, *, offset: int, limit: int) -> list[UserRecord]:
        statement = (
            select(*_USER_COLUMNS)
            .where(*_conditions(query))
            .order_by(users_table.c.id)
            .offset(offset)
            .limit(limit)
        )
        with self._engine.connect() as connection:
            return [_record(row) for row in connection.execute(statement)]

    def count(self, query: UserQuery) -> int:
        statement = select(func.count()).select_from(users_table).where(*_conditions(query))
        with self._engine.connect() as connection:
            return int(connection.execute(statement).scalar_one())

    def count_all(self) -> int:
        return self.count(UserQuery())
