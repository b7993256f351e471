"""What ``scripts/status`` looks at: the cluster a lab.json or an inventory describes.

Both sources become one :class:`Target`. The admin password comes from a file (lab.json's
``admin_password_file``) or from the inventory's (possibly vaulted) variables, never from
the command line, and it is kept out of the target's repr.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clusterforge.addresses import is_loopback_host
from clusterforge.errors import ClusterforgeError
from clusterforge.inventory.reader import InventoryReadError
from clusterforge.inventory.variables import read_inventory
from clusterforge.plan.cluster.cluster_pki import resolve_pki_dir
from clusterforge.plan.cluster.console import build_consoles
from clusterforge.plan.services.tls_proxy import proxied
from clusterforge.plan.snapshots.snapshot_schedule import declared_schedule
from clusterforge.schema import load_schema
from clusterforge.status.alerts import AlertSource, alert_source
from clusterforge.status.snapshots import UNKNOWN

DEFAULT_RENEW_WITHIN_DAYS: int = load_schema().default_of("opensearch_cert_renew_within_days")
ADMIN_USER = "admin"

_SERVICES = load_schema().services
# The path each known service answers its health check on (the roles' health URLs), by
# its name in lab.json and by its role.
SERVICE_HEALTH_PATHS = {
    **{service.status_name: service.health_path for service in _SERVICES.values()},
    **{service.role: service.health_path for service in _SERVICES.values()},
}
# The security configuration types the digest covers, as the security REST API names them.
SECURITY_CONFIG_TYPES = (
    "securityconfig",
    "internalusers",
    "roles",
    "rolesmapping",
    "actiongroups",
    "tenants",
)
# A service bound to one of these is reached through its host's address.
_WILDCARD_BINDS = ("0.0.0.0", "::", "")  # noqa: S104 - compared against, never bound
# (name in the report, inventory group) of each service.
_INVENTORY_SERVICES = tuple((service.status_name, service.role) for service in _SERVICES.values())


class StatusConfigError(ClusterforgeError):
    """The lab.json or inventory given to ``scripts/status`` cannot be used (exit code 2)."""


@dataclass(frozen=True, kw_only=True)
class ExpectedNode:
    name: str
    url: str


@dataclass(frozen=True, kw_only=True)
class Target:
    source: str
    cluster_name: str | None
    mode: str
    version: str | None
    nodes: tuple[ExpectedNode, ...]
    ca_cert: Path | None
    admin_user: str | None
    admin_password: str | None = field(repr=False)
    renew_within_days: int = DEFAULT_RENEW_WITHIN_DAYS
    console: str | None = None
    # Service name -> health URL, or a reason it cannot be checked from here.
    services: Mapping[str, str] = field(default_factory=dict)
    unchecked_services: Mapping[str, str] = field(default_factory=dict)
    # The opensearch group's variables as read (extra vars on top), for the drift check;
    # None for a lab.json, which holds none.
    opensearch_vars: Mapping[str, Any] | None = field(default=None, repr=False)
    # The Alertmanager whose firing alerts the report lists (lab.json's monitoring).
    alertmanager: AlertSource | None = None
    # The snapshot schedule the source declares (clusterforge.status.snapshots): None for
    # none, UNKNOWN for a lab.json written before it said.
    snapshot_schedule: Mapping[str, Any] | Literal["unknown"] | None = UNKNOWN

    @property
    def secured(self) -> bool:
        return self.mode != "open"


def service_health_url(name: str, url: str) -> str:
    """A service's base URL with its health path appended, unless it already has a path."""
    stripped = url.rstrip("/")
    if stripped.split("://", 1)[-1].count("/") > 0:
        return url
    return stripped + SERVICE_HEALTH_PATHS.get(name, "/health")


def load_lab_json(path: Path) -> Target:
    """The target described by a lab.json (scripts/up) or molecule verify's cluster.json."""
    try:
        facts: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StatusConfigError(f"cannot read {path}: {error}; run scripts/up first") from error
    try:
        mode = str(facts["mode"])
        nodes = tuple(
            ExpectedNode(name=str(node["name"]), url=str(node["url"])) for node in facts["nodes"]
        )
    except (KeyError, TypeError) as error:
        raise StatusConfigError(
            f"{path} lacks {error}; it must have 'mode' and 'nodes' with 'name' and 'url' "
            "(rerun scripts/up to rewrite it)"
        ) from error
    password = None
    if mode != "open":
        password_file = facts.get("admin_password_file")
        if not password_file:
            raise StatusConfigError(f"{path} has mode {mode} but no admin_password_file")
        password = _read_secret(Path(password_file))
    services = facts.get("services") or {}
    if not isinstance(services, Mapping):
        raise StatusConfigError(f"{path}: 'services' must map a service name to its URL")
    return Target(
        source=str(path),
        cluster_name=facts.get("cluster_name"),
        mode=mode,
        version=facts.get("version"),
        nodes=nodes,
        ca_cert=Path(facts["ca_cert"]) if facts.get("ca_cert") else None,
        admin_user=facts.get("admin_user") or (ADMIN_USER if mode != "open" else None),
        admin_password=password,
        renew_within_days=int(
            facts.get("opensearch_cert_renew_within_days", DEFAULT_RENEW_WITHIN_DAYS)
        ),
        console=facts.get("console") or None,
        services={
            str(name): service_health_url(str(name), str(url)) for name, url in services.items()
        },
        alertmanager=alert_source(facts.get("monitoring"), str(path)),
        snapshot_schedule=facts.get("snapshot_schedule", UNKNOWN),
    )


def _read_secret(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as error:
        raise StatusConfigError(f"cannot read the admin password file {path}: {error}") from error


def load_inventory(
    inventory: Path,
    vault_password_file: Path | None,
    extra_vars: Mapping[str, Any] | None = None,
) -> Target:
    """The target an Ansible inventory describes, read the way a playbook run reads it,
    ``extra_vars`` on top (``-e``: a password changed by a run's extra vars, say)."""
    try:
        read = read_inventory(
            inventory, vault_password_file=vault_password_file, extra_vars=extra_vars
        )
    except InventoryReadError as error:
        hint = " (pass --vault-password-file FILE)" if "vault" in str(error).lower() else ""
        raise StatusConfigError(f"cannot read the inventory {inventory}: {error}{hint}") from error
    if not read.nodes:
        raise StatusConfigError(f"the inventory {inventory} has no host in group 'opensearch'")
    cluster = read.cluster()
    first_vars = read.nodes[0][1]
    ca_cert = resolve_pki_dir(cluster, read.directory) / "ca.pem" if cluster.secured else None
    password = None
    if cluster.secured:
        passwords = first_vars.get("opensearch_security_passwords") or {}
        password = passwords.get(ADMIN_USER) if isinstance(passwords, Mapping) else None
        if not password:
            raise StatusConfigError(
                "opensearch_security_passwords.admin is not set for the opensearch group; "
                "set it (vaulted) or pass --vault-password-file to decrypt it"
            )
    consoles = build_consoles(read.consoles)
    services, unchecked = _inventory_services(read.services, read.addresses)
    return Target(
        source=str(inventory),
        cluster_name=cluster.name,
        mode=cluster.security_mode,
        version=cluster.version,
        nodes=tuple(
            ExpectedNode(name=node.name, url=cluster.http_url(node)) for node in cluster.nodes
        ),
        ca_cert=ca_cert if cluster.security_mode == "tls" else None,
        admin_user=ADMIN_USER if cluster.secured else None,
        admin_password=str(password) if password else None,
        renew_within_days=cluster.security.renew_within_days,
        console=consoles[0].url if consoles else None,
        services=services,
        unchecked_services=unchecked,
        opensearch_vars=first_vars,
        snapshot_schedule=declared_schedule(first_vars),
    )


def _inventory_services(
    groups: Mapping[str, list[tuple[str, dict[str, Any]]]],
    addresses: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    services: dict[str, str] = {}
    unchecked: dict[str, str] = {}
    for name, group in _INVENTORY_SERVICES:
        for host, host_vars in groups.get(group, []):
            key = name if len(groups[group]) == 1 else f"{name}@{host}"
            scheme, bind_variable = "http", f"{group}_host"
            if proxied(host_vars, group):
                # Reached through the TLS proxy, where it listens (roles/tls_proxy).
                scheme, bind_variable = "https", "tls_proxy_listen_address"
            default_bind = "127.0.0.1" if scheme == "http" else ""
            bind = str(host_vars.get(bind_variable, default_bind) or default_bind)
            port = host_vars.get(f"{group}_port")
            reach = addresses.get(host) or host
            if port is None:
                unchecked[key] = f"{group}_port is not set for {host}"
                continue
            if is_loopback_host(bind) and not is_loopback_host(reach):
                unchecked[key] = (
                    f"{bind_variable} is {bind} on {host}: only that host can reach it "
                    "(the role's own health check covers it)"
                )
                continue
            address = reach if bind in _WILDCARD_BINDS or is_loopback_host(bind) else bind
            if ":" in address:
                address = f"[{address}]"
            services[key] = service_health_url(name, f"{scheme}://{address}:{port}")
    return services, unchecked
