"""The scheduled snapshot run (docs/snapshots.md, "Scheduled snapshots"), one per timer tick.

This module is shipped as it is, with the package's shared module, to every node that
runs the schedule (the plan lists the files in ``snapshots.schedule.runner_files``;
roles/opensearch_snapshots places them) and run there by the node's ``python3`` from a
systemd timer. So it imports the standard library and its package only
(tests/test_host_runners.py checks that). Its decisions are pure functions, tested
without a cluster: :func:`snapshot_name` (the schedule's time window, so two nodes that
fire together ask for the same snapshot and the engine refuses the second) and
:func:`retention` (which of the schedule's own snapshots to delete). :func:`run` talks to
the cluster through one small client that verifies TLS with the cluster's CA.

A run reads its settings (``config.json``, no secret) and the snapshot user's credentials
(a root-only 0600 file; never argv, never the unit), takes the window's snapshot, applies
the retention after its own success, writes the node-exporter textfile metric
``clusterforge_snapshot_last_success_timestamp_seconds`` atomically, and prints one line
for the journal. It exits 0 when the window has a successful snapshot (its own or another
node's), 1 otherwise.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import common
from .common import ApiError, Client, label_value, load, write_atomically

METRIC = "clusterforge_snapshot_last_success_timestamp_seconds"
METRIC_FILE = "clusterforge_snapshot.prom"
NAME_TIME_FORMAT = "%Y%m%d-%H%M%S"
_NAME_TIME = re.compile(r"^[0-9]{8}-[0-9]{6}$")
# States the engine reports for a finished snapshot; IN_PROGRESS is the only other one.
IN_PROGRESS = "IN_PROGRESS"
SUCCESS = "SUCCESS"
# What the engine answers a second request for a name being taken or taken already.
_NAME_TAKEN = {"error": {"type": "invalid_snapshot_name_exception"}}
JOURNAL_ORDER = ("snapshot", "state", "shards", "seconds", "deleted", "node", "note")


@dataclass(frozen=True)
class Snapshot:
    """One snapshot of the repository as the run needs it."""

    name: str
    state: str
    start_epoch: float
    end_epoch: float


def snapshot_name(prefix: str, period_seconds: int, now_epoch: float) -> str:
    """The name of the window ``now_epoch`` falls in: the time truncated to the schedule's
    period (seconds since the epoch, UTC), after ``prefix``. Timers that fire together
    (within one period) compute the same name."""
    if period_seconds < 1:
        raise ValueError(f"period_seconds {period_seconds} must be 1 or more")
    window = int(now_epoch) // period_seconds * period_seconds
    return prefix + datetime.fromtimestamp(window, tz=UTC).strftime(NAME_TIME_FORMAT)


def is_scheduled(name: str, prefix: str) -> bool:
    """Whether the schedule made this snapshot: its prefix, then a window's time."""
    return name.startswith(prefix) and bool(_NAME_TIME.fullmatch(name[len(prefix) :]))


def retention(
    snapshots: Iterable[Snapshot],
    *,
    prefix: str,
    keep_last: int | None,
    max_age_seconds: int | None,
    now_epoch: float,
) -> list[str]:
    """The names to delete, oldest first.

    Only the schedule's own snapshots (:func:`is_scheduled`) are considered; one still in
    progress is never deleted, nor is the newest successful one. Beyond that a snapshot
    goes when it is not among the ``keep_last`` newest of the schedule's snapshots, or
    when it started more than ``max_age_seconds`` ago. Neither set: nothing is deleted.
    """
    ours = sorted(
        (snap for snap in snapshots if is_scheduled(snap.name, prefix)),
        key=lambda snap: (snap.start_epoch, snap.name),
        reverse=True,
    )
    successes = [snap for snap in ours if snap.state == SUCCESS]
    protected = {successes[0].name} if successes else set()
    doomed = []
    for position, snap in enumerate(ours):
        if snap.state == IN_PROGRESS or snap.name in protected:
            continue
        beyond_count = keep_last is not None and position >= keep_last
        too_old = max_age_seconds is not None and now_epoch - snap.start_epoch > max_age_seconds
        if beyond_count or too_old:
            doomed.append(snap.name)
    return list(reversed(doomed))


def newest_success(snapshots: Iterable[Snapshot], prefix: str) -> Snapshot | None:
    """The schedule's newest successful snapshot, or None."""
    done = [s for s in snapshots if is_scheduled(s.name, prefix) and s.state == SUCCESS]
    return max(done, key=lambda snap: (snap.end_epoch, snap.name), default=None)


def metric_text(repository: str, last_success_epoch: float | None, run_ok: bool, now: float) -> str:
    """The node-exporter textfile: the last success (absent until there is one), and this
    run's time and outcome."""
    label = "{repository=" + label_value(repository) + "}"
    lines = [
        f"# HELP {METRIC} End of the newest successful scheduled snapshot (clusterforge).",
        f"# TYPE {METRIC} gauge",
    ]
    if last_success_epoch is not None:
        lines.append(f"{METRIC}{label} {last_success_epoch:.3f}")
    lines += [
        "# HELP clusterforge_snapshot_last_run_timestamp_seconds Time of the last scheduled run.",
        "# TYPE clusterforge_snapshot_last_run_timestamp_seconds gauge",
        f"clusterforge_snapshot_last_run_timestamp_seconds{label} {now:.3f}",
        "# HELP clusterforge_snapshot_last_run_success Whether the last run's window has a "
        "successful snapshot (1) or not (0).",
        "# TYPE clusterforge_snapshot_last_run_success gauge",
        f"clusterforge_snapshot_last_run_success{label} {1 if run_ok else 0}",
    ]
    return "\n".join(lines) + "\n"


def schedule_metadata(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a scheduled snapshot records of its schedule (clusterforge.status.snapshots)."""
    return {
        "calendar": config.get("calendar", ""),
        "period_seconds": config["period_seconds"],
        "allowed_age_seconds": config.get("allowed_age_seconds", 0),
    }


def journal_line(fields: Mapping[str, Any]) -> str:
    """One line, ``key=value`` pairs in a fixed order; values with spaces are quoted."""
    return common.journal_line("clusterforge-snapshot", JOURNAL_ORDER, fields)


def error_type(body: Any) -> str:
    """The engine's error type (``invalid_snapshot_name_exception``, ...) or ''."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("type", ""))
    return ""


def _snapshot(raw: Mapping[str, Any]) -> Snapshot:
    return Snapshot(
        name=str(raw.get("snapshot", "")),
        state=str(raw.get("state", "")),
        start_epoch=float(raw.get("start_time_in_millis") or 0) / 1000,
        end_epoch=float(raw.get("end_time_in_millis") or 0) / 1000,
    )


def list_snapshots(client: Client, repository: str) -> list[Snapshot]:
    answer = client.call("GET", f"/_snapshot/{repository}/_all")
    return [_snapshot(raw) for raw in (answer or {}).get("snapshots", [])]


def in_progress(client: Client, repository: str) -> list[str]:
    answer = client.call("GET", f"/_snapshot/{repository}/_status")
    return [str(raw.get("snapshot")) for raw in (answer or {}).get("snapshots", [])]


def _wait_for_state(client: Client, repository: str, name: str, until: float) -> Snapshot | None:
    while True:
        try:
            answer = client.call("GET", f"/_snapshot/{repository}/{name}")
            found = [_snapshot(raw) for raw in answer.get("snapshots", [])]
        except ApiError as error:
            if error.status != 404:
                raise
            found = []
        if found and found[0].state != IN_PROGRESS:
            return found[0]
        if time.time() >= until:
            return found[0] if found else None
        time.sleep(2)


def run(config: Mapping[str, Any], client: Client, *, now: float, node: str) -> tuple[bool, str]:
    """One scheduled run; returns (the window has a successful snapshot, the journal line)."""
    repository = str(config["repository"])
    prefix = str(config["prefix"])
    name = snapshot_name(prefix, int(config["period_seconds"]), now)
    wait_seconds = float(config.get("wait_seconds", 300))
    until = now + wait_seconds
    fields: dict[str, Any] = {"snapshot": name, "node": node}
    started = time.monotonic()
    notes = []
    # One run at a time: a snapshot still in progress (this window's, taken by another
    # node, or any other) is waited for, up to wait_seconds, then this run skips.
    while True:
        running = in_progress(client, repository)
        if not running or time.time() >= until:
            break
        if name in running:
            break
        waited = f"waited for {','.join(running)} in progress"
        if waited not in notes:
            notes.append(waited)
        time.sleep(5)
    running = in_progress(client, repository)
    own = False
    result: Snapshot | None = None
    shards = ""
    if running and name not in running:
        notes.append(f"skipped: {','.join(running)} still in progress after {wait_seconds:.0f}s")
        fields["state"] = "SKIPPED"
    else:
        try:
            if name in running:
                raise ApiError(400, _NAME_TAKEN, "in progress elsewhere")
            answer = client.call(
                "PUT",
                f"/_snapshot/{repository}/{name}?wait_for_completion=true",
                {
                    "indices": config.get("indices", "*,-.opendistro_security"),
                    "include_global_state": False,
                    # scripts/status reads the schedule from the snapshots themselves.
                    "metadata": {"clusterforge": schedule_metadata(config)},
                },
                timeout=max(wait_seconds, 60.0) * 12,
            )
            taken = answer.get("snapshot", {})
            result = _snapshot(taken)
            shard_counts = taken.get("shards", {})
            shards = f"{shard_counts.get('successful', 0)}/{shard_counts.get('total', 0)}"
            own = True
        except ApiError as error:
            kind = error_type(error.body)
            duplicate = kind in (
                "invalid_snapshot_name_exception",
                "concurrent_snapshot_execution_exception",
            )
            if not duplicate:
                raise
            # Another node asked for this window's name first: the engine refused this
            # one. Its outcome is the window's.
            notes.append("taken by another node")
            result = _wait_for_state(client, repository, name, until)
        fields["state"] = result.state if result else "UNKNOWN"
    if shards:
        fields["shards"] = shards
    ok = result is not None and result.state == SUCCESS
    deleted: list[str] = []
    snapshots = list_snapshots(client, repository)
    if own and ok:
        doomed = retention(
            snapshots,
            prefix=prefix,
            keep_last=config.get("keep_last"),
            max_age_seconds=config.get("max_age_seconds"),
            now_epoch=time.time(),
        )
        for doomed_name in doomed:
            try:
                client.call("DELETE", f"/_snapshot/{repository}/{doomed_name}", timeout=600)
                deleted.append(doomed_name)
            except ApiError as error:
                # Gone already (another node's retention) or busy: the next run retries.
                if error.status != 404:
                    notes.append(f"could not delete {doomed_name}: HTTP {error.status}")
        snapshots = [snap for snap in snapshots if snap.name not in deleted]
    fields["seconds"] = f"{time.monotonic() - started:.1f}"
    fields["deleted"] = deleted
    if notes:
        fields["note"] = "; ".join(notes)
    newest = newest_success(snapshots, prefix)
    textfile_dir = config.get("textfile_dir")
    if textfile_dir and os.path.isdir(str(textfile_dir)):
        write_atomically(
            os.path.join(str(textfile_dir), METRIC_FILE),
            metric_text(repository, newest.end_epoch if newest else None, ok, time.time()),
        )
    return ok, journal_line(fields)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config_path = args[0] if args else "/etc/clusterforge/snapshot-schedule/config.json"
    node = os.uname().nodename
    try:
        config, username, password = load(config_path)
        client = common.client_from(config, username, password)
        # Lab containers share the host's name: the inventory's name says which node ran.
        node = str(config.get("node") or node)
        ok, line = run(config, client, now=time.time(), node=node)
    except (ApiError, OSError, ValueError, KeyError) as error:
        note = f"{error}{common.error_detail(error)}"
        print(journal_line({"state": "ERROR", "node": node, "note": note}))
        return 1
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
