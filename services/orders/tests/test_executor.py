"""eventTaskExecutor: Java ThreadPoolExecutor semantics, with real threads."""

from __future__ import annotations

import threading
import time

import pytest

from clusterforge_orders import TaskRejectedError, ThreadPoolTaskExecutor
from clusterforge_orders.executor import MAX_TASKS_HELD_FOR_PICKUP


class Gate:
    """Tasks that block until released, and record which thread ran them."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.finished: list[str] = []
        self.lock = threading.Lock()

    def task(self) -> None:
        self.started.release()
        self.release.wait(20)
        with self.lock:
            self.finished.append(threading.current_thread().name)

    def wait_started(self, count: int) -> None:
        for _ in range(count):
            assert self.started.acquire(timeout=5), "task did not start"


def test_threads_carry_the_prefix_and_number() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=2, thread_name_prefix="event-task-")
    gate = Gate()
    gate.release.set()
    try:
        for _ in range(2):
            executor.execute(gate.task)
        gate.wait_started(2)
    finally:
        executor.shutdown(timeout_seconds=5)
    assert sorted(gate.finished) == ["event-task-1", "event-task-2"]


def test_grows_past_core_only_when_the_queue_is_full_then_rejects() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=2, max_pool_size=4, queue_capacity=3)
    gate = Gate()
    try:
        for _ in range(2):
            executor.execute(gate.task)
        gate.wait_started(2)
        for _ in range(3):
            executor.execute(gate.task)
        stats = executor.stats()
        assert (stats.pool_size, stats.queue_size) == (2, 3), "queued before growing"
        executor.execute(gate.task)
        executor.execute(gate.task)
        gate.wait_started(2)
        stats = executor.stats()
        assert (stats.pool_size, stats.queue_size, stats.active_threads) == (4, 3, 4)
        with pytest.raises(TaskRejectedError, match="saturated"):
            executor.execute(gate.task)
        assert executor.stats().rejected_tasks == 1
        gate.release.set()
        gate.wait_started(3)
    finally:
        gate.release.set()
        report = executor.shutdown(timeout_seconds=5)
    assert report.terminated
    assert len(gate.finished) == 7
    assert executor.stats().completed_tasks == 7


def test_surplus_threads_retire_after_keep_alive() -> None:
    executor = ThreadPoolTaskExecutor(
        core_pool_size=1, max_pool_size=3, queue_capacity=1, keep_alive_seconds=0.2
    )
    gate = Gate()
    try:
        for _ in range(4):
            executor.execute(gate.task)
        gate.wait_started(3)
        assert executor.stats().pool_size == 3
        gate.release.set()
        deadline = time.monotonic() + 5
        while executor.stats().pool_size > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert executor.stats().pool_size == 1
    finally:
        executor.shutdown(timeout_seconds=5)


def test_zero_capacity_hands_off_to_idle_threads_only() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=1, max_pool_size=1, queue_capacity=0)
    gate = Gate()
    try:
        executor.execute(gate.task)
        gate.wait_started(1)
        with pytest.raises(TaskRejectedError):
            executor.execute(gate.task)
        gate.release.set()
        deadline = time.monotonic() + 5
        while executor.stats().active_threads and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        executor.execute(gate.task)  # the idle core thread takes it
        gate.wait_started(1)
    finally:
        executor.shutdown(timeout_seconds=5)


def test_a_failing_task_does_not_kill_its_thread() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=1, max_pool_size=1)
    done = threading.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    try:
        executor.execute(fail)
        executor.execute(done.set)
        assert done.wait(5)
        assert executor.stats().pool_size == 1
    finally:
        executor.shutdown(timeout_seconds=5)


def test_shutdown_waits_for_running_and_queued_tasks() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=1, max_pool_size=1, queue_capacity=10)
    ran: list[int] = []

    def slow(number: int) -> None:
        time.sleep(0.1)
        ran.append(number)

    for number in range(5):
        executor.execute(lambda number=number: slow(number))  # type: ignore[misc]
    report = executor.shutdown(timeout_seconds=10)
    assert report.terminated
    assert report.abandoned_tasks == 0
    assert ran == [0, 1, 2, 3, 4]
    with pytest.raises(TaskRejectedError, match="shut down"):
        executor.execute(lambda: None)


def test_shutdown_never_waits_past_its_limit() -> None:
    executor = ThreadPoolTaskExecutor(
        core_pool_size=1, max_pool_size=1, queue_capacity=10, await_termination_seconds=1.0
    )
    gate = Gate()
    try:
        for _ in range(4):
            executor.execute(gate.task)
        gate.wait_started(1)
        started = time.monotonic()
        report = executor.shutdown()
        waited = time.monotonic() - started
    finally:
        gate.release.set()
    assert 0.9 <= waited < 3.0
    assert not report.terminated
    assert report.abandoned_tasks == 3
    time.sleep(0.2)
    assert gate.finished == ["event-task-1"], "queued tasks were dropped, not run"


def _idle_pool(core: int, pickup_window_seconds: float) -> ThreadPoolTaskExecutor:
    """A pool whose core threads all started, ran a task and went idle (windows passed)."""
    executor = ThreadPoolTaskExecutor(
        core_pool_size=core, pickup_window_seconds=pickup_window_seconds
    )
    gate = Gate()
    gate.release.set()
    for _ in range(core):
        executor.execute(gate.task)
    gate.wait_started(core)
    time.sleep(pickup_window_seconds + 0.3)
    return executor


def test_tasks_of_one_pickup_window_run_on_the_thread_that_collects() -> None:
    executor = _idle_pool(4, pickup_window_seconds=1.0)
    ran: list[tuple[str, float]] = []
    done = threading.Semaphore(0)

    def record() -> None:
        ran.append((threading.current_thread().name, time.monotonic()))
        done.release()

    try:
        submitted = time.monotonic()
        executor.execute(record)
        assert done.acquire(timeout=5)
        assert ran[0][1] - submitted < 0.5, "after a quiet spell a task wakes a thread at once"
        time.sleep(0.1)  # that thread now waits out its window
        for _ in range(10):
            executor.execute(record)
        assert executor.stats().queue_size == 10, "queued; no other thread woken"
        for _ in range(10):
            assert done.acquire(timeout=5)
    finally:
        executor.shutdown(timeout_seconds=5)
    assert {name for name, _ in ran} == {ran[0][0]}, "one thread ran the window's tasks"


def test_a_slow_task_does_not_hold_back_a_task_that_arrives_after_it() -> None:
    executor = _idle_pool(2, pickup_window_seconds=0.05)
    release = threading.Event()
    fast_done = threading.Event()
    try:
        executor.execute(lambda: release.wait(20))
        time.sleep(0.3)  # the slow task runs; no thread is collecting
        submitted = time.monotonic()
        executor.execute(fast_done.set)
        assert fast_done.wait(5)
        assert time.monotonic() - submitted < 0.5, "the idle thread was woken at once"
    finally:
        release.set()
        executor.shutdown(timeout_seconds=5)


def test_a_burst_wakes_threads_without_waiting_for_the_window() -> None:
    executor = ThreadPoolTaskExecutor(core_pool_size=2, pickup_window_seconds=30.0)
    gate = Gate()
    gate.release.set()
    done = threading.Semaphore(0)
    try:
        for _ in range(2):
            executor.execute(gate.task)
        gate.wait_started(2)
        time.sleep(0.2)  # one thread now waits out a 30 s window, the other sleeps
        submitted = time.monotonic()
        for _ in range(MAX_TASKS_HELD_FOR_PICKUP + 4):
            executor.execute(done.release)
        for _ in range(MAX_TASKS_HELD_FOR_PICKUP + 4):
            assert done.acquire(timeout=10)
        assert time.monotonic() - submitted < 5, "the backlog woke a thread"
    finally:
        executor.shutdown(timeout_seconds=5)


def test_a_negative_pickup_window_is_refused() -> None:
    with pytest.raises(ValueError, match="pickup_window_seconds"):
        ThreadPoolTaskExecutor(pickup_window_seconds=-1)
