"""Transactions that know which one is current, so events can wait for the commit.

The create operation runs in :meth:`TransactionManager.begin`. While it is open, the
transaction is the *current* one for the code running in that thread (a context
variable), which lets the event bus defer AFTER_COMMIT listeners until the commit and
lets the synchronous audit listener write in the same transaction. A nested ``begin``
joins the current transaction, like Spring's ``REQUIRED`` propagation.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from sqlalchemy import Connection

from .storage import Database

logger = logging.getLogger(__name__)

AfterCommitCallback = Callable[[], None]


class TransactionContext:
    """The open transaction: its connection and the work deferred until it commits."""

    def __init__(self, *, connection: Connection) -> None:
        self.connection = connection
        self._after_commit: list[AfterCommitCallback] = []

    def register_after_commit(self, callback: AfterCommitCallback) -> None:
        """Run ``callback`` once the transaction has committed; never if it rolls back."""
        self._after_commit.append(callback)

    def _run_after_commit(self) -> None:
        for callback in self._after_commit:
            try:
                callback()
            except Exception:
                # The data is committed: failing the caller now would report a lie.
                logger.exception("after-commit callback failed")


_current_transaction: ContextVar[TransactionContext | None] = ContextVar(
    "clusterforge_orders_transaction", default=None
)


def current_transaction() -> TransactionContext | None:
    """The transaction open in the calling code, or None outside one."""
    return _current_transaction.get()


class TransactionManager:
    def __init__(self, *, database: Database) -> None:
        self._database = database

    @contextlib.contextmanager
    def begin(self) -> Iterator[TransactionContext]:
        """Open a transaction, or join the current one.

        The outermost block commits when it exits normally and rolls back when an
        exception leaves it; after a commit it runs the registered after-commit callbacks,
        outside the transaction.
        """
        joined = current_transaction()
        if joined is not None:
            yield joined
            return
        with self._database.writer_slot(), self._database.engine.begin() as connection:
            transaction = TransactionContext(connection=connection)
            token = _current_transaction.set(transaction)
            try:
                yield transaction
            finally:
                _current_transaction.reset(token)
        transaction._run_after_commit()
