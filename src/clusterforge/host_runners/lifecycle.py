"""The index lifecycle run (docs/lifecycle.md), one per timer tick, on any engine.

This module is shipped as it is, with the package's shared module, to every
cluster-manager-eligible node (the plan lists the files in ``lifecycle.runner_files``;
roles/opensearch_lifecycle places them) and run there by the node's ``python3`` from a
systemd timer. So it imports the standard library and its package only
(tests/test_host_runners.py checks that). Its decision is one pure function,
:func:`decide`, over the cluster state a run fetched (:func:`fetch_state`); it returns
each action with its reason, and the notes of what it left alone and why. ``scripts/
lifecycle --plan`` prints the same decision without acting (clusterforge.status.lifecycle).

What a run never does, whatever the policies say: touch a write index (the alias's write
index, a data stream's newest backing index, or for a series without an alias its newest
index); act on an index no policy matches; act at all on a red cluster; roll over without
room under ``cluster.max_shards_per_node`` for the new index's shards; act on an index
the index-management plugin (ISM) manages. Read-only is ``index.blocks.write`` only,
never ``read_only_allow_delete`` (the engine's own flood-stage block).

One run at a time across the nodes: every eligible node's timer fires, and only the node
that is the elected cluster manager acts; the others record a standby run. A stopped node
leaves the runs to the node elected next.

Each run prints one line for the journal and rewrites its node-exporter textfile metric
atomically: the last success, this run's time and outcome, a counter per action, and per
policy its size, its cap, its oldest index and its delete age (the alerts read them).
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import common
from .common import ApiError, Client, label_value, load, write_atomically

# A force-merge to few segments of a large index takes long; the unit's limit is higher.
FORCE_MERGE_TIMEOUT = 3600.0
METRIC_PREFIX = "clusterforge_lifecycle"
# The metrics the alerts (clusterforge.plan.monitoring.alert_rules) and scripts/status read.
LAST_SUCCESS = "clusterforge_lifecycle_last_success_timestamp_seconds"
LAST_RUN = "clusterforge_lifecycle_last_run_timestamp_seconds"
LAST_RUN_SUCCESS = "clusterforge_lifecycle_last_run_success"
ACTING = "clusterforge_lifecycle_acting"
ACTIONS_TOTAL = "clusterforge_lifecycle_actions_total"
STATE_FILE = "state.json"
JOURNAL_ORDER = ("node", "role", "state", "actions", "failed", "seconds", "note")
ACTIONS = ("rollover", "replicas", "read_only", "force_merge", "delete")
# The engine's default of cluster.max_shards_per_node.
DEFAULT_MAX_SHARDS_PER_NODE = 1000
ISM_POLICY_KEYS = (
    "index.plugins.index_state_management.policy_id",
    "index.opendistro.index_state_management.policy_id",
    "policy_id",
)


@dataclass(frozen=True)
class Index:
    """One index of a series, as a run needs it."""

    name: str
    created_epoch: float
    # When the series rolled over from it (rollover_info), or None (never, or unknown).
    rolled_over_epoch: float | None = None
    is_write: bool = False
    docs: int = 0
    primary_bytes: int = 0
    total_bytes: int = 0
    primaries: int = 1
    replicas: int = 0
    primary_segments: int | None = None
    write_blocked: bool = False
    is_open: bool = True
    ism_policy: str | None = None

    @property
    def age_basis(self) -> float:
        """Ages count from the rollover, as ISM's and ILM's do; else from the creation."""
        return self.rolled_over_epoch if self.rolled_over_epoch is not None else self.created_epoch


@dataclass(frozen=True)
class Series:
    """A policy's indices: an alias-based series, or a data stream's backing indices."""

    policy: Mapping[str, Any]
    indices: tuple[Index, ...]
    # The alias or data stream exists (a rollover has somewhere to go).
    target_found: bool = True
    # Set when the run could not read the series at all: nothing is done to it.
    unreadable: str | None = None

    @property
    def name(self) -> str:
        return str(self.policy["name"])

    @property
    def target(self) -> str:
        """What a rollover names: the data stream, or the alias."""
        return str(self.policy.get("data_stream") or self.policy.get("alias") or "")


@dataclass(frozen=True)
class ClusterState:
    status: str
    open_shards: int
    data_nodes: int
    max_shards_per_node: int = DEFAULT_MAX_SHARDS_PER_NODE

    @property
    def shard_limit(self) -> int:
        return self.max_shards_per_node * max(self.data_nodes, 1)


@dataclass(frozen=True)
class Action:
    policy: str
    action: str
    index: str
    reason: str
    # rollover: the alias or data stream; replicas: the count; force_merge: the segments.
    target: str = ""
    value: int | None = None


@dataclass
class Decision:
    actions: list[Action] = field(default_factory=list)
    # What was left alone and why, one line each.
    notes: list[str] = field(default_factory=list)


def describe_seconds(seconds: float) -> str:
    """``seconds`` in the toolkit's duration grammar's largest whole unit, rounded down."""
    whole = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def describe_bytes(amount: float) -> str:
    for unit, size in (("tb", 1024**4), ("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
        if amount >= size:
            return f"{amount / size:.1f}{unit}"
    return f"{int(amount)}b"


def write_index_of(series: Series) -> str | None:
    """The index a series writes to: flagged by the alias or the data stream; for a
    series without an alias, its newest index (it may be written to)."""
    flagged = [index.name for index in series.indices if index.is_write]
    if flagged:
        return flagged[-1]
    if series.policy.get("kind") == "alias" and not series.policy.get("alias") and series.indices:
        return max(series.indices, key=lambda index: (index.created_epoch, index.name)).name
    return None


def matches(policy: Mapping[str, Any], index: str) -> bool:
    """Whether ``index`` is one the policy may act on (its pattern; a data stream's
    backing indices)."""
    pattern = str(policy.get("index_pattern") or "")
    return bool(pattern) and fnmatch.fnmatchcase(index, pattern)


def _rollover_reason(policy: Mapping[str, Any], index: Index, now: float) -> str | None:
    conditions = policy.get("rollover") or {}
    met = []
    if conditions.get("max_docs") is not None and index.docs >= int(conditions["max_docs"]):
        met.append(f"{index.docs} docs >= max_docs {conditions['max_docs']}")
    limit = conditions.get("max_primary_size_bytes")
    if limit is not None and index.primary_bytes >= int(limit):
        met.append(
            f"primary size {describe_bytes(index.primary_bytes)} >= max_primary_size "
            f"{describe_bytes(int(limit))}"
        )
    age = conditions.get("max_age_seconds")
    if age is not None and now - index.created_epoch >= int(age):
        met.append(
            f"created {describe_seconds(now - index.created_epoch)} ago >= max_age "
            f"{describe_seconds(int(age))}"
        )
    return "; ".join(met) or None


def _decide_series(series: Series, cluster: ClusterState, now: float, decision: Decision) -> int:
    """The actions for one series; returns the shards a rollover adds (for the next
    series' headroom)."""
    policy = series.policy
    name = series.name
    if series.unreadable:
        decision.notes.append(f"{name}: not read ({series.unreadable}); nothing done")
        return 0
    ism = sorted(index.name for index in series.indices if index.ism_policy)
    if ism:
        decision.notes.append(
            f"{name}: ISM manages {', '.join(ism)}; the pattern is left to ISM (a pattern is "
            "managed one way: remove its ISM policy or this policy)"
        )
        return 0
    write = write_index_of(series)
    added = 0
    if series.target and write is None:
        # Fail closed: without knowing which index is written to, any could be; so none
        # is touched (an alias missing, or pointing at several indices and no write one).
        if series.indices:
            decision.notes.append(
                f"{name}: no write index behind {series.target}; nothing done (create the "
                "first index with the alias as its write index, or the data stream)"
            )
        return 0
    # The rollover, first: the index it leaves behind ages from now on.
    if policy.get("rollover"):
        current = next((index for index in series.indices if index.name == write), None)
        if current is None:
            decision.notes.append(f"{name}: no write index; nothing to roll over")
        elif not matches(policy, current.name):
            decision.notes.append(
                f"{name}: the write index {current.name} is outside {policy.get('index_pattern')}; "
                "not rolled over (name the series' indices so the pattern matches them)"
            )
        elif (reason := _rollover_reason(policy, current, now)) is not None:
            needed = current.primaries * (1 + current.replicas)
            if cluster.open_shards + needed > cluster.shard_limit:
                decision.notes.append(
                    f"{name}: rollover of {current.name} due ({reason}) but skipped: "
                    f"{cluster.open_shards} open shards + {needed} new > the limit "
                    f"{cluster.shard_limit} ({cluster.max_shards_per_node} "
                    "cluster.max_shards_per_node x data nodes); raise it or delete indices"
                )
            else:
                decision.actions.append(
                    Action(name, "rollover", current.name, reason, target=series.target)
                )
                added = needed
    others = sorted(
        (index for index in series.indices if index.name != write and matches(policy, index.name)),
        key=lambda index: (index.age_basis, index.name),
    )
    deleted: set[str] = set()
    delete_after = policy.get("delete_after_seconds")
    for index in others:
        age = now - index.age_basis
        since = "rolled over" if index.rolled_over_epoch is not None else "created"
        aged = f"{since} {describe_seconds(age)} ago"
        if delete_after is not None and age >= int(delete_after):
            decision.actions.append(
                Action(
                    name,
                    "delete",
                    index.name,
                    f"{aged} >= delete_after {describe_seconds(int(delete_after))}",
                )
            )
            deleted.add(index.name)
            continue
        if not index.is_open:
            continue  # a closed index takes no setting or merge; only its deletion
        replicas_after = policy.get("replicas_after_seconds")
        wanted = policy.get("replicas")
        if (
            replicas_after is not None
            and wanted is not None
            and age >= int(replicas_after)
            and index.replicas != int(wanted)
        ):
            decision.actions.append(
                Action(
                    name,
                    "replicas",
                    index.name,
                    f"{aged} >= replicas_after {describe_seconds(int(replicas_after))}; "
                    f"{index.replicas} replicas -> {wanted}",
                    value=int(wanted),
                )
            )
        read_only_after = policy.get("read_only_after_seconds")
        if read_only_after is not None and age >= int(read_only_after) and not index.write_blocked:
            decision.actions.append(
                Action(
                    name,
                    "read_only",
                    index.name,
                    f"{aged} >= read_only_after {describe_seconds(int(read_only_after))}",
                )
            )
        merge_after = policy.get("force_merge_after_seconds")
        segments = int(policy.get("max_segments") or 1)
        if (
            merge_after is not None
            and age >= int(merge_after)
            and index.primary_segments is not None
            and index.primary_segments > segments * index.primaries
        ):
            decision.actions.append(
                Action(
                    name,
                    "force_merge",
                    index.name,
                    f"{aged} >= force_merge_after {describe_seconds(int(merge_after))}; "
                    f"{index.primary_segments} primary segments > {segments} per shard",
                    value=segments,
                )
            )
    cap = policy.get("max_total_size_bytes")
    if cap is not None:
        total = sum(index.total_bytes for index in series.indices if index.name not in deleted)
        for index in others:
            if total <= int(cap):
                break
            if index.name in deleted:
                continue
            decision.actions.append(
                Action(
                    name,
                    "delete",
                    index.name,
                    f"the pattern holds {describe_bytes(total)} > max_total_size "
                    f"{describe_bytes(int(cap))}; oldest index",
                )
            )
            deleted.add(index.name)
            total -= index.total_bytes
        if total > int(cap):
            decision.notes.append(
                f"{name}: {describe_bytes(total)} > max_total_size {describe_bytes(int(cap))} "
                "with no index left to delete but the write index"
            )
    return added


def decide(cluster: ClusterState, series: Iterable[Series], now: float) -> Decision:
    """What a run does, in order, each action with its reason; pure."""
    decision = Decision()
    if cluster.status not in ("green", "yellow"):
        decision.notes.append(f"the cluster is {cluster.status}: nothing done until it is not")
        return decision
    open_shards = cluster.open_shards
    for one in series:
        state = ClusterState(
            status=cluster.status,
            open_shards=open_shards,
            data_nodes=cluster.data_nodes,
            max_shards_per_node=cluster.max_shards_per_node,
        )
        open_shards += _decide_series(one, state, now, decision)
    return decision


# ---------------------------------------------------------------- the cluster


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="*,-._")


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def shard_limit_setting(answer: Mapping[str, Any]) -> Any:
    """``cluster.max_shards_per_node`` as ``GET _cluster/settings?include_defaults`` nests
    it: transient over persistent over the engine's default. (A filter_path of the flat
    key matches nothing: the filter reads its dots as nesting.)"""
    for level in ("transient", "persistent", "defaults"):
        value = ((answer.get(level) or {}).get("cluster") or {}).get("max_shards_per_node")
        if value is not None:
            return value
    return None


def fetch_cluster(client: Client) -> ClusterState:
    health = client.call("GET", "/_cluster/health")
    settings = client.call(
        "GET",
        "/_cluster/settings?include_defaults=true&filter_path=*.cluster.max_shards_per_node",
    )
    return ClusterState(
        status=str(health.get("status", "unknown")),
        # Every shard of an open index counts against the limit, assigned or not.
        open_shards=_int(health.get("active_shards"))
        + _int(health.get("initializing_shards"))
        + _int(health.get("unassigned_shards")),
        data_nodes=_int(health.get("number_of_data_nodes"), 1),
        max_shards_per_node=_int(shard_limit_setting(settings or {}), DEFAULT_MAX_SHARDS_PER_NODE),
    )


def elected_manager(client: Client) -> str:
    answer = client.call("GET", "/_cat/cluster_manager?format=json&h=node")
    return str(answer[0].get("node", "")) if answer else ""


def _rollover_epoch(metadata: Mapping[str, Any], target: str) -> float | None:
    info = (metadata.get("rollover_info") or {}).get(target) or {}
    time_ms = info.get("time")
    return None if time_ms is None else _int(time_ms) / 1000


def fetch_series(
    client: Client, policy: Mapping[str, Any], *, ism: bool, refresh: bool = True
) -> Series:
    """One policy's indices: their stats (``_cat/indices``), their metadata (creation,
    rollover, blocks, replicas: the cluster state), which one is written to (``_alias``,
    or ``_data_stream``), and, with ISM installed, which ISM manages.

    With ``refresh``, the write index is refreshed before its stats are read. A shard
    that nobody searches for 30 s goes search-idle and stops refreshing, so its
    ``docs.count``, size and segments stand still while writes go on: on the lab a
    preview taken 14 s before a run saw no write index over its thresholds, and the run
    then rolled both over. A run and its preview must read the same numbers."""
    pattern = str(policy["index_pattern"])
    target = str(policy.get("data_stream") or policy.get("alias") or "")
    names: list[str] | None = None
    write: str | None = None
    found = True
    if policy.get("kind") == "data_stream":
        try:
            answer = client.call("GET", f"/_data_stream/{_quote(target)}")
            streams = answer.get("data_streams") or []
            names = [str(index["index_name"]) for index in streams[0]["indices"]] if streams else []
        except ApiError as error:
            if error.status != 404:
                raise
            names = []
        found = bool(names)
        write = names[-1] if names else None
    elif target:
        try:
            # Through the pattern: ``GET _alias/<alias>`` alone targets every index, and the
            # security plugin refuses it (403) to a user granted the pattern only.
            answer = client.call("GET", f"/{_quote(pattern)}/_alias/{_quote(target)}")
        except ApiError as error:
            if error.status != 404:
                raise
            answer = {}
        members = {
            str(index): (body.get("aliases") or {}).get(target) or {}
            for index, body in (answer or {}).items()
        }
        found = bool(members)
        flagged = [index for index, alias in members.items() if alias.get("is_write_index")]
        if flagged:
            write = flagged[0]
        elif len(members) == 1:
            write = next(iter(members))  # one index behind the alias is its write index
    if refresh and write:
        try:
            client.call("POST", f"/{_quote(write)}/_refresh")
        except ApiError as error:
            if error.status != 404:  # deleted meanwhile: the stats below say so
                raise
    stats = client.call(
        "GET",
        f"/_cat/indices/{_quote(pattern)}?format=json&bytes=b&expand_wildcards=all"
        "&h=index,status,pri,rep,docs.count,store.size,pri.store.size,pri.segments.count",
    )
    state = client.call(
        "GET",
        f"/_cluster/state/metadata/{_quote(pattern)}?expand_wildcards=all"
        "&filter_path=metadata.indices.*.state,metadata.indices.*.settings.index.creation_date,"
        "metadata.indices.*.settings.index.number_of_replicas,"
        "metadata.indices.*.settings.index.number_of_shards,"
        "metadata.indices.*.settings.index.blocks,metadata.indices.*.rollover_info",
    )
    metadata = ((state or {}).get("metadata") or {}).get("indices") or {}
    managed: dict[str, str] = {}
    if ism:
        explained = client.call("GET", f"/_plugins/_ism/explain/{_quote(pattern)}")
        for index, body in (explained or {}).items():
            if isinstance(body, Mapping):
                policy_id = next((body[key] for key in ISM_POLICY_KEYS if body.get(key)), None)
                if policy_id:
                    managed[str(index)] = str(policy_id)
    indices = []
    for row in stats or []:
        name = str(row.get("index"))
        if names is not None and name not in names:
            continue  # a data stream's pattern may reach another stream's indices
        meta = metadata.get(name) or {}
        settings = (meta.get("settings") or {}).get("index") or {}
        blocks = settings.get("blocks") or {}
        segments = row.get("pri.segments.count")
        indices.append(
            Index(
                name=name,
                created_epoch=_int(settings.get("creation_date")) / 1000,
                rolled_over_epoch=_rollover_epoch(meta, target) if target else None,
                is_write=name == write,
                docs=_int(row.get("docs.count")),
                primary_bytes=_int(row.get("pri.store.size")),
                total_bytes=_int(row.get("store.size")),
                primaries=_int(settings.get("number_of_shards") or row.get("pri"), 1),
                replicas=_int(settings.get("number_of_replicas") or row.get("rep")),
                primary_segments=None if segments in (None, "") else _int(segments),
                write_blocked=str(blocks.get("write", "false")).lower() == "true",
                is_open=str(row.get("status", meta.get("state", "open"))) == "open",
                ism_policy=managed.get(name),
            )
        )
    indices.sort(key=lambda index: (index.created_epoch, index.name))
    return Series(policy=policy, indices=tuple(indices), target_found=found)


def fetch_state(
    client: Client, policies: Sequence[Mapping[str, Any]], *, ism: bool
) -> tuple[ClusterState, list[Series]]:
    cluster = fetch_cluster(client)
    # A red cluster gets reads only (decide() leaves it alone).
    refresh = cluster.status in ("green", "yellow")
    series = []
    for policy in policies:
        try:
            series.append(fetch_series(client, policy, ism=ism, refresh=refresh))
        except ApiError as error:
            series.append(Series(policy=policy, indices=(), unreadable=f"{error}"))
    return cluster, series


def execute(client: Client, action: Action, series: Series) -> str:
    """Carry out one action through the core APIs; returns what happened. Refuses (raises
    ValueError) an action on an index its series does not hold or on its write index,
    whatever asked for it."""
    held = {index.name for index in series.indices}
    write = write_index_of(series)
    if action.action == "rollover":
        if action.index != write or not matches(series.policy, action.index):
            raise ValueError(
                f"rollover of {action.index}, not the write index {write} of policy {series.name}"
            )
        conditions = series.policy.get("rollover") or {}
        body: dict[str, Any] = {}
        if conditions.get("max_docs") is not None:
            body["max_docs"] = int(conditions["max_docs"])
        if conditions.get("max_primary_size_bytes") is not None:
            # The engine's max_size is the index's primary store size.
            body["max_size"] = f"{int(conditions['max_primary_size_bytes'])}b"
        if conditions.get("max_age_seconds") is not None:
            body["max_age"] = f"{int(conditions['max_age_seconds'])}s"
        answer = client.call(
            "POST", f"/{_quote(action.target)}/_rollover", {"conditions": body}, timeout=120
        )
        if not answer.get("rolled_over"):
            return "not rolled over: the engine found no condition met"
        return f"rolled over to {answer.get('new_index')}"
    if action.index not in held or not matches(series.policy, action.index):
        raise ValueError(f"{action.index} is not an index of policy {series.name}")
    if action.index == write:
        raise ValueError(f"{action.index} is the write index of {series.target}")
    path = f"/{_quote(action.index)}"
    if action.action == "replicas":
        client.call("PUT", f"{path}/_settings", {"index": {"number_of_replicas": action.value}})
        return f"replicas {action.value}"
    if action.action == "read_only":
        client.call("PUT", f"{path}/_settings", {"index": {"blocks": {"write": True}}})
        return "write blocked"
    if action.action == "force_merge":
        client.call(
            "POST",
            f"{path}/_forcemerge?max_num_segments={int(action.value or 1)}",
            timeout=FORCE_MERGE_TIMEOUT,
        )
        return f"merged to {action.value} segments"
    if action.action == "delete":
        try:
            client.call("DELETE", path, timeout=120)
        except ApiError as error:
            if error.status != 404:
                raise
            # Another run (a manager that changed mid-run) deleted it first.
            return "not deleted: already gone"
        return "deleted"
    raise ValueError(f"unknown action {action.action}")


# ---------------------------------------------------------------- the record


def policy_gauges(series: Sequence[Series], deleted: set[str]) -> dict[str, dict[str, float]]:
    """Per policy, after the run: its size, indices, oldest non-write index's age basis,
    its cap and delete age (what the alerts compare)."""
    gauges: dict[str, dict[str, float]] = {}
    for one in series:
        if one.unreadable:
            continue
        left = [index for index in one.indices if index.name not in deleted]
        write = write_index_of(one)
        aging = [index.age_basis for index in left if index.name != write]
        values: dict[str, float] = {
            "indices": len(left),
            "size_bytes": sum(index.total_bytes for index in left),
        }
        if aging:
            values["oldest_index_timestamp_seconds"] = min(aging)
        if one.policy.get("max_total_size_bytes") is not None:
            values["max_total_size_bytes"] = int(one.policy["max_total_size_bytes"])
        if one.policy.get("delete_after_seconds") is not None:
            values["delete_after_seconds"] = int(one.policy["delete_after_seconds"])
        gauges[one.name] = values
    return gauges


GAUGE_HELP = {
    "indices": "Indices of the policy's series after the last run.",
    "size_bytes": "Store size (replicas included) of the policy's series after the last run.",
    "oldest_index_timestamp_seconds": "Rollover (else creation) time of the oldest "
    "non-write index of the policy.",
    "max_total_size_bytes": "The policy's max_total_size.",
    "delete_after_seconds": "The policy's delete_after.",
}


def metric_text(
    *,
    cluster: str,
    now: float,
    run_ok: bool,
    acting: bool,
    last_success: float | None,
    counts: Mapping[tuple[str, str], int],
    gauges: Mapping[str, Mapping[str, float]],
) -> str:
    """The node-exporter textfile (the last success is absent until there is one)."""
    base = f"cluster={label_value(cluster)}"
    name = METRIC_PREFIX
    lines = [
        f"# HELP {LAST_SUCCESS} End of the last successful lifecycle run that acted "
        "(clusterforge).",
        f"# TYPE {LAST_SUCCESS} gauge",
    ]
    if last_success is not None:
        lines.append(f"{LAST_SUCCESS}{{{base}}} {last_success:.3f}")
    lines += [
        f"# HELP {LAST_RUN} Time of the last lifecycle run on this node.",
        f"# TYPE {LAST_RUN} gauge",
        f"{LAST_RUN}{{{base}}} {now:.3f}",
        f"# HELP {LAST_RUN_SUCCESS} Whether the last run on this node succeeded (1) or not.",
        f"# TYPE {LAST_RUN_SUCCESS} gauge",
        f"{LAST_RUN_SUCCESS}{{{base}}} {1 if run_ok else 0}",
        f"# HELP {ACTING} Whether this node is the elected manager that acts (1) or a standby (0).",
        f"# TYPE {ACTING} gauge",
        f"{ACTING}{{{base}}} {1 if acting else 0}",
        f"# HELP {ACTIONS_TOTAL} Lifecycle actions this node carried out.",
        f"# TYPE {ACTIONS_TOTAL} counter",
    ]
    for (policy, action), count in sorted(counts.items()):
        labels = f"{base},policy={label_value(policy)},action={label_value(action)}"
        lines.append(f"{ACTIONS_TOTAL}{{{labels}}} {count}")
    for gauge, help_text in GAUGE_HELP.items():
        rows = [(policy, values[gauge]) for policy, values in gauges.items() if gauge in values]
        if not rows:
            continue
        lines += [f"# HELP {name}_{gauge} {help_text}", f"# TYPE {name}_{gauge} gauge"]
        lines += [
            f"{name}_{gauge}{{{base},policy={label_value(policy)}}} {value:.3f}"
            for policy, value in sorted(rows)
        ]
    return "\n".join(lines) + "\n"


def journal_line(fields: Mapping[str, Any]) -> str:
    """One line, ``key=value`` pairs in a fixed order; values with spaces are quoted."""
    return common.journal_line("clusterforge-lifecycle", JOURNAL_ORDER, fields)


def load_state(state_dir: str) -> dict[str, Any]:
    """The counters and the last success kept across runs (``state.json``)."""
    try:
        with open(os.path.join(state_dir, STATE_FILE), encoding="utf-8") as handle:
            state = json.load(handle)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def run(
    config: Mapping[str, Any], client: Client, *, now: float, node: str
) -> tuple[bool, str, dict[str, Any]]:
    """One run; returns (success, the journal line, the record to keep)."""
    started = time.monotonic()
    state = load_state(str(config.get("state_dir") or "."))
    counts: dict[tuple[str, str], int] = {
        (str(key.split("/", 1)[0]), str(key.split("/", 1)[1])): int(value)
        for key, value in (state.get("counts") or {}).items()
        if "/" in key
    }
    last_success = state.get("last_success")
    fields: dict[str, Any] = {"node": node}
    manager = elected_manager(client)
    gauges: dict[str, dict[str, float]] = {}
    ok = True
    if manager != str(config.get("node_name") or node):
        # Another node acts this tick; this one only records that it is alive.
        fields["role"] = "standby"
        fields["state"] = "OK"
        fields["note"] = f"the elected manager {manager or '(none)'} acts"
        acting = False
    else:
        acting = True
        fields["role"] = "acting"
        policies = list(config.get("policies") or [])
        cluster, series = fetch_state(client, policies, ism=bool(config.get("ism_installed")))
        decision = decide(cluster, series, now)
        by_name = {one.name: one for one in series}
        done: list[str] = []
        failed: list[str] = []
        deleted: set[str] = set()
        for action in decision.actions:
            label = f"{action.action}:{action.index}"
            try:
                outcome = execute(client, action, by_name[action.policy])
            except (ApiError, ValueError) as error:
                failed.append(label)
                decision.notes.append(f"{label} failed: {error}")
                continue
            if outcome.startswith("not "):
                decision.notes.append(f"{label}: {outcome}")
                continue
            done.append(label)
            counts[(action.policy, action.action)] = (
                counts.get((action.policy, action.action), 0) + 1
            )
            if action.action == "delete":
                deleted.add(action.index)
        ok = not failed and not any(one.unreadable for one in series)
        fields["state"] = "OK" if ok else "FAILED"
        fields["actions"] = done
        if failed:
            fields["failed"] = failed
        if decision.notes:
            fields["note"] = "; ".join(decision.notes)
        gauges = policy_gauges(series, deleted)
        # A policy this run could not read keeps what the last run saw (the age of its
        # oldest index still grows against the clock, and the alert can fire).
        declared = {str(policy.get("name")) for policy in policies}
        for policy, values in (state.get("gauges") or {}).items():
            if str(policy) in declared:
                gauges.setdefault(str(policy), dict(values))
        if ok:
            last_success = time.time()
    fields["seconds"] = f"{time.monotonic() - started:.1f}"
    record = {
        "counts": {f"{policy}/{action}": count for (policy, action), count in counts.items()},
        "last_success": last_success if acting else None,
        "gauges": gauges,
        "text": metric_text(
            cluster=str(config.get("cluster", "")),
            now=time.time(),
            run_ok=ok,
            acting=acting,
            last_success=last_success if acting else None,
            counts=counts,
            gauges=gauges,
        ),
    }
    return ok, journal_line(fields), record


def keep(config: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    """Write the run's state and metric into the state directory (the textfile directory
    links to the metric)."""
    state_dir = str(config.get("state_dir") or "")
    if not state_dir or not os.path.isdir(state_dir):
        return
    write_atomically(
        os.path.join(state_dir, STATE_FILE),
        json.dumps(
            {
                "counts": record["counts"],
                "last_success": record["last_success"],
                "gauges": record.get("gauges") or {},
            }
        )
        + "\n",
    )
    write_atomically(
        os.path.join(state_dir, str(config.get("metric_file") or "clusterforge_lifecycle.prom")),
        str(record["text"]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config_path = args[0] if args else "/etc/clusterforge/lifecycle/config.json"
    node = os.uname().nodename
    config: dict[str, Any] = {}
    try:
        config, username, password = load(config_path)
        client = common.client_from(config, username, password)
        node = str(config.get("node") or node)
        ok, line, record = run(config, client, now=time.time(), node=node)
    except (ApiError, OSError, ValueError, KeyError, IndexError) as error:
        note = f"{error}{common.error_detail(error)}"
        print(journal_line({"node": node, "state": "ERROR", "note": note}))
        if config:
            state = load_state(str(config.get("state_dir") or "."))
            counts = {
                (key.split("/", 1)[0], key.split("/", 1)[1]): int(value)
                for key, value in (state.get("counts") or {}).items()
                if "/" in key
            }
            last = state.get("last_success")
            # What the last acting run saw stays (a standby's state has none): a runner
            # that cannot reach the cluster must not hide an index past its delete age.
            kept = state.get("gauges") or {}
            keep(
                config,
                {
                    "counts": state.get("counts") or {},
                    "last_success": last,
                    "gauges": kept,
                    "text": metric_text(
                        cluster=str(config.get("cluster", "")),
                        now=time.time(),
                        run_ok=False,
                        acting=False,
                        last_success=last,
                        counts=counts,
                        gauges=kept,
                    ),
                },
            )
        return 1
    keep(config, record)
    print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
