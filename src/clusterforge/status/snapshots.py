"""Scheduled snapshots in ``scripts/status`` (issue 43): the latest success's age, the next
run, and a problem when the newest successful scheduled snapshot is older than the
schedule allows.

The age is judged by the schedule the inventory declares (``declared``: an inventory's
opensearch_snapshot_schedule, or lab.json's ``snapshot_schedule``): with none declared, no
age is a problem, whatever older scheduled snapshots the repository holds (a schedule set
and then removed left status judging by it, issue 51). Only a lab.json written before it
carried the field leaves the schedule to the snapshots themselves: the runner
(clusterforge.host_runners.snapshots) puts its calendar, period and allowed age in each snapshot's
``metadata.clusterforge``. The next run is the calendar's next elapse (``systemd-analyze
calendar`` on this machine, else the next window of the period).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

from clusterforge.client import ClusterClient

METADATA_KEY = "clusterforge"


def collect_snapshots(client: ClusterClient, base: str | None) -> dict[str, Any]:
    """Every repository's snapshots, as answered (``{repository: recording}``)."""
    if base is None:
        return {"error": "no node answered GET / with 200"}
    repositories = client.get(f"{base}/_snapshot")
    if repositories.get("status") != 200 or not isinstance(repositories.get("body"), dict):
        return {
            "error": f"GET _snapshot: {repositories.get('error') or repositories.get('status')}"
        }
    return {
        "repositories": {
            name: client.get(f"{base}/_snapshot/{name}/_all") for name in repositories["body"]
        }
    }


def next_elapse(calendar: str, period_seconds: int, now: datetime) -> datetime | None:
    """When the schedule fires next: systemd's answer where systemd-analyze exists, else
    the next multiple of the period (exact for schedules aligned to it)."""
    tool = shutil.which("systemd-analyze")
    if tool and calendar:
        result = subprocess.run(  # noqa: S603 - a fixed tool, the calendar as one argument
            [
                tool,
                "calendar",
                "--iterations=1",
                "--base-time",
                f"@{int(now.timestamp())}",
                "--",
                calendar,
            ],
            capture_output=True,
            text=True,
            timeout=10,
            env={"TZ": "UTC", "LC_ALL": "C", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        from clusterforge.plan.snapshots.snapshot_schedule import parse_calendar_output

        _calendar, elapses = parse_calendar_output(result.stdout)
        if result.returncode == 0 and elapses:
            return elapses[0]
    if period_seconds > 0:
        window = int(now.timestamp()) // period_seconds * period_seconds + period_seconds
        return datetime.fromtimestamp(window, tz=UTC)
    return None


# ``declared`` when the source tells nothing of the schedule (a lab.json of an older lab).
UNKNOWN: Final = "unknown"


def snapshot_status(
    recorded: Mapping[str, Any],
    *,
    now: datetime,
    declared: Mapping[str, Any] | Literal["unknown"] | None = UNKNOWN,
    next_run: Callable[[str, int, datetime], datetime | None] = next_elapse,
) -> tuple[dict[str, Any] | None, list[str]]:
    """(the report's ``snapshots`` section, problems); None when no scheduled snapshot is
    in any repository (no schedule, or not run yet: nothing to judge). ``declared`` is the
    schedule the inventory declares
    (clusterforge.plan.snapshots.snapshot_schedule.declared_schedule), None for none."""
    if "error" in recorded:
        return {"error": recorded["error"]}, []
    scheduled = []
    for repository, answer in (recorded.get("repositories") or {}).items():
        body = answer.get("body") if answer.get("status") == 200 else None
        for snapshot in (body or {}).get("snapshots", []) if isinstance(body, dict) else []:
            metadata = (snapshot.get("metadata") or {}).get(METADATA_KEY)
            if isinstance(metadata, dict):
                scheduled.append((repository, snapshot, metadata))
    if not scheduled:
        return None, []
    scheduled.sort(key=lambda item: int(item[1].get("start_time_in_millis") or 0))
    repository, _separator, schedule = scheduled[-1]
    if declared is None:
        schedule = {"calendar": "none declared", "allowed_age_seconds": 0}
    elif declared != UNKNOWN and isinstance(declared, Mapping):
        schedule = {**schedule, **declared}
    successes = [item for item in scheduled if item[1].get("state") == "SUCCESS"]
    period = int(schedule.get("period_seconds") or 0)
    allowed = int(schedule.get("allowed_age_seconds") or 0)
    calendar = str(schedule.get("calendar") or "")
    upcoming = next_run(calendar, period, now) if declared is not None else None
    section: dict[str, Any] = {
        "repository": repository,
        "schedule": calendar,
        "allowed_age_seconds": allowed,
        "next_run": upcoming.isoformat() if upcoming else None,
        "scheduled_snapshots": len(scheduled),
        "latest_success": None,
        "age_seconds": None,
    }
    problems: list[str] = []
    if not successes:
        if declared is None:  # an old schedule's leftovers: nothing runs to judge
            return section, problems
        problems.append(
            f"no scheduled snapshot in {repository} succeeded ({len(scheduled)} taken); "
            "read the runs with journalctl -u clusterforge-snapshot on the nodes"
        )
        return section, problems
    latest = max(successes, key=lambda item: int(item[1].get("end_time_in_millis") or 0))[1]
    ended = datetime.fromtimestamp(int(latest.get("end_time_in_millis") or 0) / 1000, tz=UTC)
    age = int((now - ended).total_seconds())
    section.update(latest_success=latest.get("snapshot"), age_seconds=age)
    if allowed and age > allowed:
        problems.append(
            f"the latest successful scheduled snapshot {latest.get('snapshot')} is {age} s old; "
            f"the schedule ({calendar}) allows {allowed} s: check the timers "
            "(systemctl list-timers clusterforge-snapshot.timer) and their runs "
            "(journalctl -u clusterforge-snapshot) on the nodes"
        )
    return section, problems
