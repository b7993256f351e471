"""The one door from an inventory on disk to the model.

:func:`read_inventory` reads an inventory from disk (:class:`InventoryReader`: Ansible's
own loader, group_vars, host_vars, vault) for ``scripts/render`` and ``scripts/status``;
which variables the model and the services' plan read, and the model built from them, are
clusterforge.plan.cluster.host_variables' (re-exported here for the actions that import them from
this module).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.inventory.reader import InventoryReader
from clusterforge.plan.cluster.host_variables import (
    CLUSTER_GROUP,
    CONSOLE_GROUP,
    HostSource,
    HostVars,
    TaskHosts,
    build_model,
    database_vars,
    is_model_variable,
    is_service_variable,
    model_vars,
    service_addresses,
    service_vars,
    services_vars,
)
from clusterforge.plan.cluster.model import Cluster, build_cluster

__all__ = [
    "CLUSTER_GROUP",
    "CONSOLE_GROUP",
    "HostSource",
    "HostVars",
    "InventoryVars",
    "TaskHosts",
    "build_model",
    "database_vars",
    "is_model_variable",
    "is_service_variable",
    "load_inventory_nodes",
    "model_vars",
    "read_inventory",
    "service_addresses",
    "service_vars",
    "services_vars",
]


@dataclass(frozen=True, kw_only=True)
class InventoryVars:
    """What the plan reads from an inventory: its directory, the model's variables of the
    nodes and the consoles, and the services' variables."""

    directory: Path
    nodes: HostVars
    consoles: HostVars
    services: dict[str, HostVars]
    # Each service host's ansible_host, where it has one (scripts/status reaches it there).
    addresses: dict[str, str] = field(default_factory=dict)
    # The db host's postgresql_* variables (database_vars).
    databases: HostVars = field(default_factory=list)

    def cluster(self) -> Cluster:
        return build_cluster(self.nodes)


def _is_address(name: str) -> bool:
    return name == "ansible_host"


def read_inventory(
    inventory: Path,
    *,
    vault_password_file: Path | None = None,
    extra_vars: Mapping[str, Any] | None = None,
    group: str = CLUSTER_GROUP,
    console_group: str = CONSOLE_GROUP,
) -> InventoryVars:
    """Everything the plan reads from the inventory at ``inventory``, as a playbook run
    reads it (vault included, ``extra_vars`` on top)."""
    reader = InventoryReader(
        inventory, vault_password_file=vault_password_file, extra_vars=extra_vars
    )
    nodes = model_vars(reader, group)
    consoles = model_vars(reader, console_group)
    services = services_vars(reader)
    addresses = {
        host: str(address)
        for hosts in services.values()
        for host, _variables in hosts
        if (address := reader.variables(host, _is_address).get("ansible_host"))
    }
    return InventoryVars(
        directory=reader.directory,
        nodes=nodes,
        consoles=consoles,
        services=services,
        addresses=addresses,
        databases=database_vars(reader),
    )


def load_inventory_nodes(
    inventory: Path, group: str = CLUSTER_GROUP, *, vault_password_file: Path | None = None
) -> HostVars:
    """(inventory name, model variables) for every host of ``group``, as Ansible sees them."""
    return model_vars(InventoryReader(inventory, vault_password_file=vault_password_file), group)
