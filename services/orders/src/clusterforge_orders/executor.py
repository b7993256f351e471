"""``eventTaskExecutor``: a thread pool with the semantics of Java's ThreadPoolExecutor.

Why not :class:`concurrent.futures.ThreadPoolExecutor`? It has none of the behaviour the
spec asks for:

- its work queue is unbounded, so it never rejects a task and a slow listener makes the
  backlog (and memory) grow without limit instead of being counted as rejections;
- it starts a new thread for each submission while no thread is idle, up to
  ``max_workers``, i.e. it grows *before* queueing, where Java grows past the core size
  only once the queue is full;
- it has no core/maximum split and never retires surplus threads after a keep-alive;
- ``shutdown(wait=True)`` has no time limit, so a stuck listener blocks shutdown forever;
- its threads are named ``<prefix>_<n>``, not ``event-task-<n>``.

This pool follows ``java.util.concurrent.ThreadPoolExecutor`` with an ``AbortPolicy``,
configured like Spring's ``ThreadPoolTaskExecutor``:

1. below ``core_pool_size`` threads, a new thread starts with the task;
2. otherwise the task is queued if the queue (``queue_capacity``) has room;
3. otherwise, below ``max_pool_size`` threads, a new thread starts with the task;
4. otherwise the task is rejected with :class:`TaskRejectedError`.

One addition, for the interpreter's sake: the *pick-up window*. A worker that has just
finished a task and finds the queue empty waits up to ``pickup_window_seconds`` (5 ms)
for the next tasks, and while it does, a new task is only queued: no other thread is
woken for it. At the end of the window that worker runs what came, in order. So under
a steady stream of short tasks one thread wakes per window instead of one per task:
waking a pool thread costs the service more interpreter time than its listeners' work
(bench/RESULTS.md, "orders: one hand-off per order"). A task that arrives while no
worker is collecting (after a quiet spell, or while every awake worker runs a task)
wakes an idle thread at once, as in Java, so a slow task never holds back the ones
that arrive after it; only the tasks of the same window wait for it when nothing else
arrives. A backlog of ``MAX_TASKS_HELD_FOR_PICKUP`` (16) wakes threads as in Java, so a
burst is not rejected while threads wait out a window. ``pickup_window_seconds=0``
gives Java's dispatch exactly.

Threads above the core size retire after ``keep_alive_seconds`` without work. Shutdown
stops intake, lets the threads finish the running and the queued tasks, and waits for
them at most ``await_termination_seconds`` (30 s); queued tasks still waiting then are
dropped and reported. Threads are daemons, so a task stuck past that limit cannot keep
the process alive.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .errors import TaskRejectedError

logger = logging.getLogger(__name__)

Task = Callable[[], None]

DEFAULT_AWAIT_TERMINATION_SECONDS = 30.0
DEFAULT_KEEP_ALIVE_SECONDS = 60.0
DEFAULT_PICKUP_WINDOW_SECONDS = 0.005
# A backlog this long wakes a thread even during a pick-up window: a burst must not fill
# the queue (and be rejected) while idle threads wait for the window to end.
MAX_TASKS_HELD_FOR_PICKUP = 16


@dataclass(frozen=True, slots=True)
class ExecutorStats:
    """A consistent snapshot of the pool, for metrics and the benchmark's backlog."""

    pool_size: int
    active_threads: int
    queue_size: int
    completed_tasks: int
    rejected_tasks: int


@dataclass(frozen=True, slots=True)
class ShutdownReport:
    """How shutdown ended: ``terminated`` is False when the time limit cut it short."""

    terminated: bool
    abandoned_tasks: int
    waited_seconds: float


class ThreadPoolTaskExecutor:
    """A bounded pool: core threads, a bounded queue, surplus threads, then rejection."""

    def __init__(
        self,
        *,
        name: str = "eventTaskExecutor",
        core_pool_size: int = 4,
        max_pool_size: int = 8,
        queue_capacity: int = 200,
        thread_name_prefix: str = "event-task-",
        keep_alive_seconds: float = DEFAULT_KEEP_ALIVE_SECONDS,
        await_termination_seconds: float = DEFAULT_AWAIT_TERMINATION_SECONDS,
        pickup_window_seconds: float = DEFAULT_PICKUP_WINDOW_SECONDS,
    ) -> None:
        if core_pool_size < 0 or max_pool_size < 1 or max_pool_size < core_pool_size:
            raise ValueError(
                f"pool sizes core={core_pool_size} max={max_pool_size} are invalid; "
                "need 0 <= core <= max and max >= 1"
            )
        if queue_capacity < 0:
            raise ValueError(f"queue_capacity {queue_capacity} must be 0 or more")
        if pickup_window_seconds < 0:
            raise ValueError(f"pickup_window_seconds {pickup_window_seconds} must be 0 or more")
        self.name = name
        self.core_pool_size = core_pool_size
        self.max_pool_size = max_pool_size
        self.queue_capacity = queue_capacity
        self.thread_name_prefix = thread_name_prefix
        self.keep_alive_seconds = keep_alive_seconds
        self.await_termination_seconds = await_termination_seconds
        self.pickup_window_seconds = pickup_window_seconds

        self._lock = threading.Lock()
        self._work_available = threading.Condition(self._lock)
        self._worker_exited = threading.Condition(self._lock)
        self._queue: deque[Task] = deque()
        self._workers: set[threading.Thread] = set()
        self._idle_workers = 0
        # A worker is waiting out its pick-up window: new tasks only queue (module doc).
        self._collecting = False
        self._active_tasks = 0
        self._completed_tasks = 0
        self._rejected_tasks = 0
        self._shut_down = False
        self._thread_numbers = itertools.count(1)

    # -- intake --------------------------------------------------------------------------

    def execute(self, task: Task) -> None:
        """Run ``task`` on a pool thread, or raise :class:`TaskRejectedError` at once."""
        with self._lock:
            if self._shut_down:
                self._rejected_tasks += 1
                raise TaskRejectedError(f"{self.name} is shut down", executor=self.name)
            if len(self._workers) < self.core_pool_size:
                self._start_worker(task)
                return
            if self._queue_has_room():
                self._queue.append(task)
                if not self._workers:
                    # Only reachable with core_pool_size 0: someone must drain the queue.
                    self._start_worker(None)
                elif not self._collecting or len(self._queue) >= MAX_TASKS_HELD_FOR_PICKUP:
                    self._work_available.notify()
                return
            if len(self._workers) < self.max_pool_size:
                self._start_worker(task)
                return
            self._rejected_tasks += 1
            raise TaskRejectedError(
                f"{self.name} is saturated ({len(self._workers)} threads busy, "
                f"{len(self._queue)} tasks queued)",
                executor=self.name,
            )

    def _queue_has_room(self) -> bool:
        if self.queue_capacity == 0:
            # Java's SynchronousQueue: a hand-off succeeds only to a thread already waiting.
            return self._idle_workers > len(self._queue)
        return len(self._queue) < self.queue_capacity

    def _start_worker(self, first_task: Task | None) -> None:
        thread = threading.Thread(
            target=self._work,
            args=(first_task,),
            name=f"{self.thread_name_prefix}{next(self._thread_numbers)}",
            daemon=True,
        )
        self._workers.add(thread)
        thread.start()

    # -- workers -------------------------------------------------------------------------

    def _work(self, first_task: Task | None) -> None:
        task = first_task
        try:
            while True:
                if task is not None:
                    self._run(task)
                with self._lock:
                    task = self._next_task()
                    if task is None:
                        return
        finally:
            with self._lock:
                self._workers.discard(threading.current_thread())
                self._worker_exited.notify_all()

    def _next_task(self) -> Task | None:
        """Wait for a task; None tells the calling worker to exit. Called with the lock."""
        may_collect = self.pickup_window_seconds > 0
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._shut_down:
                return None
            surplus = len(self._workers) > self.core_pool_size
            self._idle_workers += 1
            try:
                if may_collect and not self._collecting:
                    # Once per finished task, so that an idle pool does not poll: after a
                    # window without tasks this worker waits like the others.
                    may_collect = False
                    self._collecting = True
                    try:
                        self._work_available.wait(self.pickup_window_seconds)
                    finally:
                        self._collecting = False
                elif surplus:
                    woken = self._work_available.wait(self.keep_alive_seconds)
                    if not woken and not self._queue and len(self._workers) > self.core_pool_size:
                        return None
                else:
                    self._work_available.wait()
            finally:
                self._idle_workers -= 1

    def _run(self, task: Task) -> None:
        with self._lock:
            self._active_tasks += 1
        try:
            task()
        except Exception:
            # The event bus wraps listeners and counts their failures; this only keeps
            # the worker alive when a bare task escapes that.
            logger.exception("task on %s failed", self.name)
        finally:
            with self._lock:
                self._active_tasks -= 1
                self._completed_tasks += 1

    # -- observation and shutdown --------------------------------------------------------

    def stats(self) -> ExecutorStats:
        with self._lock:
            return ExecutorStats(
                pool_size=len(self._workers),
                active_threads=self._active_tasks,
                queue_size=len(self._queue),
                completed_tasks=self._completed_tasks,
                rejected_tasks=self._rejected_tasks,
            )

    @property
    def is_shut_down(self) -> bool:
        with self._lock:
            return self._shut_down

    def shutdown(self, *, timeout_seconds: float | None = None) -> ShutdownReport:
        """Refuse new tasks, then wait for running and queued ones, at most the limit.

        ``timeout_seconds`` defaults to ``await_termination_seconds`` (30 s).
        """
        limit = self.await_termination_seconds if timeout_seconds is None else timeout_seconds
        started = time.monotonic()
        deadline = started + limit
        with self._lock:
            self._shut_down = True
            self._work_available.notify_all()
            while self._workers:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._worker_exited.wait(remaining)
            abandoned = len(self._queue)
            self._queue.clear()
            terminated = not self._workers
        waited = time.monotonic() - started
        if terminated:
            logger.info("%s shut down after %.1f s", self.name, waited)
        else:
            logger.warning(
                "%s did not finish within %.1f s; %d queued task(s) dropped, "
                "running tasks left on daemon threads",
                self.name,
                limit,
                abandoned,
            )
        return ShutdownReport(
            terminated=terminated, abandoned_tasks=abandoned, waited_seconds=waited
        )
