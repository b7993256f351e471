"""The cluster's least-privilege monitoring user (issue 42), and which hosts' variables
the monitoring reads.

The cluster is read as an internal user (:data:`MONITOR_ROLE`: the ``cluster_monitor``
and ``indices_monitor`` action groups and the two snapshot reads the exporter's snapshot
collector makes), whose password is ``monitoring_cluster_password`` (vaulted) or
generated once into ``<inventory>/.opensearch/<user>.password`` like the order service's.
clusterforge.plan.cluster_security adds it to the security files; the rest of the
monitoring's plan is clusterforge.plan.monitoring.monitoring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.errors import InventoryError
from clusterforge.plan.security.toolkit_users import (
    ToolkitUser,
    generated_password_at,
    generated_password_path,
)
from clusterforge.schema import load_schema

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

GROUP = "monitoring"
PREFIX = "monitoring_"
USERNAME_VARIABLE = "monitoring_cluster_username"
PASSWORD_VARIABLE = "monitoring_cluster_password"  # noqa: S105 - a variable name
MONITOR_ROLE = "clusterforge_monitor"
# The password of an inventory check (generate=False), which reads and writes nothing.
NOT_GENERATED = "not-generated-by-the-inventory-check"
MONITOR_ROLE_BODY: Mapping[str, Any] = {
    "description": "The monitoring exporter: cluster, index and snapshot reads (clusterforge)",
    "cluster_permissions": [
        "cluster_monitor",
        # The exporter's snapshots collector lists the repositories and their snapshots.
        "cluster:admin/repository/get",
        "cluster:admin/snapshot/get",
    ],
    "index_permissions": [{"index_patterns": ["*"], "allowed_actions": ["indices_monitor"]}],
}


def monitoring_value(variables: Mapping[str, Any], name: str) -> Any:
    given = variables.get(name)
    return load_schema().default_of(name) if given is None else given


def monitoring_variables(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """A host's ``monitoring_*`` variables (the rest of its variables are not read here)."""
    return {name: value for name, value in host_vars.items() if name.startswith(PREFIX)}


def monitoring_hosts_vars(source: Any) -> list[tuple[str, dict[str, Any]]]:
    """(host, its ``monitoring_*`` variables, templated) for every host of the group
    ``monitoring`` of ``source`` (a clusterforge.plan.cluster.host_variables.HostSource)."""
    return [
        (host, dict(source.variables(host, lambda name: name.startswith(PREFIX))))
        for host in source.hosts(GROUP)
    ]


@dataclass(frozen=True, kw_only=True)
class MonitoringUser:
    """The exporter's internal user; ``password`` is the one secret (never in a repr)."""

    username: str
    password: str = field(repr=False)
    password_file: str | None


def plan_monitoring_user(
    cluster: Cluster | None,
    monitoring_hosts: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path,
    generate: bool = True,
) -> MonitoringUser | None:
    """The cluster's monitoring user: None without a monitoring host or a secured cluster.

    ``generate=False`` (the inventory check) reads and writes nothing.
    """
    if cluster is None or not monitoring_hosts or not cluster.secured:
        return None
    variables = monitoring_hosts[0][1]
    username = str(monitoring_value(variables, USERNAME_VARIABLE))
    given = variables.get(PASSWORD_VARIABLE)
    if given is not None and not str(given):
        raise InventoryError(
            [
                f"{PASSWORD_VARIABLE} is empty; set a vaulted password, or leave it unset "
                "to have one generated"
            ]
        )
    if given:
        from clusterforge.pki.hashing import PasswordRejectedError, check_password_allowed

        try:
            check_password_allowed(username, str(given), setting=PASSWORD_VARIABLE)
        except PasswordRejectedError as error:
            raise InventoryError([str(error)]) from None
        return MonitoringUser(username=username, password=str(given), password_file=None)
    path = generated_password_path(inventory_dir, username)
    if not generate:
        return MonitoringUser(username=username, password=NOT_GENERATED, password_file=str(path))
    password = generated_password_at(path, fix=f"or set {PASSWORD_VARIABLE} (vaulted)")
    return MonitoringUser(username=username, password=password, password_file=str(path))


def toolkit_user(user: MonitoringUser) -> ToolkitUser:
    """The monitoring's exporter as a row of the toolkit's users."""
    return ToolkitUser(
        name=user.username,
        description="The monitoring exporter: reads cluster and index stats (clusterforge)",
        mapping_description="The monitoring exporter's internal user",
        password=user.password,
        password_file=user.password_file,
        permissions={MONITOR_ROLE: MONITOR_ROLE_BODY},
    )
