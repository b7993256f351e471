"""One function decides whether an inventory is good: :func:`validate_inventory`.

The first play of every playbook (playbooks/check_inventory.yml) runs it before any host
is contacted, :func:`clusterforge.plan.plan.build_plan` runs it first (and goes on from
what it planned: nothing is planned twice), and ``scripts/render`` runs it through
``build_plan``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from clusterforge.errors import ArtifactError, ClusterforgeError, InventoryError
from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CA_PASSPHRASE_ENV,
    PkiError,
    SubjectFields,
)
from clusterforge.pki.published_secrets import published_secret_findings
from clusterforge.plan.cluster.cluster_pki import (
    CA_COMMON_NAME_SUFFIX,
    CA_PASSPHRASE_VARIABLE,
    ca_passphrase,
    resolve_pki_dir,
)
from clusterforge.plan.cluster.console import build_consoles
from clusterforge.plan.cluster.model import SECURITY_PLUGIN_NAME, Cluster, build_cluster, plain_data
from clusterforge.plan.cluster.plugins import check_plugin
from clusterforge.plan.cluster_config import (
    ClusterConfig,
    plan_cluster_config,
    toolkit_security_names,
)
from clusterforge.plan.cluster_security import SECURITY_USERS_VARIABLE, check_orders_user
from clusterforge.plan.lifecycle.lifecycle import plan_lifecycle
from clusterforge.plan.monitoring.monitoring import check_monitoring
from clusterforge.plan.security.ldap import ca_problems as ldap_ca_problems
from clusterforge.plan.security.tls_profile import default_profile
from clusterforge.plan.services import services_plan
from clusterforge.plan.services.orders_search import TEMPLATE_NAME as ORDERS_TEMPLATE_NAME
from clusterforge.plan.services.orders_search import (
    OrdersSearch,
    index_template,
    plan_for_cluster,
    with_generated_password,
)
from clusterforge.plan.services.services_database import (
    database_server,
    server_tls,
    with_database_passwords,
)
from clusterforge.plan.services.services_plan import (
    plan_services_section,
    section_covers,
    service_hosts_variables,
    with_search_password,
)
from clusterforge.plan.services.tls_proxy import plan_tls_proxies
from clusterforge.plan.snapshots.snapshots import plan_snapshots


@dataclasses.dataclass(frozen=True)
class ValidatedInventory:
    """What :func:`validate_inventory` checked and planned, for
    :func:`clusterforge.plan.plan.build_plan` to go on from without planning it again.

    ``cluster`` is None only for an inventory without OpenSearch nodes (a services-only
    run of playbooks/services.yml); ``warnings`` are the model's warnings and, for a
    review, what would stop a deploy. ``orders_search`` says whether delivery is on; its
    password is a placeholder (clusterforge.plan.services.orders_search.NOT_GENERATED) unless the
    check ran with ``generate``. ``services`` is the plan's ``services`` section,
    ``{host: {service: settings}}``, planned with that delivery: each host's settings
    file (``content``, secrets included: whoever shows it withholds it) besides its
    public form.
    """

    cluster: Cluster | None
    orders_search: OrdersSearch | None
    cluster_config: ClusterConfig
    snapshots: dict[str, Any] | None
    warnings: tuple[str, ...]
    services: dict[str, dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    # The index lifecycle (clusterforge.plan.lifecycle.lifecycle), None without policies.
    lifecycle: dict[str, Any] | None = None
    # The db server's TLS settings, from the cluster's TLS profile (the default profile
    # without OpenSearch nodes): clusterforge.plan.services.services_database.server_tls.
    postgresql_tls: dict[str, str] = dataclasses.field(default_factory=dict)
    # Each service host's TLS proxy, {host: what roles/tls_proxy copies}
    # (clusterforge.plan.services.tls_proxy.plan_tls_proxies); a host without a proxy is absent.
    tls_proxies: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


_T = TypeVar("_T")

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
    generate: bool = False,
    checked_services: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    database_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    monitoring_vars: Sequence[tuple[str, Mapping[str, Any]]] = (),
    service_addresses: Mapping[str, str] | None = None,
) -> ValidatedInventory:
    """Check the whole inventory on the control node, writing and fetching nothing.

    The first play of every playbook (playbooks/check_inventory.yml) runs this before
    any host is contacted, :func:`clusterforge.plan.plan.build_plan` runs it before it
    issues a certificate, and ``scripts/render`` runs it through ``build_plan``: one
    function decides whether an inventory is good. It checks the cluster model, the order
    delivery, the services' settings, the snapshot policy, the console hosts, the CA (its
    passphrase, and an existing CA key is unlocked in memory), the archives that are files
    on the control node (a ``source: file`` plugin's version against the engine's), and
    that no secret is one this repository publishes. Archives that would be downloaded or
    built are checked by the full plan, after every node answered. ``review`` turns a
    published secret and a file missing on this machine into warnings (scripts/render).

    ``generate`` (``build_plan``) reads or generates the order service's password once
    every other check passed, so the services' settings are planned once, with it; without
    it nothing is written and they are checked with a placeholder.

    ``checked_services`` is the ``services`` an earlier check of the same run returned
    (playbooks/check_inventory.yml keeps it for playbooks/plan.yml): when it holds every
    service host of ``services_vars``, the services' settings are not validated again,
    only given the delivery's real password
    (:func:`clusterforge.plan.services.services_plan.with_search_password`), so a ``site.yml`` run
    validates each service host's settings once. ``database_vars`` is the group
    postgresql's hosts' variables: a service host on PostgreSQL gets its URL from the
    first one (clusterforge.plan.services.services_database), its password generated with
    ``generate`` (a placeholder without). ``monitoring_vars`` is the group monitoring's
    host with its ``monitoring_*`` variables
    (clusterforge.plan.monitoring.monitoring.check_monitoring). ``service_addresses`` maps a service
    host to its ``ansible_host``: the URLs and the certificate names of its TLS proxy, planned here
    (``tls_proxies``).

    Raises :class:`InventoryError` listing every problem, each naming its variable.
    """
    services_vars = services_vars or {}
    inventory_dir = inventory_dir or Path.cwd()
    problems: list[str] = []
    warnings: list[str] = []
    # Refused by a deploy, shown by a review (REVIEW_WARNING_SUFFIX).
    deploy_only = published_secret_findings(
        [
            *nodes_vars,
            *consoles_vars,
            *(host for hosts in services_vars.values() for host in hosts),
        ]
    )
    cluster = None
    if nodes_vars or not any(services_vars.values()):
        try:
            cluster = build_cluster(nodes_vars)
        except InventoryError as error:
            # The rest of the checks read the cluster model; its problems come first.
            raise InventoryError([*error.problems, *deploy_only]) from None
        warnings[:0] = cluster.warnings
    cluster_config = ClusterConfig(objects={}, prune=False, keep={})
    if cluster is not None:
        cluster_config = _collect(
            problems, lambda: _cluster_config(cluster, nodes_vars), cluster_config
        )
    orders_search = _collect(
        problems,
        lambda: plan_for_cluster(
            cluster,
            service_hosts_variables(
                "order_service",
                services_vars.get("order_service") or [],
                checkout=project_root or services_plan.DEFAULT_PROJECT_ROOT,
            ),
            inventory_dir=inventory_dir,
            # A password to generate is generated below, once every check passed.
            generate=False,
        ),
        None,
    )
    snapshots = None
    lifecycle = None
    if cluster is not None:
        snapshots = _collect(
            problems,
            lambda: plan_snapshots(cluster, nodes_vars[0][1], inventory_dir=inventory_dir),
            None,
        )
        lifecycle = _collect(
            problems,
            lambda: plan_lifecycle(cluster, nodes_vars[0][1], inventory_dir=inventory_dir),
            None,
        )
        deploy_only.extend(_missing_console_files(consoles_vars))
        deploy_only.extend(_missing_local_files(cluster))
        deploy_only.extend(ldap_ca_problems(cluster.ldap, inventory_dir))
        problems.extend(_cluster_problems(cluster, nodes_vars[0][1], inventory_dir, orders_search))
    problems.extend(
        check_monitoring(cluster, nodes_vars, monitoring_vars, inventory_dir=inventory_dir)
    )
    profile = cluster.tls_profile if cluster is not None else default_profile()
    # The services' TLS proxies, planned here once (a services-only inventory has no
    # build_plan): their clashes stop the run before any host, their plans are copied.
    tls_proxies, proxy_problems = plan_tls_proxies(
        services_vars,
        tls_protocols=profile.protocols,
        tls_ciphers=profile.ciphers,
        addresses=service_addresses,
    )
    problems.extend(proxy_problems)
    if review:
        warnings.extend(f"{finding}{REVIEW_WARNING_SUFFIX}" for finding in deploy_only)
    else:
        problems.extend(deploy_only)
    if generate and not problems and (checked := orders_search) is not None:
        orders_search = _collect(problems, lambda: with_generated_password(checked), None)
    services: dict[str, dict[str, dict[str, Any]]] = {}
    if checked_services is not None and section_covers(checked_services, services_vars):
        if not problems:
            services = with_search_password(checked_services, orders_search)
    else:
        services = _collect(
            problems,
            lambda: plan_services_section(
                services_vars,
                project_root,
                orders_search,
                with_secrets=True,
                database=database_server(database_vars, inventory_dir=inventory_dir),
            ),
            {},
        )
    if generate and not problems:
        services = _collect(problems, lambda: with_database_passwords(services), {})
    if problems:
        raise InventoryError(list(dict.fromkeys(problems)))
    return ValidatedInventory(
        cluster=cluster,
        orders_search=orders_search,
        cluster_config=cluster_config,
        snapshots=snapshots,
        warnings=tuple(warnings),
        services=services,
        lifecycle=lifecycle,
        postgresql_tls=server_tls(profile),
        tls_proxies=tls_proxies,
    )


def _collect(problems: list[str], plan: Callable[[], _T], fallback: _T) -> _T:
    """``plan()``, or ``fallback`` with its refusal's problems added to ``problems``."""
    try:
        return plan()
    except ClusterforgeError as error:
        problems.extend(_problems_of(error))
        return fallback


def _cluster_config(
    cluster: Cluster, nodes_vars: Sequence[tuple[str, Mapping[str, Any]]]
) -> ClusterConfig:
    return plan_cluster_config(
        nodes_vars[0][1],
        secured=cluster.secured,
        toolkit_names=toolkit_security_names(),
        managed_templates=[{"name": ORDERS_TEMPLATE_NAME, **index_template()}],
    )


def _cluster_problems(
    cluster: Cluster,
    first: Mapping[str, Any],
    inventory_dir: Path,
    orders_search: OrdersSearch | None,
) -> list[str]:
    """The plugin zips, the CA and the order service's user name, each checked alone."""
    checks: list[Callable[[], None]] = [
        lambda: _check_plugin_zips(cluster),
        lambda: _check_ca(cluster, inventory_dir, ca_passphrase(first)),
    ]
    if orders_search is not None and cluster.secured:
        users = list(plain_data(first.get(SECURITY_USERS_VARIABLE) or []))
        checks.append(lambda: check_orders_user(users, orders_search))
    problems: list[str] = []
    for check in checks:
        _collect(problems, check, None)
    return problems


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
        for _plugin, path, variable in _plugin_zips(cluster)
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
