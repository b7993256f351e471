"""Nodes leaving the cluster: the plan's ``removal`` and ``groups`` sections.

:func:`plan_removal` refuses, before any host changes, a removal that would cost the
cluster its quorum or its replicas, and says how the drain goes (:func:`drain_settings`);
:func:`plan_groups` decides the run's groups of OpenSearch hosts once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterforge.errors import ClusterforgeError
from clusterforge.plan.cluster.model import Cluster
from clusterforge.plan.cluster.restarts import observed_awareness_pause
from clusterforge.plan.cluster.rollout import AWARENESS_PAUSE, CLUSTER_MANAGER_ROLES

DATA_ROLES = frozenset({"data"})
# The persistent setting a removal's drain sets first (drain_settings), before any node of
# the run restarts (site.yml, "Begin the removal").
EXCLUDE_NAME = "cluster.routing.allocation.exclude._name"


class RemovalRefusedError(ClusterforgeError):
    """Removing the nodes marked absent would cost the cluster its quorum or its replicas."""


@dataclass(frozen=True)
class ObservedCluster:
    """What the first running node that answered reports (playbooks/plan.yml, the
    clusterforge_observe action): the members (id, name, roles); the indices' settings
    and the voting configuration (``last_committed_config``, node ids, and
    ``voting_config_exclusions``), each None when it could not be read; and the names the
    persistent allocation exclusion holds."""

    members: list[dict[str, Any]]
    index_settings: dict[str, Any] | None
    voting: dict[str, Any] | None
    allocation_excluded: frozenset[str]


def _observed_cluster(observed: Mapping[str, Mapping[str, Any]]) -> ObservedCluster:
    for seen in observed.values():
        members = (seen or {}).get("cluster_nodes")
        if members:
            settings = seen.get("index_settings")
            voting = seen.get("voting")
            persistent = seen.get("persistent_settings")
            excluded = persistent.get(EXCLUDE_NAME) if isinstance(persistent, Mapping) else None
            return ObservedCluster(
                [dict(member) for member in members],
                dict(settings) if isinstance(settings, Mapping) else None,
                dict(voting) if isinstance(voting, Mapping) else None,
                frozenset(name.strip() for name in str(excluded or "").split(",") if name.strip()),
            )
    return ObservedCluster([], {}, None, frozenset())


def counted_managers(
    members: Sequence[Mapping[str, Any]], voting: Mapping[str, Any] | None
) -> set[str]:
    """The names of the members whose vote the quorum rule counts: the
    cluster-manager-eligible ones, and those the cluster's committed voting configuration
    still holds, less those a voting exclusion has already taken out.

    Why the voting configuration too: a leaving node that a killed run already excluded
    from voting has given its vote up, so removing it costs no quorum; and a node the
    configuration still holds counts. Without the configuration (not read) only the roles
    count: a rerun is then refused rather than judged on less than the cluster says.
    (A demoted node does not stay in the configuration: on OpenSearch 2.19.4 it shrank to
    the elected manager alone once the other node rejoined without the role. The mark of
    a begun removal covers that case; see :func:`plan_removal`.)
    """
    eligible = {
        str(member["name"])
        for member in members
        if CLUSTER_MANAGER_ROLES.intersection(str(role) for role in member.get("roles") or [])
    }
    if voting is None:
        return eligible
    names = {str(member["id"]): str(member["name"]) for member in members if member.get("id")}
    voters = {
        names[node_id] for node_id in voting.get("last_committed_config") or [] if node_id in names
    }
    excluded = {
        names.get(str(entry.get("node_id")), str(entry.get("node_name")))
        for entry in voting.get("voting_config_exclusions") or []
        if isinstance(entry, Mapping)
    }
    return (eligible | voters) - excluded


def _replicas_needed(index_settings: Mapping[str, Any]) -> tuple[int, str | None]:
    """The most data nodes an index needs (number_of_replicas + 1), and which index.
    Indices with auto_expand_replicas adapt to the nodes there are and need none."""
    most, which = 1, None
    for index, entry in sorted(index_settings.items()):
        settings = entry.get("settings") or {} if isinstance(entry, Mapping) else {}
        auto_expand = str(settings.get("index.auto_expand_replicas", "false")).lower()
        if auto_expand not in ("false", "none", ""):
            continue
        needed = int(settings.get("index.number_of_replicas", 1)) + 1
        if needed > most:
            most, which = needed, index
    return most, which


# The groups of a run (playbooks/plan.yml puts the hosts in them once). Every play but
# decommission.yml's targets the nodes that stay; the plays that talk to the cluster's API
# target those it answers on.
PRESENT_GROUP = "opensearch_present"


SERVING_GROUP = "opensearch_serving"


REMOVED_GROUP = "opensearch_removed"


def plan_groups(
    cluster: Cluster, observed: Mapping[str, Mapping[str, Any]], *, preview: bool = False
) -> dict[str, list[str]]:
    """The run's groups of OpenSearch hosts, in inventory order, decided once here so that
    no play guards host by host: the nodes that stay (every node not marked
    ``opensearch_node_state: absent``), the nodes the cluster's API is reached through
    (the same in a run; in a preview, which starts nothing, those that run now), and the
    nodes marked absent (decommission.yml drains them)."""
    present = [node.inventory_name for node in cluster.nodes]
    serving = [host for host in present if not preview or (observed.get(host) or {}).get("active")]
    return {
        PRESENT_GROUP: present,
        SERVING_GROUP: serving,
        REMOVED_GROUP: [node.inventory_name for node in cluster.removed_nodes],
    }


def plan_removal(
    cluster: Cluster,
    observed: Mapping[str, Mapping[str, Any]],
    *,
    awareness_paused: bool | None = None,
) -> dict[str, Any]:
    """The nodes marked ``opensearch_node_state: absent``, and the refusal, before any
    host changes, of a removal that would leave fewer than a quorum of the cluster
    managers the cluster has now, or fewer data nodes than its indices' replicas need.

    The cluster's own view (its members and index settings, observed from a running node)
    decides; without one (nothing runs) nothing can be lost and the removal is allowed.
    ``via`` is a present, running node through which the drain's API calls go.
    """
    removed = cluster.removed_nodes
    seen = _observed_cluster(observed)
    members, index_settings = seen.members, seen.index_settings
    member_roles = {
        str(member["name"]): [str(role) for role in member.get("roles") or []] for member in members
    }
    leaving = [node for node in removed if node.name in member_roles]
    leaving_names = {node.name for node in leaving}
    problems = []
    if leaving:
        hosts = ", ".join(node.inventory_name for node in leaving)

        def has_role(name: str, wanted: frozenset[str]) -> bool:
            return bool(wanted.intersection(member_roles[name]))

        counted = counted_managers(members, seen.voting)
        managers = [name for name in member_roles if name in counted]
        managers_left = [name for name in managers if name not in leaving_names]
        quorum = len(managers) // 2 + 1
        # A removal an earlier run began: its drain excluded exactly these nodes before
        # any node of that run restarted, so that run judged the quorum on the roles the
        # cluster had then. Its rolling restart may since have taken the manager role
        # from a node that stays (two eligible nodes survive the loss of neither), and
        # the engine shrank its voting configuration to match: judged again, the same
        # removal would be refused, and the cluster left half-drained (issue 50,
        # finding 3). It is finished instead; one floor still holds.
        begun = leaving_names <= seen.allocation_excluded
        if begun and managers and not managers_left:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) would leave no "
                "cluster-manager-eligible node: set opensearch_node_state: present on one "
                "of them, or give a node that stays the cluster_manager role first."
            )
        elif not begun and managers and len(managers_left) < quorum:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) would leave "
                f"{len(managers_left)} of the cluster's {len(managers)} cluster-manager-eligible "
                f"nodes, fewer than a quorum of {quorum}: set opensearch_node_state: present on "
                f"{quorum - len(managers_left)} of them, or add cluster-manager-eligible nodes "
                "first and remove these in a later run."
            )
        data = [name for name in member_roles if has_role(name, DATA_ROLES)]
        data_left = [name for name in data if name not in leaving_names]
        if index_settings is None:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) needs the indices' "
                "number_of_replicas, and the cluster did not answer GET /_settings: rerun "
                "when it answers."
            )
        needed, index = _replicas_needed(index_settings or {})
        if len(data_left) < needed:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) would leave "
                f"{len(data_left)} data node(s), and index {index} needs {needed} "
                f"(number_of_replicas + 1): lower that index's number_of_replicas, or add "
                "data nodes first, or set opensearch_node_state: present on some of these hosts."
            )
    if problems:
        raise RemovalRefusedError("\n".join(problems))
    running = [
        node.inventory_name
        for node in cluster.nodes
        if (observed.get(node.inventory_name) or {}).get("active")
    ]
    zones_leaving = sorted({str(node.zone) for node in removed if node.zone} - set(cluster.zones))
    names = [node.name for node in removed]
    return {
        "nodes": {
            node.inventory_name: {
                "name": node.name,
                "member": node.name in member_roles,
                "cluster_manager_eligible": node.cluster_manager_eligible,
            }
            for node in removed
        },
        "names": names,
        "via": running[0] if running else None,
        "zones_leaving": zones_leaving,
        "drain_settings": drain_settings(
            names,
            zones_leaving,
            # The rollout's decision when the caller has it (build_plan), so the nodes'
            # opensearch.yml files are read once.
            paused=observed_awareness_pause(cluster, observed)["pause"]
            if awareness_paused is None
            else awareness_paused,
        ),
    }


# Allocation awareness counts a zone while any node of it is in the cluster, excluded or
# not: with a whole zone leaving, the zones that stay may not take its copies (6 copies
# over 3 zones allow 2 a zone, and the staying zones already hold 2 each), so the drain
# would wait forever (seen removing zone-c of a 9-node lab). The drain pauses awareness
# instead (clusterforge.plan.cluster.rollout.AWARENESS_PAUSE); cleanup.yml lifts the pause once
# the zone's nodes have left, and the engine spreads the copies over the staying zones
# again.
def drain_settings(
    names: Sequence[str], zones_leaving: Sequence[str], *, paused: bool = False
) -> dict[str, str]:
    """The persistent settings the drain sets (roles/opensearch_decommission): the nodes'
    exclusion, and a pause of allocation awareness when whole zones leave or the zones are
    turned off (``paused``: the rollout's awareness pause, which the removal then lifts).
    cleanup.yml resets each of them once the nodes have left."""
    settings = {EXCLUDE_NAME: ",".join(names)}
    if zones_leaving or paused:
        settings.update(AWARENESS_PAUSE)
    return settings
