"""The plan handed to the roles: the validated model plus every node's rendered files."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from clusterforge.model import Cluster, build_cluster, heap_megabytes
from clusterforge.render import render_node_files


def cluster_facts(cluster: Cluster) -> dict[str, Any]:
    """The cluster-wide facts the roles use, as plain data."""
    return {
        "name": cluster.name,
        "version": cluster.version,
        "security_mode": cluster.security_mode,
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
        "node_count": len(cluster.nodes),
        "nodes": [
            {
                "name": node.name,
                "inventory_name": node.inventory_name,
                "url": cluster.http_url(node),
            }
            for node in cluster.nodes
        ],
    }


def plan_cluster(nodes_vars: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Validate the inventory and return the plan: cluster facts, warnings, per-node files."""
    cluster = build_cluster(nodes_vars)
    return {
        "cluster": cluster_facts(cluster),
        "model_warnings": list(cluster.warnings),
        "nodes": {
            node.inventory_name: {
                "name": node.name,
                "roles": list(node.roles),
                "url": cluster.http_url(node),
                "files": render_node_files(cluster, node),
            }
            for node in cluster.nodes
        },
    }
