"""Every file a node gets, rendered from the model. The roles and ``scripts/render``
both call :func:`render_node_files`, so a file can only be produced one way.
"""

from __future__ import annotations

from typing import Any

import jinja2
import yaml

from clusterforge.pki.security_config import REST_API_ROLES_ENABLED
from clusterforge.plan.cluster.cluster_pki import ClusterPki
from clusterforge.plan.cluster.model import Cluster, Node

MANAGED_HEADER = (
    "# Managed by clusterforge, rendered from the inventory. Local edits are overwritten;\n"
    "# change the inventory and rerun the playbook instead."
)
# Relative to the config directory: the plugin reads certificates only from inside it.
# A node's TLS files live in one directory per generation (certs/gen-<digest>/) behind the
# link certs/live, which roles/certificates swaps in one rename: the plugin's hot reload
# never sees a new certificate beside an old key (docs/certificates.md).
NODE_TLS_LINK = "certs/live"
NODE_CERT_FILE = f"{NODE_TLS_LINK}/node.pem"
NODE_KEY_FILE = f"{NODE_TLS_LINK}/node-key.pem"
NODE_CA_FILE = f"{NODE_TLS_LINK}/ca.pem"
# The console's copy of the CA bundle, relative to its own config directory.
CA_CERT_FILE = "certs/ca.pem"
ADMIN_CERT_FILE = "certs/admin.pem"
# Where versions before issue 31 kept the super-admin's key at rest; roles/certificates
# removes it. The key now stays on the control node and reaches a node only for the run
# of securityadmin or of one clusterforge_http_wait call.
RETIRED_ADMIN_KEY_FILE = "certs/admin-key.pem"
HOT_RELOAD_SETTING = "plugins.security.ssl.certificates_hot_reload.enabled"
# Where audit events go when failed logins are recorded (which events: the security
# config's audit.yml, clusterforge.pki.security_config): the engine's log4j logger `audit`,
# whose lines land in the node's log under the shipped log4j2.properties' rolling
# policy, so they take no more room than the log already may. An audit index would grow
# a new index a day with nothing to remove the old ones.
AUDIT_SINK_SETTINGS: dict[str, Any] = {
    "plugins.security.audit.type": "log4j",
    "plugins.security.audit.config.log4j.logger_name": "audit",
    "plugins.security.audit.config.log4j.level": "INFO",
}
CORS_ALLOW_HEADERS = "X-Requested-With, X-Auth-Token, Content-Type, Content-Length, Authorization"

_environment = jinja2.Environment(
    loader=jinja2.PackageLoader("clusterforge.plan", "templates"),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # noqa: S701 - these are config files, not HTML
)


def security_settings(cluster: Cluster, node: Node, pki: ClusterPki | None) -> dict[str, Any]:
    """The plugins.security.* part of opensearch.yml for the cluster's mode."""
    if not cluster.secured:
        return {"plugins.security.disabled": True}
    if pki is None:
        raise ValueError("a secured cluster needs its PKI to render opensearch.yml")
    settings: dict[str, Any] = {
        "plugins.security.disabled": False,
        "plugins.security.ssl.transport.enabled": True,
        "plugins.security.ssl.transport.pemcert_filepath": NODE_CERT_FILE,
        "plugins.security.ssl.transport.pemkey_filepath": NODE_KEY_FILE,
        "plugins.security.ssl.transport.pemtrustedcas_filepath": NODE_CA_FILE,
        "plugins.security.ssl.transport.enforce_hostname_verification": False,
        "plugins.security.ssl.http.enabled": cluster.security_mode == "tls",
        # Renewed certificates are loaded without a restart. Of 2.19's two mechanisms
        # this is the one that watches the files (every 5 s); the older reloadcerts API
        # (plugins.security.ssl_cert_reload_enabled) needs an admin-certificate call per
        # node and layer, and the plugin refuses to start with both set.
        HOT_RELOAD_SETTING: True,
        # On reload the plugin compares the new certificate's issuer DN, subject DN and
        # SANs with the loaded one's and refuses a difference. A CA rotation changes the
        # issuer DN by design, so the comparison would block it; the control node
        # decides what a certificate says, and nodes_dn and the CA bundle still decide
        # whom a node trusts.
        "plugins.security.ssl.transport.enforce_cert_reload_dn_verification": False,
    }
    settings.update(tls_policy_settings(cluster, "transport"))
    if cluster.security_mode == "tls":
        settings.update(
            {
                "plugins.security.ssl.http.pemcert_filepath": NODE_CERT_FILE,
                "plugins.security.ssl.http.pemkey_filepath": NODE_KEY_FILE,
                "plugins.security.ssl.http.pemtrustedcas_filepath": NODE_CA_FILE,
                "plugins.security.ssl.http.enforce_cert_reload_dn_verification": False,
            }
        )
        settings.update(tls_policy_settings(cluster, "http"))
    settings.update(
        {
            "plugins.security.nodes_dn": pki.nodes_dn,
            "plugins.security.authcz.admin_dn": pki.admin_dn,
            # Without it the REST API refuses every Basic-auth user (docs/design.md).
            "plugins.security.restapi.roles_enabled": list(REST_API_ROLES_ENABLED),
        }
    )
    if cluster.audit_failed_logins:
        settings.update(AUDIT_SINK_SETTINGS)
    if cluster.security_mode == "basic" and node == cluster.security_init_node:
        # securityadmin speaks only HTTPS, so without HTTP TLS this one node loads the
        # security index from config/opensearch-security/ itself, once, when it is missing.
        settings["plugins.security.allow_default_init_securityindex"] = True
    return settings


def zone_settings(cluster: Cluster, node: Node) -> dict[str, Any]:
    """The node's zone and shard allocation awareness (docs/zones.md): the engine then
    keeps a shard's copies in different zones, so one zone down leaves a copy of each."""
    if not node.zone:
        return {}
    settings: dict[str, Any] = {
        "node.attr.zone": node.zone,
        "cluster.routing.allocation.awareness.attributes": "zone",
    }
    if cluster.zone_forced:
        settings["cluster.routing.allocation.awareness.force.zone.values"] = list(cluster.zones)
    return settings


def tls_policy_settings(cluster: Cluster, layer: str) -> dict[str, Any]:
    """The TLS versions and suites one layer (``http`` or ``transport``) accepts.

    Without them the plugin offers TLS 1.2's CBC and SHA-1 suites too, and picks one of
    them before a client's AES-GCM (issue 32).
    """
    settings: dict[str, Any] = {}
    if cluster.tls_protocols:
        settings[f"plugins.security.ssl.{layer}.enabled_protocols"] = list(cluster.tls_protocols)
    if cluster.tls_ciphers:
        settings[f"plugins.security.ssl.{layer}.enabled_ciphers"] = list(cluster.tls_ciphers)
    return settings


def opensearch_settings(
    cluster: Cluster, node: Node, *, first_start: bool, pki: ClusterPki | None = None
) -> dict[str, Any]:
    """The node's opensearch.yml as data.

    ``first_start`` adds cluster.initial_cluster_manager_nodes, which may only be present
    until the cluster has formed once: left in place, a node that loses its data could
    bootstrap a second cluster of its own.
    """
    transport = cluster.transport_port
    settings: dict[str, Any] = {
        "cluster.name": cluster.name,
        "node.name": node.name,
        "node.roles": list(node.roles),
        "network.host": node.bind_host,
        "network.bind_host": node.bind_host,
        "network.publish_host": node.publish_host,
        "http.port": cluster.http_port,
        "transport.port": transport,
        "discovery.seed_hosts": [f"{peer.publish_host}:{transport}" for peer in cluster.nodes],
        "discovery.initial_state_timeout": cluster.initial_state_timeout,
        "path.data": cluster.data_path,
        "path.logs": cluster.log_path,
        "path.repo": [cluster.repo_path],
    }
    settings.update(zone_settings(cluster, node))
    if first_start:
        settings["cluster.initial_cluster_manager_nodes"] = [
            peer.name for peer in cluster.nodes if peer.cluster_manager_eligible
        ]
    if cluster.cors_enabled:
        settings.update(
            {
                "http.cors.enabled": True,
                "http.cors.allow-origin": cluster.cors_allow_origin,
                "http.cors.allow-credentials": cluster.cors_allow_credentials,
                "http.cors.allow-headers": CORS_ALLOW_HEADERS,
            }
        )
    settings.update(security_settings(cluster, node, pki))
    settings.update(cluster.extra_settings)
    return settings


def render_opensearch_yml(
    cluster: Cluster, node: Node, *, first_start: bool, pki: ClusterPki | None = None
) -> str:
    return render_settings_yaml(
        opensearch_settings(cluster, node, first_start=first_start, pki=pki)
    )


def render_settings_yaml(settings: dict[str, Any]) -> str:
    """A flat settings file (opensearch.yml, opensearch_dashboards.yml) from its data."""
    body = yaml.safe_dump(
        settings, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )
    return f"{MANAGED_HEADER}\n{body}"


def render_template(name: str, **context: Any) -> str:
    """One of the package's templates, with the managed-file header."""
    template = _environment.get_template(name)
    return template.render(managed_header=MANAGED_HEADER, **context)


def _render_template(name: str, cluster: Cluster, node: Node) -> str:
    return render_template(name, cluster=cluster, node=node)


def render_node_files(
    cluster: Cluster, node: Node, pki: ClusterPki | None = None
) -> dict[str, str]:
    """Every file of one node, by its name in the role (and in ``scripts/render``'s output)."""
    return {
        "opensearch.yml": render_opensearch_yml(cluster, node, first_start=False, pki=pki),
        "opensearch.first-start.yml": render_opensearch_yml(
            cluster, node, first_start=True, pki=pki
        ),
        "heap.options": _render_template("heap.options.j2", cluster, node),
        "opensearch.service": _render_template("opensearch.service.j2", cluster, node),
    }
