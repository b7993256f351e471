"""The plan: everything the hosts get, computed from the inventory alone.

:func:`build_plan` is the one function behind both the ``clusterforge_plan`` action
(playbooks/plan.yml) and ``scripts/render``. It holds the validated model, the fetched
and checked artifacts, the PKI, the security files, the console, the rollout (which
nodes restart, in which order, and the refusal of a downgrade) and the seam where the
services' settings will be added (``services``).

It also decides the order service's delivery into the cluster (``orders_search``,
clusterforge.plan.orders_search): the user and roles go into the security files, the index
template into ``orders_search``, and the settings into ``services``; the user's password
goes only into the service's settings file, which its role writes.

Nothing secret is in the plan: passwords are validated and turned into bcrypt hashes
here, and the CA passphrase only unlocks the CA key in memory. The security files hold
hashes, so whoever shows the plan withholds them (:func:`host_files` does).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from clusterforge.errors import ArtifactError, ClusterforgeError, InventoryError
from clusterforge.pki.pki import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CA_PASSPHRASE_ENV,
    PkiError,
    SubjectFields,
    load_or_create_ca,
)
from clusterforge.pki.published_secrets import published_secret_findings
from clusterforge.plan import services_plan
from clusterforge.plan.artifacts import FetchedArtifact, fetch_engine
from clusterforge.plan.cluster_config import (
    ClusterConfig,
    plan_cluster_config,
    toolkit_security_names,
)
from clusterforge.plan.cluster_pki import (
    CA_COMMON_NAME_SUFFIX,
    ClusterPki,
    ensure_cluster_pki,
    resolve_pki_dir,
)
from clusterforge.plan.cluster_security import render_cluster_security
from clusterforge.plan.console import (
    CONFIG_FILE,
    UNIT_NAME,
    build_consoles,
    console_settings,
    plan_consoles,
    render_console_config,
    render_console_unit,
)
from clusterforge.plan.model import (
    PREDEFINED_USER_NAMES,
    SECURITY_PLUGIN_NAME,
    Cluster,
    Node,
    build_cluster,
    heap_megabytes,
    plain_data,
)
from clusterforge.plan.orders_search import (
    DISABLED,
    USERNAME_VARIABLE,
    OrdersSearch,
    index_template,
    plan_for_cluster,
    security_additions,
)
from clusterforge.plan.orders_search import TEMPLATE_NAME as ORDERS_TEMPLATE_NAME
from clusterforge.plan.plugins import check_plugin, fetch_plugin, fetch_security_plugin
from clusterforge.plan.render import (
    ADMIN_CERT_FILE,
    NODE_CA_FILE,
    NODE_CERT_FILE,
    NODE_KEY_FILE,
    NODE_TLS_LINK,
    RETIRED_ADMIN_KEY_FILE,
    render_node_files,
)
from clusterforge.plan.rollout import (
    CLUSTER_MANAGER_ROLES,
    Operation,
    Topology,
    TopologyNode,
    plan_batches,
)
from clusterforge.plan.services_plan import plan_services, service_hosts_variables
from clusterforge.plan.snapshot_schedule import complete_schedule
from clusterforge.plan.snapshot_schedule import security_additions as snapshot_security_additions
from clusterforge.plan.snapshot_schedule import snapshot_password as scheduled_snapshot_password
from clusterforge.plan.snapshots import plan_snapshots

DATA_ROLES = frozenset({"data"})
CA_PASSPHRASE_VARIABLE = "opensearch_ca_passphrase"  # noqa: S105 - a variable name
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


def _fetch_artifacts(cluster: Cluster, project_root: Path) -> dict[str, Any]:
    """The engine, the security plugin and every plugin, in the control node's cache, each
    plugin's descriptor checked against the engine version."""
    engine = fetch_engine(cluster.distribution)
    security_plugin = None
    plugins: list[dict[str, Any]] = []
    if not cluster.distribution.bundles_security_plugin:
        security_plugin, security_descriptor = fetch_security_plugin(
            cluster.version, cluster.security.plugin_path
        )
        # Listed with the other plugins so the plugins role installs them all with one
        # opensearch-plugin run (one JVM start; 1.8 s against 2.7 s for the security
        # plugin and one other on a lab node). The security role installs it only if
        # nothing did (a play without the plugins role).
        plugins.append(
            _present_plugin(security_descriptor.name, security_descriptor.version, security_plugin)
        )
    fetched_any = engine.fetched or bool(security_plugin and security_plugin.fetched)
    for spec in cluster.plugins:
        if spec.state == "absent":
            plugins.append({"name": spec.name, "state": "absent"})
            continue
        artifact, descriptor = fetch_plugin(
            spec,
            engine_version=cluster.version,
            engine_archive=engine.path,
            project_root=project_root,
        )
        fetched_any = fetched_any or artifact.fetched
        plugins.append(_present_plugin(spec.name, descriptor.version, artifact))
    return {
        "engine": str(engine.path),
        "security_plugin": str(security_plugin.path) if security_plugin else None,
        "plugins": plugins,
        "fetched": fetched_any,
    }


def _present_plugin(name: str, version: str, artifact: FetchedArtifact) -> dict[str, Any]:
    return {
        "name": name,
        "state": "present",
        "path": str(artifact.path),
        "version": version,
        # Its name on the hosts, under the plugins role's archive directory.
        "archive_name": f"{name}-{version}.zip",
    }


def ca_passphrase(first_host_vars: Mapping[str, Any]) -> bytes | None:
    """The CA passphrase: the (vaulted) variable, else the environment."""
    value = first_host_vars.get(CA_PASSPHRASE_VARIABLE) or os.environ.get(CA_PASSPHRASE_ENV)
    return str(value).encode() if value else None


class DowngradeRefusedError(ClusterforgeError):
    """A node runs a newer engine than the inventory names; the message lists every node."""


# The security plugin's config directory on a node, relative to the config directory.
SECURITY_CONFIG_SUBDIR = "opensearch-security"
SECURITY_PASSWORDS_VARIABLE = "opensearch_security_passwords"
SECURITY_USERS_VARIABLE = "opensearch_security_users"
_WITHHELD = "<withheld: a bcrypt hash; the hosts get the real one>"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-")[0].split(".") if part.isdigit())


def memory_megabytes(meminfo: str | None) -> int | None:
    """MemTotal of a host's /proc/meminfo in MB (as Ansible's memtotal_mb), or None; the
    look at the nodes (clusterforge_observe) reports it for :func:`plan_rollout`."""
    for line in (meminfo or "").splitlines():
        name, _, value = line.partition(":")
        fields = value.split()
        if name == "MemTotal" and fields and fields[0].isdigit():
            return int(fields[0]) // 1024
    return None


def plan_rollout(cluster: Cluster, observed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What the nodes report decides the rollout: first start, a mode switch, upgrades,
    the batches and restart order (:mod:`clusterforge.plan.rollout`: the elected cluster
    manager last), the batches of a scale-in, and a downgrade refused.

    ``observed`` maps inventory names to what a read-only look at each node found
    (playbooks/plan.yml): ``version`` (what ``GET /`` answered, or None), ``active``
    (the service runs), ``formed`` (the node's formed marker exists), ``security_mode``
    (the mode marker's content, or None), ``cluster_manager`` (the elected cluster
    manager's node name, as that node sees it, or None) and ``memory_megabytes`` (the
    host's MemTotal, or None). A node nobody observed is new.

    A heap above half of a host's memory is refused here, before any host changes (the
    other half is the engine's file cache), so the engine play needs no gathered facts.
    """
    heap = heap_megabytes(cluster.heap_size)
    too_small = [
        f"opensearch_heap_size {cluster.heap_size} needs {heap} MB, more than half of "
        f"{name}'s {int(memory)} MB; set opensearch_heap_size to {int(memory) // 2}m or less"
        for name, seen in sorted(observed.items())
        if (memory := (seen or {}).get("memory_megabytes")) and heap * 2 > int(memory)
    ]
    if too_small:
        raise InventoryError(too_small)
    problems = []
    nodes: dict[str, Any] = {}
    manager_names = set()
    for node in cluster.nodes:
        seen = observed.get(node.inventory_name) or {}
        running_version = seen.get("version") or None
        if running_version and _version_key(str(running_version)) > _version_key(cluster.version):
            problems.append(
                f"{node.inventory_name} runs OpenSearch {running_version}, newer than "
                f"opensearch_version {cluster.version}. Downgrades are refused: an index "
                "written by a newer version cannot be read by an older one. Set "
                f"opensearch_version to {running_version} or later."
            )
        if seen.get("cluster_manager"):
            manager_names.add(str(seen["cluster_manager"]))
        active = bool(seen.get("active"))
        nodes[node.inventory_name] = {
            "active": active,
            "running_version": running_version,
            "upgrade": bool(active and running_version and running_version != cluster.version),
        }
    if problems:
        raise DowngradeRefusedError("\n".join(problems))
    mode_switch = any(
        (observed.get(node.inventory_name) or {}).get("security_mode") not in (None, "")
        and str((observed.get(node.inventory_name) or {}).get("security_mode")).strip()
        != cluster.security_mode
        for node in cluster.nodes
    )
    # A node on its way out may be the elected one: the scale-in then moves it last.
    elected = next(
        (
            node.inventory_name
            for node in (*cluster.nodes, *cluster.removed_nodes)
            if node.name in manager_names
        ),
        None,
    )
    upgrading = any(node["upgrade"] for node in nodes.values())
    batches = plan_batches(
        _topology(cluster, cluster.nodes, elected),
        Operation.UPGRADE if upgrading else Operation.RESTART,
    )
    scale_in = None
    if cluster.removed_nodes:
        # The cluster still counts the leaving nodes: they are in the quorum's budget.
        scale_in = plan_batches(
            _topology(cluster, (*cluster.nodes, *cluster.removed_nodes), elected),
            Operation.SCALE_IN,
            [node.inventory_name for node in cluster.removed_nodes],
        ).as_dict()
    return {
        # Any node's marker means the cluster exists: new nodes then join it and never
        # carry cluster.initial_cluster_manager_nodes.
        "first_start": not any(
            (observed.get(node.inventory_name) or {}).get("formed") for node in cluster.nodes
        ),
        # Nodes with and without transport TLS cannot talk to each other, so a mode switch
        # restarts every node at once (a full cluster restart), never one at a time.
        "mode_switch": mode_switch,
        # One node at a time in the batches' order (docs/zones.md): what
        # playbooks/rolling.yml runs in node mode; zone mode runs the batches themselves.
        "restart_order": batches.order,
        "batch_mode": cluster.rolling_batch,
        "batches": batches.as_dict(),
        "scale_in": scale_in,
        "nodes": nodes,
    }


def with_config_restarts(
    rollout: Mapping[str, Any],
    nodes: Mapping[str, Mapping[str, Any]],
    observed: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """``rollout`` with ``nodes[host].config_restart`` for every node: the opensearch.yml
    settings whose change needs a restart of the running node (:func:`settings_needing_restart`),
    between the text the look found on it (``observed[host].opensearch_yml``: None when the
    file is missing, or when nobody looked) and the one roles/opensearch writes (the
    first-start variant while the cluster has not formed). Empty when only start-only
    settings change; ``["opensearch.yml"]`` when there was no file to compare. The role
    records whether a changed opensearch.yml restarts the node from it, and asks nothing
    after the plan.
    """
    config_name = "opensearch.first-start.yml" if rollout["first_start"] else "opensearch.yml"
    return {
        **rollout,
        "nodes": {
            host: {
                **entry,
                "config_restart": settings_needing_restart(
                    (observed.get(host) or {}).get("opensearch_yml"),
                    nodes[host]["files"][config_name],
                ),
            }
            for host, entry in rollout["nodes"].items()
        },
    }


def _topology(cluster: Cluster, nodes: Sequence[Node], elected: str | None) -> Topology:
    return Topology(
        nodes=tuple(
            TopologyNode(name=node.inventory_name, roles=frozenset(node.roles), zone=node.zone)
            for node in nodes
        ),
        batch_mode=cluster.rolling_batch,
        elected=elected,
    )


# What ``security`` holds when the caller asked for no security files: a role that reads
# ``security.files`` from such a plan fails on the missing key instead of placing nothing.
SECURITY_FILES_OMITTED = {
    "omitted": "planned with security_files false: this playbook places no security files"
}


def _security_files(
    first_host_vars: Mapping[str, Any],
    pki: ClusterPki | None,
    orders_search: OrdersSearch | None = None,
    cluster: Cluster | None = None,
    snapshot_password: str | None = None,
) -> dict[str, Any] | None:
    if pki is None:
        return None
    users = list(plain_data(first_host_vars.get(SECURITY_USERS_VARIABLE) or []))
    roles: dict[str, Any] = {}
    role_mappings: dict[str, Any] = {}
    if orders_search is not None:
        _check_orders_user(users, orders_search)
        additions = security_additions(orders_search)
        users.append(additions["user"])
        roles = additions["roles"]
        role_mappings = additions["role_mappings"]
    if snapshot_password is not None:
        additions = snapshot_security_additions(snapshot_password)
        users.append(additions["user"])
        roles = {**roles, **additions["roles"]}
        role_mappings = {**role_mappings, **additions["role_mappings"]}
    return render_cluster_security(
        pki_dir=Path(pki.pki_dir),
        passwords=plain_data(first_host_vars.get(SECURITY_PASSWORDS_VARIABLE) or {}),
        users=users,
        roles=roles,
        role_mappings=role_mappings,
        check_key=pki.hash_check_key,
        audit_failed_logins=cluster.audit_failed_logins if cluster else False,
        auth_failure_limit=cluster.auth_failure_limit if cluster else None,
    )


def _check_orders_user(users: Sequence[Any], orders_search: OrdersSearch) -> None:
    """The order service's user must not take the name of another internal user."""
    taken = {str(user.get("name")) for user in users if isinstance(user, Mapping)}
    if orders_search.username in taken | set(PREDEFINED_USER_NAMES):
        raise InventoryError(
            [
                f"{orders_search.username!r} is the order service's user "
                f"({USERNAME_VARIABLE}) and also a user of opensearch_security_users or a "
                f"predefined user; set {USERNAME_VARIABLE} to another name"
            ]
        )


def _consoles_unfetched(
    cluster: Cluster, consoles_vars: Sequence[tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The console hosts' files without their archive (a review does not download it)."""
    return {
        console.inventory_name: {
            "url": console.url,
            "config_dir": console.config_dir,
            "config_file": f"{console.config_dir}/{CONFIG_FILE}",
            "settings": console_settings(cluster, console),
            "unit": render_console_unit(cluster, console),
        }
        for console in build_consoles(consoles_vars)
    }


# The top-level sections of a plan (build_plan's keys): what with_observed keeps of a
# registered result, which also carries Ansible's own keys (changed, failed, ...).
PLAN_SECTIONS = (
    "cluster",
    "model_warnings",
    "artifacts",
    "security",
    "orders_search",
    "cluster_config",
    "consoles",
    "rollout",
    "removal",
    "groups",
    "services",
    "snapshots",
    "nodes",
)


@dataclasses.dataclass(frozen=True)
class ValidatedInventory:
    """What :func:`validate_inventory` checked, for :func:`build_plan` to go on from.

    ``cluster`` is None only for an inventory without OpenSearch nodes (a services-only
    run of playbooks/services.yml); ``warnings`` are the model's warnings and, for a
    review, what would stop a deploy. ``orders_search`` says whether delivery is on; its
    password may be a placeholder for one still to generate
    (clusterforge.plan.orders_search.NOT_GENERATED), so :func:`build_plan` plans delivery and
    the services' settings again.
    """

    cluster: Cluster | None
    orders_search: OrdersSearch | None
    cluster_config: ClusterConfig
    snapshots: dict[str, Any] | None
    warnings: tuple[str, ...]


# A review (scripts/render, review=True) shows what a deploy would refuse but that says
# nothing about the files it renders: a secret published in this repository (the example
# inventory's), and an archive or CA file missing on the machine it runs on (a review
# often runs elsewhere than the control node). A deploy refuses both.
REVIEW_WARNING_SUFFIX = " (a review shows this; a playbook run refuses it)"


def validate_inventory(
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path | None = None,
    consoles_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    project_root: Path | None = None,
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]] | None = None,
    review: bool = False,
) -> ValidatedInventory:
    """Check the whole inventory on the control node, writing and fetching nothing.

    The first play of every playbook (playbooks/check-inventory.yml) runs this before
    any host is contacted, :func:`build_plan` runs it before it issues a certificate,
    and ``scripts/render`` runs it through :func:`build_plan`: one function decides
    whether an inventory is good. It checks the cluster model, the order delivery, the
    services' settings, the snapshot policy, the console hosts, the CA (its passphrase,
    and an existing CA key is unlocked in memory), the archives that are files on the
    control node (a ``source: file`` plugin's version against the engine's), and that no
    secret is one this repository publishes. Archives that would be downloaded or built
    are checked by the full plan, after every node answered. ``review`` turns a published
    secret and a file missing on this machine into warnings (scripts/render).

    Raises :class:`InventoryError` listing every problem, each naming its variable.
    """
    services_vars = services_vars or {}
    checkout = project_root or services_plan.DEFAULT_PROJECT_ROOT
    inventory_dir = inventory_dir or Path.cwd()
    problems: list[str] = []
    warnings: list[str] = []
    # Refused by a deploy, shown by a review (REVIEW_WARNING_SUFFIX).
    deploy_only: list[str] = []
    published = published_secret_findings(
        [
            *nodes_vars,
            *consoles_vars,
            *(host for hosts in services_vars.values() for host in hosts),
        ]
    )
    deploy_only.extend(published)
    cluster = None
    services_only = not nodes_vars and any(services_vars.values())
    if not services_only:
        try:
            cluster = build_cluster(nodes_vars)
        except InventoryError as error:
            # The rest of the checks read the cluster model; its problems come first.
            raise InventoryError([*error.problems, *deploy_only]) from None
        warnings[:0] = cluster.warnings
    orders_search = None
    snapshots = None
    cluster_config = ClusterConfig(objects={}, prune=False, keep={})
    if cluster is not None:
        try:
            cluster_config = plan_cluster_config(
                nodes_vars[0][1],
                secured=cluster.secured,
                toolkit_names=toolkit_security_names(),
                managed_templates=[{"name": ORDERS_TEMPLATE_NAME, **index_template()}],
            )
        except ClusterforgeError as error:
            problems.extend(_problems_of(error))
    try:
        orders_search = plan_for_cluster(
            cluster,
            service_hosts_variables(
                "order_service", services_vars.get("order_service") or [], checkout=checkout
            ),
            inventory_dir=inventory_dir,
            # The check writes nothing: a password to generate is generated by the plan.
            generate=False,
        )
    except ClusterforgeError as error:
        problems.extend(_problems_of(error))
    try:
        _plan_services(services_vars, project_root, orders_search)
    except ClusterforgeError as error:
        problems.extend(_problems_of(error))
    if cluster is not None:
        first = nodes_vars[0][1]
        try:
            snapshots = plan_snapshots(cluster, first, inventory_dir=inventory_dir)
        except ClusterforgeError as error:
            problems.extend(_problems_of(error))
        deploy_only.extend(_missing_console_files(consoles_vars))
        deploy_only.extend(_missing_local_files(cluster))
        checks: list[Callable[[], None]] = [
            lambda: _check_plugin_zips(cluster),
            lambda: _check_ca(cluster, inventory_dir, ca_passphrase(first)),
        ]
        if orders_search is not None and cluster.secured:
            users = list(plain_data(first.get(SECURITY_USERS_VARIABLE) or []))
            checks.append(lambda: _check_orders_user(users, orders_search))
        for check in checks:
            try:
                check()
            except ClusterforgeError as error:
                problems.extend(_problems_of(error))
    if review:
        warnings.extend(f"{finding}{REVIEW_WARNING_SUFFIX}" for finding in deploy_only)
    else:
        problems.extend(deploy_only)
    if problems:
        raise InventoryError(list(dict.fromkeys(problems)))
    return ValidatedInventory(
        cluster=cluster,
        orders_search=orders_search,
        cluster_config=cluster_config,
        snapshots=snapshots,
        warnings=tuple(warnings),
    )


def _problems_of(error: ClusterforgeError) -> list[str]:
    problems = getattr(error, "problems", None)
    if problems:
        return [str(problem) for problem in problems]
    return [str(error)]


def _missing_console_files(consoles_vars: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """A console archive given as a file must be one on the control node."""
    return [
        f"{console.inventory_name}: dashboards_archive_path {console.archive_path!r} "
        "is not a file on the control node; give the path of the console's archive "
        "there, or set dashboards_archive_url and dashboards_archive_sha512"
        for console in build_consoles(consoles_vars)
        if console.archive_path and not Path(console.archive_path).is_file()
    ]


def _plugin_zips(cluster: Cluster) -> list[tuple[str, str, str]]:
    """(plugin name, path, variable) of every plugin zip that is a file on the control node."""
    zips = [
        (plugin.name, plugin.path or "", f"opensearch_plugins entry {plugin.name!r} (source: file)")
        for plugin in cluster.plugins
        if plugin.source == "file" and plugin.state != "absent"
    ]
    if cluster.security.plugin_path and not cluster.distribution.bundles_security_plugin:
        zips.append(
            (SECURITY_PLUGIN_NAME, cluster.security.plugin_path, "opensearch_security_plugin_path")
        )
    return zips


def _missing_local_files(cluster: Cluster) -> list[str]:
    """The engine archive, the plugin zips and the user's CA that the inventory names as
    files on the control node, and that are not there."""
    missing = []
    distribution = cluster.distribution
    if distribution.source == "file" and not Path(distribution.path or "").is_file():
        missing.append(
            f"opensearch_distribution_path {distribution.path!r} is not a file on the control "
            "node; give the path of the engine's archive there"
        )
    missing.extend(
        f"{variable}: {path!r} is not a file on the control node; fix its path"
        for _, path, variable in _plugin_zips(cluster)
        if not Path(path).is_file()
    )
    security = cluster.security
    if security.ca_cert_path and security.ca_key_path:
        missing.extend(
            f"{variable} {path!r} is not a file on the control node; fix the path"
            for variable, path in (
                ("opensearch_ca_cert_path", security.ca_cert_path),
                ("opensearch_ca_key_path", security.ca_key_path),
            )
            if not Path(path).is_file()
        )
    return missing


def _check_plugin_zips(cluster: Cluster) -> None:
    """Each plugin zip on the control node (``source: file``,
    opensearch_security_plugin_path) holds the plugin it is listed as, built for the
    engine's version. Read where it lies: nothing is copied into the cache here."""
    problems = []
    for name, path, variable in _plugin_zips(cluster):
        if not Path(path).is_file():
            continue  # _missing_local_files names it
        try:
            descriptor = check_plugin(Path(path), cluster.version)
        except ArtifactError as error:
            problems.append(f"{variable}: {error}")
            continue
        if descriptor.name != name:
            problems.append(
                f"{variable}: the zip {path} holds plugin {descriptor.name!r}, not {name!r}; "
                "fix the name or point it at the right zip"
            )
    if problems:
        raise InventoryError(problems)


def _check_ca(cluster: Cluster, inventory_dir: Path, passphrase: bytes | None) -> None:
    """The CA can be used as the inventory describes it, read-only: the passphrase is set
    where clusterforge keeps the CA, and an existing CA key is unlocked in memory (a wrong
    passphrase, a lone CA file, an expired CA fail here, before any host is contacted)."""
    if not cluster.secured:
        return
    security = cluster.security
    pki_dir = resolve_pki_dir(cluster, inventory_dir)
    user_ca = bool(security.ca_cert_path and security.ca_key_path)
    if user_ca:
        if not all(
            Path(str(path)).is_file() for path in (security.ca_cert_path, security.ca_key_path)
        ):
            return  # _missing_local_files names it
    elif not passphrase:
        raise InventoryError(
            [
                f"{CA_PASSPHRASE_VARIABLE} is not set (nor {CA_PASSPHRASE_ENV}); secured "
                f"modes keep the CA key in {pki_dir} encrypted with it: set "
                f"{CA_PASSPHRASE_VARIABLE} in an ansible-vault file"
            ]
        )
    ca_files = [pki_dir / CA_CERT_FILE, pki_dir / CA_KEY_FILE]
    if not user_ca and not any(path.exists() for path in ca_files):
        return  # the full plan creates the CA, after every node answered
    try:
        # With both files present (or a user's CA) this only loads; with one of them it
        # refuses before anything is written.
        load_or_create_ca(
            pki_dir,
            passphrase=passphrase,
            subject=SubjectFields(
                common_name=f"{cluster.name}{CA_COMMON_NAME_SUFFIX}",
                **dict(security.cert_subject),
            ),
            user_ca_cert=Path(security.ca_cert_path or "") if user_ca else None,
            user_ca_key=Path(security.ca_key_path or "") if user_ca else None,
        )
    except PkiError as error:
        raise InventoryError([f"{CA_PASSPHRASE_VARIABLE} / the CA: {error}"]) from None


def build_plan(
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path | None = None,
    consoles_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    observed: Mapping[str, Mapping[str, Any]] | None = None,
    project_root: Path | None = None,
    fetch: bool = True,
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]] | None = None,
    security_files: bool = True,
    review: bool = False,
    preview: bool = False,
) -> dict[str, Any]:
    """Everything the hosts get, from the inventory (and what the nodes report they run).

    :func:`validate_inventory` checks the whole inventory first, so nothing is written
    (no certificate, no cache entry) for an inventory it refuses; ``review`` is passed to
    it (``scripts/render`` warns where a deploy refuses).

    ``security_files=False`` leaves out the security files (``security`` then says so),
    for a playbook that places none (rolling-restart.yml): they need the users' hashes,
    and each kept hash without a matching check record costs a bcrypt check.

    ``fetch=False`` leaves the archives alone (``scripts/render`` reviews files; it does
    not download engines). ``services_vars`` maps each service's group
    (``user_directory``, ``order_service``) to its hosts' variables: their settings are
    validated by the services' own settings models (clusterforge.plan.services_plan), and the
    plan's ``services`` section holds them without their secrets; the service roles
    write the secret-bearing file themselves, with no_log.

    ``preview`` (check mode) decides the ``groups`` section: a preview talks to the
    cluster only through the nodes that run (:func:`plan_groups`).
    """
    if not nodes_vars:
        raise InventoryError(
            ["the inventory group 'opensearch' is empty; add at least one host to it"]
        )
    validated = validate_inventory(
        nodes_vars,
        inventory_dir=inventory_dir,
        consoles_vars=consoles_vars,
        project_root=project_root,
        services_vars=services_vars,
        # A plan that fetches nothing is a review: nothing deploys from it.
        review=review or not fetch,
    )
    cluster = validated.cluster
    if cluster is None:  # validate_inventory builds one whenever there are nodes
        raise InventoryError(["the inventory group 'opensearch' has no usable host"])
    snapshots = validated.snapshots
    cluster_config = validated.cluster_config
    # Again, now generating the order service's password if it has none (the check
    # generated nothing), and the services' settings with it.
    orders_search = plan_for_cluster(
        cluster,
        service_hosts_variables(
            "order_service",
            (services_vars or {}).get("order_service") or [],
            checkout=project_root or services_plan.DEFAULT_PROJECT_ROOT,
        ),
        inventory_dir=inventory_dir or Path.cwd(),
    )
    services = _plan_services(services_vars or {}, project_root, orders_search)
    pki = None
    if cluster.secured:
        pki = ensure_cluster_pki(
            cluster,
            pki_dir=resolve_pki_dir(cluster, inventory_dir or Path.cwd()),
            passphrase=ca_passphrase(nodes_vars[0][1]),
        )
    snapshot_password = None
    if snapshots is not None and snapshots.get("schedule") is not None and pki is not None:
        # Scheduled snapshots (clusterforge.plan.snapshot_schedule): the runner's user,
        # its password generated once on the control node, and what each node gets.
        snapshot_password = scheduled_snapshot_password(inventory_dir or Path.cwd())
        snapshots = {
            **snapshots,
            "schedule": complete_schedule(
                snapshots["schedule"],
                cluster,
                repository=str(snapshots["repository"]),
                ca_file=f"{cluster.config_dir}/{NODE_CA_FILE}",
            ),
        }
    if fetch:
        consoles = plan_consoles(cluster, consoles_vars)
        artifacts = _fetch_artifacts(cluster, project_root or Path.cwd())
    else:
        consoles = _consoles_unfetched(cluster, consoles_vars)
        artifacts = None
    plan: dict[str, Any] = {
        "cluster": cluster_facts(cluster, pki),
        "model_warnings": list(validated.warnings),
        "artifacts": artifacts,
        "security": _security_files(
            nodes_vars[0][1], pki, orders_search, cluster, snapshot_password
        )
        if security_files
        else dict(SECURITY_FILES_OMITTED),
        # Order delivery (docs/orders-search.md): the index template, the user's name and
        # the CA bundle the order_service role copies; never the password.
        "orders_search": orders_search.public() if orders_search else dict(DISABLED),
        # The cluster's own objects declared in the inventory (docs/cluster-config.md).
        "cluster_config": cluster_config.as_plan(),
        "consoles": consoles,
        "rollout": plan_rollout(cluster, observed or {}),
        "removal": plan_removal(cluster, observed or {}),
        "groups": plan_groups(cluster, observed or {}, preview=preview),
        "services": services,
        "snapshots": snapshots,
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
                    "serial": pki.nodes[node.inventory_name].serial,
                    "generation": (pki.generations or {}).get(node.inventory_name, ""),
                },
            }
            for node in cluster.nodes
        },
    }
    if observed is not None:
        # Only a plan that looked at the nodes says what their opensearch.yml needs; without
        # the look the field is absent and roles/opensearch restarts on any change.
        plan["rollout"] = with_config_restarts(plan["rollout"], plan["nodes"], observed)
    return plan


def with_observed(
    plan: Mapping[str, Any],
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    observed: Mapping[str, Mapping[str, Any]],
    *,
    preview: bool = False,
) -> dict[str, Any]:
    """``plan`` (a :func:`build_plan` result) with its rollout, removal and groups decided again
    from what the nodes report; everything else is kept as it was planned.

    playbooks/plan.yml plans before it looks at the nodes (the look needs the plan's
    paths and URLs) and decides the rollout after. Only the rollout and the removal read
    ``observed``, so the second step rebuilds the model and nothing else: the rest of a
    plan costs seconds (a bcrypt check per security user), and no fact moves back.

    The rollout also says, per node, which of its opensearch.yml settings need a restart
    when the file changes (``rollout.nodes[host].config_restart``,
    :func:`with_config_restarts`): the look read the node's current file, so no role calls
    back into the plan to compare it with the one it writes.
    """
    cluster = build_cluster(nodes_vars)
    return {
        **{section: plan[section] for section in PLAN_SECTIONS},
        "rollout": with_config_restarts(plan_rollout(cluster, observed), plan["nodes"], observed),
        "removal": plan_removal(cluster, observed),
        "groups": plan_groups(cluster, observed, preview=preview),
    }


def _plan_services(
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
    project_root: Path | None,
    orders_search: OrdersSearch | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every service host's settings, secrets left out: ``{host: {service: planned}}``."""
    hosts_by_group = {group: [host for host, _ in hosts] for group, hosts in services_vars.items()}
    if not any(hosts_by_group.values()):
        return {}
    hostvars: dict[str, dict[str, Any]] = {}
    for hosts in services_vars.values():
        for host, variables in hosts:
            hostvars.setdefault(host, {}).update(variables)
    planned = plan_services(
        hosts_by_group,
        hostvars,
        checkout=project_root or services_plan.DEFAULT_PROJECT_ROOT,
        orders_search=orders_search,
    )
    return {
        host: {service: settings.as_dict() for service, settings in by_service.items()}
        for host, by_service in planned.items()
    }


def _withhold_hashes(internal_users: str) -> str:
    document = yaml.safe_load(internal_users) or {}
    for name, entry in document.items():
        if name != "_meta" and isinstance(entry, dict) and "hash" in entry:
            entry["hash"] = _WITHHELD
    return str(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))


def host_files(plan: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """For every host, the files it gets (path relative to its config directory, or the
    unit's name), secrets left out: no private key, no password, no bcrypt hash.

    opensearch.yml is the file the node holds after the cluster formed (the first start's
    variant only adds cluster.initial_cluster_manager_nodes; it is written beside it).
    """
    cluster = plan["cluster"]
    pki = cluster["pki"]
    out: dict[str, dict[str, str]] = {}
    for host, node in plan["nodes"].items():
        files = {
            "opensearch.yml": node["files"]["opensearch.yml"],
            "opensearch.first-start.yml": node["files"]["opensearch.first-start.yml"],
            "jvm.options.d/heap.options": node["files"]["heap.options"],
            "opensearch.service": node["files"]["opensearch.service"],
        }
        if pki is not None:
            files[NODE_CA_FILE] = Path(pki["ca_cert"]).read_text()
            files[NODE_CERT_FILE] = Path(node["tls"]["cert"]).read_text()
            if host == cluster["security_init_node"]:
                files[ADMIN_CERT_FILE] = Path(pki["admin_cert"]).read_text()
        security = plan.get("security")
        if security is not None:
            for name, content in security["files"].items():
                if name == "internal_users.yml":
                    content = _withhold_hashes(content)
                files[f"{SECURITY_CONFIG_SUBDIR}/{name}"] = content
        out[host] = files
    for host, console in plan["consoles"].items():
        files = out.setdefault(host, {})
        # Without opensearch.password: the role adds it, the review copy never has it.
        files[CONFIG_FILE] = render_console_config(console["settings"], None)
        files[UNIT_NAME] = console["unit"]
    for host, by_service in plan.get("services", {}).items():
        files = out.setdefault(host, {})
        for settings in by_service.values():
            files[settings["file_name"]] = settings["public_content"]
    return out


def restart_reasons(
    plan: Mapping[str, Any], host: str, changes: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Why a node restarts in the rolling play: the changes recorded for it this run and
    a pending upgrade. A node that was not running started with its new files already,
    and a mode switch restarted every node at once, so neither restarts here."""
    rollout = plan["rollout"]
    node = rollout["nodes"][host]
    if not node["active"] or rollout["mode_switch"]:
        return []
    # With hot reload the node loads new certificate files by itself (roles/certificates
    # swaps them in whole); they are no reason to restart. A change recorded with
    # restart: false (seed hosts only, read at start) is shown, never restarted for.
    reloadable = {"certificates"} if (plan["cluster"].get("pki") or {}).get("hot_reload") else set()
    reasons = [
        str(change["reason"])
        for change in changes
        if change.get("host") == host
        and change.get("restart", True)
        and change.get("reason") not in reloadable
    ]
    if node["upgrade"]:
        reasons.append(f"upgrade {node['running_version']} -> {plan['cluster']['version']}")
    return list(dict.fromkeys(reasons))


def rolling_batches(
    plan: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    hosts: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The batches playbooks/rolling.yml restarts with ``opensearch_rolling_batch: zone``:
    the plan's batches (``rollout.batches``, in order), each keeping only the nodes that
    have a reason to restart (:func:`restart_reasons` over ``changes``, every host's
    recorded changes together); a batch left with none is dropped. Each batch gains
    ``reasons``, ``{node: its reasons}``, for the play to say why. ``hosts`` (the play's
    hosts: ``--limit``, or hosts failed before) keeps only those: the play cuts its host
    list into batches by their sizes, so a batch must not name a host the play lacks.

    Empty in node mode: its play restarts ``rollout.restart_order`` one node at a time, as
    it did before batches existed."""
    return _batches_restarting(plan["rollout"], _restarts(plan, changes), hosts)


def _restarts(
    plan: Mapping[str, Any], changes: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """``{node: its reasons}`` for the nodes that restart (:func:`restart_reasons`)."""
    return {
        name: why
        for name in plan["rollout"]["nodes"]
        if (why := restart_reasons(plan, name, changes))
    }


def _batches_restarting(
    rollout: Mapping[str, Any], restarts: Mapping[str, list[str]], hosts: Sequence[str] | None
) -> list[dict[str, Any]]:
    """The zone-mode batches cut down to the nodes in ``restarts`` (and in ``hosts``)."""
    if rollout.get("batch_mode") != "zone":
        return []
    batches = []
    for batch in rollout["batches"]["batches"]:
        reasons = {
            name: restarts[name]
            for name in batch["nodes"]
            if name in restarts and (hosts is None or name in hosts)
        }
        if reasons:
            batches.append({**batch, "nodes": list(reasons), "reasons": reasons})
    return batches


def with_restarts(
    plan: Mapping[str, Any],
    changes: Sequence[Mapping[str, Any]],
    hosts: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``plan`` with the rolling play's restart decision added to its rollout; everything
    else is kept as it was planned and decided.

    ``changes`` are the changes every host recorded this run (``{host, reason, restart}``,
    ``__clusterforge_changes`` of the play's hosts together), ``hosts`` the play's hosts
    (``--limit``, or hosts failed before). The rollout gains ``restarts``,
    ``{node: its reasons}`` for the nodes with a reason (:func:`restart_reasons`), and
    ``restart_batches``, the batches zone mode restarts (:func:`rolling_batches`; empty in
    node mode). playbooks/rolling.yml asks once, after the roles ran, and reads both: the
    plan stays the one producer of what a node does, and no play asks a filter again.
    """
    rollout = plan["rollout"]
    # Each node's reasons are decided once and serve both answers.
    restarts = _restarts(plan, changes)
    return {
        # A registered result also carries Ansible's own keys (changed, failed, ...).
        **{section: plan[section] for section in PLAN_SECTIONS if section in plan},
        "rollout": {
            **rollout,
            "restarts": restarts,
            "restart_batches": _batches_restarting(rollout, restarts, hosts),
        },
    }


# Read only when a node starts (discovery) or when the cluster first forms: a running node
# never rereads them, so a change to them alone is no reason to restart it. Scale out and
# in change discovery.seed_hosts on every node; restarting the whole cluster for it would
# defeat the point.
START_ONLY_SETTINGS = frozenset({"discovery.seed_hosts", "cluster.initial_cluster_manager_nodes"})


def settings_needing_restart(old_text: str | None, new_text: str) -> list[str]:
    """The opensearch.yml settings whose change needs a restart of a running node: every
    changed key but the start-only ones. A missing or unreadable old file needs one."""
    try:
        old = yaml.safe_load(old_text or "")
    except yaml.YAMLError:
        old = None
    new = yaml.safe_load(new_text) or {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ["opensearch.yml"]
    changed = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
    return [key for key in changed if key not in START_ONLY_SETTINGS]


class RemovalRefusedError(ClusterforgeError):
    """Removing the nodes marked absent would cost the cluster its quorum or its replicas."""


def _observed_cluster(
    observed: Mapping[str, Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The cluster's members (name, roles) and its indices' settings (None when they could
    not be read), as the first running node that answered reports them
    (playbooks/plan.yml, the clusterforge_observe action)."""
    for seen in observed.values():
        members = (seen or {}).get("cluster_nodes")
        if members:
            settings = seen.get("index_settings")
            return [dict(member) for member in members], (
                dict(settings) if isinstance(settings, Mapping) else None
            )
    return [], {}


def _replicas_needed(index_settings: Mapping[str, Any]) -> tuple[int, str | None]:
    """The most data nodes an index needs (number_of_replicas + 1), and which index.
    Indices with auto_expand_replicas adapt to the nodes there are and need none."""
    most, which = 1, None
    for index, entry in sorted(index_settings.items()):
        settings = entry.get("settings") or {} if isinstance(entry, Mapping) else {}
        auto_expand = str(settings.get("index.auto_expand_replicas", "false")).lower()
        if auto_expand not in ("false", "none", ""):
            continue
        needed = int(settings.get("index.number_of_replicas", 1)) + 1
        if needed > most:
            most, which = needed, index
    return most, which


# The groups of a run (playbooks/plan.yml puts the hosts in them once). Every play but
# decommission.yml's targets the nodes that stay; the plays that talk to the cluster's API
# target those it answers on.
PRESENT_GROUP = "opensearch_present"
SERVING_GROUP = "opensearch_serving"
REMOVED_GROUP = "opensearch_removed"


def plan_groups(
    cluster: Cluster, observed: Mapping[str, Mapping[str, Any]], *, preview: bool = False
) -> dict[str, list[str]]:
    """The run's groups of OpenSearch hosts, in inventory order, decided once here so that
    no play guards host by host: the nodes that stay (every node not marked
    ``opensearch_node_state: absent``), the nodes the cluster's API is reached through
    (the same in a run; in a preview, which starts nothing, those that run now), and the
    nodes marked absent (decommission.yml drains them)."""
    present = [node.inventory_name for node in cluster.nodes]
    serving = [host for host in present if not preview or (observed.get(host) or {}).get("active")]
    return {
        PRESENT_GROUP: present,
        SERVING_GROUP: serving,
        REMOVED_GROUP: [node.inventory_name for node in cluster.removed_nodes],
    }


def plan_removal(cluster: Cluster, observed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The nodes marked ``opensearch_node_state: absent``, and the refusal, before any
    host changes, of a removal that would leave fewer than a quorum of the cluster
    managers the cluster has now, or fewer data nodes than its indices' replicas need.

    The cluster's own view (its members and index settings, observed from a running node)
    decides; without one (nothing runs) nothing can be lost and the removal is allowed.
    ``via`` is a present, running node through which the drain's API calls go.
    """
    removed = cluster.removed_nodes
    members, index_settings = _observed_cluster(observed)
    member_roles = {
        str(member["name"]): [str(role) for role in member.get("roles") or []] for member in members
    }
    leaving = [node for node in removed if node.name in member_roles]
    problems = []
    if leaving:
        hosts = ", ".join(node.inventory_name for node in leaving)

        def has_role(name: str, wanted: frozenset[str]) -> bool:
            return bool(wanted.intersection(member_roles[name]))

        managers = [name for name in member_roles if has_role(name, CLUSTER_MANAGER_ROLES)]
        managers_left = [name for name in managers if name not in {n.name for n in leaving}]
        quorum = len(managers) // 2 + 1
        if managers and len(managers_left) < quorum:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) would leave "
                f"{len(managers_left)} of the cluster's {len(managers)} cluster-manager-eligible "
                f"nodes, fewer than a quorum of {quorum}: set opensearch_node_state: present on "
                f"{quorum - len(managers_left)} of them, or add cluster-manager-eligible nodes "
                "first and remove these in a later run."
            )
        data = [name for name in member_roles if has_role(name, DATA_ROLES)]
        data_left = [name for name in data if name not in {n.name for n in leaving}]
        if index_settings is None:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) needs the indices' "
                "number_of_replicas, and the cluster did not answer GET /_settings: rerun "
                "when it answers."
            )
        needed, index = _replicas_needed(index_settings or {})
        if len(data_left) < needed:
            problems.append(
                f"removing {hosts} (opensearch_node_state: absent) would leave "
                f"{len(data_left)} data node(s), and index {index} needs {needed} "
                f"(number_of_replicas + 1): lower that index's number_of_replicas, or add "
                "data nodes first, or set opensearch_node_state: present on some of these hosts."
            )
    if problems:
        raise RemovalRefusedError("\n".join(problems))
    running = [
        node.inventory_name
        for node in cluster.nodes
        if (observed.get(node.inventory_name) or {}).get("active")
    ]
    zones_leaving = sorted({str(node.zone) for node in removed if node.zone} - set(cluster.zones))
    names = [node.name for node in removed]
    return {
        "nodes": {
            node.inventory_name: {
                "name": node.name,
                "member": node.name in member_roles,
                "cluster_manager_eligible": node.cluster_manager_eligible,
            }
            for node in removed
        },
        "names": names,
        "via": running[0] if running else None,
        "zones_leaving": zones_leaving,
        "drain_settings": drain_settings(names, zones_leaving),
    }


# Allocation awareness counts a zone while any node of it is in the cluster, excluded or
# not: with a whole zone leaving, the zones that stay may not take its copies (6 copies
# over 3 zones allow 2 a zone, and the staying zones already hold 2 each), so the drain
# would wait forever (seen removing zone-c of a 9-node lab). The drain pauses awareness
# instead; cleanup.yml lifts the pause once the zone's nodes have left, and the engine
# spreads the copies over the staying zones again.
AWARENESS_PAUSE = {"cluster.routing.allocation.awareness.attributes": ""}


def drain_settings(names: Sequence[str], zones_leaving: Sequence[str]) -> dict[str, str]:
    """The persistent settings the drain sets (roles/opensearch_decommission): the nodes'
    exclusion, and a pause of allocation awareness when whole zones leave. cleanup.yml
    resets each of them once the nodes have left."""
    settings = {"cluster.routing.allocation.exclude._name": ",".join(names)}
    if zones_leaving:
        settings.update(AWARENESS_PAUSE)
    return settings
