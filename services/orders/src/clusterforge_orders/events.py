"""An in-process event bus with synchronous, asynchronous and after-commit listeners.

Ordering and failure, as :meth:`EventBus.publish` applies them:

- Listeners are taken in ascending ``priority``, ties in subscription order.
- A synchronous listener runs in the publishing thread before ``publish`` returns. If it
  raises, ``publish`` stops and raises :class:`SynchronousListenerError` (the failure
  is counted); listeners after it are not called, so within a transaction the publisher
  rolls back.
- An asynchronous listener is handed to the executor (``eventTaskExecutor``) and
  ``publish`` goes on. If it raises on the pool thread, the failure is logged and
  counted, and nobody else sees it. If the executor rejects it, the rejection is logged
  and counted, and ``publish`` goes on. When a transaction is current, the hand-off
  waits until that transaction ends, committed or rolled back (it runs either way, as
  Spring's plain ``@Async @EventListener`` does), before the publishing operation
  returns: a pool thread woken while the transaction holds SQLite's writer lock would
  only compete for the interpreter with the thread holding it, stretching the time
  every other writer waits.
- A listener with phase AFTER_COMMIT is not called during ``publish`` when a transaction
  is current: it is registered with that transaction and dispatched (synchronously or
  asynchronously, as subscribed) once it commits. On rollback it is dropped. Without a
  current transaction it is skipped (and counted) unless it was subscribed with
  ``fallback_execution=True``, in which case it is dispatched at once. A failing
  synchronous after-commit listener is logged and counted, never raised: the data is
  already committed.
- The asynchronous listeners of one event published in a transaction (plain and
  AFTER_COMMIT alike) are handed over together, as *one* executor task that calls them
  one after the other, each with its own failure handling; a rejection counts for each
  of them. The AFTER_COMMIT ones run first, then the plain ones, each group in priority
  order: a slow listener delays the ones after it in the task, and the order's sync
  should not wait for a notification. The task is handed over where the first of them
  stands among the transaction's end-of-scope work (which keeps priority order).
  Why one task: under load, waking a pool thread costs more than these listeners' own
  work (bench/RESULTS.md, "orders: one hand-off per order").

Listeners return nothing and never see each other.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .errors import SynchronousListenerError, TaskRejectedError
from .executor import ThreadPoolTaskExecutor
from .metrics import OrderMetrics
from .transactions import current_transaction

logger = logging.getLogger(__name__)

Listener = Callable[[Any], None]


class TransactionPhase(Enum):
    AFTER_COMMIT = "after_commit"


@dataclass(frozen=True, slots=True)
class ListenerRegistration:
    name: str
    event_type: type[object]
    callback: Listener
    asynchronous: bool
    priority: int
    phase: TransactionPhase | None
    fallback_execution: bool
    sequence: int


class EventBus:
    """Delivers events to the listeners subscribed for their type (see module doc)."""

    def __init__(self, *, executor: ThreadPoolTaskExecutor, metrics: OrderMetrics) -> None:
        self._executor = executor
        self._metrics = metrics
        self._registrations: list[ListenerRegistration] = []
        # listeners_for() per event type, computed once: publish() runs on every order.
        self._by_type: dict[type[object], tuple[ListenerRegistration, ...]] = {}

    def subscribe(
        self,
        event_type: type[object],
        callback: Listener,
        *,
        name: str,
        asynchronous: bool = False,
        priority: int = 0,
        phase: TransactionPhase | None = None,
        fallback_execution: bool = False,
    ) -> ListenerRegistration:
        """Add a listener. Subscribe before publishing starts; the list is not locked."""
        if any(existing.name == name for existing in self._registrations):
            raise ValueError(f"a listener named {name!r} is already subscribed")
        registration = ListenerRegistration(
            name=name,
            event_type=event_type,
            callback=callback,
            asynchronous=asynchronous,
            priority=priority,
            phase=phase,
            fallback_execution=fallback_execution,
            sequence=len(self._registrations),
        )
        self._registrations.append(registration)
        self._registrations.sort(key=lambda item: (item.priority, item.sequence))
        self._by_type.clear()
        self._metrics.register_listener(name)
        return registration

    def listeners_for(self, event_type: type[object]) -> list[ListenerRegistration]:
        return [item for item in self._registrations if issubclass(event_type, item.event_type)]

    def publish(self, event: object) -> None:
        event_type = type(event)
        self._metrics.event_published(event_type.__name__)
        transaction = current_transaction()
        registrations = self._by_type.get(event_type)
        if registrations is None:
            registrations = self._by_type[event_type] = tuple(self.listeners_for(event_type))
        # The asynchronous listeners to hand over as one task when the transaction ends.
        # Registered with it before the first synchronous listener can raise, so that a
        # rollback still hands over the plain ones subscribed ahead of the failure.
        handoff: list[ListenerRegistration] | None = None
        for registration in registrations:
            if registration.asynchronous and transaction is not None:
                if handoff is None:
                    handoff = []
                    transaction.register_after_completion(
                        functools.partial(self._hand_over, handoff, event)
                    )
                handoff.append(registration)
                continue
            if registration.phase is TransactionPhase.AFTER_COMMIT:
                if transaction is not None:
                    transaction.register_after_commit(
                        functools.partial(self._dispatch_after_commit, registration, event)
                    )
                elif registration.fallback_execution:
                    self._dispatch_after_commit(registration, event)
                else:
                    self._metrics.after_commit_skipped(registration.name)
                    logger.debug(
                        "skipped %s for %s: no transaction", registration.name, event_type.__name__
                    )
                continue
            self._dispatch(registration, event)

    def _hand_over(
        self, registrations: list[ListenerRegistration], event: object, committed: bool
    ) -> None:
        after_commit = [r for r in registrations if r.phase is TransactionPhase.AFTER_COMMIT]
        plain = [r for r in registrations if r.phase is not TransactionPhase.AFTER_COMMIT]
        # After-commit listeners first: the order's sync must not wait for a slow
        # notification (a webhook near its timeout) running ahead of it on the same thread.
        due = (*after_commit, *plain) if committed else tuple(plain)
        if due:
            self._submit(due, event)

    def _dispatch(self, registration: ListenerRegistration, event: object) -> None:
        if registration.asynchronous:
            self._submit((registration,), event)
            return
        try:
            registration.callback(event)
        except Exception as error:
            self._metrics.listener_failed(registration.name)
            raise SynchronousListenerError(listener=registration.name) from error

    def _dispatch_after_commit(self, registration: ListenerRegistration, event: object) -> None:
        try:
            self._dispatch(registration, event)
        except SynchronousListenerError:
            logger.exception("after-commit listener %s failed", registration.name)

    def _submit(self, registrations: tuple[ListenerRegistration, ...], event: object) -> None:
        try:
            self._executor.execute(functools.partial(self._run_async, registrations, event))
        except TaskRejectedError as rejection:
            for registration in registrations:
                self._metrics.task_rejected(registration.name)
            logger.warning(
                "listener(s) %s not run for %s: %s",
                ", ".join(registration.name for registration in registrations),
                type(event).__name__,
                rejection,
            )

    def _run_async(self, registrations: tuple[ListenerRegistration, ...], event: object) -> None:
        for registration in registrations:
            try:
                registration.callback(event)
            except Exception:
                self._metrics.listener_failed(registration.name)
                logger.exception(
                    "asynchronous listener %s failed for %s",
                    registration.name,
                    type(event).__name__,
                )
