"""Monitoring from the inventory (issue 42): Prometheus, Alertmanager and the exporters.

The host of the inventory group ``monitoring`` runs Debian's Prometheus, Alertmanager and
blackbox exporter, and one Debian ``prometheus-elasticsearch-exporter`` per node of the
cluster; every host the toolkit deploys runs Debian's node exporter. Everything here is
decided from the inventory and the plan, never typed twice:

- the cluster's nodes (their https URLs, 9200 and 9300) and their count come from the
  cluster model; the services' endpoints from their TLS proxies' plan
  (clusterforge.plan.tls_proxy); the CA from the cluster's PKI;
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
clusterforge.plan.alerting, from the monitoring host's ``monitoring_alert*`` variables.

Everything secret (the user's password, the tokens, the web password) goes into files
marked ``secret`` of :func:`plan_monitoring`'s result, which the role writes with
no_log; no rendered configuration holds one (each names a ``*_file``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.generated_secrets import GeneratedSecretError, read_or_generate, url_safe
from clusterforge.plan.alerting import (
    RULES_FILE_NAME,
    Alerting,
    alert_rules,
    alertmanager_config,
    alertmanager_secret_files,
    build_alerting,
)
from clusterforge.plan.render import MANAGED_HEADER, render_template
from clusterforge.schema import load_schema

if TYPE_CHECKING:
    from clusterforge.plan.model import Cluster

GROUP = "monitoring"
PREFIX = "monitoring_"
# Per host: where its node exporter listens, when ansible_host is no address of the host.
NODE_EXPORTER_ADDRESS = "monitoring_node_exporter_address"
USERNAME_VARIABLE = "monitoring_cluster_username"
PASSWORD_VARIABLE = "monitoring_cluster_password"  # noqa: S105 - a variable name
PASSWORD_DIR_NAME = ".opensearch"  # noqa: S105 - the order service's, one place for both
WEB_SECRETS_DIR_NAME = ".monitoring"
WEB_PASSWORD_FILE = "web.password"  # noqa: S105 - a file name
WEB_HASH_FILE = "web.password.bcrypt"
MONITOR_ROLE = "clusterforge_monitor"
# The password of an inventory check (generate=False), which reads and writes nothing.
NOT_GENERATED = "not-generated-by-the-inventory-check"
MONITOR_ROLE_BODY: Mapping[str, Any] = {
    "description": "The monitoring exporter: cluster, index and snapshot reads (clusterforge)",
    "cluster_permissions": [
        "cluster_monitor",
        # The exporter's snapshots collector lists the repositories and their snapshots.
        "cluster:admin/repository/get",
        "cluster:admin/snapshot/get",
    ],
    "index_permissions": [{"index_patterns": ["*"], "allowed_actions": ["indices_monitor"]}],
}

CONFIG_DIR = "/etc/clusterforge-monitoring"
NODE_EXPORTER_DIR = "/etc/clusterforge-node-exporter"
STATE_DIR = "/var/lib/clusterforge-monitoring"
# Debian's packages create this account; every monitoring process runs as it.
SERVICE_USER = "prometheus"
UNITS = {
    "prometheus": "clusterforge-prometheus",
    "alertmanager": "clusterforge-alertmanager",
    "blackbox": "clusterforge-blackbox-exporter",
    "cluster_exporter": "clusterforge-cluster-exporter@",
    "node_exporter": "clusterforge-node-exporter",
}
# Debian's own units start the packages on every address with their default settings;
# the role masks them before the packages are installed.
DEBIAN_UNITS = (
    "prometheus",
    "prometheus-alertmanager",
    "prometheus-blackbox-exporter",
    "prometheus-elasticsearch-exporter",
    "prometheus-node-exporter",
)
PACKAGES = (
    "prometheus",
    "prometheus-alertmanager",
    "prometheus-blackbox-exporter",
    "prometheus-elasticsearch-exporter",
    "prometheus-node-exporter",
)
BINARIES = {
    "prometheus": "/usr/bin/prometheus",
    "alertmanager": "/usr/bin/prometheus-alertmanager",
    "blackbox": "/usr/bin/prometheus-blackbox-exporter",
    "cluster_exporter": "/usr/bin/prometheus-elasticsearch-exporter",
    "node_exporter": "/usr/bin/prometheus-node-exporter",
}
# The services' metrics paths, behind their TLS proxies (both serve GET /metrics).
METRICS_PATH = "/metrics"
JOB_OF_SERVICE = {"user_directory": "user_directory", "order_service": "order_service"}
TLS_PROBE_MODULE = "tls_cluster_ca"
RULES_FILE = RULES_FILE_NAME


def _value(variables: Mapping[str, Any], name: str) -> Any:
    given = variables.get(name)
    return load_schema().default_of(name) if given is None else given


def monitoring_variables(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """A host's ``monitoring_*`` variables (the rest of its variables are not read here)."""
    return {name: value for name, value in host_vars.items() if name.startswith(PREFIX)}


def monitoring_hosts_vars(source: Any) -> list[tuple[str, dict[str, Any]]]:
    """(host, its ``monitoring_*`` variables, templated) for every host of the group
    ``monitoring`` of ``source`` (a clusterforge.inventory.variables.HostSource)."""
    return [
        (host, dict(source.variables(host, lambda name: name.startswith(PREFIX))))
        for host in source.hosts(GROUP)
    ]


# --- the cluster's monitoring user ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MonitoringUser:
    """The exporter's internal user; ``password`` is the one secret (never in a repr)."""

    username: str
    password: str = field(repr=False)
    password_file: str | None


def plan_monitoring_user(
    cluster: Cluster | None,
    monitoring_hosts: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path,
    generate: bool = True,
) -> MonitoringUser | None:
    """The cluster's monitoring user: None without a monitoring host or a secured cluster.

    ``generate=False`` (the inventory check) reads and writes nothing.
    """
    if cluster is None or not monitoring_hosts or not cluster.secured:
        return None
    variables = monitoring_hosts[0][1]
    username = str(_value(variables, USERNAME_VARIABLE))
    given = variables.get(PASSWORD_VARIABLE)
    if given is not None and not str(given):
        raise InventoryError(
            [
                f"{PASSWORD_VARIABLE} is empty; set a vaulted password, or leave it unset "
                "to have one generated"
            ]
        )
    if given:
        from clusterforge.pki.hashing import PasswordRejectedError, check_password_allowed

        try:
            check_password_allowed(username, str(given), setting=PASSWORD_VARIABLE)
        except PasswordRejectedError as error:
            raise InventoryError([str(error)]) from None
        return MonitoringUser(username=username, password=str(given), password_file=None)
    path = inventory_dir / PASSWORD_DIR_NAME / f"{username}.password"
    if not generate:
        return MonitoringUser(username=username, password=NOT_GENERATED, password_file=str(path))
    try:
        password = read_or_generate(
            path, generate=url_safe(32), fix=f"or set {PASSWORD_VARIABLE} (vaulted)"
        )
    except GeneratedSecretError as error:
        raise InventoryError([str(error)]) from None
    return MonitoringUser(username=username, password=password, password_file=str(path))


def security_additions(user: MonitoringUser) -> dict[str, Any]:
    """The user, its role and the mapping the monitoring adds to the security files."""
    from clusterforge.pki.security_config import RoleMapping

    return {
        "user": {
            "name": user.username,
            "password": user.password,
            "backend_roles": [],
            "description": "The monitoring exporter: reads cluster and index stats (clusterforge)",
        },
        "roles": {MONITOR_ROLE: dict(MONITOR_ROLE_BODY)},
        "role_mappings": {
            MONITOR_ROLE: RoleMapping(
                users=(user.username,), description="The monitoring exporter's internal user"
            )
        },
    }


# --- the monitoring host's plan ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ServiceEndpoint:
    """One service's HTTPS base URL (its TLS proxy) and the token its /metrics takes."""

    service: str
    host: str
    base_url: str
    token: str = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class MonitoringSettings:
    host: str
    address: str
    prometheus_listen: str
    prometheus_port: int
    alertmanager_listen: str
    alertmanager_port: int
    exporters_listen: str
    blackbox_port: int
    cluster_exporter_base_port: int
    node_exporter_port: int
    scrape_interval: str
    evaluation_interval: str
    retention: str
    web_username: str

    @classmethod
    def of(cls, host: str, address: str, variables: Mapping[str, Any]) -> MonitoringSettings:
        def text(name: str) -> str:
            return str(_value(variables, name))

        def number(name: str) -> int:
            return int(_value(variables, name))

        return cls(
            host=host,
            address=address,
            prometheus_listen=text("monitoring_prometheus_listen_address") or address,
            prometheus_port=number("monitoring_prometheus_port"),
            alertmanager_listen=text("monitoring_alertmanager_listen_address") or address,
            alertmanager_port=number("monitoring_alertmanager_port"),
            exporters_listen=text("monitoring_exporters_listen_address"),
            blackbox_port=number("monitoring_blackbox_port"),
            cluster_exporter_base_port=number("monitoring_cluster_exporter_base_port"),
            node_exporter_port=number("monitoring_node_exporter_port"),
            scrape_interval=text("monitoring_scrape_interval"),
            evaluation_interval=text("monitoring_evaluation_interval"),
            retention=text("monitoring_retention"),
            web_username=text("monitoring_web_username"),
        )

    @property
    def prometheus_url(self) -> str:
        return f"https://{_host_port(self.prometheus_listen, self.prometheus_port)}"

    @property
    def alertmanager_url(self) -> str:
        return f"https://{_host_port(self.alertmanager_listen, self.alertmanager_port)}"


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _paths() -> dict[str, str]:
    secrets = f"{CONFIG_DIR}/secrets"
    return {
        "prometheus_yml": f"{CONFIG_DIR}/prometheus.yml",
        "web_yml": f"{CONFIG_DIR}/web.yml",
        "alertmanager_yml": f"{CONFIG_DIR}/alertmanager.yml",
        "blackbox_yml": f"{CONFIG_DIR}/blackbox.yml",
        "rules_dir": f"{CONFIG_DIR}/rules",
        "ca": f"{CONFIG_DIR}/tls/ca-bundle.pem",
        "cert": f"{CONFIG_DIR}/tls/monitoring.pem",
        "key": f"{CONFIG_DIR}/tls/monitoring-key.pem",
        "secrets": secrets,
        "web_password": f"{secrets}/web.password",
        "alertmanager_secrets": f"{secrets}/alertmanager",
        "exporter_env_dir": f"{CONFIG_DIR}/cluster-exporter",
        "node_web_yml": f"{NODE_EXPORTER_DIR}/web.yml",
        "node_cert": f"{NODE_EXPORTER_DIR}/node-exporter.pem",
        "node_key": f"{NODE_EXPORTER_DIR}/node-exporter-key.pem",
    }


PATHS = _paths()


def _token_file(service: str) -> str:
    return f"{PATHS['secrets']}/{service}.token"


def _web_tls(cert: str, key: str) -> dict[str, Any]:
    # One TLS profile for every listener (the proxy's and the cluster's): 1.2 and up,
    # Go's AEAD suites only.
    return {
        "cert_file": cert,
        "key_file": key,
        "min_version": "TLS12",
    }


def render_web_config(cert: str, key: str, username: str, password_hash: str) -> str:
    """exporter-toolkit's web config: TLS and one user, by its bcrypt hash."""
    return _yaml(
        {
            "tls_server_config": _web_tls(cert, key),
            "basic_auth_users": {username: password_hash},
        }
    )


def _yaml(document: Any) -> str:
    return (
        MANAGED_HEADER + "\n" + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    )


def _client_tls() -> dict[str, Any]:
    # Every scrape of a TLS endpoint verifies the cluster's CA; never insecure_skip_verify.
    return {"ca_file": PATHS["ca"], "insecure_skip_verify": False}


def _basic_auth(settings: MonitoringSettings) -> dict[str, Any]:
    return {"username": settings.web_username, "password_file": PATHS["web_password"]}


@dataclass(frozen=True, kw_only=True)
class ClusterTarget:
    inventory_name: str
    url: str
    transport: str
    exporter_port: int


def render_prometheus_yml(
    settings: MonitoringSettings,
    *,
    cluster_targets: Sequence[ClusterTarget],
    node_exporters: Sequence[tuple[str, str]],
    services: Sequence[ServiceEndpoint],
    extra_rules_files: Sequence[str] = (),
) -> str:
    """prometheus.yml: every job the rules read (docs/monitoring.md, "What is scraped")."""
    exporters = settings.exporters_listen
    tls_targets = [
        *[target.url.split("://", 1)[1] for target in cluster_targets],
        *[target.transport for target in cluster_targets],
        *[endpoint.base_url.split("://", 1)[1] for endpoint in services],
    ]
    scrape_configs: list[dict[str, Any]] = [
        {
            "job_name": "prometheus",
            "scheme": "https",
            "tls_config": _client_tls(),
            "basic_auth": _basic_auth(settings),
            "static_configs": [
                {"targets": [_host_port(settings.prometheus_listen, settings.prometheus_port)]}
            ],
        },
        {
            "job_name": "alertmanager",
            "scheme": "https",
            "tls_config": _client_tls(),
            "basic_auth": _basic_auth(settings),
            "static_configs": [
                {"targets": [_host_port(settings.alertmanager_listen, settings.alertmanager_port)]}
            ],
        },
        {
            # One exporter per node (on this host, loopback), each reading its node over
            # TLS with the CA; the node label says which.
            "job_name": "opensearch",
            "static_configs": [
                {
                    "targets": [_host_port(exporters, target.exporter_port)],
                    "labels": {"node": target.inventory_name},
                }
                for target in cluster_targets
            ],
        },
        {
            "job_name": "node",
            "scheme": "https",
            "tls_config": _client_tls(),
            "basic_auth": _basic_auth(settings),
            "static_configs": [
                {
                    "targets": [_host_port(address, settings.node_exporter_port)],
                    "labels": {"host": host},
                }
                for host, address in node_exporters
            ],
        },
        {
            "job_name": "tls_expiry",
            "metrics_path": "/probe",
            "params": {"module": [TLS_PROBE_MODULE]},
            "static_configs": [{"targets": tls_targets}],
            "relabel_configs": [
                {"source_labels": ["__address__"], "target_label": "__param_target"},
                {"source_labels": ["__param_target"], "target_label": "instance"},
                {
                    "target_label": "__address__",
                    "replacement": _host_port(exporters, settings.blackbox_port),
                },
            ],
        },
    ]
    for service in JOB_OF_SERVICE:
        endpoints = [endpoint for endpoint in services if endpoint.service == service]
        if not endpoints:
            continue
        for endpoint in endpoints:
            scrape_configs.append(
                {
                    "job_name": JOB_OF_SERVICE[service]
                    if len(endpoints) == 1
                    else f"{JOB_OF_SERVICE[service]}_{endpoint.host}",
                    "scheme": "https",
                    "metrics_path": METRICS_PATH,
                    "tls_config": _client_tls(),
                    "authorization": {
                        "type": "Bearer",
                        "credentials_file": _token_file(f"{service}-{endpoint.host}"),
                    },
                    "static_configs": [
                        {
                            "targets": [endpoint.base_url.split("://", 1)[1]],
                            "labels": {"host": endpoint.host, "job": JOB_OF_SERVICE[service]},
                        }
                    ],
                }
            )
    document = {
        "global": {
            "scrape_interval": settings.scrape_interval,
            "evaluation_interval": settings.evaluation_interval,
        },
        "rule_files": [f"{PATHS['rules_dir']}/{RULES_FILE}", *extra_rules_files],
        "alerting": {
            "alertmanagers": [
                {
                    "scheme": "https",
                    "tls_config": _client_tls(),
                    "basic_auth": _basic_auth(settings),
                    "static_configs": [
                        {
                            "targets": [
                                _host_port(settings.alertmanager_listen, settings.alertmanager_port)
                            ]
                        }
                    ],
                }
            ]
        },
        "scrape_configs": scrape_configs,
    }
    return _yaml(document)


def render_blackbox_yml() -> str:
    """One module: a TCP connection with TLS, verified against the cluster's CA."""
    return _yaml(
        {
            "modules": {
                TLS_PROBE_MODULE: {
                    "prober": "tcp",
                    "timeout": "5s",
                    "tcp": {"tls": True, "tls_config": _client_tls()},
                }
            }
        }
    )


def cluster_exporter_env(
    target: ClusterTarget, settings: MonitoringSettings, user: MonitoringUser | None
) -> str:
    """The environment file of one node's exporter (root-only, 0600: it holds the password).

    The password reaches the exporter as ES_PASSWORD, never as an argument."""
    args = [
        f"--web.listen-address={_host_port(settings.exporters_listen, target.exporter_port)}",
        f"--es.uri={target.url}",
        f"--es.ca={PATHS['ca']}",
        "--es.node=_local",
        "--es.indices",
        "--es.snapshots",
        "--es.timeout=10s",
    ]
    lines = [f'ARGS="{" ".join(args)}"']
    if user is not None:
        lines += [f"ES_USERNAME={user.username}", f"ES_PASSWORD={user.password}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class AlertingFiles:
    """The rules, alertmanager.yml and the receivers' secret files (clusterforge.plan.alerting)."""

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


def build_host_alerting(
    cluster: Cluster,
    variables: Mapping[str, Any],
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path | None,
) -> Alerting:
    """:func:`clusterforge.plan.alerting.build_alerting` for the monitoring host, with the
    engine's watermark settings and certificate renewal window from the cluster's nodes."""
    first = nodes_vars[0][1] if nodes_vars else {}
    engine_settings = [
        dict(cluster.extra_settings),
        dict(first.get("opensearch_cluster_settings") or {}),
    ]
    renew = first.get("opensearch_cert_renew_within_days")
    if renew is None:
        renew = load_schema().default_of("opensearch_cert_renew_within_days")
    return build_alerting(
        variables,
        engine_settings=engine_settings,
        cert_renew_within_days=int(renew),
        rules_base_dir=inventory_dir,
    )


def render_unit(name: str, **context: Any) -> str:
    return render_template(
        f"monitoring-{name}.service.j2", paths=PATHS, binaries=BINARIES, **context
    )


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
    if cluster.security_mode != "tls":
        raise InventoryError(
            [
                f"the monitoring group has hosts but opensearch_security_mode is "
                f"{cluster.security_mode}: monitoring scrapes only over verified TLS; set "
                "opensearch_security_mode: tls, or leave the monitoring group empty"
            ]
        )
    base = settings.cluster_exporter_base_port
    targets = [
        ClusterTarget(
            inventory_name=node.inventory_name,
            url=cluster.http_url(node),
            transport=_host_port(node.publish_host, cluster.transport_port),
            exporter_port=base + index,
        )
        for index, node in enumerate(cluster.nodes)
    ]
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
    planned_alerting = alerting_files(
        alerting, expected_nodes=len(cluster.nodes), secrets=alerting_secrets
    )
    user_rules = {
        f"{PATHS['rules_dir']}/{name}": text for name, text in planned_alerting.user_rules.items()
    }
    owner = {"owner": "root", "group": SERVICE_USER}
    files: list[dict[str, Any]] = [
        {
            "path": PATHS["prometheus_yml"],
            "content": render_prometheus_yml(
                settings,
                cluster_targets=targets,
                node_exporters=node_exporters,
                services=services,
                extra_rules_files=list(user_rules),
            ),
            **owner,
            "mode": "0640",
        },
        {
            "path": PATHS["web_yml"],
            "content": render_web_config(
                PATHS["cert"], PATHS["key"], settings.web_username, web_password_hash
            ),
            **owner,
            "mode": "0640",
        },
        {"path": PATHS["blackbox_yml"], "content": render_blackbox_yml(), **owner, "mode": "0640"},
        {
            "path": f"{PATHS['rules_dir']}/{RULES_FILE}",
            "content": planned_alerting.rules,
            **owner,
            "mode": "0640",
        },
        {
            "path": PATHS["alertmanager_yml"],
            "content": planned_alerting.alertmanager,
            **owner,
            "mode": "0640",
        },
        {
            "path": PATHS["web_password"],
            "content": web_password + "\n",
            **owner,
            "mode": "0640",
            "secret": True,
        },
    ]
    for path, content in user_rules.items():
        files.append({"path": path, "content": content, **owner, "mode": "0640"})
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
                "path": _token_file(f"{endpoint.service}-{endpoint.host}"),
                "content": endpoint.token + "\n",
                **owner,
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
    units = {
        UNITS["prometheus"]: render_unit("prometheus", settings=settings),
        UNITS["alertmanager"]: render_unit("alertmanager", settings=settings),
        UNITS["blackbox"]: render_unit("blackbox", settings=settings),
        UNITS["cluster_exporter"]: render_unit("cluster-exporter", settings=settings),
    }
    for unit, content in units.items():
        files.append(
            {
                "path": f"/etc/systemd/system/{unit}.service",
                "content": content,
                "owner": "root",
                "group": "root",
                "mode": "0644",
            }
        )
    return {
        "files": files,
        "units": [UNITS["prometheus"], UNITS["alertmanager"], UNITS["blackbox"]],
        "cluster_exporters": [
            f"{UNITS['cluster_exporter']}{target.inventory_name}" for target in targets
        ],
        # What a unit restarts for (anything else of its files only reloads it).
        "restart_paths": {
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
        },
        "prometheus_url": settings.prometheus_url,
        "alertmanager_url": settings.alertmanager_url,
        "web_username": settings.web_username,
        "expected_nodes": len(cluster.nodes),
        "targets": {
            "opensearch": [target.inventory_name for target in targets],
            "node": [host for host, _ in node_exporters],
            "tls_expiry": len(targets) * 2 + len(services),
            "services": [f"{endpoint.service}@{endpoint.host}" for endpoint in services],
        },
        "node_exporter": {
            "web_config": render_web_config(
                PATHS["node_cert"], PATHS["node_key"], settings.web_username, web_password_hash
            ),
            "port": settings.node_exporter_port,
            # Each host's exporter listens on its own address (TLS and a password).
            "units": {
                host: render_unit(
                    "node-exporter", listen=_host_port(address, settings.node_exporter_port)
                )
                for host, address in node_exporters
            },
            "unit_name": UNITS["node_exporter"],
            "dir": NODE_EXPORTER_DIR,
            "cert": PATHS["node_cert"],
            "key": PATHS["node_key"],
            "web_yml": PATHS["node_web_yml"],
        },
    }


def rendered_for_own_prometheus(inputs: MonitoringInputs) -> dict[str, str]:
    """What ``scripts/render`` writes for a user who runs Prometheus already: the scrape
    config (paths as on a clusterforge monitoring host; adjust the CA and secret files)
    and the rules."""
    settings, cluster, alerting = inputs.settings, inputs.cluster, inputs.alerting
    base = settings.cluster_exporter_base_port
    targets = [
        ClusterTarget(
            inventory_name=node.inventory_name,
            url=cluster.http_url(node),
            transport=_host_port(node.publish_host, cluster.transport_port),
            exporter_port=base + index,
        )
        for index, node in enumerate(cluster.nodes)
    ]
    return {
        "prometheus.yml": render_prometheus_yml(
            settings,
            cluster_targets=targets,
            node_exporters=inputs.node_exporters,
            services=inputs.services,
            extra_rules_files=[f"{PATHS['rules_dir']}/{name}" for name in alerting.rules_files],
        ),
        RULES_FILE: alert_rules(alerting, len(cluster.nodes)),
        **dict(alerting.rules_files),
        "blackbox.yml": render_blackbox_yml(),
    }


# --- reading the inventory (the action plugin and scripts/render) -----------------------

# Groups whose hosts run a node exporter (every host the toolkit deploys).
HOST_GROUPS = ("opensearch", "dashboards", "postgresql", "user_directory", "order_service", GROUP)


@dataclass(frozen=True, kw_only=True)
class MonitoringInputs:
    """What the monitoring host's plan is made from, read from the inventory."""

    host: str
    variables: dict[str, Any]
    cluster: Cluster
    settings: MonitoringSettings
    services: tuple[ServiceEndpoint, ...]
    node_exporters: tuple[tuple[str, str], ...]
    alerting: Alerting
    alerting_secrets: dict[str, Any] = field(repr=False)


def read_monitoring_inputs(
    source: Any,
    *,
    inventory_dir: Path,
    tls_protocols: Sequence[str],
    tls_ciphers: Sequence[str],
) -> MonitoringInputs | None:
    """The monitoring host's inputs from ``source`` (a
    clusterforge.inventory.variables.HostSource: a task's or an inventory on disk); None
    without a monitoring host. Refuses more than one, or none without a cluster."""
    from clusterforge.inventory.variables import build_model, services_vars
    from clusterforge.plan.model import plain_data
    from clusterforge.plan.tls_proxy import PROXIED_SERVICES, plan_tls_proxy

    monitoring_hosts = [str(name) for name in source.hosts(GROUP)]
    if not monitoring_hosts:
        return None
    if len(monitoring_hosts) > 1:
        raise InventoryError(
            [
                f"the monitoring group holds {', '.join(monitoring_hosts)}; monitoring runs on "
                "exactly one host: put one host in the group monitoring"
            ]
        )
    if not source.hosts("opensearch"):
        raise InventoryError(
            ["the monitoring group needs the cluster it watches: the group opensearch is empty"]
        )
    host = monitoring_hosts[0]
    variables = dict(plain_data(source.variables(host, lambda name: name.startswith(PREFIX))))
    cluster, nodes_vars = build_model(source, "opensearch")

    def address(name: str) -> str:
        found = source.variables(name, lambda key: key == "ansible_host").get("ansible_host")
        return str(found or name)

    def exporter_address(name: str) -> str:
        """Where the host's node exporter listens: its own variable, else its address."""
        given = source.variables(name, NODE_EXPORTER_ADDRESS.__eq__).get(NODE_EXPORTER_ADDRESS)
        return str(given) if given else address(name)

    endpoints: list[ServiceEndpoint] = []
    for service, service_hosts in services_vars(source).items():
        if service not in PROXIED_SERVICES:
            continue
        for service_host, service_variables in service_hosts:
            groups = [s for s in PROXIED_SERVICES if service_host in map(str, source.hosts(s))]
            proxy = plan_tls_proxy(
                service_host,
                service_variables,
                groups,
                tls_protocols=tls_protocols,
                tls_ciphers=tls_ciphers,
            )
            if proxy is None:
                continue
            tokens = list(service_variables.get(f"{service}_auth_tokens") or [])
            if not tokens:
                raise InventoryError(
                    [
                        f"{service}_auth_tokens is empty on {service_host}: Prometheus scrapes "
                        f"{service}'s /metrics with a bearer token; give the service one "
                        "(vaulted)"
                    ]
                )
            url = proxy.urls(address(service_host)).get(service)
            if url:
                endpoints.append(
                    ServiceEndpoint(
                        service=service,
                        host=str(service_host),
                        base_url=url,
                        token=str(tokens[0]),
                    )
                )
    exporter_hosts: list[tuple[str, str]] = []
    for group in HOST_GROUPS:
        for name in map(str, source.hosts(group)):
            if name not in {known for known, _ in exporter_hosts}:
                exporter_hosts.append((name, exporter_address(name)))
    alerting = build_host_alerting(cluster, variables, nodes_vars, inventory_dir=inventory_dir)
    wanted = set(alerting.secret_variables)
    secrets = dict(plain_data(source.variables(host, wanted.__contains__))) if wanted else {}
    return MonitoringInputs(
        host=host,
        variables=variables,
        cluster=cluster,
        settings=MonitoringSettings.of(host, address(host), variables),
        services=tuple(endpoints),
        node_exporters=tuple(exporter_hosts),
        alerting=alerting,
        alerting_secrets=secrets,
    )
