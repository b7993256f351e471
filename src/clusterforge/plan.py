"""The plan handed to the roles: the validated model, its certificates, every node's files.

Nothing secret is in the plan: passwords are only validated here, and the CA passphrase
only unlocks the CA key in memory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterforge.cluster_pki import ClusterPki, ensure_cluster_pki, resolve_pki_dir
from clusterforge.console import plan_consoles
from clusterforge.model import Cluster, build_cluster, heap_megabytes
from clusterforge.pki import CA_PASSPHRASE_ENV
from clusterforge.render import (
    ADMIN_CERT_FILE,
    ADMIN_KEY_FILE,
    CA_CERT_FILE,
    NODE_CERT_FILE,
    NODE_KEY_FILE,
    render_node_files,
)

CA_PASSPHRASE_VARIABLE = "opensearch_ca_passphrase"  # noqa: S105 - a variable name


def cluster_facts(cluster: Cluster, pki: ClusterPki | None) -> dict[str, Any]:
    """The cluster-wide facts the roles use, as plain data."""
    return {
        "name": cluster.name,
        "version": cluster.version,
        "security_mode": cluster.security_mode,
        "secured": cluster.secured,
        "http_scheme": cluster.http_scheme,
        "http_port": cluster.http_port,
        "heap_megabytes_required": heap_megabytes(cluster.heap_size),
        "install_root": cluster.install_root,
        "install_dir": cluster.install_dir,
        "home": cluster.home,
        "config_dir": cluster.config_dir,
        "data_path": cluster.data_path,
        "log_path": cluster.log_path,
        "repo_path": cluster.repo_path,
        "service_user": cluster.service_user,
        "java_home": cluster.java_home,
        "distribution": dataclasses.asdict(cluster.distribution),
        "archive_name": cluster.distribution.archive_name,
        "needs_system_java": not cluster.distribution.bundles_jdk,
        "bundles_security_plugin": cluster.distribution.bundles_security_plugin,
        "security_plugin_path": cluster.security.plugin_path,
        "security_init_node": cluster.security_init_node.inventory_name,
        "plugins": [dataclasses.asdict(plugin) for plugin in cluster.plugins],
        "node_count": len(cluster.nodes),
        "nodes": [
            {
                "name": node.name,
                "inventory_name": node.inventory_name,
                "url": cluster.http_url(node),
            }
            for node in cluster.nodes
        ],
        "pki": _pki_facts(cluster, pki),
    }


def _pki_facts(cluster: Cluster, pki: ClusterPki | None) -> dict[str, Any] | None:
    if pki is None:
        return None
    on_node = cluster.config_dir
    return {
        "dir": pki.pki_dir,
        "ca_cert": pki.ca_cert_path,
        "admin_cert": pki.admin.cert_path,
        "admin_key": pki.admin.key_path,
        "admin_dn": pki.admin_dn,
        "nodes_dn": pki.nodes_dn,
        "on_node": {
            "ca_cert": f"{on_node}/{CA_CERT_FILE}",
            "node_cert": f"{on_node}/{NODE_CERT_FILE}",
            "node_key": f"{on_node}/{NODE_KEY_FILE}",
            "admin_cert": f"{on_node}/{ADMIN_CERT_FILE}",
            "admin_key": f"{on_node}/{ADMIN_KEY_FILE}",
        },
        "changed": pki.ca_changed
        or pki.admin.changed
        or any(node.changed for node in pki.nodes.values()),
        "expiry_days": {
            "admin": pki.admin.days_left,
            **{name: node.days_left for name, node in pki.nodes.items()},
        },
    }


def ca_passphrase(first_host_vars: Mapping[str, Any]) -> bytes | None:
    """The CA passphrase: the (vaulted) variable, else the environment."""
    value = first_host_vars.get(CA_PASSPHRASE_VARIABLE) or os.environ.get(CA_PASSPHRASE_ENV)
    return str(value).encode() if value else None


def plan_cluster(
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path | None = None,
    consoles_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> dict[str, Any]:
    """Validate the inventory, make the certificates a secured cluster needs, render files,
    and plan the console hosts (their archive checked against the engine version)."""
    cluster = build_cluster(nodes_vars)
    consoles = plan_consoles(cluster, consoles_vars)
    pki = None
    if cluster.secured:
        pki = ensure_cluster_pki(
            cluster,
            pki_dir=resolve_pki_dir(cluster, inventory_dir or Path.cwd()),
            passphrase=ca_passphrase(nodes_vars[0][1]),
        )
    return {
        "cluster": cluster_facts(cluster, pki),
        "model_warnings": list(cluster.warnings),
        "consoles": consoles,
        "nodes": {
            node.inventory_name: {
                "name": node.name,
                "roles": list(node.roles),
                "url": cluster.http_url(node),
                "files": render_node_files(cluster, node, pki),
                "tls": None
                if pki is None
                else {
                    "cert": pki.nodes[node.inventory_name].cert_path,
                    "key": pki.nodes[node.inventory_name].key_path,
                },
            }
            for node in cluster.nodes
        },
    }
