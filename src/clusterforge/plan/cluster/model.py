"""The typed model of a cluster, built from inventory variables and validated at once.

:func:`build_cluster` takes what the inventory says (cluster-wide variables and each
node's host variables), reports every problem together in one :class:`InventoryError`,
and otherwise returns a frozen :class:`Cluster`. Nothing else in the toolkit reads raw
inventory variables. Their names, types, defaults and constraints are declared once in
``schema.yml`` (:mod:`clusterforge.schema`); the checks
(:mod:`clusterforge.plan.cluster.model_checks`) hold every value against it, refuse undeclared
variables of a known prefix, then check the rules that involve several variables.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterforge.errors import InventoryError
from clusterforge.pki.security_config import AuthFailureLimit
from clusterforge.plan.cluster.model_checks import (
    PLUGIN_NAME,
    PLUGIN_REQUIRED_FIELDS,
    SECURED_MODES,
    Problems,
    check_cluster_values,
    check_cors,
    check_extra_settings,
    check_heap,
    check_host_values,
    check_jvm_options,
    check_passwords,
    check_plugin_fields,
    check_state_dir,
    check_tls,
    check_users,
    cluster_defaults,
    seconds,
)
from clusterforge.plan.cluster.rollout import CLUSTER_MANAGER_ROLES, cluster_managers_down_budget
from clusterforge.plan.security.ldap import LdapDirectory, build_ldap
from clusterforge.plan.security.tls_profile import TlsProfile, default_profile
from clusterforge.schema import as_int, load_schema, normalized, unknown_variables

SECURITY_MODES = ("open", "tls", "basic")
# The subject fields opensearch_cert_subject may set: those its default sets.
SUBJECT_FIELDS = frozenset(load_schema().default_of("opensearch_cert_subject"))
DISTRIBUTION_SOURCES = ("maven", "tarball", "file")
KNOWN_NODE_ROLES = frozenset(
    {"cluster_manager", "master", "data", "ingest", "remote_cluster_client", "search", "ml"}
)


_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Distribution:
    """Where the engine archive comes from."""

    source: str
    version: str
    url: str | None = None
    sha512: str | None = None
    path: str | None = None

    @property
    def bundles_jdk(self) -> bool:
        """The official tarball carries its own JDK; the integ-test zip does not."""
        return self.source == "tarball"

    @property
    def bundles_security_plugin(self) -> bool:
        """The official tarball ships the security plugin installed; the zip has none."""
        return self.source == "tarball"

    @property
    def archive_name(self) -> str:
        suffix = "tar.gz" if self.source == "tarball" else "zip"
        if self.source == "file" and self.path and self.path.endswith((".tar.gz", ".tgz")):
            suffix = "tar.gz"
        return f"opensearch-{self.version}-{self.source}.{suffix}"


@dataclass(frozen=True)
class Node:
    """One OpenSearch node as the inventory describes it."""

    inventory_name: str
    name: str
    roles: tuple[str, ...]
    bind_host: str
    publish_host: str
    extra_sans: tuple[str, ...] = ()
    ansible_host: str | None = None
    zone: str | None = None

    @property
    def subject_alt_names(self) -> tuple[str, ...]:
        """Every name and address the node is known by, for its certificate."""
        candidates = (
            self.inventory_name,
            self.name,
            self.ansible_host,
            self.bind_host,
            self.publish_host,
            *self.extra_sans,
        )
        return tuple(dict.fromkeys(name for name in candidates if name))

    @property
    def cluster_manager_eligible(self) -> bool:
        return bool(CLUSTER_MANAGER_ROLES.intersection(self.roles))


PLUGIN_SOURCES = ("build", "maven", "url", "file")
PLUGIN_STATES = ("present", "absent")
# Comes with the distribution or opensearch_security_plugin_path, never opensearch_plugins.
SECURITY_PLUGIN_NAME = "opensearch-security"


@dataclass(frozen=True)
class PluginSpec:
    """One engine plugin of the inventory, from exactly one source."""

    name: str
    source: str
    state: str = "present"
    path: str | None = None  # build: the Maven project folder; file: the zip
    coordinates: str | None = None  # maven: group:artifact
    version: str | None = None  # maven: defaults to the engine version
    url: str | None = None
    sha512: str | None = None


@dataclass(frozen=True)
class Security:
    """Non-secret security facts. Passwords and the CA passphrase are validated by
    :func:`build_cluster` but never kept here: only the actions that need them read them.
    """

    pki_dir: str
    ca_cert_path: str | None
    ca_key_path: str | None
    cert_subject: Mapping[str, str]
    renew_within_days: int
    admin_common_name: str
    plugin_path: str | None


@dataclass(frozen=True)
class Cluster:
    """A whole cluster: every fact the renderer and the roles need, validated."""

    name: str
    distribution: Distribution
    security_mode: str
    heap_size: str
    jvm_options: tuple[str, ...]
    http_port: int
    transport_port: int
    install_root: str
    config_dir: str
    data_path: str
    log_path: str
    repo_path: str
    service_user: str
    java_home: str
    limit_nofile: int
    initial_state_timeout: str
    cors_enabled: bool
    cors_allow_origin: str
    extra_settings: Mapping[str, Any]
    nodes: tuple[Node, ...]
    security: Security
    plugins: tuple[PluginSpec, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    # Hosts marked opensearch_node_state: absent: drained and stopped, never configured;
    # every other field (seed hosts, node count, nodes_dn) concerns the present nodes only.
    removed_nodes: tuple[Node, ...] = field(default=())
    cors_allow_credentials: bool = True
    zone_forced: bool = False
    rolling_batch: str = "node"
    # Empty only for a Cluster built by hand: build_cluster always fills them from the schema.
    tls_protocols: tuple[str, ...] = ()
    tls_ciphers: tuple[str, ...] = ()
    audit_failed_logins: bool = False
    auth_failure_limit: AuthFailureLimit | None = None
    state_dir: str = "/var/lib/clusterforge/opensearch"
    # The company directory (clusterforge.plan.security.ldap), None when opensearch_ldap_enabled is
    # false.
    ldap: LdapDirectory | None = None

    @property
    def tls_profile(self) -> TlsProfile:
        """The one TLS profile every listener of the toolkit offers
        (clusterforge.plan.security.tls_profile); a Cluster built by hand without one has the
        schema's default."""
        if not self.tls_protocols:
            return default_profile()
        return TlsProfile.of(self.tls_protocols, self.tls_ciphers)

    @property
    def zones(self) -> tuple[str, ...]:
        """The zones of the present nodes, sorted; empty when zones are not used."""
        return tuple(sorted({node.zone for node in self.nodes if node.zone}))

    @property
    def version(self) -> str:
        return self.distribution.version

    @property
    def install_dir(self) -> str:
        return f"{self.install_root}/opensearch-{self.version}"

    @property
    def home(self) -> str:
        """The `current` symlink: units and tools go through it, so upgrades swap one link."""
        return f"{self.install_root}/current"

    @property
    def http_scheme(self) -> str:
        return "https" if self.security_mode == "tls" else "http"

    @property
    def secured(self) -> bool:
        return self.security_mode in SECURED_MODES

    @property
    def security_init_node(self) -> Node:
        """The one node that initializes and reloads the security index."""
        return self.nodes[0]

    def node(self, inventory_name: str) -> Node:
        for node in self.nodes:
            if node.inventory_name == inventory_name:
                return node
        raise KeyError(inventory_name)

    def http_url(self, node: Node) -> str:
        return f"{self.http_scheme}://{_url_host(node.publish_host)}:{self.http_port}"


def _url_host(host: str) -> str:
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


def _build_distribution(value: Callable[[str], Any], problems: Problems) -> Distribution:
    source = value("opensearch_distribution_source")
    version = value("opensearch_version")
    url = value("opensearch_distribution_url")
    path = value("opensearch_distribution_path")
    if source == "file" and not path:
        problems.error(
            "opensearch_distribution_source is 'file' but opensearch_distribution_path is "
            "empty; set it to the archive's path on the control node"
        )
    if source == "tarball" and not url:
        problems.error(
            "opensearch_distribution_source is 'tarball' but opensearch_distribution_url is "
            "empty; set it to the tarball's URL (or leave the default)"
        )
    if isinstance(url, str) and isinstance(version, str):
        url = url.replace("{version}", version)
    return Distribution(
        source=str(source),
        version=str(version),
        url=url or None,
        sha512=value("opensearch_distribution_sha512") or None,
        path=path or None,
    )


def _build_node(
    inventory_name: str, host_vars: Mapping[str, Any], bad: set[str], problems: Problems
) -> Node | None:
    given_name = host_vars.get("opensearch_node_name")
    name = str(given_name or inventory_name)
    if not given_name and not _NODE_NAME.match(name):
        problems.error(
            f"{inventory_name}: the inventory name {name!r} has characters a node name "
            "cannot carry; set opensearch_node_name to letters, digits, '.', '_' and '-'"
        )
    roles_value = host_vars.get("opensearch_node_roles")
    if roles_value is None:
        roles_value = cluster_defaults()["opensearch_node_roles"]
    if "opensearch_node_roles" in bad:
        # Already reported; keep the known roles so the eligibility rule stays meaningful.
        listed = roles_value if isinstance(roles_value, list) else []
        roles_value = [role for role in listed if role in KNOWN_NODE_ROLES]
    bind_host = host_vars.get("opensearch_network_host") or host_vars.get("ansible_host")
    if not bind_host:
        problems.error(
            f"{inventory_name}: no address; set ansible_host or opensearch_network_host "
            "to the address the node listens on"
        )
        return None
    publish_host = host_vars.get("opensearch_publish_host") or bind_host
    extra_sans = host_vars.get("opensearch_extra_sans") or []
    if "opensearch_extra_sans" in bad:
        extra_sans = []
    return Node(
        inventory_name=inventory_name,
        name=name,
        roles=tuple(str(role) for role in roles_value),
        bind_host=str(bind_host),
        publish_host=str(publish_host),
        extra_sans=tuple(str(san) for san in extra_sans),
        ansible_host=str(host_vars["ansible_host"]) if host_vars.get("ansible_host") else None,
        zone=str(host_vars["opensearch_zone"])
        if host_vars.get("opensearch_zone") and "opensearch_zone" not in bad
        else None,
    )


def plain_data(value: Any) -> Any:
    """Plain Python values from whatever the caller holds.

    Ansible hands over str, list and dict subclasses that carry its own tags; they must
    not leak into rendered YAML or into the plan's comparisons.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(key): plain_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(item) for item in value]
    return value


def with_booleans(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """``host_vars`` with every variable the schema declares a boolean read as Ansible
    reads it (``-e opensearch_config_prune=true`` gives the string 'true'); a value that is
    no boolean stays as it is, for the schema check to refuse naming the variable."""
    variables = load_schema().variables
    return {
        key: normalized(variables[key], value) if key in variables else value
        for key, value in host_vars.items()
    }


def build_cluster(nodes_vars: Sequence[tuple[str, Mapping[str, Any]]]) -> Cluster:
    """Build and validate the cluster from (inventory name, host variables) pairs.

    Raises InventoryError listing every problem found; warnings ride on the result.
    """
    nodes_vars = [
        (str(name), with_booleans(plain_data(host_vars))) for name, host_vars in nodes_vars
    ]
    problems = Problems()
    if not nodes_vars:
        raise InventoryError(
            ["the inventory group 'opensearch' is empty; add at least one host to it"]
        )
    for problem in unknown_variables(nodes_vars):
        problems.error(problem)
    values, bad = check_cluster_values(nodes_vars, problems)
    defaults = cluster_defaults()

    def value(key: str) -> Any:
        """The checked value; a bad one (already reported) falls back to the default."""
        return defaults.get(key) if key in bad else values.get(key)

    distribution = _build_distribution(value, problems)
    security_mode = str(value("opensearch_security_mode"))
    heap_size = str(value("opensearch_heap_size"))
    check_heap(heap_size, problems)
    jvm_options = check_jvm_options(value("opensearch_jvm_options"), problems)
    http_port = as_int(value("opensearch_http_port")) or 0
    transport_port = as_int(value("opensearch_transport_port")) or 0
    if http_port == transport_port:
        problems.error(
            f"opensearch_http_port and opensearch_transport_port are both {http_port}; "
            "give them different ports (default 9200 and 9300)"
        )
    extra_settings = value("opensearch_extra_settings") or {}
    check_extra_settings(extra_settings, problems)
    cors_enabled = bool(value("opensearch_cors_enabled"))
    cors_allow_origin = str(value("opensearch_cors_allow_origin"))
    cors_allow_credentials = bool(value("opensearch_cors_allow_credentials"))
    check_cors(cors_enabled, cors_allow_origin, cors_allow_credentials, problems)

    tls_protocols, tls_ciphers = check_tls(value, problems)
    state_dir = str(value("opensearch_state_dir")).rstrip("/")
    check_state_dir(state_dir, value, problems)
    security = _build_security(value, problems)
    check_users(value("opensearch_security_users") or [], problems)
    check_passwords(value, security_mode, "opensearch_security_mode" in bad, problems)
    plugins = _build_plugins(value("opensearch_plugins"), problems)
    ldap = build_ldap(value, secured=security_mode in SECURED_MODES, error=problems.error)
    nodes: list[Node] = []
    roles_bad = False
    for name, host_vars in nodes_vars:
        host_bad = check_host_values(name, host_vars, problems)
        roles_bad = roles_bad or "opensearch_node_roles" in host_bad
        node = _build_node(name, host_vars, host_bad, problems)
        if node:
            nodes.append(node)
    # A host left out for another problem must not raise a second, misleading one.
    unbuilt = len(nodes) < len(nodes_vars)
    check_uniqueness(nodes, problems)
    absent = {
        name for name, host_vars in nodes_vars if host_vars.get("opensearch_node_state") == "absent"
    }
    removed_nodes = [node for node in nodes if node.inventory_name in absent]
    nodes = [node for node in nodes if node.inventory_name not in absent]
    if removed_nodes and not nodes:
        problems.error(
            "every host of the group 'opensearch' has opensearch_node_state: absent; keep at "
            "least one node present (remove a whole cluster by stopping its hosts instead)"
        )
    check_manager_count(nodes, roles_bad=roles_bad, unbuilt=unbuilt, problems=problems)

    zone_forced = bool(value("opensearch_zone_forced"))
    rolling_batch = str(value("opensearch_rolling_batch"))
    check_topology(nodes, zone_forced=zone_forced, rolling_batch=rolling_batch, problems=problems)

    if problems.errors:
        raise InventoryError(problems.errors)
    return Cluster(
        name=str(value("opensearch_cluster_name")),
        distribution=distribution,
        security_mode=security_mode,
        heap_size=heap_size,
        jvm_options=jvm_options,
        http_port=http_port,
        transport_port=transport_port,
        install_root=str(value("opensearch_install_root")),
        config_dir=str(value("opensearch_config_dir")),
        data_path=str(value("opensearch_data_path")),
        log_path=str(value("opensearch_log_path")),
        repo_path=str(value("opensearch_repo_path")),
        service_user=str(value("opensearch_service_user")),
        java_home=str(value("opensearch_java_home")),
        limit_nofile=as_int(value("opensearch_limit_nofile")) or 0,
        initial_state_timeout=str(value("opensearch_discovery_initial_state_timeout")),
        cors_enabled=cors_enabled,
        cors_allow_origin=cors_allow_origin,
        cors_allow_credentials=cors_allow_credentials,
        extra_settings=dict(extra_settings),
        nodes=tuple(nodes),
        removed_nodes=tuple(removed_nodes),
        security=security,
        plugins=plugins,
        warnings=tuple(problems.warnings),
        zone_forced=zone_forced,
        rolling_batch=rolling_batch,
        tls_protocols=tls_protocols,
        tls_ciphers=tls_ciphers,
        audit_failed_logins=bool(value("opensearch_audit_failed_logins")),
        auth_failure_limit=_auth_failure_limit(value),
        state_dir=state_dir,
        ldap=ldap,
    )


def hosts_named(nodes: Sequence[Node], most: int = 8) -> str:
    """Hosts for a message: a 60-node inventory names a few and counts the rest."""
    names = [node.inventory_name for node in nodes]
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def check_topology(
    nodes: Sequence[Node], *, zone_forced: bool, rolling_batch: str, problems: Problems
) -> None:
    """Zones on every present node or none, forced awareness only over zones that can
    hold copies, cluster managers that survive the loss of any one of three or more
    zones, and zone batches only where there are zones to batch by (docs/zones.md)."""
    zoned = [node for node in nodes if node.zone]
    unzoned = [node for node in nodes if not node.zone]
    if zoned and unzoned:
        problems.error(
            f"opensearch_zone is set on {len(zoned)} of {len(nodes)} nodes; "
            f"{hosts_named(unzoned)} have none: the engine would place copies by zone among "
            "some nodes only; set opensearch_zone on every node of the group 'opensearch' "
            "(e.g. in group_vars of a group per zone), or on none"
        )
    zones: dict[str, list[Node]] = {}
    for node in zoned:
        zones.setdefault(str(node.zone), []).append(node)
    if zone_forced and not zones:
        problems.error(
            "opensearch_zone_forced is true but no node has opensearch_zone; set "
            "opensearch_zone on every node, or set opensearch_zone_forced: false"
        )
    for zone, members in sorted(zones.items()):
        if zone_forced and not any("data" in node.roles for node in members):
            problems.error(
                f"opensearch_zone_forced is true and zone {zone!r} ({hosts_named(members)}) holds "
                "no data node: its share of the copies could never be assigned and the "
                "cluster would stay yellow; add a data node to that zone, move its nodes "
                "into another zone, or set opensearch_zone_forced: false"
            )
    eligible = [node for node in nodes if node.cluster_manager_eligible]
    budget = cluster_managers_down_budget(len(eligible))
    if len(zones) >= 3 and eligible:
        for zone, members in sorted(zones.items()):
            managers = [node for node in members if node.cluster_manager_eligible]
            if len(managers) > budget:
                problems.error(
                    f"zone {zone!r} holds {len(managers)} of the {len(eligible)} "
                    "cluster-manager-eligible nodes: with that zone down the rest cannot "
                    "elect a cluster manager; spread them across the zones, e.g. one "
                    "dedicated cluster manager (opensearch_node_roles: [cluster_manager]) "
                    f"in each of three of the {len(zones)} zones"
                )
    if rolling_batch == "zone" and len(zones) < 2:
        where = f"the one zone {next(iter(zones))!r}" if zones else "no zone"
        problems.error(
            f"opensearch_rolling_batch is zone but the nodes have {where}: a zone batch "
            "would take every data node down at once; give the nodes two or more zones "
            "(opensearch_zone), or set opensearch_rolling_batch: node"
        )


def check_uniqueness(nodes: Sequence[Node], problems: Problems) -> None:
    by_name: dict[str, list[str]] = {}
    by_address: dict[str, list[str]] = {}
    for node in nodes:
        by_name.setdefault(node.name, []).append(node.inventory_name)
        by_address.setdefault(node.publish_host, []).append(node.inventory_name)
    for name, hosts in by_name.items():
        if len(hosts) > 1:
            problems.error(
                f"node name {name!r} is used by {', '.join(hosts)}; node names must be unique: "
                "set opensearch_node_name per host"
            )
    for address, hosts in by_address.items():
        if len(hosts) > 1:
            problems.error(
                f"address {address} is published by {', '.join(hosts)}; each node needs its "
                "own address: set ansible_host or opensearch_publish_host per host"
            )


def check_manager_count(
    nodes: Sequence[Node], *, roles_bad: bool, unbuilt: bool, problems: Problems
) -> None:
    """One or three (an odd number of) cluster-manager-eligible nodes; never two."""
    eligible = [node for node in nodes if node.cluster_manager_eligible]
    if nodes and not eligible and not roles_bad:
        problems.error(
            "no node is cluster-manager-eligible; add cluster_manager to "
            "opensearch_node_roles of one or three nodes"
        )
    elif len(eligible) == 2 and not roles_bad and not unbuilt:
        problems.error(
            f"exactly two cluster-manager-eligible nodes ({eligible[0].inventory_name}, "
            f"{eligible[1].inventory_name}): the cluster survives the loss of neither; add "
            "cluster_manager to opensearch_node_roles of a third node, or make one of them "
            "data-only (opensearch_node_roles: [data, ingest])"
        )
    elif len(eligible) % 2 == 0 and eligible:
        problems.warn(
            f"{len(eligible)} cluster-manager-eligible nodes is an even number: it tolerates no "
            "more failures than one fewer would; prefer an odd number (1, 3 or 5)"
        )


def _auth_failure_limit(value: Callable[[str], Any]) -> AuthFailureLimit | None:
    tries = as_int(value("opensearch_auth_failure_allowed_tries")) or 0
    if tries == 0:
        return None
    return AuthFailureLimit(
        allowed_tries=tries,
        time_window_seconds=seconds(str(value("opensearch_auth_failure_time_window"))),
        block_expiry_seconds=seconds(str(value("opensearch_auth_failure_block_expiry"))),
    )


def _build_security(value: Callable[[str], Any], problems: Problems) -> Security:
    subject = value("opensearch_cert_subject") or {}
    if set(subject) - SUBJECT_FIELDS:
        problems.error(
            "opensearch_cert_subject must be a mapping with only the keys "
            f"{', '.join(sorted(SUBJECT_FIELDS))}"
        )
        subject = {}
    country = subject.get("country", "")
    if country and (len(str(country)) != 2 or not str(country).isalpha()):
        problems.error(
            f"opensearch_cert_subject.country {country!r} is not a two-letter country code; "
            "set e.g. US or DE"
        )
    ca_cert = value("opensearch_ca_cert_path") or None
    ca_key = value("opensearch_ca_key_path") or None
    if bool(ca_cert) != bool(ca_key):
        problems.error(
            "only one of opensearch_ca_cert_path and opensearch_ca_key_path is set; "
            "set both to use your own CA, or neither to let clusterforge make one"
        )
    return Security(
        pki_dir=str(value("opensearch_pki_dir") or ""),
        ca_cert_path=ca_cert,
        ca_key_path=ca_key,
        cert_subject={str(key): str(item) for key, item in subject.items()},
        renew_within_days=as_int(value("opensearch_cert_renew_within_days")) or 0,
        admin_common_name=str(value("opensearch_admin_cert_common_name")),
        plugin_path=value("opensearch_security_plugin_path") or None,
    )


def _build_plugins(raw: Any, problems: Problems) -> tuple[PluginSpec, ...]:
    if raw in (None, "") or not isinstance(raw, list):
        return ()  # a non-list is reported by the schema check
    plugins: list[PluginSpec] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"opensearch_plugins[{index}]"
        if not isinstance(entry, Mapping):
            problems.error(
                f"{where} must be a mapping, e.g. {{name: analysis-smartcn, source: build, "
                "path: engine-plugins/analysis-smartcn}}"
            )
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not PLUGIN_NAME.match(name):
            problems.error(f"{where} needs a name, e.g. {{name: analysis-smartcn, source: build}}")
            continue
        if name == SECURITY_PLUGIN_NAME:
            problems.error(
                f"{where}: {name} is not listed here; the toolkit installs the security "
                "plugin that matches the engine (or opensearch_security_plugin_path); "
                "remove this entry"
            )
            continue
        check_plugin_fields(f"{where} ({name})", entry, problems)
        if name in seen:
            problems.error(f"{where}: plugin {name!r} is listed twice; keep one entry")
        seen.add(name)
        state = entry.get("state", "present")
        if state not in PLUGIN_STATES:
            problems.error(f"{where} ({name}): state {state!r} is unknown; use present or absent")
            continue
        source = str(entry.get("source", "" if state == "present" else "file"))
        if state == "present":
            if source not in PLUGIN_SOURCES:
                problems.error(
                    f"{where} ({name}): source {source!r} is unknown; choose one of "
                    f"{', '.join(PLUGIN_SOURCES)}"
                )
            else:
                missing = [key for key in PLUGIN_REQUIRED_FIELDS[source] if not entry.get(key)]
                if missing:
                    problems.error(
                        f"{where} ({name}): source {source} needs {', '.join(missing)}; set it"
                    )
            if source == "url" and entry.get("url") and not entry.get("sha512"):
                problems.warn(
                    f"{where} ({name}): no sha512 given; the .sha512 published beside the URL "
                    "is used"
                )
        plugins.append(
            PluginSpec(
                name=name,
                source=source,
                state=str(state),
                path=str(entry["path"]) if entry.get("path") else None,
                coordinates=str(entry["coordinates"]) if entry.get("coordinates") else None,
                version=str(entry["version"]) if entry.get("version") else None,
                url=str(entry["url"]) if entry.get("url") else None,
                sha512=str(entry["sha512"]) if entry.get("sha512") else None,
            )
        )
    return tuple(plugins)
