"""scripts/status on scheduled snapshots (clusterforge.status.snapshots), from recorded
answers: the latest success's age, the next run, and a problem once it is older than the
schedule allows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from clusterforge.status.command import _snapshots_line
from clusterforge.status.snapshots import next_elapse, snapshot_status

NOW = datetime(2026, 11, 22, 20, 55, 30, tzinfo=UTC)
MINUTE = {"calendar": "*-*-* *:*:00", "period_seconds": 60, "allowed_age_seconds": 180}


def snapshot(name: str, ended_seconds_ago: int, state: str = "SUCCESS", **extra: Any) -> dict:
    end = int(NOW.timestamp() - ended_seconds_ago) * 1000
    return {
        "snapshot": name,
        "state": state,
        "start_time_in_millis": end - 2000,
        "end_time_in_millis": end,
        **extra,
    }


def recorded(*snapshots: dict[str, Any]) -> dict[str, Any]:
    return {"repositories": {"backups": {"status": 200, "body": {"snapshots": list(snapshots)}}}}


def fixed_next(calendar: str, period: int, now: datetime) -> datetime:
    return datetime(2026, 11, 22, 20, 56, tzinfo=UTC)


def test_no_scheduled_snapshot_is_no_section_and_no_problem() -> None:
    manual = snapshot("before-upgrade", 10**6)
    assert snapshot_status(recorded(manual), now=NOW, next_run=fixed_next) == (None, [])


def test_a_fresh_success_shows_its_age_and_the_next_run() -> None:
    section, problems = snapshot_status(
        recorded(
            snapshot("lab-scheduled-1", 100, metadata={"clusterforge": MINUTE}),
            snapshot("lab-scheduled-2", 40, metadata={"clusterforge": MINUTE}),
            snapshot("before-upgrade", 5),
        ),
        now=NOW,
        next_run=fixed_next,
    )
    assert problems == []
    assert section is not None
    assert section["latest_success"] == "lab-scheduled-2"
    assert section["age_seconds"] == 40
    assert section["next_run"] == "2026-11-22T20:56:00+00:00"
    line = _snapshots_line(section)
    assert "latest lab-scheduled-2 (0m40s ago)" in line and "next run 2026-11-22T20:56" in line


def test_too_old_a_success_is_a_problem() -> None:
    section, problems = snapshot_status(
        recorded(
            snapshot("lab-scheduled-1", 181, metadata={"clusterforge": MINUTE}),
            snapshot("lab-scheduled-2", 120, "FAILED", metadata={"clusterforge": MINUTE}),
        ),
        now=NOW,
        next_run=fixed_next,
    )
    assert section is not None and section["age_seconds"] == 181
    assert len(problems) == 1
    assert problems[0].startswith(
        "the latest successful scheduled snapshot lab-scheduled-1 is 181 s old; the schedule "
        "(*-*-* *:*:00) allows 180 s"
    )


def test_scheduled_snapshots_none_of_which_succeeded_are_a_problem() -> None:
    _, problems = snapshot_status(
        recorded(snapshot("lab-scheduled-1", 10, "FAILED", metadata={"clusterforge": MINUTE})),
        now=NOW,
        next_run=fixed_next,
    )
    assert problems and "no scheduled snapshot in backups succeeded" in problems[0]


def test_the_next_run_without_systemd_is_the_next_window() -> None:
    assert next_elapse("", 60, NOW) == datetime(2026, 11, 22, 20, 56, tzinfo=UTC)


def test_the_next_run_from_systemd_follows_the_calendar() -> None:
    found = next_elapse("*-*-* 02:00:00", 86400, NOW)
    # With systemd-analyze: tomorrow 02:00; without it, the next day boundary.
    assert found in (
        datetime(2026, 11, 23, 2, 0, tzinfo=UTC),
        datetime(2026, 11, 23, 0, 0, tzinfo=UTC),
    )
