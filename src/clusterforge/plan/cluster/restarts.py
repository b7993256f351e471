"""Which nodes restart, in which order, and why: the plan's ``rollout`` section.

:func:`plan_rollout` reads the model and what the nodes report (first start, a mode
switch, upgrades, a downgrade refused) and hands the topology to the pure planner
(:mod:`clusterforge.plan.cluster.rollout`) for the batches; :func:`with_config_restarts` adds,
per node, the opensearch.yml settings whose change needs a restart; the rolling play's
restart decision (:func:`restart_reasons`, :func:`rolling_batches`,
:func:`restart_decision`) is made from the changes the hosts recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterforge.errors import ClusterforgeError, InventoryError
from clusterforge.plan.cluster.model import Cluster, Node
from clusterforge.plan.cluster.model_checks import heap_megabytes
from clusterforge.plan.cluster.rollout import (
    Operation,
    Topology,
    TopologyNode,
    awareness_pause,
    plan_batches,
    zoned_nodes,
)


class DowngradeRefusedError(ClusterforgeError):
    """A node runs a newer engine than the inventory names; the message lists every node."""


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-")[0].split(".") if part.isdigit())


def memory_megabytes(meminfo: str | None) -> int | None:
    """MemTotal of a host's /proc/meminfo in MB (as Ansible's memtotal_mb), or None; the
    look at the nodes (clusterforge_observe) reports it for :func:`plan_rollout`."""
    for line in (meminfo or "").splitlines():
        name, _separator, value = line.partition(":")
        fields = value.split()
        if name == "MemTotal" and fields and fields[0].isdigit():
            return int(fields[0]) // 1024
    return None


def plan_rollout(cluster: Cluster, observed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What the nodes report decides the rollout: first start, a mode switch, upgrades,
    the batches and restart order (:mod:`clusterforge.plan.cluster.rollout`: the elected cluster
    manager last), the batches of a scale-in, and a downgrade refused.

    ``observed`` maps inventory names to what a read-only look at each node found
    (playbooks/plan.yml): ``version`` (what ``GET /`` answered, or None), ``active``
    (the service runs), ``formed`` (the node's formed marker exists), ``security_mode``
    (the mode marker's content, or None), ``cluster_manager`` (the elected cluster
    manager's node name, as that node sees it, or None) and ``memory_megabytes`` (the
    host's MemTotal, or None). A node nobody observed is new.

    A heap above half of a host's memory is refused here, before any host changes (the
    other half is the engine's file cache), so the engine play needs no gathered facts.
    """
    _refuse_heap_over_half_of_memory(cluster, observed)
    problems = []
    nodes: dict[str, Any] = {}
    manager_names = set()
    for node in cluster.nodes:
        seen = observed.get(node.inventory_name) or {}
        running_version = seen.get("version") or None
        if running_version and _version_key(str(running_version)) > _version_key(cluster.version):
            problems.append(
                f"{node.inventory_name} runs OpenSearch {running_version}, newer than "
                f"opensearch_version {cluster.version}. Downgrades are refused: an index "
                "written by a newer version cannot be read by an older one. Set "
                f"opensearch_version to {running_version} or later."
            )
        if seen.get("cluster_manager"):
            manager_names.add(str(seen["cluster_manager"]))
        active = bool(seen.get("active"))
        nodes[node.inventory_name] = {
            "active": active,
            # Started at boot too: a node active and enabled needs no start
            # (roles/opensearch, tasks/run.yml).
            "enabled": bool(seen.get("enabled")),
            "running_version": running_version,
            "upgrade": bool(active and running_version and running_version != cluster.version),
            # Without a look at the node, a changed opensearch.yml restarts it.
            "change_records": change_records(node.inventory_name, [CONFIG_FILE]),
        }
    if problems:
        raise DowngradeRefusedError("\n".join(problems))
    mode_switch = any(
        (observed.get(node.inventory_name) or {}).get("security_mode") not in (None, "")
        and str((observed.get(node.inventory_name) or {}).get("security_mode")).strip()
        != cluster.security_mode
        for node in cluster.nodes
    )
    # A node on its way out may be the elected one: the scale-in then moves it last.
    elected = next(
        (
            node.inventory_name
            for node in (*cluster.nodes, *cluster.removed_nodes)
            if node.name in manager_names
        ),
        None,
    )
    upgrading = any(node["upgrade"] for node in nodes.values())
    batches = plan_batches(
        _topology(cluster, cluster.nodes, elected),
        Operation.UPGRADE if upgrading else Operation.RESTART,
    )
    scale_in = None
    if cluster.removed_nodes:
        # The cluster still counts the leaving nodes: they are in the quorum's budget.
        scale_in = plan_batches(
            _topology(cluster, (*cluster.nodes, *cluster.removed_nodes), elected),
            Operation.SCALE_IN,
            [node.inventory_name for node in cluster.removed_nodes],
        ).as_dict()
    managers_seen = {
        (observed.get(node.inventory_name) or {}).get("cluster_manager") for node in cluster.nodes
    }
    return {
        # Every node ran, answered its version and named one and the same elected cluster
        # manager when the plan looked, seconds ago: the cluster had formed with all of
        # them. A run that then starts or restarts no node need not wait for the
        # formation again (roles/opensearch, tasks/wait_formed.yml: issue 54, waits only
        # on change); a new, stopped, silent or manager-less node, or two views of the
        # manager, and the run waits as before.
        "all_joined": bool(cluster.nodes)
        and all(node["active"] and node["running_version"] for node in nodes.values())
        and len(managers_seen) == 1
        and all(managers_seen),
        # Any node's marker means the cluster exists: new nodes then join it and never
        # carry cluster.initial_cluster_manager_nodes.
        "first_start": not any(
            (observed.get(node.inventory_name) or {}).get("formed") for node in cluster.nodes
        ),
        # Nodes with and without transport TLS cannot talk to each other, so a mode switch
        # restarts every node at once (a full cluster restart), never one at a time.
        "mode_switch": mode_switch,
        # One node at a time in the batches' order (docs/zones.md): what
        # playbooks/rolling.yml runs in node mode; zone mode runs the batches themselves.
        "restart_order": batches.order,
        "batch_mode": cluster.rolling_batch,
        "batches": batches.as_dict(),
        "scale_in": scale_in,
        "nodes": nodes,
        # Zones turned off: awareness paused until every node runs without them.
        "awareness_pause": observed_awareness_pause(cluster, observed),
    }


def observed_awareness_pause(
    cluster: Cluster, observed: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """:func:`clusterforge.plan.cluster.rollout.awareness_pause` from the opensearch.yml each node
    holds now (the look's ``opensearch_yml``), the nodes marked absent among them."""
    configs = {}
    for host, seen in observed.items():
        try:
            configs[host] = yaml.safe_load((seen or {}).get("opensearch_yml") or "")
        except yaml.YAMLError:
            configs[host] = None
    return awareness_pause(
        zoned_nodes(configs),
        zones_planned=bool(cluster.zones),
        removing=[node.inventory_name for node in cluster.removed_nodes],
    )


def _refuse_heap_over_half_of_memory(
    cluster: Cluster, observed: Mapping[str, Mapping[str, Any]]
) -> None:
    heap = heap_megabytes(cluster.heap_size)
    too_small = [
        f"opensearch_heap_size {cluster.heap_size} needs {heap} MB, more than half of "
        f"{name}'s {int(memory)} MB; set opensearch_heap_size to {int(memory) // 2}m or less"
        for name, seen in sorted(observed.items())
        if (memory := (seen or {}).get("memory_megabytes")) and heap * 2 > int(memory)
    ]
    if too_small:
        raise InventoryError(too_small)


def with_config_restarts(
    rollout: Mapping[str, Any],
    nodes: Mapping[str, Mapping[str, Any]],
    observed: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """``rollout`` with ``nodes[host].config_restart`` for every node: the opensearch.yml
    settings whose change needs a restart of the running node (:func:`settings_needing_restart`),
    between the text the look found on it (``observed[host].opensearch_yml``: None when the
    file is missing, or when nobody looked) and the one roles/opensearch writes (the
    first-start variant while the cluster has not formed). Empty when only start-only
    settings change; ``["opensearch.yml"]`` when there was no file to compare. The role
    records whether a changed opensearch.yml restarts the node from it, and asks nothing
    after the plan.
    """
    config_name = "opensearch.first-start.yml" if rollout["first_start"] else "opensearch.yml"
    return {
        **rollout,
        "nodes": {
            host: {
                **entry,
                "config_restart": (
                    config_restart := settings_needing_restart(
                        (observed.get(host) or {}).get("opensearch_yml"),
                        nodes[host]["files"][config_name],
                    )
                ),
                "change_records": change_records(host, config_restart),
            }
            for host, entry in rollout["nodes"].items()
        },
    }


CONFIG_FILE = "opensearch.yml"


def change_records(host: str, config_restart: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What roles/opensearch records (``__clusterforge_changes``) when it changes one of the
    node's files, by the file's name in ``nodes[host].files`` (the first start's
    opensearch.yml is recorded as opensearch.yml): the reason :func:`restart_reasons`
    gives, and whether it restarts a running node. opensearch.yml restarts it only for
    the settings in ``config_restart`` (:func:`settings_needing_restart`); the heap and
    the unit always do."""
    detail = (
        f" ({', '.join(config_restart)})"
        if config_restart
        else " (start-only settings: no restart)"
    )
    return {
        CONFIG_FILE: {
            "host": host,
            "reason": f"{CONFIG_FILE}{detail}",
            "restart": bool(config_restart),
        },
        "heap.options": {"host": host, "reason": "heap.options", "restart": True},
        "opensearch.service": {"host": host, "reason": "opensearch.service", "restart": True},
    }


def _topology(cluster: Cluster, nodes: Sequence[Node], elected: str | None) -> Topology:
    return Topology(
        nodes=tuple(
            TopologyNode(name=node.inventory_name, roles=frozenset(node.roles), zone=node.zone)
            for node in nodes
        ),
        batch_mode=cluster.rolling_batch,
        elected=elected,
    )


def restart_reasons(
    plan: Mapping[str, Any], host: str, changes: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Why a node restarts in the rolling play: the changes recorded for it this run and
    a pending upgrade. A node that was not running started with its new files already,
    and a mode switch restarted every node at once, so neither restarts here."""
    rollout = plan["rollout"]
    node = rollout["nodes"][host]
    if not node["active"] or rollout["mode_switch"]:
        return []
    # With hot reload the node loads new certificate files by itself (roles/certificates
    # swaps them in whole); they are no reason to restart. A change recorded with
    # restart: false (seed hosts only, read at start) is shown, never restarted for.
    reloadable = {"certificates"} if (plan["cluster"].get("pki") or {}).get("hot_reload") else set()
    reasons = [
        str(change["reason"])
        for change in changes
        if change.get("host") == host
        and change.get("restart", True)
        and change.get("reason") not in reloadable
    ]
    if node["upgrade"]:
        reasons.append(f"upgrade {node['running_version']} -> {plan['cluster']['version']}")
    return list(dict.fromkeys(reasons))


def rolling_batches(
    plan: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    hosts: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The batches playbooks/rolling.yml restarts with ``opensearch_rolling_batch: zone``:
    the plan's batches (``rollout.batches``, in order), each keeping only the nodes that
    have a reason to restart (:func:`restart_reasons` over ``changes``, every host's
    recorded changes together); a batch left with none is dropped. Each batch gains
    ``reasons``, ``{node: its reasons}``, for the play to say why. ``hosts`` (the play's
    hosts: ``--limit``, or hosts failed before) keeps only those: the play cuts its host
    list into batches by their sizes, so a batch must not name a host the play lacks.

    Empty in node mode: its play restarts ``rollout.restart_order`` one node at a time, as
    it did before batches existed."""
    return _batches_restarting(plan["rollout"], _restarts(plan, changes), hosts)


def _restarts(
    plan: Mapping[str, Any], changes: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """``{node: its reasons}`` for the nodes that restart (:func:`restart_reasons`)."""
    return {
        name: why
        for name in plan["rollout"]["nodes"]
        if (why := restart_reasons(plan, name, changes))
    }


def _batches_restarting(
    rollout: Mapping[str, Any], restarts: Mapping[str, list[str]], hosts: Sequence[str] | None
) -> list[dict[str, Any]]:
    """The zone-mode batches cut down to the nodes in ``restarts`` (and in ``hosts``)."""
    if rollout.get("batch_mode") != "zone":
        return []
    batches = []
    for batch in rollout["batches"]["batches"]:
        reasons = {
            name: restarts[name]
            for name in batch["nodes"]
            if name in restarts and (hosts is None or name in hosts)
        }
        if reasons:
            batches.append({**batch, "nodes": list(reasons), "reasons": reasons})
    return batches


# Read only when a node starts (discovery) or when the cluster first forms: a running node
# never rereads them, so a change to them alone is no reason to restart it. Scale out and
# in change discovery.seed_hosts on every node; restarting the whole cluster for it would
# defeat the point.
START_ONLY_SETTINGS = frozenset({"discovery.seed_hosts", "cluster.initial_cluster_manager_nodes"})


def settings_needing_restart(old_text: str | None, new_text: str) -> list[str]:
    """The opensearch.yml settings whose change needs a restart of a running node: every
    changed key but the start-only ones. A missing or unreadable old file needs one."""
    try:
        old = yaml.safe_load(old_text or "")
    except yaml.YAMLError:
        old = None
    new = yaml.safe_load(new_text) or {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["opensearch.yml"]
    changed = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
    return [key for key in changed if key not in START_ONLY_SETTINGS]


def restart_decision(
    plan: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    hosts: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The plan's rollout with the rolling play's decision (see
    :func:`clusterforge.plan.plan.with_restarts`): ``restarts``, ``{node: its reasons}``,
    and ``restart_batches``, the zone-mode batches that restart."""
    rollout = plan["rollout"]
    # Each node's reasons are decided once and serve both answers.
    restarts = _restarts(plan, changes)
    return {
        **rollout,
        "restarts": restarts,
        "restart_batches": _batches_restarting(rollout, restarts, hosts),
    }
