"""The plan's ``cluster`` and ``nodes`` sections: the facts the roles read.

Paths, markers, the engine's tool environment, the PKI's files as the nodes see them, and
each node's rendered files (:func:`clusterforge.plan.cluster.render.render_node_files`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from clusterforge.plan.cluster.cluster_pki import ClusterPki
from clusterforge.plan.cluster.model import Cluster
from clusterforge.plan.cluster.model_checks import heap_megabytes
from clusterforge.plan.cluster.render import (
    ADMIN_CERT_FILE,
    NODE_CA_FILE,
    NODE_CERT_FILE,
    NODE_KEY_FILE,
    NODE_TLS_LINK,
    RETIRED_ADMIN_KEY_FILE,
    render_node_files,
)

# The engine's command-line tools (opensearch-plugin, opensearch-keystore) each start a JVM
# that lives a second or two; on a cold bootstrap several run on every host at once. The
# optimising compiler only costs such a process: with C1 alone the security plugin's
# install took 2.05 s of CPU instead of 3.1 s, the keystore's creation 1.07 s instead of
# 1.55 s (measured in a lab node). opensearch-cli appends this to its own JVM options.
TOOL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


# Files a node keeps in the toolkit's root-only state directory (opensearch_state_dir):
# the run that formed the cluster writes them, and the next plan reads them
# (clusterforge_observe) to tell a formed cluster and the mode it runs; the security
# role's marker says what securityadmin last loaded. They decide what a run does, so
# the service user, which owns the data path, must not be able to write them (issue 32).
FORMED_MARKER = ".clusterforge-cluster-formed"


SECURITY_MODE_MARKER = ".clusterforge-security-mode"


SECURITY_LOADED_MARKER = ".clusterforge-security-loaded.json"


# Not a marker but root appends to it: a file in a directory the service user owns could
# be swapped for a link to any file.
SECURITYADMIN_LOG = ".clusterforge-securityadmin.log"


MARKERS = {
    "formed": FORMED_MARKER,
    "security_mode": SECURITY_MODE_MARKER,
    "security_loaded": SECURITY_LOADED_MARKER,
    "securityadmin_log": SECURITYADMIN_LOG,
}


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
        "state_dir": cluster.state_dir,
        "markers": {key: f"{cluster.state_dir}/{name}" for key, name in MARKERS.items()},
        # Where releases before issue 32 kept them; a rerun moves them (roles/opensearch).
        "legacy_markers": {key: f"{cluster.data_path}/{name}" for key, name in MARKERS.items()},
        "log_path": cluster.log_path,
        "repo_path": cluster.repo_path,
        "service_user": cluster.service_user,
        "java_home": cluster.java_home,
        "distribution": dataclasses.asdict(cluster.distribution),
        "archive_name": cluster.distribution.archive_name,
        "needs_system_java": not cluster.distribution.bundles_jdk,
        "tool_environment": tool_environment(cluster),
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


def tool_environment(cluster: Cluster) -> dict[str, str]:
    """The environment of the engine's command-line tools on a node."""
    return {
        # Empty: the archive's bundled JDK.
        "OPENSEARCH_JAVA_HOME": "" if cluster.distribution.bundles_jdk else cluster.java_home,
        "OPENSEARCH_PATH_CONF": cluster.config_dir,
        "OPENSEARCH_JAVA_OPTS": TOOL_JAVA_OPTIONS,
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
        # Nodes load renewed certificates without a restart (render.HOT_RELOAD_SETTING).
        "hot_reload": True,
        "on_node": {
            "tls_link": f"{on_node}/{NODE_TLS_LINK}",
            "ca_cert": f"{on_node}/{NODE_CA_FILE}",
            "node_cert": f"{on_node}/{NODE_CERT_FILE}",
            "node_key": f"{on_node}/{NODE_KEY_FILE}",
            "admin_cert": f"{on_node}/{ADMIN_CERT_FILE}",
            "retired_admin_key": f"{on_node}/{RETIRED_ADMIN_KEY_FILE}",
        },
        "changed": pki.ca_changed
        or pki.admin.changed
        or any(node.changed for node in pki.nodes.values()),
        "expiry_days": {
            "admin": pki.admin.days_left,
            **{name: node.days_left for name, node in pki.nodes.items()},
        },
    }


def node_facts(cluster: Cluster, pki: ClusterPki | None) -> dict[str, Any]:
    """Every node's name, roles, URL, rendered files and certificate (the ``nodes`` section)."""
    return {
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
                "serial": pki.nodes[node.inventory_name].serial,
                "generation": (pki.generations or {}).get(node.inventory_name, ""),
            },
        }
        for node in cluster.nodes
    }
