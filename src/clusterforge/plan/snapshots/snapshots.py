"""The snapshot part of the plan: the filesystem repository and the optional policy.

``opensearch_snapshot_repository`` names a repository of type ``fs`` at ``path.repo``
(``opensearch_repo_path``), a directory every node shares. ``opensearch_snapshot_policy``
is a snapshot-management policy (``_plugins/_sm``), which only exists where the
index-management plugin runs: the official tarball bundles it, the minimal zip the
``maven`` source installs does not (its ``GET _cat/plugins`` lists no such plugin), so
there the policy is refused before any host changes.

The policy's request body is built here, once; its digest rides in the policy's
description so that a rerun compares one string instead of the engine's rewritten copy.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import Cluster
from clusterforge.plan.cluster.model_checks import report_unknown_keys
from clusterforge.plan.snapshots.snapshot_schedule import plan_schedule

REPOSITORY_VARIABLE = "opensearch_snapshot_repository"
POLICY_VARIABLE = "opensearch_snapshot_policy"
# What the _plugins/_sm API needs: index management, which runs on the job scheduler.
SM_PLUGINS = ("opensearch-job-scheduler", "opensearch-index-management")
DIGEST_PREFIX = "managed by clusterforge; sha256:"

_POLICY_KEYS = frozenset(
    {"name", "cron", "timezone", "max_age", "max_count", "min_count", "indices", "enabled"}
)
_POLICY_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
# Five fields (minute hour day month weekday) of digits, names, * / , - and ?.
_CRON = re.compile(r"^\s*[0-9A-Za-z*/,?-]+(\s+[0-9A-Za-z*/,?-]+){4}\s*$")
_AGE = re.compile(r"^[1-9][0-9]*(ms|s|m|h|d)$")
_TIMEZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+/-]*$")


def sm_available(cluster: Cluster) -> bool:
    """Whether the nodes will run the SM API: the official tarball bundles it; otherwise
    both of its plugins must be listed (present) in opensearch_plugins."""
    if cluster.distribution.source == "tarball":
        return True
    present = {plugin.name for plugin in cluster.plugins if plugin.state == "present"}
    return all(name in present for name in SM_PLUGINS)


def plan_snapshots(
    cluster: Cluster,
    variables: Mapping[str, Any],
    *,
    inventory_dir: Path | None = None,
    analyze: str | None = None,
) -> dict[str, Any]:
    """``{"repository", "location", "policy", "schedule"}`` from the inventory; the
    repository, the policy and the schedule (clusterforge.plan.snapshots.snapshot_schedule) are None
    when not set. Raises InventoryError naming every problem."""
    repository = variables.get(REPOSITORY_VARIABLE) or None
    raw_policy = variables.get(POLICY_VARIABLE) or None
    problems: list[str] = []
    policy = None
    if raw_policy is not None:
        if repository is None:
            problems.append(
                f"{POLICY_VARIABLE} is set but {REPOSITORY_VARIABLE} is not: the policy "
                f"snapshots into that repository; set {REPOSITORY_VARIABLE}, e.g. backups"
            )
        if not sm_available(cluster):
            problems.append(
                f"{POLICY_VARIABLE} needs the snapshot-management API (_plugins/_sm), which "
                "belongs to the index-management plugin; opensearch_distribution_source "
                f"{cluster.distribution.source!r} installs a minimal engine without it "
                f"(missing: {', '.join(SM_PLUGINS)}). Use opensearch_distribution_source: "
                "tarball (the official archive bundles it), add both plugins to "
                f"opensearch_plugins, or remove {POLICY_VARIABLE} and run "
                "playbooks/snapshot.yml on a schedule of your own"
            )
        policy = _build_policy(raw_policy, str(repository or ""), problems)
    schedule = None
    try:
        schedule = plan_schedule(
            cluster,
            variables,
            repository=repository,
            policy_set=raw_policy is not None,
            inventory_dir=inventory_dir,
            analyze=analyze,
        )
    except InventoryError as error:
        problems.extend(str(problem) for problem in error.problems)
    if problems:
        raise InventoryError(problems)
    return {
        "repository": repository,
        "location": cluster.repo_path,
        "policy": policy,
        "schedule": schedule,
    }


def _build_policy(
    raw: Mapping[str, Any], repository: str, problems: list[str]
) -> dict[str, Any] | None:
    where = POLICY_VARIABLE
    report_unknown_keys(where, raw, sorted(_POLICY_KEYS), problems.append)
    name = raw.get("name", "clusterforge")
    if not isinstance(name, str) or not _POLICY_NAME.fullmatch(name):
        problems.append(
            f"{where}.name {name!r} is malformed; write a lower-case name, e.g. nightly"
        )
    cron = raw.get("cron")
    if not isinstance(cron, str) or not _CRON.fullmatch(cron):
        problems.append(
            f"{where}.cron {cron!r} is not a five-field cron expression; "
            "write e.g. '0 2 * * *' (every day at 02:00)"
        )
    timezone = raw.get("timezone", "UTC")
    if not isinstance(timezone, str) or not _TIMEZONE.fullmatch(timezone):
        problems.append(
            f"{where}.timezone {timezone!r} is not a time zone name; write e.g. UTC or "
            "Europe/Berlin"
        )
    max_age = raw.get("max_age")
    if max_age is not None and (not isinstance(max_age, str) or not _AGE.fullmatch(max_age)):
        problems.append(f"{where}.max_age {max_age!r} is not a duration; write e.g. 14d or 72h")
    counts: dict[str, int] = {}
    for key in ("max_count", "min_count"):
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{where}.{key} {value!r} is not a whole number of 1 or more")
        else:
            counts[key] = value
    if "max_count" in counts and counts.get("min_count", 1) > counts["max_count"]:
        problems.append(
            f"{where}.min_count {counts['min_count']} exceeds max_count "
            f"{counts['max_count']}; lower min_count or raise max_count"
        )
    indices = raw.get("indices", "*")
    if isinstance(indices, list) and all(isinstance(item, str) for item in indices):
        indices = ",".join(indices)
    if not isinstance(indices, str) or not indices.strip():
        problems.append(f"{where}.indices {indices!r} must be an index pattern or a list of them")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(f"{where}.enabled {enabled!r} is not a boolean; write true or false")
    if problems:
        return None
    schedule = {"cron": {"expression": " ".join(str(cron).split()), "timezone": timezone}}
    body: dict[str, Any] = {
        "creation": {"schedule": schedule},
        "snapshot_config": {"repository": repository, "indices": indices},
        "enabled": enabled,
    }
    if max_age is not None or "max_count" in counts:
        condition: dict[str, Any] = {"min_count": counts.get("min_count", 1)}
        if max_age is not None:
            condition["max_age"] = max_age
        if "max_count" in counts:
            condition["max_count"] = counts["max_count"]
        body["deletion"] = {"schedule": schedule, "condition": condition}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    body["description"] = DIGEST_PREFIX + digest
    return {"name": name, "body": body, "description": body["description"]}


# The security plugin's own index: a restore of every index leaves it out (the cluster's
# users and roles are the inventory's, not a snapshot's).
SECURITY_INDEX = ".opendistro_security"


# restore.yml -e snapshot_name=latest: the newest successful snapshot of the repository.
LATEST = "latest"


def plan_restore_snapshot(
    requested: str, snapshots: Sequence[Mapping[str, Any]], *, repository: str | None = None
) -> dict[str, Any]:
    """Which snapshot a restore reads (playbooks/restore.yml, roles/opensearch_snapshots):
    ``requested`` (``snapshot_name``) as given, or for ``latest`` the newest successful
    one of ``snapshots`` (the repository's list as ``GET _snapshot/<repository>/_all``
    reports it: ``snapshot``, ``state``, ``end_time_in_millis``) by its end time, scheduled
    or not; of two that ended together, the one listed last. ``latest`` over a repository
    without a successful snapshot is refused, naming what it holds."""
    if requested != LATEST:
        return {"snapshot": requested}
    succeeded = [entry for entry in snapshots if entry.get("state") == "SUCCESS"]
    if not succeeded:
        held = ", ".join(f"{entry.get('snapshot')} ({entry.get('state')})" for entry in snapshots)
        raise InventoryError(
            [
                f"snapshot_name=latest: repository {repository or '(unnamed)'} holds no "
                f"successful snapshot (it holds: {held or 'no snapshot'}); take one with "
                "playbooks/snapshot.yml, or name the snapshot to restore"
            ]
        )
    newest = sorted(succeeded, key=lambda entry: int(entry.get("end_time_in_millis") or 0))[-1]
    return {"snapshot": str(newest["snapshot"])}


def plan_restore(snapshot: str, snapshot_indices: Sequence[str], requested: Any) -> dict[str, Any]:
    """The indices a restore of ``snapshot`` touches (playbooks/restore.yml,
    roles/opensearch_snapshots): ``requested`` (``restore_indices``: comma-separated or a
    list), or, when it is empty, every index the snapshot holds but the security plugin's
    own. An index the snapshot does not hold is refused, naming those it holds."""
    if isinstance(requested, str):
        names = requested.split(",") if requested else []
    else:
        names = [str(name) for name in requested or []]
    if not names:
        return {"indices": [index for index in snapshot_indices if index != SECURITY_INDEX]}
    unknown = [name for name in names if name not in snapshot_indices]
    if unknown:
        raise InventoryError(
            [
                f"Snapshot {snapshot} holds no index {', '.join(unknown)}; it holds "
                f"{', '.join(sorted(snapshot_indices))}."
            ]
        )
    return {"indices": names}
