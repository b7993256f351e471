"""The lab's shape: how many nodes, where they stand (zones, dedicated managers), their
addresses and heap, the network mode, and the steps a shrink takes.

Pure decisions, refused here before any container starts (clusterforge.lab.cluster uses
them; tests/test_lab_topology.py and tests/test_zones_off.py test them).
"""

from __future__ import annotations

import json
import resource
from dataclasses import dataclass
from pathlib import Path

from clusterforge.errors import LabError
from clusterforge.plan.cluster.rollout import CLUSTER_MANAGER_ROLES, scale_in_steps

CONTAINER_PREFIX = "clusterforge-lab-"
NETWORK_NAME = "clusterforge-lab"
NODE_COUNT = 3  # the default of scripts/up --nodes
MIN_NODES = 1
MAX_NODES = 9  # loopback addresses 127.0.0.11 .. 127.0.0.19 (the apps container has .21)
MAX_ZONES = 3  # scripts/up --zones
# Zones go round-robin over the nodes: opensearch-1 in zone-a, -2 in zone-b, -3 in zone-c,
# -4 in zone-a again, ...
ZONE_NAMES = ("zone-a", "zone-b", "zone-c")
# scripts/up --managers M: the first M nodes are dedicated cluster managers (with zones,
# one per zone), the others hold data. First, so that growing the lab adds data nodes and
# shrinking it removes data nodes: a node that held shards cannot become a dedicated
# manager, nor the reverse without a new container.
MANAGER_ROLES = ("cluster_manager",)
DATA_ROLES = ("data", "ingest")
LOOPBACK_BASE = "127.0.0."
LOOPBACK_FIRST_OCTET = 11
LOOPBACK_SSH_PORT = 2222
REQUIRED_NOFILE = 65535
# The lab's nodes cannot raise the open-file limit above the machine's hard limit, and
# systemd refuses to start a unit that asks for more than it may have.
CLUSTER_NAME = "clusterforge-lab"
HEAP = "512m"
# From MANY_NODES nodes on: six to nine JVMs share this machine's 2 cores and 24 GiB with
# the apps container and the controller; a smaller heap starts and collects faster there.
# (Growing across the line changes jvm.options: every node restarts once, rolling.)
MANY_NODES = 6
HEAP_MANY = "384m"
# The apps container runs both services (services.yml) against the lab's cluster, on an
# address of its own so that its ports never meet a node's.
APPS_HOST = "apps-1"
APPS_LOOPBACK_OCTET = 21


@dataclass(frozen=True)
class LabNode:
    inventory_name: str
    address: str
    ssh_port: int

    @property
    def container(self) -> str:
        return f"{CONTAINER_PREFIX}{self.inventory_name}"


@dataclass(frozen=True)
class Placement:
    """Where a lab node stands: its zone (None: the lab has no zones) and its
    opensearch_node_roles (None: the inventory leaves the default, every role)."""

    zone: str | None = None
    roles: tuple[str, ...] | None = None


def lab_placements(count: int, *, zones: int = 0, managers: int = 0) -> list[Placement]:
    """Each of ``count`` nodes' zone and roles, in node order, for ``--zones`` and
    ``--managers``: zones round-robin, the first ``managers`` nodes dedicated cluster
    managers (one per zone while there are as many zones), the rest data and ingest.
    Without either flag every node keeps the default roles and no zone: the lab as it
    was. Refused here, before a container starts, what the plan would refuse later."""
    problems = []
    if not 0 <= zones <= MAX_ZONES:
        problems.append(f"--zones takes 1 to {MAX_ZONES}, not {zones}")
    elif zones > count:
        problems.append(f"--zones {zones} needs at least {zones} nodes (--nodes {count})")
    if managers < 0 or (managers and managers >= count):
        problems.append(
            f"--managers {managers} leaves no data node among {count}: "
            f"give --nodes more than {managers}"
        )
    elif managers == 2:
        problems.append(
            "--managers 2 is refused: two cluster managers survive the loss of neither; use 1 or 3"
        )
    elif zones >= 3 and 0 < managers < zones:
        problems.append(
            f"--managers {managers} with --zones {zones}: the managers must be spread over "
            f"the zones so the others still elect one while a zone is down; use --managers "
            f"{zones}"
        )
    if problems:
        raise LabError("; ".join(problems))
    placements = []
    for index in range(count):
        zone = ZONE_NAMES[index % zones] if zones else None
        roles: tuple[str, ...] | None = None
        if managers:
            roles = MANAGER_ROLES if index < managers else DATA_ROLES
        placements.append(Placement(zone=zone, roles=roles))
    return placements


def shrink_steps(existing: int, count: int, *, zones: int = 0, managers: int = 0) -> list[int]:
    """The node counts ``scripts/up --nodes COUNT`` runs the playbook at, one run each:
    ``[COUNT]`` unless the lab shrinks by so many cluster-manager-eligible nodes that one
    run would lose the quorum (the plan refuses that); it then steps down
    (clusterforge.plan.cluster.rollout.scale_in_steps: 6 -> 4 -> 3), each run draining the nodes
    past its count, the last ones first."""
    if count >= existing:
        return [count]
    eligible = [
        placement.roles is None or bool(set(placement.roles) & CLUSTER_MANAGER_ROLES)
        for placement in lab_placements(existing, zones=min(zones, existing), managers=managers)
    ]
    return scale_in_steps(eligible, count)


def check_managers_unchanged(lab_json: Path, managers: int) -> None:
    """A running lab keeps its number of dedicated managers: a node that held shards does
    not start as a dedicated manager, nor does a manager's node become a data node without
    its cluster state. ``lab.json`` (absent before the first run) says what the lab has;
    one written before --managers existed had none."""
    if not lab_json.is_file():
        return
    try:
        before = int(json.loads(lab_json.read_text()).get("managers") or 0)
    except (ValueError, AttributeError, TypeError):
        return  # unreadable: the lab is being rebuilt, nothing to keep
    if before != managers:
        raise LabError(
            f"the lab runs with --managers {before}, not {managers}: nodes cannot change "
            "between dedicated cluster manager and data node in place; scripts/down first, "
            f"or run scripts/up with --managers {before}"
        )


def lab_heap(count: int) -> str:
    """The lab's heap for ``count`` nodes (opensearch_heap_size is one for the cluster)."""
    return HEAP_MANY if count >= MANY_NODES else HEAP


def choose_network(requested: str | None) -> tuple[str, str]:
    """Return (mode, reason)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    if requested:
        return requested, f"--network {requested} was given (open-file hard limit {hard_text})"
    if hard != resource.RLIM_INFINITY and hard < REQUIRED_NOFILE:
        return "loopback", (
            f"the open-file hard limit is {hard_text}, below the {REQUIRED_NOFILE} OpenSearch's "
            "bootstrap checks need off loopback; nodes use 127.0.0.x addresses in the host network"
        )
    return "bridge", f"the open-file hard limit is {hard_text}; nodes get their own docker network"
