"""The rollout planner: which nodes go down together, in which order, and what each batch
waits for before the next one goes.

Pure (docs/architecture.md): a :class:`Topology` in, a :class:`Rollout` out; no
Ansible, no I/O, no clock. :func:`clusterforge.plan.cluster.restarts.plan_rollout` builds the
topology from the model and what the nodes report, and puts :meth:`Rollout.as_dict` in the plan.

Two batch modes (``opensearch_rolling_batch``):

``node``
    one node at a time, in inventory order, the elected cluster manager last: the
    toolkit's behaviour before zones existed, kept as the default.
``zone``
    the data, ingest and coordinating nodes of one zone together, so a 60-node
    cluster in three zones restarts in a handful of batches instead of 60 turns; then
    the dedicated cluster managers one at a time, the elected one last (an elected
    manager that holds data goes in its zone's batch, which then goes last). A batch never
    holds nodes of two zones, and never so many cluster-manager-eligible nodes that the
    rest could not elect a manager: the surplus goes one at a time after its zone.

Every batch of a restart, a config change and an upgrade is wrapped the same way:
allocation held to primaries and a flush before it (its shards then recover from what
they hold instead of being copied), allocation released after it, then a wait for green.
An upgrade waits for yellow between batches, green after the last: while versions are
mixed the engine places no replica on a node older than its primary's, so some replicas
stay unassigned until every node runs the new version (the engine's rolling-upgrade
guide says to go on in that state). A scale-in drains each batch instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

CLUSTER_MANAGER_ROLES = frozenset({"cluster_manager", "master"})
# Roles that hold or process documents; a cluster-manager-eligible node with none of
# them is a dedicated cluster manager.
WORKLOAD_ROLES = frozenset({"data", "ingest", "search", "ml"})
BATCH_MODES = ("node", "zone")


class Operation(StrEnum):
    """Why nodes go down: each has its own steps around a batch and its own wait."""

    RESTART = "restart"
    CONFIG_CHANGE = "config_change"
    UPGRADE = "upgrade"
    SCALE_IN = "scale_in"


class BatchKind(StrEnum):
    NODE = "node"  # one node (node mode, or a cluster-manager-eligible node over the budget)
    ZONE = "zone"  # the data, ingest and coordinating nodes of one zone
    CLUSTER_MANAGER = "cluster_manager"  # one dedicated cluster manager
    ELECTED_CLUSTER_MANAGER = "elected_cluster_manager"  # always alone, always last


@dataclass(frozen=True, kw_only=True)
class TopologyNode:
    """One node as the planner needs it: its inventory name, roles and zone."""

    name: str
    roles: frozenset[str]
    zone: str | None = None

    @property
    def cluster_manager_eligible(self) -> bool:
        return bool(CLUSTER_MANAGER_ROLES & self.roles)

    @property
    def dedicated_cluster_manager(self) -> bool:
        return self.cluster_manager_eligible and not WORKLOAD_ROLES & self.roles


@dataclass(frozen=True, kw_only=True)
class Topology:
    """The whole cluster in inventory order, its batch mode, and the elected cluster
    manager's inventory name (None when nothing reported one)."""

    nodes: tuple[TopologyNode, ...]
    batch_mode: str = "node"
    elected: str | None = None

    def __post_init__(self) -> None:
        if self.batch_mode not in BATCH_MODES:
            raise ValueError(f"batch_mode {self.batch_mode!r} is not one of {BATCH_MODES}")


@dataclass(frozen=True)
class Batch:
    """Nodes that go down together; the next batch waits for ``wait_for``."""

    nodes: tuple[str, ...]
    kind: BatchKind
    zone: str | None
    wait_for: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "kind": str(self.kind),
            "zone": self.zone,
            "wait_for": self.wait_for,
        }


@dataclass(frozen=True)
class Rollout:
    operation: Operation
    batch_mode: str
    batches: tuple[Batch, ...]
    elected: str | None
    # False: nothing reported an elected manager; the planner assumed ``elected``.
    elected_observed: bool
    before_batch: tuple[str, ...]
    # Then each batch's own wait_for, before the next batch goes.
    after_batch: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def order(self) -> list[str]:
        """Every node once, batch after batch: a one-at-a-time executor's order."""
        return [name for batch in self.batches for name in batch.nodes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation": str(self.operation),
            "batch_mode": self.batch_mode,
            "elected": self.elected,
            "elected_observed": self.elected_observed,
            "before_batch": list(self.before_batch),
            "after_batch": list(self.after_batch),
            "notes": list(self.notes),
            "batches": [batch.as_dict() for batch in self.batches],
        }


def voting_members(eligible: int) -> int:
    """How many cluster-manager-eligible nodes vote: the engine leaves one out of an even
    number, since an even voting configuration tolerates no more failures."""
    return eligible if eligible % 2 else max(eligible - 1, 0)


def cluster_managers_down_budget(eligible: int) -> int:
    """How many cluster-manager-eligible nodes may be down at once while the rest still
    hold a majority of any voting configuration the engine may have chosen: 1 of 3 or 4,
    2 of 5 or 6; 0 of 1 or 2, which cannot lose one (such a node then goes alone)."""
    return max(voting_members(eligible) - 1, 0) // 2


_RESTART_STEPS = (
    ("cluster.routing.allocation.enable: primaries", "POST /_flush"),
    ("cluster.routing.allocation.enable: null (all)",),
)
_STEPS: dict[Operation, tuple[tuple[str, ...], tuple[str, ...]]] = {
    Operation.RESTART: _RESTART_STEPS,
    Operation.CONFIG_CHANGE: _RESTART_STEPS,
    Operation.UPGRADE: _RESTART_STEPS,
    Operation.SCALE_IN: (
        (
            "cluster.routing.allocation.exclude._name: the batch's nodes",
            "wait until no shard is left on them",
            "POST /_cluster/voting_config_exclusions for its cluster-manager-eligible nodes",
        ),
        ("stop and disable the nodes", "DELETE /_cluster/voting_config_exclusions"),
    ),
}
_UPGRADE_NOTE = (
    "an upgrade waits for yellow between batches and for green after the last: while "
    "versions are mixed the engine places no replica on a node older than its primary's, "
    "so some replicas stay unassigned until every node runs the new version"
)


def plan_batches(
    topology: Topology,
    operation: Operation = Operation.RESTART,
    targets: Iterable[str] | None = None,
) -> Rollout:
    """The ordered batches for ``operation`` over ``targets`` (inventory names; None: every
    node): the nodes a config change restarts, the nodes an upgrade moves to the new
    version, the nodes a scale-in removes. The quorum budget counts every
    cluster-manager-eligible node of ``topology``: those outside ``targets`` stay up.
    """
    wanted = None if targets is None else set(targets)
    subject = [node for node in topology.nodes if wanted is None or node.name in wanted]
    elected, observed = _elected(topology)
    if topology.batch_mode == "zone":
        eligible = sum(node.cluster_manager_eligible for node in topology.nodes)
        # A node that leaves for good is excluded from voting first, one at a time.
        budget = 0 if operation is Operation.SCALE_IN else cluster_managers_down_budget(eligible)
        groups = _zone_groups(subject, elected, budget)
    else:
        groups = _node_groups(subject, elected)
    waits = ["green"] * len(groups)
    notes = []
    if operation is Operation.UPGRADE:
        waits = ["yellow"] * (len(groups) - 1) + ["green"] if groups else []
        notes.append(_UPGRADE_NOTE)
    if not observed and elected is not None:
        notes.append(
            "no running node reported an elected cluster manager among these nodes; "
            f"{elected} (the last cluster-manager-eligible node of the inventory) is "
            "assumed and goes last"
        )
    before, after = _STEPS[operation]
    return Rollout(
        operation=operation,
        batch_mode=topology.batch_mode,
        batches=tuple(
            Batch(nodes, kind, zone, wait)
            for (nodes, kind, zone), wait in zip(groups, waits, strict=True)
        ),
        elected=elected,
        elected_observed=observed,
        before_batch=before,
        after_batch=after,
        notes=tuple(notes),
    )


_Group = tuple[tuple[str, ...], BatchKind, str | None]


def _elected(topology: Topology) -> tuple[str | None, bool]:
    names = {node.name for node in topology.nodes}
    if topology.elected in names:
        return topology.elected, True
    eligible = [node.name for node in topology.nodes if node.cluster_manager_eligible]
    if eligible:
        return eligible[-1], False
    return (topology.nodes[-1].name if topology.nodes else None), False


def _node_groups(subject: list[TopologyNode], elected: str | None) -> list[_Group]:
    groups: list[_Group] = [
        ((node.name,), _single_kind(node), node.zone) for node in subject if node.name != elected
    ]
    groups.extend(
        ((node.name,), BatchKind.ELECTED_CLUSTER_MANAGER, node.zone)
        for node in subject
        if node.name == elected
    )
    return groups


def _single_kind(node: TopologyNode) -> BatchKind:
    return BatchKind.CLUSTER_MANAGER if node.dedicated_cluster_manager else BatchKind.NODE


def _zone_groups(subject: list[TopologyNode], elected: str | None, budget: int) -> list[_Group]:
    by_zone: dict[str | None, list[TopologyNode]] = {}
    managers: list[TopologyNode] = []
    last: TopologyNode | None = None
    for node in subject:
        if node.name == elected:
            last = node
        elif node.dedicated_cluster_manager:
            managers.append(node)
        else:
            by_zone.setdefault(node.zone, []).append(node)
    elected_zone = last.zone if last else None
    # An elected manager that also holds data is one of its zone's nodes: that zone's
    # batch takes it and goes last of all, so a cluster of mixed nodes in Z zones rolls in
    # Z batches (6 nodes in 3 zones: 3, not 4). It still goes down once, last, with as
    # many cluster-manager-eligible nodes as the budget allows. Alone when it is a
    # dedicated manager, has no zone, or no eligible node may go with it (budget 0: one or
    # two eligible nodes, or a scale-in).
    joins_zone = (
        last is not None
        and not last.dedicated_cluster_manager
        and elected_zone is not None
        and budget >= 1
    )
    if joins_zone:
        # Its zone may hold no other node of the subject: it then goes alone, still last.
        by_zone.setdefault(elected_zone, [])
    # The elected manager's zone goes last of the zones: its peers stay up longest.
    zones = sorted(by_zone, key=lambda zone: (zone is None, zone == elected_zone, zone or ""))
    groups: list[_Group] = []
    final: list[_Group] = []
    for zone in zones:
        members = by_zone[zone]
        if zone is None:
            # Validation refuses zones on some nodes only; should it be bypassed, a node
            # without a zone goes alone rather than with an unrelated group.
            groups.extend(((node.name,), BatchKind.NODE, None) for node in members)
            continue
        with_elected = joins_zone and zone == elected_zone
        together: list[str] = []
        alone: list[TopologyNode] = []
        managers_in_batch = 1 if with_elected else 0
        for node in members:
            if node.cluster_manager_eligible and managers_in_batch >= budget:
                alone.append(node)
                continue
            managers_in_batch += node.cluster_manager_eligible
            together.append(node.name)
        if with_elected:
            assert last is not None  # noqa: S101 - joins_zone says so; narrows the type
            groups.extend(((node.name,), BatchKind.NODE, zone) for node in alone)
            kind = BatchKind.ZONE if together else BatchKind.ELECTED_CLUSTER_MANAGER
            final.append(((*together, last.name), kind, zone))
            continue
        if together:
            groups.append((tuple(together), BatchKind.ZONE, zone))
        groups.extend(((node.name,), BatchKind.NODE, zone) for node in alone)
    groups.extend(((node.name,), BatchKind.CLUSTER_MANAGER, node.zone) for node in managers)
    if last is not None and not joins_zone:
        final.append(((last.name,), BatchKind.ELECTED_CLUSTER_MANAGER, last.zone))
    return groups + final


_KIND_LABELS = {
    BatchKind.NODE: "node",
    BatchKind.ZONE: "zone",
    BatchKind.CLUSTER_MANAGER: "cluster manager",
    BatchKind.ELECTED_CLUSTER_MANAGER: "elected cluster manager",
}


def describe_rollout(rollout: Mapping[str, Any], *, title: str = "rollout") -> list[str]:
    """A :meth:`Rollout.as_dict` as lines a reviewer reads (``scripts/render``)."""
    batches = rollout["batches"]
    operation = str(rollout["operation"]).replace("_", " ")
    lines = [
        f"{title}: {operation} in {len(batches)} batch(es), "
        f"opensearch_rolling_batch: {rollout['batch_mode']}",
        f"  before each batch: {'; '.join(rollout['before_batch'])}",
        f"  after each batch: {'; '.join(rollout['after_batch'])}; then its wait",
    ]
    lines.extend(f"  note: {note}" for note in rollout["notes"])
    width = len(str(len(batches)))
    for number, batch in enumerate(batches, start=1):
        label = _KIND_LABELS[BatchKind(batch["kind"])]
        where = f" {batch['zone']}" if batch["zone"] and batch["kind"] == BatchKind.ZONE else ""
        zone = f" (zone {batch['zone']})" if batch["zone"] and not where else ""
        count = f", {len(batch['nodes'])} nodes" if len(batch["nodes"]) > 1 else ""
        lines.append(
            f"  {number:>{width}}. {label}{where}{zone}{count}, then {batch['wait_for']}: "
            f"{', '.join(batch['nodes'])}"
        )
    return lines


# The engine reads the awareness attributes from the elected cluster manager's settings: a
# persistent cluster setting overrides every node's opensearch.yml. While a cluster turns
# its zones off, the nodes restarted without node.attr.zone sit beside nodes whose
# opensearch.yml still requires it, and the first of them back takes no copy ("node does
# not contain the awareness attribute [zone]"): the auto-expanding .opendistro_security
# stays yellow and the rolling turn waits for green forever. An empty persistent value
# pauses awareness; resetting it (null) lets the nodes' own files decide again.
AWARENESS_SETTING = "cluster.routing.allocation.awareness.attributes"
AWARENESS_PAUSE = {AWARENESS_SETTING: ""}
ZONE_ATTRIBUTE = "node.attr.zone"


def awareness_pause(
    zoned: Iterable[str], *, zones_planned: bool, removing: Iterable[str] = ()
) -> dict[str, Any]:
    """Whether the rollout pauses allocation awareness, and what lifts the pause.

    ``zoned`` are the nodes whose opensearch.yml still carries a zone (``node.attr.zone``,
    as the look at the nodes found it), ``zones_planned`` whether the plan keeps zones,
    ``removing`` the nodes this run removes. A cluster whose zones are turned off pauses
    awareness before its first node restarts without them, and keeps it paused until
    every node runs without them: after the restarts (``lifted_by: restarts``), or, when
    nodes leave in the same run, once they have left (``lifted_by: removal``: the
    decommission's drain sets the pause too, and its cleanup lifts it), since a node that
    leaves never restarts and may be the elected one. A cluster that keeps its zones, or
    never had any, pauses nothing.
    """
    still_zoned = sorted(set(zoned))
    pause = bool(still_zoned) and not zones_planned
    lifted_by = None
    if pause:
        lifted_by = "removal" if any(True for _removed in removing) else "restarts"
    return {
        "pause": pause,
        "zoned": still_zoned,
        "lifted_by": lifted_by,
        "settings": dict(AWARENESS_PAUSE) if pause else {},
        "lift_settings": dict.fromkeys(AWARENESS_PAUSE) if pause else {},
    }


def zoned_nodes(configs: Mapping[str, Any]) -> list[str]:
    """The nodes whose opensearch.yml settings (a parsed mapping per node; None or
    anything else when the file is missing or unreadable) carry a zone attribute."""
    return sorted(
        name
        for name, settings in configs.items()
        if isinstance(settings, Mapping) and settings.get(ZONE_ATTRIBUTE) not in (None, "")
    )


def scale_in_steps(eligible: Iterable[bool], target: int) -> list[int]:
    """The node counts a scale-in from the end of an ordered node list goes through, one
    run each, so that every run keeps a quorum of the cluster-manager-eligible nodes the
    cluster has when it starts (the plan refuses a removal that would not).

    ``eligible`` says, for each node in order, whether it is cluster-manager-eligible; the
    nodes past ``target`` leave, the last ones first. Each step removes as many nodes as
    it can: from 6 eligible nodes to 3 it goes 6 -> 4 -> 3 (4 of 6 keep the quorum of 4,
    then 3 of 4 the quorum of 3). The last step always reaches ``target``: a target that
    keeps no eligible node is the plan's to refuse.
    """
    flags = list(eligible)
    if not 0 < target < len(flags):
        return [target] if target != len(flags) else []
    steps = []
    count = len(flags)
    while count > target:
        managers_now = sum(flags[:count])
        quorum = managers_now // 2 + 1
        step = next(
            (c for c in range(target, count) if sum(flags[:c]) >= quorum or not managers_now),
            None,
        )
        if step is None or step == count:
            # Even one node fewer loses the quorum (1 or 2 eligible nodes): go straight
            # to the target and let the plan say why.
            steps.append(target)
            break
        steps.append(step)
        count = step
    return steps
