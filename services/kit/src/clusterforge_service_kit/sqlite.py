"""SQLite as both services use it: a private file, WAL, and one busy timeout.

Needs SQLAlchemy (the ``server`` extra) only for the engine event; the file handling is
the standard library's.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, event

# How long a writer waits for another process's write lock before SQLite gives up. Past
# the client's read timeout (10 s by the spec) nobody is waiting for the answer any more.
SQLITE_BUSY_TIMEOUT_SECONDS = 10


class SqliteLocationError(ValueError):
    """The SQLite file cannot be created where the database URL puts it."""


def create_private_sqlite_file(database: str | None) -> None:
    """Create the SQLite file 0600 before SQLite does (it would honour the umask: 0644).

    SQLite gives its -wal and -shm files the main file's permissions, so they are
    private too. An existing file keeps its mode: the operator chose it. A missing
    directory is refused with the fix, rather than SQLite's "unable to open database
    file" at the first query.
    """
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    directory = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(directory):
        raise SqliteLocationError(
            f"cannot create the SQLite file {database}: its directory {directory} does not "
            "exist; create it (writable by the service) or point the URL to an existing one"
        )
    try:
        descriptor = os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as error:
        raise SqliteLocationError(
            f"cannot create the SQLite file {database} ({error.strerror}); make its "
            "directory writable by the service or point the URL elsewhere"
        ) from None
    os.close(descriptor)


def sqlite_connect_arguments() -> dict[str, Any]:
    """``connect_args`` for ``create_engine``: shared between threads, the one busy timeout."""
    return {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_SECONDS}


def _tune_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers go on while one writer writes; NORMAL keeps commits durable
    # against a process crash without an fsync per commit; the busy timeout makes a
    # second writer (another process) wait for the lock instead of failing at once.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SECONDS * 1000}")
    cursor.close()


def tune_sqlite_engine(engine: Engine) -> None:
    """Apply the pragmas above to every connection ``engine`` opens."""
    event.listen(engine, "connect", _tune_sqlite_connection)
