"""Monitoring from the inventory (issue 42): Prometheus, Alertmanager and the exporters.

The host of the inventory group ``monitoring`` runs Debian's Prometheus, Alertmanager and
blackbox exporter, and one Debian ``prometheus-elasticsearch-exporter`` per node of the
cluster; every host the toolkit deploys runs Debian's node exporter. Everything here is
decided from the inventory and the plan, never typed twice:

- the cluster's nodes (their https URLs, 9200 and 9300) and their count come from the
  cluster model; the services' endpoints from their TLS proxies' plan
  (clusterforge.plan.services.tls_proxy); the CA from the cluster's PKI;
- the cluster is read as a least-privilege internal user (:data:`MONITOR_ROLE`: the
  ``cluster_monitor`` and ``indices_monitor`` action groups and the two snapshot reads
  the exporter's snapshot collector makes), whose password is ``monitoring_cluster_password``
  (vaulted) or generated once into ``<inventory>/.opensearch/<user>.password`` like the
  order service's;
- the services' ``/metrics`` take the first of their ``<service>_auth_tokens``;
- Prometheus, Alertmanager and the node exporters serve TLS with a certificate the
  cluster's CA issues and require a password (``<inventory>/.monitoring/web.password``,
  generated once; the hosts hold its bcrypt hash only); the blackbox and cluster
  exporters bind a loopback address.

The alert rules, the user's own rules files and Alertmanager's routes come from
clusterforge.plan.monitoring.alerting, from the monitoring host's ``monitoring_alert*`` variables.

Everything secret (the user's password, the tokens, the web password) goes into files
marked ``secret`` of :func:`plan_monitoring`'s result, which the role writes with
no_log; no rendered configuration holds one (each names a ``*_file``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.host_groups import HOST_GROUPS
from clusterforge.plan.cluster.model_checks import schema_problem
from clusterforge.plan.monitoring.alerting import (
    RECEIVERS,
    Alerting,
    alert_rules,
    alertmanager_config,
    alertmanager_secret_files,
)
from clusterforge.plan.monitoring.monitoring_config import (
    BINARIES,
    CONFIG_DIR,
    DEBIAN_UNITS,
    JOB_OF_SERVICE,
    METRICS_PATH,
    NODE_EXPORTER_DIR,
    PACKAGES,
    PATHS,
    RULES_FILE,
    SERVICE_USER,
    STATE_DIR,
    TLS_PROBE_MODULE,
    UNITS,
    WEB_HASH_FILE,
    WEB_PASSWORD_FILE,
    WEB_SECRETS_DIR_NAME,
    ClusterTarget,
    MonitoringSettings,
    ServiceEndpoint,
    cluster_exporter_env,
    cluster_targets,
    host_port,
    render_blackbox_yml,
    render_prometheus_yml,
    render_unit,
    render_web_config,
    token_file,
)
from clusterforge.plan.monitoring.monitoring_inputs import (
    NO_CLUSTER,
    MonitoringInputs,
    build_host_alerting,
    more_than_one_host,
    read_monitoring_inputs,
)
from clusterforge.plan.monitoring.monitoring_user import (
    GROUP,
    MONITOR_ROLE,
    MONITOR_ROLE_BODY,
    NOT_GENERATED,
    PASSWORD_VARIABLE,
    PREFIX,
    USERNAME_VARIABLE,
    MonitoringUser,
    monitoring_hosts_vars,
    monitoring_variables,
    plan_monitoring_user,
    toolkit_user,
)
from clusterforge.plan.security.tls_profile import TlsProfile
from clusterforge.plan.security.toolkit_users import PASSWORD_DIR_NAME
from clusterforge.schema import load_schema, undeclared_variable

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

# The monitoring's names, importable from here as before the module was split by concern
# (the user, the configuration files, the inputs, and the plan below).
__all__ = [
    "BINARIES",
    "CONFIG_DIR",
    "DEBIAN_UNITS",
    "GROUP",
    "HOST_GROUPS",
    "JOB_OF_SERVICE",
    "METRICS_PATH",
    "MONITOR_ROLE",
    "MONITOR_ROLE_BODY",
    "NODE_EXPORTER_DIR",
    "NOT_GENERATED",
    "PACKAGES",
    "PASSWORD_DIR_NAME",
    "PASSWORD_VARIABLE",
    "PATHS",
    "PREFIX",
    "RULES_FILE",
    "SERVICE_USER",
    "STATE_DIR",
    "TLS_PROBE_MODULE",
    "UNITS",
    "USERNAME_VARIABLE",
    "WEB_HASH_FILE",
    "WEB_PASSWORD_FILE",
    "WEB_SECRETS_DIR_NAME",
    "AlertingFiles",
    "ClusterTarget",
    "MonitoringInputs",
    "MonitoringSettings",
    "MonitoringUser",
    "ServiceEndpoint",
    "alerting_files",
    "build_host_alerting",
    "cluster_exporter_env",
    "monitoring_hosts_vars",
    "monitoring_variables",
    "plan_monitoring",
    "plan_monitoring_user",
    "read_monitoring_inputs",
    "render_blackbox_yml",
    "render_prometheus_yml",
    "render_unit",
    "render_web_config",
    "rendered_for_own_prometheus",
    "toolkit_user",
]


@dataclass(frozen=True, kw_only=True)
class AlertingFiles:
    """The rules, alertmanager.yml and the receivers' secret files
    (clusterforge.plan.monitoring.alerting)."""

    rules: str
    alertmanager: str
    secret_files: dict[str, str]
    user_rules: dict[str, str]


def alerting_files(
    alerting: Alerting, *, expected_nodes: int, secrets: Mapping[str, Any]
) -> AlertingFiles:
    return AlertingFiles(
        rules=alert_rules(alerting, expected_nodes),
        alertmanager=alertmanager_config(
            alerting, secrets, secrets_dir=PATHS["alertmanager_secrets"]
        ),
        secret_files=alertmanager_secret_files(
            alerting, secrets, secrets_dir=PATHS["alertmanager_secrets"]
        ),
        user_rules=dict(alerting.rules_files),
    )


def _checked_targets(settings: MonitoringSettings, cluster: Cluster) -> list[ClusterTarget]:
    """The cluster's exporters; refused off TLS, or when their ports meet another's."""
    if cluster.security_mode != "tls":
        raise InventoryError(
            [
                f"the monitoring group has hosts but opensearch_security_mode is "
                f"{cluster.security_mode}: monitoring scrapes only over verified TLS; set "
                "opensearch_security_mode: tls, or leave the monitoring group empty"
            ]
        )
    base = settings.cluster_exporter_base_port
    targets = cluster_targets(settings, cluster)
    ports = [settings.blackbox_port, *(target.exporter_port for target in targets)]
    if settings.exporters_listen == settings.prometheus_listen:
        ports.append(settings.prometheus_port)
    if len(set(ports)) != len(ports):
        raise InventoryError(
            [
                f"monitoring_cluster_exporter_base_port {base} gives the {len(targets)} node "
                f"exporters ports {base}..{base + len(targets) - 1}, which meet "
                f"monitoring_blackbox_port {settings.blackbox_port} or "
                "monitoring_prometheus_port; move one of them"
            ]
        )
    return targets


_OWNER = {"owner": "root", "group": SERVICE_USER}


def _config_files(
    settings: MonitoringSettings,
    *,
    targets: Sequence[ClusterTarget],
    node_exporters: Sequence[tuple[str, str]],
    services: Sequence[ServiceEndpoint],
    planned_alerting: AlertingFiles,
    user_rules: Mapping[str, str],
    web_password_hash: str,
    profile: TlsProfile,
) -> list[dict[str, Any]]:
    """The configuration files, none of which holds a secret (root's, the service user's
    group, 0640)."""
    contents = {
        PATHS["prometheus_yml"]: render_prometheus_yml(
            settings,
            cluster_targets=targets,
            node_exporters=node_exporters,
            services=services,
            extra_rules_files=list(user_rules),
        ),
        PATHS["web_yml"]: render_web_config(
            PATHS["cert"], PATHS["key"], settings.web_username, web_password_hash, profile=profile
        ),
        PATHS["blackbox_yml"]: render_blackbox_yml(),
        f"{PATHS['rules_dir']}/{RULES_FILE}": planned_alerting.rules,
        PATHS["alertmanager_yml"]: planned_alerting.alertmanager,
    }
    return [
        {"path": path, "content": content, **_OWNER, "mode": "0640"}
        for path, content in contents.items()
    ]


def _secret_files(
    settings: MonitoringSettings,
    *,
    targets: Sequence[ClusterTarget],
    services: Sequence[ServiceEndpoint],
    planned_alerting: AlertingFiles,
    user: MonitoringUser | None,
) -> list[dict[str, Any]]:
    """The receivers' secrets, the services' tokens and the exporters' environments."""
    files: list[dict[str, Any]] = []
    for path, content in planned_alerting.secret_files.items():
        # Alertmanager's (the prometheus user's) to read, nobody else's.
        files.append(
            {
                "path": path,
                "content": content + "\n",
                "owner": SERVICE_USER,
                "group": SERVICE_USER,
                "mode": "0600",
                "secret": True,
            }
        )
    for endpoint in services:
        files.append(
            {
                "path": token_file(f"{endpoint.service}-{endpoint.host}"),
                "content": endpoint.token + "\n",
                **_OWNER,
                "mode": "0640",
                "secret": True,
            }
        )
    for target in targets:
        files.append(
            {
                "path": f"{PATHS['exporter_env_dir']}/{target.inventory_name}.env",
                "content": cluster_exporter_env(target, settings, user),
                "owner": "root",
                "group": "root",
                "mode": "0600",
                "secret": True,
            }
        )
    return files


def _unit_files(settings: MonitoringSettings) -> list[dict[str, Any]]:
    units = {
        UNITS["prometheus"]: render_unit("prometheus", settings=settings),
        UNITS["alertmanager"]: render_unit("alertmanager", settings=settings),
        UNITS["blackbox"]: render_unit("blackbox", settings=settings),
        UNITS["cluster_exporter"]: render_unit("cluster-exporter", settings=settings),
    }
    return [
        {
            "path": f"/etc/systemd/system/{unit}.service",
            "content": content,
            "owner": "root",
            "group": "root",
            "mode": "0644",
        }
        for unit, content in units.items()
    ]


def _restart_paths(targets: Sequence[ClusterTarget]) -> dict[str, list[str]]:
    """What a unit restarts for (anything else of its files only reloads it)."""
    return {
        **{
            UNITS[name]: [f"/etc/systemd/system/{UNITS[name]}.service"]
            for name in ("prometheus", "alertmanager", "blackbox")
        },
        **{
            f"{UNITS['cluster_exporter']}{target.inventory_name}": [
                f"/etc/systemd/system/{UNITS['cluster_exporter']}.service",
                f"{PATHS['exporter_env_dir']}/{target.inventory_name}.env",
            ]
            for target in targets
        },
    }


# The monitoring host's parts; the node exporter, on every host, is the last of BINARIES.
_MONITORING_HOST_PARTS = ("prometheus", "alertmanager", "blackbox", "cluster_exporter")


def debian_install(parts: Sequence[str]) -> dict[str, list[Any]]:
    """What a role installs for ``parts`` (keys of BINARIES): Debian's packages, its units
    to mask first (links to /dev/null, so no package starts with Debian's defaults), and
    the binaries whose presence spares asking apt. BINARIES, PACKAGES and DEBIAN_UNITS
    list the parts in one order; the roles hold no copy of them."""
    index = {part: position for position, part in enumerate(BINARIES)}
    return {
        "packages": [PACKAGES[index[part]] for part in parts],
        "masks": [
            {
                "path": f"/etc/systemd/system/{DEBIAN_UNITS[index[part]]}.service",
                "target": "/dev/null",
            }
            for part in parts
        ],
        "binaries": [BINARIES[part] for part in parts],
    }


def _node_exporter(
    settings: MonitoringSettings,
    node_exporters: Sequence[tuple[str, str]],
    web_password_hash: str,
    profile: TlsProfile,
) -> dict[str, Any]:
    return {
        "web_config": render_web_config(
            PATHS["node_cert"],
            PATHS["node_key"],
            settings.web_username,
            web_password_hash,
            profile=profile,
        ),
        "port": settings.node_exporter_port,
        # Each host's exporter listens on its own address (TLS and a password).
        "units": {
            host: render_unit(
                "node-exporter", listen=host_port(address, settings.node_exporter_port)
            )
            for host, address in node_exporters
        },
        "unit_name": UNITS["node_exporter"],
        "install": debian_install(["node_exporter"]),
        "dir": NODE_EXPORTER_DIR,
        "cert": PATHS["node_cert"],
        "key": PATHS["node_key"],
        "web_yml": PATHS["node_web_yml"],
    }


def plan_monitoring(
    settings: MonitoringSettings,
    *,
    cluster: Cluster,
    user: MonitoringUser | None,
    services: Sequence[ServiceEndpoint],
    node_exporters: Sequence[tuple[str, str]],
    alerting: Alerting,
    alerting_secrets: Mapping[str, Any],
    web_password: str,
    web_password_hash: str,
) -> dict[str, Any]:
    """The monitoring host's files (secrets marked) and what the role and the lab read."""
    targets = _checked_targets(settings, cluster)
    profile = cluster.tls_profile
    planned_alerting = alerting_files(
        alerting, expected_nodes=len(cluster.nodes), secrets=alerting_secrets
    )
    user_rules = {
        f"{PATHS['rules_dir']}/{name}": text for name, text in planned_alerting.user_rules.items()
    }
    files = [
        *_config_files(
            settings,
            targets=targets,
            node_exporters=node_exporters,
            services=services,
            planned_alerting=planned_alerting,
            user_rules=user_rules,
            web_password_hash=web_password_hash,
            profile=profile,
        ),
        {
            "path": PATHS["web_password"],
            "content": web_password + "\n",
            **_OWNER,
            "mode": "0640",
            "secret": True,
        },
        *[
            {"path": path, "content": content, **_OWNER, "mode": "0640"}
            for path, content in user_rules.items()
        ],
        *_secret_files(
            settings,
            targets=targets,
            services=services,
            planned_alerting=planned_alerting,
            user=user,
        ),
        *_unit_files(settings),
    ]
    return {
        "files": files,
        "units": [UNITS["prometheus"], UNITS["alertmanager"], UNITS["blackbox"]],
        "install": debian_install(_MONITORING_HOST_PARTS),
        "cluster_exporters": [
            f"{UNITS['cluster_exporter']}{target.inventory_name}" for target in targets
        ],
        "restart_paths": _restart_paths(targets),
        "prometheus_url": settings.prometheus_url,
        "alertmanager_url": settings.alertmanager_url,
        "web_username": settings.web_username,
        "expected_nodes": len(cluster.nodes),
        "targets": {
            "opensearch": [target.inventory_name for target in targets],
            "node": [host for host, _variables in node_exporters],
            "tls_expiry": len(targets) * 2 + len(services),
            "services": [f"{endpoint.service}@{endpoint.host}" for endpoint in services],
        },
        "node_exporter": _node_exporter(settings, node_exporters, web_password_hash, profile),
    }


def rendered_for_own_prometheus(inputs: MonitoringInputs) -> dict[str, str]:
    """What ``scripts/render`` writes for a user who runs Prometheus already: the scrape
    config (paths as on a clusterforge monitoring host; adjust the CA and secret files)
    and the rules."""
    settings, cluster, alerting = inputs.settings, inputs.cluster, inputs.alerting
    return {
        "prometheus.yml": render_prometheus_yml(
            settings,
            cluster_targets=cluster_targets(settings, cluster),
            node_exporters=inputs.node_exporters,
            services=inputs.services,
            extra_rules_files=[f"{PATHS['rules_dir']}/{name}" for name in alerting.rules_files],
        ),
        RULES_FILE: alert_rules(alerting, len(cluster.nodes)),
        **dict(alerting.rules_files),
        "blackbox.yml": render_blackbox_yml(),
    }


def check_monitoring(
    cluster: Cluster | None,
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    monitoring_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path,
) -> list[str]:
    """Every problem of the monitoring host's ``monitoring_*`` variables, for the inventory
    check: each against the schema (durations, ranges, ports, unknown names), then what the
    monitoring play would refuse later (the listeners' ports, the receivers, the alerting
    durations, the exporters' ports, the mode). Reads and writes nothing.

    The monitoring play runs last in site.yml; a setting it alone refused was found after
    the cluster had changed (issue 51).
    """
    if not monitoring_vars:
        return []
    problems: list[str] = []
    if len(monitoring_vars) > 1:
        return [more_than_one_host([host for host, _variables in monitoring_vars])]
    host, variables = monitoring_vars[0]
    declared = load_schema().variables
    named_secrets = _secret_variable_names(variables.get(RECEIVERS))
    for name in sorted(variables):
        if name in named_secrets:
            continue  # a receiver's secret, by the name its *_var gives
        if name not in declared:
            problems.append(f"{host}: {undeclared_variable(name, PREFIX)}")
        elif variables[name] is not None and (problem := schema_problem(name, variables[name])):
            problems.append(f"{host}: {problem}")
    if problems:  # the checks below read the values as the schema declares them
        return problems
    if cluster is None:
        return [NO_CLUSTER]
    settings = MonitoringSettings.of(host, host, variables)
    problems += _listener_clashes(settings)
    for check in (
        lambda: _checked_targets(settings, cluster),
        lambda: build_host_alerting(cluster, variables, nodes_vars, inventory_dir=inventory_dir),
        lambda: plan_monitoring_user(
            cluster, monitoring_vars, inventory_dir=inventory_dir, generate=False
        ),
    ):
        try:
            check()
        except InventoryError as error:
            problems += error.problems
    return problems


def _secret_variable_names(receivers: Any) -> set[str]:
    """The variables the receivers name for their secrets (``*_var``)."""
    names: set[str] = set()
    for receiver in receivers if isinstance(receivers, list) else []:
        for body in receiver.values() if isinstance(receiver, Mapping) else []:
            if isinstance(body, Mapping):
                names.update(str(v) for k, v in body.items() if str(k).endswith("_var"))
    return names


def _listener_clashes(settings: MonitoringSettings) -> list[str]:
    """Prometheus, Alertmanager and the node exporter each need a port of their own where
    they share an address (an empty listen address is the host's own)."""
    listeners = [
        ("monitoring_prometheus_port", settings.prometheus_listen, settings.prometheus_port),
        ("monitoring_alertmanager_port", settings.alertmanager_listen, settings.alertmanager_port),
        ("monitoring_node_exporter_port", settings.address, settings.node_exporter_port),
    ]
    problems = []
    for index, (name, address, port) in enumerate(listeners):
        for other, other_address, other_port in listeners[index + 1 :]:
            if port == other_port and address == other_address:
                problems.append(
                    f"{name} and {other} are both {port} on {address}; give each its own port"
                )
    return problems
