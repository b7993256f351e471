"""The control node's artifact cache filled for an inventory, without touching any host.

``clusterforge fetch`` (docs/inventory-checks.md) reads the inventory through the same
door as ``scripts/render`` (:func:`clusterforge.inventory.variables.load_inventory_nodes`:
Ansible's own loader, group_vars, host_vars, vault), builds the cluster model from it
(:func:`clusterforge.plan.cluster.model.build_cluster`, which names each bad variable)
and fetches what a playbook's plan would fetch
(:func:`clusterforge.plan.cluster.plugins.fetch_artifacts`): the engine, the security
plugin and every plugin, each checked against the engine version. A playbook run, a
molecule converge or ``scripts/up`` then finds them in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterforge.inventory.reader import InventoryReadError
from clusterforge.inventory.variables import CLUSTER_GROUP, load_inventory_nodes
from clusterforge.plan.cluster.model import Cluster, build_cluster
from clusterforge.plan.cluster.plugins import ArtifactReport, fetch_artifacts

# The checkout: a plugin built from source names its Maven project relative to it, as
# the plan action does (plugins/action/clusterforge_plan.py's PROJECT_ROOT).
CHECKOUT = Path(__file__).resolve().parents[3]


def inventory_cluster(
    inventory: Path, group: str = CLUSTER_GROUP, *, vault_password_file: Path | None = None
) -> Cluster:
    """The cluster model of ``group``'s hosts in the inventory at ``inventory``."""
    nodes = load_inventory_nodes(inventory, group, vault_password_file=vault_password_file)
    if not nodes:
        raise InventoryReadError(
            f"{inventory}: the group {group!r} has no hosts; add them, or fix the file "
            "Ansible could not parse (its warning above names it)"
        )
    return build_cluster(nodes)


def fetch_inventory_artifacts(
    inventory: Path,
    group: str = CLUSTER_GROUP,
    *,
    vault_password_file: Path | None = None,
    project_root: Path = CHECKOUT,
    report: ArtifactReport | None = None,
) -> dict[str, Any]:
    """Fetch (or find cached) every archive the inventory's cluster needs; the plan's
    ``artifacts`` section. Raises ClusterforgeError naming what to change."""
    cluster = inventory_cluster(inventory, group, vault_password_file=vault_password_file)
    return fetch_artifacts(cluster, project_root, report=report)
