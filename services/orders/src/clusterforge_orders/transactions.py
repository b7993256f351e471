"""Transactions that know which one is current, so events can wait for the commit.

The create operation runs in :meth:`TransactionManager.begin`. While it is open, the
transaction is the *current* one for the code running in that thread (a context
variable), which lets the event bus defer AFTER_COMMIT listeners until the commit and
lets the synchronous audit listener write in the same transaction. A nested ``begin``
joins the current transaction, like Spring's ``REQUIRED`` propagation.

The bus also defers the *hand-off* of its asynchronous listeners to the end of the
transaction's scope (:meth:`TransactionContext.register_after_completion`): plain ones run
whether it commits or rolls back, as Spring's ``@Async @EventListener`` does, but their
executor thread is not woken while the transaction still holds SQLite's writer lock,
where it would only compete for the interpreter with the thread that holds the lock.
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
# Called with whether the transaction committed.
CompletionCallback = Callable[[bool], None]


class TransactionContext:
    """The open transaction: its connection and the work deferred until it commits."""

    def __init__(self, *, connection: Connection) -> None:
        self.connection = connection
        # Both kinds, in registration order: they run in that one order once the scope ends.
        self._deferred: list[CompletionCallback] = []

    def register_after_commit(self, callback: AfterCommitCallback) -> None:
        """Run ``callback`` once the transaction has committed; never if it rolls back."""

        def if_committed(committed: bool) -> None:
            if committed:
                callback()

        self._deferred.append(if_committed)

    def register_after_completion(self, callback: CompletionCallback) -> None:
        """Run ``callback(committed)`` once the transaction has ended, either way.

        It runs after the connection and the writer slot are released, in the thread
        that opened the transaction, before ``begin`` returns or re-raises.
        """
        self._deferred.append(callback)

    def _run_deferred(self, *, committed: bool) -> None:
        for callback in self._deferred:
            try:
                callback(committed)
            except Exception:
                # After a commit, failing the caller now would report a lie; after a
                # rollback, the caller gets the error that caused it, not this one.
                logger.exception("callback at the end of a transaction failed")


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
        exception leaves it. Then, outside the transaction and the writer slot, it runs
        the registered callbacks in registration order: the after-completion ones always,
        the after-commit ones only after a commit.
        """
        joined = current_transaction()
        if joined is not None:
            yield joined
            return
        transaction: TransactionContext | None = None
        try:
            with self._database.writer_slot(), self._database.engine.begin() as connection:
                transaction = TransactionContext(connection=connection)
                token = _current_transaction.set(transaction)
                try:
                    yield transaction
                finally:
                    _current_transaction.reset(token)
        except BaseException:
            if transaction is not None:
                transaction._run_deferred(committed=False)
            raise
        if transaction is not None:  # always: the with block ran and did not raise
            transaction._run_deferred(committed=True)
