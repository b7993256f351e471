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


def test_with_the_schedule_removed_an_old_scheduled_snapshot_is_no_problem() -> None:
    """The inventory declares no schedule (it was set, then removed): the repository's old
    scheduled snapshots, however old, are no problem (issue 51: status stayed at 1)."""
    old = snapshot("lab-scheduled-1", 10**6, metadata={"clusterforge": MINUTE})
    failed = snapshot("lab-scheduled-2", 10**5, state="FAILED", metadata={"clusterforge": MINUTE})
    section, problems = snapshot_status(
        recorded(old, failed), now=NOW, declared=None, next_run=fixed_next
    )
    assert problems == []
    assert section is not None and section["next_run"] is None
    # The same repository judged as before, by the snapshots' own metadata, is a problem.
    _, judged = snapshot_status(recorded(old, failed), now=NOW, next_run=fixed_next)
    assert judged


def test_the_declared_schedule_wins_over_the_snapshots_metadata() -> None:
    """An hourly schedule now declared, the last minutely snapshot 10 minutes old: fine."""
    hourly = {"calendar": "hourly", "allowed_age_seconds": 2 * 3600 + 60}
    section, problems = snapshot_status(
        recorded(snapshot("lab-scheduled-1", 600, metadata={"clusterforge": MINUTE})),
        now=NOW,
        declared=hourly,
        next_run=fixed_next,
    )
    assert problems == []
    assert section is not None and section["schedule"] == "hourly"
    _, too_old = snapshot_status(
        recorded(snapshot("lab-scheduled-1", 3 * 3600, metadata={"clusterforge": MINUTE})),
        now=NOW,
        declared=hourly,
        next_run=fixed_next,
    )
    assert len(too_old) == 1 and "hourly" in too_old[0]


def test_declared_schedule_from_the_inventorys_variables() -> None:
    from clusterforge.plan.snapshots.snapshot_schedule import declared_schedule

    assert declared_schedule({}) is None
    assert declared_schedule({"opensearch_snapshot_schedule": ""}) is None
    hourly = declared_schedule({"opensearch_snapshot_schedule": "hourly"})
    # systemd-analyze normalizes the calendar (*-*-* *:00:00) where it is installed.
    assert hourly is not None and hourly["allowed_age_seconds"] == 2 * 3600 + 60
    # opensearch_snapshot_max_age is retention (what the runner deletes), not the age
    # status allows: a daily schedule allows two days and a minute whatever it says.
    daily = declared_schedule(
        {"opensearch_snapshot_schedule": "daily", "opensearch_snapshot_max_age": "30d"}
    )
    assert daily is not None and daily["allowed_age_seconds"] == 2 * 86400 + 60
