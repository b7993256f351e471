"""The lab's inventory, written by scripts/up on every run: ``hosts.yml`` (the nodes, their
zones and roles, the console, the apps container's services and monitoring) and the
groups' variables, every secret read by a lookup of its 0600 file.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from clusterforge.lab import monitoring as lab_monitoring
from clusterforge.lab.containers import (
    ORDER_SERVICE_TOKEN,
    SECURITY_SECRETS,
    USER_DIRECTORY_TOKEN,
    LabContainers,
)
from clusterforge.lab.directory_container import LabDirectory
from clusterforge.lab.topology import CLUSTER_NAME, LabNode, lab_heap, lab_placements

# Debian's python3, which the lab image installs (clusterforge.lab.image).
LAB_PYTHON = "/usr/bin/python3"
# The Chinese analyzer, built from this project's source for the engine in use.
LAB_PLUGINS = (
    {"name": "analysis-smartcn", "source": "build", "path": "engine-plugins/analysis-smartcn"},
)
SNAPSHOT_REPOSITORY = "clusterforge-lab"
# A tls lab takes snapshots on a schedule (docs/lab.md), so that a lab left alone is
# quiet: with a repository declared and no schedule, the snapshot age alert fired 13
# minutes after scripts/up (issue 51). Every 5 minutes (status allows 11), the last 6 kept:
# 30 minutes of a lab's small indices in the shared directory.
LAB_SNAPSHOT_SCHEDULE: dict[str, Any] = {
    "opensearch_snapshot_schedule": "*:0/5",
    "opensearch_snapshot_keep_last": 6,
}


def lab_snapshot_vars(mode: str) -> dict[str, Any]:
    """The lab's snapshot schedule's variables; none outside tls, where the runner cannot
    verify the cluster it talks to."""
    return dict(LAB_SNAPSHOT_SCHEDULE) if mode == "tls" else {}


USER_DIRECTORY_PORT = 8081
ORDERS_PORT = 8082
HEADER = "# Written by scripts/up; rewritten on every run.\n"

Lookup = Callable[[str], str]


def inventory_groups(
    nodes: list[LabNode],
    *,
    absent: tuple[str, ...] = (),
    apps: LabNode | None = None,
    zones: int = 0,
    managers: int = 0,
    monitoring: bool = False,
    console: bool = False,
) -> dict[str, Any]:
    """hosts.yml's groups: the nodes with their zones and roles (those about to leave
    marked absent), the console beside the first node, the apps container's groups."""
    hosts: dict[str, dict[str, Any]] = {
        node.inventory_name: {"ansible_host": node.address, "ansible_port": node.ssh_port}
        for node in nodes
    }
    # Placed over every node, the ones about to leave too: a node keeps its zone and
    # roles until it is gone.
    for name, placement in zip(
        hosts, lab_placements(len(nodes), zones=zones, managers=managers), strict=True
    ):
        if placement.zone is not None:
            hosts[name]["opensearch_zone"] = placement.zone
        if placement.roles is not None:
            hosts[name]["opensearch_node_roles"] = list(placement.roles)
    for name in absent:
        # Scale in: the playbook drains, stops and disables these nodes.
        hosts[name]["opensearch_node_state"] = "absent"
    present = [name for name in hosts if name not in absent]
    if len(present) == 2 and not managers:
        # Two cluster-manager-eligible nodes survive the loss of neither, and the plan
        # refuses them (docs/zones.md): the second one holds data only.
        hosts[present[1]]["opensearch_node_roles"] = ["data", "ingest"]
    children: dict[str, Any] = {"opensearch": {"hosts": hosts}}
    if console:
        # The console runs beside the first node, on its address.
        children["dashboards"] = {"hosts": {nodes[0].inventory_name: {}}}
    if apps:
        apps_host = {
            apps.inventory_name: {"ansible_host": apps.address, "ansible_port": apps.ssh_port}
        }
        children["user_directory"] = {"hosts": apps_host}
        children["order_service"] = {"hosts": {apps.inventory_name: {}}}
        if monitoring:
            # Prometheus, Alertmanager and the exporters beside the services.
            children["monitoring"] = {"hosts": {apps.inventory_name: {}}}
    return children


def service_group_vars(
    apps: LabNode | None, *, network: str, mode: str, lookup: Lookup
) -> dict[str, dict[str, Any]]:
    """group_vars of user_directory and order_service: behind the TLS proxy, each with a
    bearer token of its own."""
    # The applications bind loopback behind the TLS proxy (roles/tls_proxy), which
    # listens on the apps container's own address. In the loopback network that
    # address is a loopback one too, and the only one the container may take.
    app_bind = (apps.address if network == "loopback" else "127.0.0.1") if apps else ""
    proxy_vars = {"tls_proxy_listen_address": apps.address if apps else ""}
    if mode == "open":
        # No cluster PKI in open mode: the proxy's certificate still needs the CA.
        proxy_vars["opensearch_ca_passphrase"] = lookup("ca_passphrase")
    return {
        "user_directory": {
            **proxy_vars,
            "user_directory_host": app_bind,
            "user_directory_port": USER_DIRECTORY_PORT,
            # The lab's user directory takes writes, so it asks for a token even on
            # loopback; lab.json names the 0600 file (user_directory_token_file).
            "user_directory_auth_tokens": [lookup(USER_DIRECTORY_TOKEN)],
        },
        "order_service": {
            **proxy_vars,
            "order_service_host": app_bind,
            "order_service_port": ORDERS_PORT,
            # As the user directory's: lab.json names the 0600 file (orders_token_file).
            "order_service_auth_tokens": [lookup(ORDER_SERVICE_TOKEN)],
        },
    }


def _write_or_remove(path: Path, content: dict[str, Any] | None, **dump: Any) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(HEADER + yaml.safe_dump(content, **dump))


class LabInventory(LabContainers):
    """The lab's containers, and the inventory that points the playbooks at them."""

    def _lookup(self, name: str) -> str:
        path = self.secret_file(name)
        return "{{ lookup('ansible.builtin.file', '" + str(path) + "') }}"

    def _connection_vars(self) -> dict[str, Any]:
        return {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": " ".join(self._ssh_options()[2:]),
            # The lab image's Python. Named, so no run spends a round trip per
            # host finding it: 3.3 s of a 36.6 s tls rerun under Mitogen
            # (bench/RESULTS.md, session 9).
            "ansible_python_interpreter": LAB_PYTHON,
        }

    def _cluster_group_vars(
        self, present: int, *, mode: str, directory: LabDirectory | None
    ) -> dict[str, Any]:
        group_vars: dict[str, Any] = {
            "opensearch_cluster_name": CLUSTER_NAME,
            "opensearch_security_mode": mode,
            "opensearch_heap_size": lab_heap(present),
            "opensearch_distribution_source": "maven",
            "opensearch_plugins": [dict(plugin) for plugin in LAB_PLUGINS],
            # Registered on the directory every node mounts at path.repo, so that
            # playbooks/snapshot.yml and restore.yml work on the lab as they are.
            "opensearch_snapshot_repository": SNAPSHOT_REPOSITORY,
            **lab_snapshot_vars(mode),
        }
        if mode != "open":
            group_vars["opensearch_pki_dir"] = str(self.pki_dir)
            group_vars["opensearch_ca_passphrase"] = self._lookup("ca_passphrase")
            group_vars["opensearch_security_passwords"] = {
                user: self._lookup(user) for user in SECURITY_SECRETS
            }
            if directory is not None:
                # scripts/up --ldap (docs/ldap.md): the directory container and a role per group.
                group_vars.update(directory.inventory_vars(self._lookup))
        return group_vars

    def write_inventory(
        self,
        nodes: list[LabNode],
        *,
        network: str,
        mode: str,
        dashboards_archive: Path | None = None,
        absent: tuple[str, ...] = (),
        apps: LabNode | None = None,
        zones: int = 0,
        managers: int = 0,
        monitoring: bool = False,
        directory: LabDirectory | None = None,
    ) -> None:
        children = inventory_groups(
            nodes,
            absent=absent,
            apps=apps,
            zones=zones,
            managers=managers,
            monitoring=monitoring,
            console=dashboards_archive is not None,
        )
        inventory = {"all": {"vars": self._connection_vars(), "children": children}}
        self._ensure_secrets()
        group_vars = self._cluster_group_vars(
            len(nodes) - len(absent), mode=mode, directory=directory
        )
        comment = ""
        if network == "loopback":
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            group_vars["opensearch_limit_nofile"] = hard
            comment = (
                "# loopback network: this machine's open-file hard limit cannot be raised, so\n"
                "# the unit asks for no more than it; OpenSearch on loopback skips the check.\n"
            )
        group_vars_dir = self.lab_dir / "group_vars"
        group_vars_dir.mkdir(parents=True, exist_ok=True)
        (self.lab_dir / "hosts.yml").write_text(HEADER + yaml.safe_dump(inventory, sort_keys=False))
        (group_vars_dir / "opensearch.yml").write_text(
            HEADER + comment + yaml.safe_dump(group_vars, sort_keys=False)
        )
        services = service_group_vars(apps, network=network, mode=mode, lookup=self._lookup)
        for group, variables in services.items():
            _write_or_remove(
                group_vars_dir / f"{group}.yml", variables if apps else None, sort_keys=False
            )
        _write_or_remove(
            group_vars_dir / "monitoring.yml",
            lab_monitoring.group_vars(apps.address, self.lab_dir) if apps and monitoring else None,
            sort_keys=False,
        )
        _write_or_remove(
            group_vars_dir / "dashboards.yml",
            {"dashboards_archive_path": str(dashboards_archive.resolve())}
            if dashboards_archive
            else None,
        )
