"""Scheduled snapshots (issue 43): a systemd timer on the nodes, on any engine.

``opensearch_snapshot_schedule`` is a systemd ``OnCalendar`` expression. It is checked
here, on the control node, before any host is contacted: ``systemd-analyze calendar``
normalizes it and lists its next elapses, whose smallest gap is the schedule's period.
The period names the snapshots: a run takes ``<cluster>-scheduled-<window>``, the window
being the run's time truncated to the period (clusterforge.host_runners.snapshots.snapshot_name),
so the timers of several nodes that fire together ask for one name and the engine
refuses all but the first.

The timer and its oneshot service run on every cluster-manager-eligible node, or on the
nodes ``opensearch_snapshot_schedule_nodes`` names. The service runs the stdlib-only
runner (clusterforge.host_runners.snapshots, shipped in this plan with its package's
shared files: clusterforge.plan.cluster.host_runners) as the dedicated
user :data:`SNAPSHOT_USER`, whose role may take, list and delete snapshots and read the
repository, nothing else. Its password is generated once on the control node into
``<inventory>/.opensearch/<user>.password`` (0600) and only ever written to the nodes'
root-only credentials file: the plan's entry for that file holds it, marked ``secret``
(as the monitoring's are), in the no_log plan result; no other part of the plan, and
nothing a review writes (clusterforge.plan.plan.host_files), holds it.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.durations import duration_problem
from clusterforge.durations import duration_seconds as parse_duration
from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.host_runners import (
    RETIRED_RUNNER_PATHS,
    UNIT_DIR,
    config_json,
    credentials_json,
    runner_files,
    runner_placement,
    unit_files,
)
from clusterforge.plan.security.toolkit_users import (
    ToolkitUser,
    generated_password,
    generated_password_path,
)
from clusterforge.schema import as_int

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

SCHEDULE_VARIABLE = "opensearch_snapshot_schedule"
KEEP_LAST_VARIABLE = "opensearch_snapshot_keep_last"
MAX_AGE_VARIABLE = "opensearch_snapshot_max_age"
NODES_VARIABLE = "opensearch_snapshot_schedule_nodes"

SNAPSHOT_USER = "clusterforge-snapshots"
SNAPSHOT_ROLE = "clusterforge_snapshots"
# Take, list, watch and delete snapshots, and read the repository's registration;
# restore is left out (playbooks/restore.yml restores with the admin certificate), and
# there is no index permission at all, so a document read is refused (403).
SNAPSHOT_ROLE_BODY: Mapping[str, Any] = {
    "description": "Scheduled snapshots: take, list and delete snapshots only (clusterforge)",
    "cluster_permissions": [
        "cluster:admin/snapshot/create",
        "cluster:admin/snapshot/delete",
        "cluster:admin/snapshot/get",
        "cluster:admin/snapshot/status*",
        "cluster:admin/repository/get",
    ],
    "index_permissions": [],
}

UNIT_NAME = "clusterforge-snapshot"
CONFIG_DIR = "/etc/clusterforge/snapshot-schedule"
# The runner's own directory: the package clusterforge.host_runners goes below it.
RUNNER_DIR = "/usr/local/lib/clusterforge/snapshots"
RUNNER_NAME = "snapshots"
# Debian's prometheus-node-exporter reads *.prom files from here (--collector.textfile.directory).
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
DEFAULT_INDICES = "*,-.opendistro_security"
# How long a run waits for a snapshot in progress before it skips (capped by the period).
MAX_WAIT_SECONDS = 300

# What systemd accepts without systemd-analyze (the control node lacks it): the
# shorthands and their periods.
SHORTHAND_PERIODS = {
    "minutely": 60,
    "hourly": 3600,
    "daily": 86400,
    "weekly": 7 * 86400,
}
_ELAPSE = re.compile(
    r"^\s*(?:Next elapse|Iter\. #\d+):\s+\w{3}\s+(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s+UTC\s*$"
)
_NORMALIZED = re.compile(r"^\s*Normalized form:\s+(.+?)\s*$")
CALENDAR_ITERATIONS = 12


class CalendarError(ValueError):
    """systemd refused the expression, or it never elapses."""


def parse_calendar_output(text: str) -> tuple[str, list[datetime]]:
    """The normalized form and the elapses (UTC) in ``systemd-analyze calendar`` output
    (run with TZ=UTC)."""
    normalized = ""
    elapses = []
    for line in text.splitlines():
        if match := _NORMALIZED.match(line):
            normalized = match.group(1)
        elif match := _ELAPSE.match(line):
            elapses.append(datetime.fromisoformat(match.group(1) + "+00:00"))
    return normalized, elapses


def period_of(elapses: Sequence[datetime]) -> int:
    """The smallest gap between consecutive elapses, in seconds (the naming window)."""
    gaps = [
        int((later - earlier).total_seconds()) for earlier, later in itertools.pairwise(elapses)
    ]
    gaps = [gap for gap in gaps if gap > 0]
    if not gaps:
        raise CalendarError("it elapses fewer than twice, so it has no period")
    return min(gaps)


def check_calendar(expression: str, *, analyze: str | None = None) -> tuple[str, int]:
    """(normalized expression, period in seconds) of an OnCalendar expression.

    Asks ``systemd-analyze calendar`` where it exists (``analyze`` names it; by default it
    is looked up on PATH); without it, only the shorthands of :data:`SHORTHAND_PERIODS`
    are accepted. Raises :class:`CalendarError` saying what systemd said."""
    text = expression.strip()
    if not text or "\n" in text:
        raise CalendarError("it is empty or spans several lines")
    tool = analyze if analyze is not None else shutil.which("systemd-analyze")
    if not tool:
        if text in SHORTHAND_PERIODS:
            return text, SHORTHAND_PERIODS[text]
        raise CalendarError(
            "systemd-analyze is not on this control node, so only "
            f"{', '.join(SHORTHAND_PERIODS)} can be checked; install systemd or use one of them"
        )
    result = subprocess.run(  # noqa: S603 - a fixed tool, the expression as one argument
        [tool, "calendar", f"--iterations={CALENDAR_ITERATIONS}", "--", text],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "TZ": "UTC", "LC_ALL": "C", "SYSTEMD_COLORS": "0"},
        check=False,
    )
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise CalendarError(said[-1] if said else f"systemd-analyze exited {result.returncode}")
    normalized, elapses = parse_calendar_output(result.stdout)
    return normalized or text, period_of(elapses)


def duration_seconds(value: str) -> int | None:
    """Whole seconds of a duration in the toolkit's grammar (clusterforge.durations)."""
    seconds = parse_duration(value)
    return None if seconds is None else int(seconds)


def snapshot_password(inventory_dir: Path) -> str:
    """The snapshot user's password, generated once into its 0600 file. Never printed."""
    return generated_password(inventory_dir, SNAPSHOT_USER)


def plan_schedule(
    cluster: Cluster,
    variables: Mapping[str, Any],
    *,
    repository: str | None,
    policy_set: bool,
    inventory_dir: Path | None = None,
    analyze: str | None = None,
) -> dict[str, Any] | None:
    """The schedule's part of the plan, or None when ``opensearch_snapshot_schedule`` is
    unset. Raises InventoryError naming every problem and its variable."""
    raw = variables.get(SCHEDULE_VARIABLE)
    keep_last = variables.get(KEEP_LAST_VARIABLE)
    max_age = variables.get(MAX_AGE_VARIABLE)
    nodes_given = variables.get(NODES_VARIABLE)
    problems: list[str] = []
    if raw in (None, ""):
        for name, value in (
            (KEEP_LAST_VARIABLE, keep_last),
            (MAX_AGE_VARIABLE, max_age),
            (NODES_VARIABLE, nodes_given),
        ):
            if value not in (None, "", []):
                problems.append(
                    f"{name} is set but {SCHEDULE_VARIABLE} is not: it applies to scheduled "
                    f"snapshots only; set {SCHEDULE_VARIABLE} (e.g. daily) or remove {name}"
                )
        if problems:
            raise InventoryError(problems)
        return None
    expression = str(raw)
    if policy_set:
        problems.append(
            f"{SCHEDULE_VARIABLE} and opensearch_snapshot_policy are both set: two schedulers "
            "would snapshot and delete in one repository; keep one of them (the schedule works "
            "on any engine, the policy needs the index-management plugin)"
        )
    if not repository:
        problems.append(
            f"{SCHEDULE_VARIABLE} is set but opensearch_snapshot_repository is not: the "
            "schedule snapshots into that repository; set opensearch_snapshot_repository, "
            "e.g. backups"
        )
    if not cluster.secured:
        problems.append(
            f"{SCHEDULE_VARIABLE} needs a secured cluster (opensearch_security_mode: tls): "
            "the runner authenticates as its own user and verifies the cluster's CA"
        )
    normalized, period = expression, 0
    try:
        normalized, period = check_calendar(expression, analyze=analyze)
    except CalendarError as error:
        problems.append(
            f"{SCHEDULE_VARIABLE} {expression!r} is not a systemd OnCalendar expression "
            f"systemd accepts ({error}); write e.g. daily, '*-*-* 02:00:00' or '*:0/15'"
        )
    if keep_last in (None, ""):
        keep_last = None
    else:
        # -e and INI inventories give strings of digits.
        number = as_int(keep_last)
        if number is None or number < 1:
            problems.append(
                f"{KEEP_LAST_VARIABLE} {keep_last!r} is not a whole number of 1 or more"
            )
        keep_last = number
    max_age_seconds = None
    if max_age not in (None, ""):
        # One grammar with the schema's; a retention under a second deletes every snapshot
        # but the newest, which is a range's matter, said as one.
        problem = duration_problem(MAX_AGE_VARIABLE, str(max_age), minimum_seconds=1)
        if problem:
            problems.append(problem)
        else:
            max_age_seconds = duration_seconds(str(max_age))
    users = variables.get("opensearch_security_users") or []
    if any(isinstance(user, Mapping) and user.get("name") == SNAPSHOT_USER for user in users):
        problems.append(
            f"opensearch_security_users has a user {SNAPSHOT_USER!r}, the name of the scheduled "
            f"snapshots' own user ({SCHEDULE_VARIABLE}); rename that user"
        )
    eligible = [node.inventory_name for node in cluster.nodes if node.cluster_manager_eligible]
    names = [node.inventory_name for node in cluster.nodes]
    if nodes_given in (None, "", []):
        hosts = eligible
    elif isinstance(nodes_given, list) and all(isinstance(item, str) for item in nodes_given):
        hosts = list(dict.fromkeys(nodes_given))
        unknown = [host for host in hosts if host not in names]
        if unknown:
            problems.append(
                f"{NODES_VARIABLE} names {', '.join(unknown)}, which are not OpenSearch nodes of "
                f"this inventory ({', '.join(names)}); name nodes of the opensearch group, e.g. "
                "\"{{ groups['backup_nodes'] }}\""
            )
    else:
        problems.append(f"{NODES_VARIABLE} must be a list of inventory host names")
        hosts = []
    if problems:
        raise InventoryError(problems)
    if period and max_age_seconds is not None and max_age_seconds < period:
        raise InventoryError(
            [
                f"{MAX_AGE_VARIABLE} {max_age} is shorter than the schedule's period "
                f"({period} s): every snapshot would be too old by the next run; raise it"
            ]
        )
    prefix = f"{cluster.name.lower()}-scheduled-"
    # Absolute: where the password is kept on the control node, as anyone reading it needs.
    password_file = (
        generated_password_path(inventory_dir.resolve(), SNAPSHOT_USER) if inventory_dir else None
    )
    return {
        "calendar": normalized,
        "expression": expression,
        "period_seconds": period,
        "keep_last": keep_last,
        "max_age_seconds": max_age_seconds,
        "prefix": prefix,
        "hosts": hosts,
        "username": SNAPSHOT_USER,
        "password_file": str(password_file) if password_file else None,
        "unit": UNIT_NAME,
        "config_dir": CONFIG_DIR,
        "config_file": f"{CONFIG_DIR}/config.json",
        "credentials_file": f"{CONFIG_DIR}/credentials.json",
        **runner_placement(RUNNER_NAME, RUNNER_DIR),
        "textfile_dir": TEXTFILE_DIR,
        "wait_seconds": min(MAX_WAIT_SECONDS, max(10, period // 2)),
    }


def runner_config(
    schedule: Mapping[str, Any], *, repository: str, urls: Sequence[str], ca_file: str
) -> dict[str, Any]:
    """config.json of one node: its own URL first, then the others (a stopped engine on
    this host leaves the others to answer)."""
    return {
        "repository": repository,
        "prefix": schedule["prefix"],
        "period_seconds": schedule["period_seconds"],
        "calendar": schedule["calendar"],
        "allowed_age_seconds": allowed_age_seconds(int(schedule["period_seconds"])),
        "keep_last": schedule["keep_last"],
        "max_age_seconds": schedule["max_age_seconds"],
        "indices": DEFAULT_INDICES,
        "urls": list(urls),
        "ca_file": ca_file,
        "credentials_file": schedule["credentials_file"],
        "textfile_dir": schedule["textfile_dir"],
        "wait_seconds": schedule["wait_seconds"],
    }


def toolkit_user(password: str, password_file: str | None = None) -> ToolkitUser:
    """The scheduled snapshots' runner as a row of the toolkit's users."""
    return ToolkitUser(
        name=SNAPSHOT_USER,
        description="Scheduled snapshots (clusterforge)",
        mapping_description="The scheduled snapshots' user",
        password=password,
        password_file=password_file,
        permissions={SNAPSHOT_ROLE: SNAPSHOT_ROLE_BODY},
    )


def declared_schedule(variables: Mapping[str, Any]) -> dict[str, Any] | None:
    """The schedule the inventory declares, as ``scripts/status`` judges the snapshots'
    age by it: ``{"calendar", "allowed_age_seconds"}``, or None without a schedule (then no
    age is a problem). ``allowed_age_seconds`` is two periods and a minute, as the runner
    records it; 0 (not judged) where the calendar cannot be read on this machine."""
    raw = variables.get(SCHEDULE_VARIABLE)
    if raw in (None, ""):
        return None
    expression = str(raw)
    try:
        calendar, period = check_calendar(expression)
    except CalendarError:
        calendar, period = expression, 0
    return {
        "calendar": calendar,
        "allowed_age_seconds": allowed_age_seconds(period) if period else 0,
    }


def allowed_age_seconds(period_seconds: int) -> int:
    """How old the newest scheduled snapshot may be before status calls it a problem:
    two periods (one run may fail or skip) and a minute for the snapshot itself."""
    return 2 * period_seconds + 60


def schedule_removal() -> dict[str, Any]:
    """What a node that does not run the schedule has removed (roles/opensearch_snapshots,
    tasks/schedule.yml): the unit to stop, the timer whose presence says anything is
    there, and every path the schedule ever placed."""
    timer = f"{UNIT_DIR}/{UNIT_NAME}.timer"
    return {
        "unit": UNIT_NAME,
        "timer": timer,
        "paths": [
            timer,
            f"{UNIT_DIR}/{UNIT_NAME}.service",
            CONFIG_DIR,
            RUNNER_DIR,
            RETIRED_RUNNER_PATHS[RUNNER_NAME],
        ],
    }


def complete_schedule(
    schedule: Mapping[str, Any],
    cluster: Cluster,
    *,
    repository: str,
    ca_file: str,
    password: str,
) -> dict[str, Any]:
    """The checked schedule with what the nodes get: each node's config.json, the timer
    and service units, the runner package's files, and per node the directories, files
    (the credentials marked ``secret``) and retired paths that
    roles/opensearch_snapshots/tasks/schedule.yml copies as they are."""
    from clusterforge.plan.cluster.render import render_template

    urls = {node.inventory_name: cluster.http_url(node) for node in cluster.nodes}
    context = {"schedule": schedule, "cluster_name": cluster.name, "repository": repository}
    configs = {
        host: runner_config(
            schedule,
            repository=repository,
            urls=[urls[host], *(url for name, url in urls.items() if name != host)],
            ca_file=ca_file,
        )
        | {"node": host}
        for host in schedule["hosts"]
    }
    timer_unit = render_template("clusterforge-snapshot.timer.j2", **context)
    service_unit = render_template("clusterforge-snapshot.service.j2", **context)
    package_files = runner_files(RUNNER_NAME, RUNNER_DIR)
    # The settings directory is root's alone (0700): it holds the engine credentials.
    directories = [
        *schedule["runner_directories"],
        {"path": schedule["config_dir"], "owner": "root", "group": "root", "mode": "0700"},
        {"path": schedule["textfile_dir"], "owner": "root", "group": "root", "mode": "0755"},
    ]
    credentials = {
        "path": schedule["credentials_file"],
        "owner": "root",
        "group": "root",
        "mode": "0600",
        "secret": True,
        "content": credentials_json(str(schedule["username"]), password),
    }
    units = unit_files(str(schedule["unit"]), service_unit=service_unit, timer_unit=timer_unit)
    return {
        **schedule,
        "configs": configs,
        "timer_unit": timer_unit,
        "service_unit": service_unit,
        "runner_files": package_files,
        "unit_dir": UNIT_DIR,
        "directories": {host: directories for host in schedule["hosts"]},
        "files": {
            host: [
                *package_files,
                {
                    "path": schedule["config_file"],
                    "owner": "root",
                    "group": "root",
                    "mode": "0600",
                    "content": config_json(configs[host]),
                },
                credentials,
                *units,
            ]
            for host in schedule["hosts"]
        },
        "absent": {host: list(schedule["retired_runner_paths"]) for host in schedule["hosts"]},
    }
