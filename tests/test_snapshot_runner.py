"""The scheduled snapshot runner's decisions (clusterforge.host_runners.snapshots), pure: the
window's name, which of the schedule's snapshots retention deletes, the textfile metric,
the journal line. It runs on the nodes with their python3 alone, so it must import the
standard library only. Against a real engine it runs in the lab drill
(docs/snapshots.md, "The schedule drill")."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from clusterforge.host_runners import snapshots as snapshot_runner
from clusterforge.host_runners.common import ApiError, write_atomically
from clusterforge.host_runners.snapshots import (
    METRIC,
    Snapshot,
    is_scheduled,
    journal_line,
    metric_text,
    newest_success,
    retention,
    snapshot_name,
)

PREFIX = "lab-scheduled-"
T0 = 1_800_000_000  # 2027-01-15 08:00:00 UTC, a whole minute


def snap(minute: int, state: str = "SUCCESS", prefix: str = PREFIX) -> Snapshot:
    start = T0 + minute * 60
    return Snapshot(
        name=snapshot_name(prefix, 60, start),
        state=state,
        start_epoch=start,
        end_epoch=start + 5,
    )


def test_the_runner_imports_the_standard_library_only() -> None:
    # Its own package's modules come in relatively (level 1); the whole package runs
    # alone under python3 -I in tests/test_host_runners.py.
    tree = ast.parse(Path(snapshot_runner.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_timers_that_fire_together_compute_one_name() -> None:
    # Two nodes fire 0.2 s and 1.7 s after the minute: one window, one name.
    assert snapshot_name(PREFIX, 60, T0 + 0.2) == snapshot_name(PREFIX, 60, T0 + 1.7)
    assert snapshot_name(PREFIX, 60, T0 + 0.2) == "lab-scheduled-20270115-080000"
    assert snapshot_name(PREFIX, 60, T0 + 60) == "lab-scheduled-20270115-080100"
    # A daily schedule: every run of the day is one window.
    assert snapshot_name(PREFIX, 86400, T0) == "lab-scheduled-20270115-000000"
    with pytest.raises(ValueError, match="period_seconds"):
        snapshot_name(PREFIX, 0, T0)


def test_only_names_the_schedule_makes_are_its_own() -> None:
    assert is_scheduled("lab-scheduled-20270115-080000", PREFIX)
    assert not is_scheduled("lab-scheduled-before-upgrade", PREFIX)
    assert not is_scheduled("lab-20270115-080000", PREFIX)
    assert not is_scheduled("other-scheduled-20270115-080000", PREFIX)


def test_keep_last_keeps_the_newest_and_deletes_oldest_first() -> None:
    snapshots = [snap(minute) for minute in range(5)]
    doomed = retention(snapshots, prefix=PREFIX, keep_last=3, max_age_seconds=None, now_epoch=T0)
    assert doomed == [snapshots[0].name, snapshots[1].name]


def test_retention_never_touches_snapshots_the_schedule_did_not_make() -> None:
    manual = Snapshot("before-upgrade", "SUCCESS", T0 - 10_000, T0 - 9_000)
    other = snap(-100, prefix="other-scheduled-")
    snapshots = [manual, other, *(snap(minute) for minute in range(4))]
    doomed = retention(
        snapshots, prefix=PREFIX, keep_last=1, max_age_seconds=60, now_epoch=T0 + 10_000
    )
    assert manual.name not in doomed and other.name not in doomed
    assert len(doomed) == 3


def test_the_newest_successful_snapshot_is_never_deleted() -> None:
    # The newest two failed; keep_last=1 and a max_age everything exceeds would delete all.
    snapshots = [snap(0), snap(1, "FAILED"), snap(2, "PARTIAL")]
    doomed = retention(
        snapshots, prefix=PREFIX, keep_last=1, max_age_seconds=60, now_epoch=T0 + 100_000
    )
    assert snapshots[0].name not in doomed
    assert doomed == [snapshots[1].name, snapshots[2].name]


def test_a_snapshot_in_progress_is_never_deleted() -> None:
    snapshots = [snap(0, "IN_PROGRESS"), snap(1), snap(2)]
    doomed = retention(snapshots, prefix=PREFIX, keep_last=1, max_age_seconds=None, now_epoch=T0)
    assert doomed == [snapshots[1].name]


def test_max_age_deletes_what_started_too_long_ago() -> None:
    snapshots = [snap(minute) for minute in range(0, 600, 60)]  # one an hour, ten hours
    doomed = retention(
        snapshots,
        prefix=PREFIX,
        keep_last=None,
        max_age_seconds=3 * 3600,
        now_epoch=T0 + 600 * 60,
    )
    assert doomed == [s.name for s in snapshots[:7]]


def test_no_retention_set_deletes_nothing() -> None:
    snapshots = [snap(minute) for minute in range(50)]
    assert (
        retention(
            snapshots, prefix=PREFIX, keep_last=None, max_age_seconds=None, now_epoch=T0 + 10**7
        )
        == []
    )


def test_the_newest_success_gives_the_metric() -> None:
    snapshots = [snap(0), snap(1), snap(2, "FAILED")]
    newest = newest_success(snapshots, PREFIX)
    assert newest == snapshots[1]
    text = metric_text("backups", newest.end_epoch if newest else None, True, T0 + 200)
    assert f'{METRIC}{{repository="backups"}} {T0 + 65:.3f}\n' in text
    assert 'clusterforge_snapshot_last_run_success{repository="backups"} 1\n' in text
    # Before any success, the metric is absent (an alert on absence, not on a zero).
    assert f"{METRIC}{{" not in metric_text("backups", None, False, T0)


def test_the_metric_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "clusterforge_snapshot.prom"
    write_atomically(str(path), "one\n")
    write_atomically(str(path), "two\n")
    assert path.read_text() == "two\n"
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]


def test_one_journal_line_names_everything() -> None:
    line = journal_line(
        {
            "snapshot": "lab-scheduled-20270115-080000",
            "state": "SUCCESS",
            "shards": "5/5",
            "seconds": "1.4",
            "deleted": ["a", "b"],
            "node": "os-1",
        }
    )
    assert line == (
        "clusterforge-snapshot snapshot=lab-scheduled-20270115-080000 state=SUCCESS "
        "shards=5/5 seconds=1.4 deleted=a,b node=os-1"
    )
    assert "deleted=none" in journal_line({"deleted": []})
    assert 'note="taken by another node"' in journal_line({"note": "taken by another node"})
    assert "\n" not in line


class StandInEngine:
    """A stand-in for the engine's snapshot API, named as one: the real engine runs the
    runner in the lab drill; this one lets the run's branches be driven here."""

    def __init__(self, existing: list[dict[str, object]] | None = None) -> None:
        self.snapshots = list(existing or [])
        self.running: list[str] = []
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, body: object = None, *, timeout: float = 0) -> object:
        self.calls.append((method, path))
        name = path.split("?")[0].rsplit("/", 1)[-1]
        if method == "GET" and path.endswith("/_status"):
            return {"snapshots": [{"snapshot": running} for running in self.running]}
        if method == "GET" and path.endswith("/_all"):
            return {"snapshots": self.snapshots}
        if method == "GET":
            found = [s for s in self.snapshots if s["snapshot"] == name]
            if not found:
                raise ApiError(404, None, "missing")
            return {"snapshots": found}
        if method == "PUT":
            if any(s["snapshot"] == name for s in self.snapshots):
                raise ApiError(400, {"error": {"type": "invalid_snapshot_name_exception"}}, "taken")
            now_ms = int(T0 * 1000)
            taken = {
                "snapshot": name, "state": "SUCCESS", "start_time_in_millis": now_ms,
                "end_time_in_millis": now_ms + 1000, "shards": {"successful": 4, "total": 4},
            }  # fmt: skip
            self.snapshots.append(taken)
            return {"snapshot": taken}
        if method == "DELETE":
            self.snapshots = [s for s in self.snapshots if s["snapshot"] != name]
            return {"acknowledged": True}
        raise AssertionError(path)


def raw(minute: int, state: str = "SUCCESS") -> dict[str, object]:
    s = snap(minute, state)
    return {
        "snapshot": s.name, "state": s.state, "start_time_in_millis": int(s.start_epoch * 1000),
        "end_time_in_millis": int(s.end_epoch * 1000),
    }  # fmt: skip


CONFIG = {
    "repository": "backups", "prefix": PREFIX, "period_seconds": 60, "keep_last": 2,
    "max_age_seconds": None, "wait_seconds": 1, "calendar": "*-*-* *:*:00",
    "allowed_age_seconds": 180,
}  # fmt: skip


def test_a_run_takes_the_window_and_applies_retention(tmp_path: Path) -> None:
    engine = StandInEngine([raw(-3), raw(-2), {"snapshot": "manual", "state": "SUCCESS",
                            "start_time_in_millis": 0, "end_time_in_millis": 1}])  # fmt: skip
    config = {**CONFIG, "textfile_dir": str(tmp_path)}
    ok, line = snapshot_runner.run(config, engine, now=T0 + 0.5, node="n1")  # type: ignore[arg-type]
    assert ok
    names = [s["snapshot"] for s in engine.snapshots]
    assert names == [snap(-2).name, "manual", snapshot_name(PREFIX, 60, T0)]
    assert f"snapshot={snapshot_name(PREFIX, 60, T0)} state=SUCCESS shards=4/4" in line
    assert f"deleted={snap(-3).name}" in line
    assert METRIC in (tmp_path / "clusterforge_snapshot.prom").read_text()


def test_a_second_node_in_the_same_window_is_refused_and_records_the_outcome() -> None:
    engine = StandInEngine()
    assert snapshot_runner.run(CONFIG, engine, now=T0 + 0.2, node="n1")[0]  # type: ignore[arg-type]
    ok, line = snapshot_runner.run(CONFIG, engine, now=T0 + 1.1, node="n2")  # type: ignore[arg-type]
    assert ok
    assert "taken by another node" in line and "deleted=none" in line
    assert len(engine.snapshots) == 1
    assert [c for c in engine.calls if c[0] == "DELETE"] == []


def test_a_run_skips_when_another_snapshot_stays_in_progress() -> None:
    engine = StandInEngine()
    engine.running = ["someone-elses"]
    ok, line = snapshot_runner.run(CONFIG, engine, now=time_now(), node="n1")  # type: ignore[arg-type]
    assert not ok
    assert "state=SKIPPED" in line and "someone-elses still in progress" in line
    assert not [c for c in engine.calls if c[0] == "PUT"]


def time_now() -> float:
    import time

    return time.time()
