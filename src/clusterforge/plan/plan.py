"""The plan: everything the hosts get, computed from the inventory alone.

:func:`build_plan` is the one function behind both the ``clusterforge_plan`` action
(playbooks/plan.yml) and ``scripts/render``. It only assembles: each section of the plan
comes from the module of its concern, computed once per call.

============== ============================================================
section        planned by
============== ============================================================
(validation)   :mod:`clusterforge.plan.validation` (the model, the order
               delivery, the services' settings, the cluster's objects, the
               snapshot policy: each planned there once, and reused here)
cluster, nodes :mod:`clusterforge.plan.cluster.cluster_facts`
artifacts      :func:`clusterforge.plan.cluster.plugins.fetch_artifacts`
security       :func:`clusterforge.plan.cluster_security.plan_security_files`
orders_search  :mod:`clusterforge.plan.services.orders_search`
cluster_config :mod:`clusterforge.plan.cluster_config`
consoles       :mod:`clusterforge.plan.cluster.console`
rollout        :mod:`clusterforge.plan.cluster.restarts` (batches:
               :mod:`clusterforge.plan.cluster.rollout`)
removal,groups :mod:`clusterforge.plan.cluster.removal`
services       :mod:`clusterforge.plan.services.services_plan`
postgresql_tls :func:`clusterforge.plan.services.services_database.server_tls`
snapshots      :mod:`clusterforge.plan.snapshots.snapshots`
lifecycle      :mod:`clusterforge.plan.lifecycle.lifecycle`
monitoring     :mod:`clusterforge.plan.monitoring.monitoring_host` (the files:
               :mod:`clusterforge.plan.monitoring.monitoring`)
============== ============================================================

A new section is one entry of the ``plan`` dict in :func:`build_plan` (and one name in
:data:`PLAN_SECTIONS`); an inventory check it needs goes in
:func:`clusterforge.plan.validation.validate_inventory`, whose result carries what it
planned so that nothing is planned twice.

The order service's delivery into the cluster (``orders_search``,
clusterforge.plan.services.orders_search): the user and roles go into the security files, the index
template into ``orders_search``, and the settings into ``services``; the user's password
goes only into the service's settings file, which its role writes.

Nothing secret is in the plan but the files that must hold one: passwords are validated
and turned into bcrypt hashes here, and the CA passphrase only unlocks the CA key in
memory. The security files hold hashes and each service host's ``services`` entry its
settings file (``content``: tokens, a database URL, the delivery's password), which its
role copies (0600) as the nodes' roles copy ``nodes``; the monitoring's files and the
timers' credentials files (``snapshots.schedule.files``, ``lifecycle.files``) are
entries marked ``secret``. So the action's result is no_log, and whoever shows the plan
withholds them (:func:`host_files` writes ``public_content`` and none of those).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.cluster_facts import cluster_facts, node_facts
from clusterforge.plan.cluster.cluster_pki import ca_passphrase, ensure_cluster_pki, resolve_pki_dir
from clusterforge.plan.cluster.console import (
    CONFIG_FILE,
    UNIT_NAME,
    consoles_unfetched,
    plan_consoles,
    render_console_config,
)
from clusterforge.plan.cluster.host_certificates import issuing_ca_of_cluster
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.plugins import fetch_artifacts
from clusterforge.plan.cluster.removal import plan_groups, plan_removal
from clusterforge.plan.cluster.render import ADMIN_CERT_FILE, NODE_CA_FILE, NODE_CERT_FILE
from clusterforge.plan.cluster.restarts import plan_rollout, restart_decision, with_config_restarts
from clusterforge.plan.cluster_security import (
    SECURITY_CONFIG_SUBDIR,
    SECURITY_FILES_OMITTED,
    plan_security_files,
    withhold_hashes,
)
from clusterforge.plan.lifecycle.lifecycle import (
    complete_lifecycle,
    lifecycle_password,
    lifecycle_removal,
)
from clusterforge.plan.lifecycle.lifecycle import toolkit_user as lifecycle_toolkit_user
from clusterforge.plan.monitoring.monitoring import plan_monitoring_user
from clusterforge.plan.monitoring.monitoring_host import plan_monitoring_host
from clusterforge.plan.security.ldap import ldap_facts
from clusterforge.plan.services.orders_search import DISABLED
from clusterforge.plan.snapshots.snapshot_schedule import complete_schedule, schedule_removal
from clusterforge.plan.snapshots.snapshot_schedule import (
    snapshot_password as scheduled_snapshot_password,
)
from clusterforge.plan.snapshots.snapshots import plan_restore, plan_restore_snapshot
from clusterforge.plan.validation import validate_inventory

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
    "postgresql_tls",
    "snapshots",
    "lifecycle",
    "timer_removal",
    "monitoring",
    "nodes",
    "converge_digest",
)


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
    monitoring_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    checked_services: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    database_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    monitoring_source: Any = None,
    renew_monitoring: bool = False,
    renew_node_exporters: bool = False,
) -> dict[str, Any]:
    """Everything the hosts get, from the inventory (and what the nodes report they run).

    :func:`clusterforge.plan.validation.validate_inventory` checks the whole inventory
    first, so nothing is written (no certificate, no cache entry, no generated password)
    for an inventory it refuses; ``review`` is passed to it (``scripts/render`` warns where
    a deploy refuses). What it planned (the model, the order delivery, the services'
    settings, the cluster's objects, the snapshot policy) is used as it is.

    ``security_files=False`` leaves out the security files (``security`` then says so),
    for a playbook that places none (rolling_restart.yml): they need the users' hashes,
    and each kept hash without a matching check record costs a bcrypt check.

    ``fetch=False`` leaves the archives alone (``scripts/render`` reviews files; it does
    not download engines). ``services_vars`` maps each service's group
    (``user_directory``, ``order_service``) to its hosts' variables: their settings are
    validated by the services' own settings models (clusterforge.plan.services.services_plan), and
    the plan's ``services`` section holds them: each host's settings file (``content``) and
    its public form. ``checked_services`` is the ``services`` the inventory check of the
    same run returned: with it they are not validated a second time
    (:func:`clusterforge.plan.validation.validate_inventory`). ``database_vars``: the
    group postgresql's hosts, whose first one a service on PostgreSQL connects to.

    ``preview`` (check mode) decides the ``groups`` section: a preview talks to the
    cluster only through the nodes that run (:func:`clusterforge.plan.cluster.removal.plan_groups`).

    ``monitoring_source`` (a clusterforge.plan.cluster.host_variables.HostSource of the same
    inventory: the monitoring reads every host's address and the services' proxies) plans
    the ``monitoring`` section
    (:func:`clusterforge.plan.monitoring.monitoring_host.plan_monitoring_host`), None without it or
    without a monitoring host; ``renew_monitoring`` and ``renew_node_exporters`` issue its
    certificates again now (playbooks/rotate_certs.yml).
    """
    if not nodes_vars:
        raise InventoryError(
            ["the inventory group 'opensearch' is empty; add at least one host to it"]
        )
    inventory_dir = inventory_dir or Path.cwd()
    validated = validate_inventory(
        nodes_vars,
        inventory_dir=inventory_dir,
        consoles_vars=consoles_vars,
        project_root=project_root,
        services_vars=services_vars,
        # A plan that fetches nothing is a review: nothing deploys from it.
        review=review or not fetch,
        generate=True,
        checked_services=checked_services,
        database_vars=database_vars,
        monitoring_vars=monitoring_vars,
    )
    cluster = validated.cluster
    if cluster is None:  # validate_inventory builds one whenever there are nodes
        raise InventoryError(["the inventory group 'opensearch' has no usable host"])
    orders_search = validated.orders_search
    pki = None
    if cluster.secured:
        pki = ensure_cluster_pki(
            cluster,
            pki_dir=resolve_pki_dir(cluster, inventory_dir),
            passphrase=ca_passphrase(nodes_vars[0][1]),
        )
    looked = observed is not None
    observed = observed or {}
    nodes = node_facts(cluster, pki)
    snapshots = validated.snapshots
    snapshot_password = None
    if snapshots is not None and snapshots.get("schedule") is not None and pki is not None:
        # Scheduled snapshots (clusterforge.plan.snapshots.snapshot_schedule): the runner's user,
        # its password generated once on the control node, and what each node gets.
        snapshot_password = scheduled_snapshot_password(inventory_dir)
        snapshots = {
            **snapshots,
            "schedule": complete_schedule(
                snapshots["schedule"],
                cluster,
                repository=str(snapshots["repository"]),
                ca_file=f"{cluster.config_dir}/{NODE_CA_FILE}",
                password=snapshot_password,
            ),
        }
    # The monitoring's exporter user (docs/monitoring.md), planned once: the security
    # files hold its hash, the monitoring host's environment files its password.
    monitoring_user = plan_monitoring_user(cluster, monitoring_vars, inventory_dir=inventory_dir)
    monitoring = None
    if monitoring_source is not None and pki is not None:
        monitoring = plan_monitoring_host(
            monitoring_source,
            cluster=cluster,
            nodes_vars=nodes_vars,
            user=monitoring_user,
            ca=issuing_ca_of_cluster(
                cluster,
                pki_dir=resolve_pki_dir(cluster, inventory_dir),
                passphrase=ca_passphrase(nodes_vars[0][1]),
            ),
            inventory_dir=inventory_dir,
            renew=renew_monitoring,
            renew_node_exporters=renew_node_exporters,
        )
    lifecycle = validated.lifecycle
    lifecycle_rows = []
    if lifecycle is not None and pki is not None:
        # The index lifecycle (clusterforge.plan.lifecycle.lifecycle): the runner's engine user, its
        # password generated once on the control node, and what each eligible node gets.
        runner_password = lifecycle_password(inventory_dir)
        lifecycle_rows.append(lifecycle_toolkit_user(lifecycle, runner_password))
        lifecycle = complete_lifecycle(
            lifecycle,
            cluster,
            ca_file=f"{cluster.config_dir}/{NODE_CA_FILE}",
            password=runner_password,
        )
    # Only a plan that looked at the nodes says what their opensearch.yml needs; without
    # the look the field is absent and roles/opensearch restarts on any change.
    rollout = (
        with_config_restarts(plan_rollout(cluster, observed), nodes, observed)
        if looked
        else plan_rollout(cluster, observed)
    )
    plan: dict[str, Any] = {
        "cluster": {
            **cluster_facts(cluster, pki),
            # The directory (docs/ldap.md): its CA certificate, read here on the control node.
            "ldap": ldap_facts(
                cluster.ldap,
                config_dir=cluster.config_dir,
                state_dir=cluster.state_dir,
                inventory_dir=inventory_dir,
            ),
        },
        "model_warnings": list(validated.warnings),
        "artifacts": fetch_artifacts(cluster, project_root or Path.cwd()) if fetch else None,
        "security": plan_security_files(
            nodes_vars[0][1],
            pki,
            orders_search,
            cluster,
            monitoring_user,
            snapshot_password,
            lifecycle_rows,
        )
        if security_files
        else dict(SECURITY_FILES_OMITTED),
        # Order delivery (docs/orders-search.md): the index template, the user's name and
        # the CA bundle the order_service role copies; never the password.
        "orders_search": orders_search.public() if orders_search else dict(DISABLED),
        # The cluster's own objects declared in the inventory (docs/cluster-config.md).
        "cluster_config": validated.cluster_config.as_plan(),
        "consoles": plan_consoles(cluster, consoles_vars)
        if fetch
        else consoles_unfetched(cluster, consoles_vars),
        "rollout": rollout,
        "removal": plan_removal(
            cluster, observed, awareness_paused=rollout["awareness_pause"]["pause"]
        ),
        "groups": plan_groups(cluster, observed, preview=preview),
        "services": validated.services,
        # The db server's TLS settings, from the cluster's TLS profile (roles/postgresql).
        "postgresql_tls": validated.postgresql_tls,
        "snapshots": snapshots,
        # The index lifecycle's timer (docs/lifecycle.md), None without policies.
        "lifecycle": lifecycle,
        # What a node that runs neither timer (any more) has removed: always planned, as a
        # schedule or the policies removed leave the timers on the nodes until then.
        "timer_removal": {
            "snapshots": schedule_removal(),
            "lifecycle": lifecycle_removal(),
        },
        # The monitoring host's files and every node exporter's (docs/monitoring.md), with
        # their certificates and keys and the web password: no_log, as the whole plan is.
        "monitoring": monitoring,
        "nodes": nodes,
        # The converge gate's digest (clusterforge.plan.converged): the action that runs
        # this puts it in once the look at the nodes has decided the rollout; a plan that
        # has not looked skips nothing.
        "converge_digest": "",
    }
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
    rollout = with_config_restarts(plan_rollout(cluster, observed), plan["nodes"], observed)
    return {
        **{section: plan[section] for section in PLAN_SECTIONS},
        "rollout": rollout,
        "removal": plan_removal(
            cluster, observed, awareness_paused=rollout["awareness_pause"]["pause"]
        ),
        "groups": plan_groups(cluster, observed, preview=preview),
    }


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
    ``{node: its reasons}`` for the nodes with a reason
    (:func:`clusterforge.plan.cluster.restarts.restart_reasons`), and ``restart_batches``, the
    batches zone mode restarts (:func:`clusterforge.plan.cluster.restarts.rolling_batches`; empty
    in node mode). playbooks/rolling.yml asks once, after the roles ran, and reads both: the
    plan stays the one producer of what a node does, and no play asks a filter again.
    """
    return {
        # A registered result also carries Ansible's own keys (changed, failed, ...).
        **{section: plan[section] for section in PLAN_SECTIONS if section in plan},
        "rollout": restart_decision(plan, changes, hosts),
    }


def with_restore(
    plan: Mapping[str, Any], snapshot: str, snapshot_indices: Sequence[str], requested: Any
) -> dict[str, Any]:
    """``plan`` with the restore's decision in ``snapshots.restore`` (which indices, the
    unknown ones refused: :func:`clusterforge.plan.snapshots.snapshots.plan_restore`); everything
    else is kept as it was planned. playbooks/restore.yml asks once it has read the
    snapshot's indices."""
    snapshots = plan.get("snapshots") or {}
    return {
        **{section: plan[section] for section in PLAN_SECTIONS if section in plan},
        "snapshots": {
            **snapshots,
            # The snapshot with_restore_snapshot chose stays beside the indices.
            "restore": {
                **(snapshots.get("restore") or {}),
                **plan_restore(snapshot, snapshot_indices, requested),
            },
        },
    }


def with_restore_snapshot(
    plan: Mapping[str, Any], requested: str, snapshots: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``plan`` with the snapshot a restore reads in ``snapshots.restore.snapshot``
    (``latest`` resolved to the newest successful one of ``snapshots``, the repository's
    list: :func:`clusterforge.plan.snapshots.snapshots.plan_restore_snapshot`); everything else is
    kept as it was planned. playbooks/restore.yml asks before it reads the snapshot."""
    planned_snapshots = plan.get("snapshots") or {}
    return {
        **{section: plan[section] for section in PLAN_SECTIONS if section in plan},
        "snapshots": {
            **planned_snapshots,
            "restore": plan_restore_snapshot(
                requested, snapshots, repository=planned_snapshots.get("repository")
            ),
        },
    }


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
                    content = withhold_hashes(content)
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
