"""The monitoring host's configuration files, rendered from data: prometheus.yml (every
job the rules read), the exporter-toolkit web configs (TLS and one user by its bcrypt
hash), blackbox.yml, each node's cluster exporter environment, and the units.

The host of the inventory group ``monitoring`` runs Debian's Prometheus, Alertmanager and
blackbox exporter, and one Debian ``prometheus-elasticsearch-exporter`` per node of the
cluster; every host the toolkit deploys runs Debian's node exporter. No rendered file
holds a secret: each names a ``*_file`` (clusterforge.plan.monitoring.monitoring places them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from clusterforge.plan.cluster.render import MANAGED_HEADER, render_template
from clusterforge.plan.monitoring.alerting import RULES_FILE_NAME
from clusterforge.plan.monitoring.monitoring_user import MonitoringUser, monitoring_value
from clusterforge.plan.security.tls_profile import TlsProfile

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

WEB_SECRETS_DIR_NAME = ".monitoring"
WEB_PASSWORD_FILE = "web.password"  # noqa: S105 - a file name
WEB_HASH_FILE = "web.password.bcrypt"
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
            return str(monitoring_value(variables, name))

        def number(name: str) -> int:
            return int(monitoring_value(variables, name))

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
        return f"https://{host_port(self._reachable(self.prometheus_listen), self.prometheus_port)}"

    @property
    def alertmanager_url(self) -> str:
        reachable = self._reachable(self.alertmanager_listen)
        return f"https://{host_port(reachable, self.alertmanager_port)}"

    def _reachable(self, listen: str) -> str:
        """Where a person reaches a listener: its address, or the host's where it listens
        on every address. The units pass it as --web.external-url, so a notification's
        links lead there (without it Prometheus wrote its machine's host name)."""
        return self.address if listen in _ANY_ADDRESS else listen


_ANY_ADDRESS = ("", "0.0.0.0", "::")  # noqa: S104 - compared with, never bound


def host_port(host: str, port: int) -> str:
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


def token_file(service: str) -> str:
    return f"{PATHS['secrets']}/{service}.token"


def render_web_config(
    cert: str, key: str, username: str, password_hash: str, *, profile: TlsProfile
) -> str:
    """exporter-toolkit's web config: the cluster's TLS profile and one user, by its
    bcrypt hash."""
    return _yaml(
        {
            "tls_server_config": profile.go_server_config(cert, key),
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


def cluster_targets(settings: MonitoringSettings, cluster: Cluster) -> list[ClusterTarget]:
    """One exporter per node of the cluster, on consecutive ports from the base port."""
    base = settings.cluster_exporter_base_port
    return [
        ClusterTarget(
            inventory_name=node.inventory_name,
            url=cluster.http_url(node),
            transport=host_port(node.publish_host, cluster.transport_port),
            exporter_port=base + index,
        )
        for index, node in enumerate(cluster.nodes)
    ]


def _https_job(name: str, settings: MonitoringSettings, targets: list[str]) -> dict[str, Any]:
    """A job over TLS with the cluster's CA and the web password (exporter-toolkit's)."""
    return {
        "job_name": name,
        "scheme": "https",
        "tls_config": _client_tls(),
        "basic_auth": _basic_auth(settings),
        "static_configs": [{"targets": targets}],
    }


def _own_jobs(
    settings: MonitoringSettings,
    cluster_targets: Sequence[ClusterTarget],
    node_exporters: Sequence[tuple[str, str]],
    tls_targets: list[str],
) -> list[dict[str, Any]]:
    """Prometheus, Alertmanager, the cluster's exporters, the node exporters and the TLS
    expiry probes."""
    exporters = settings.exporters_listen
    node_job = _https_job("node", settings, [])
    node_job["static_configs"] = [
        {
            "targets": [host_port(address, settings.node_exporter_port)],
            "labels": {"host": host},
        }
        for host, address in node_exporters
    ]
    return [
        _https_job(
            "prometheus",
            settings,
            [host_port(settings.prometheus_listen, settings.prometheus_port)],
        ),
        _https_job(
            "alertmanager",
            settings,
            [host_port(settings.alertmanager_listen, settings.alertmanager_port)],
        ),
        {
            # One exporter per node (on this host, loopback), each reading its node over
            # TLS with the CA; the node label says which.
            "job_name": "opensearch",
            "static_configs": [
                {
                    "targets": [host_port(exporters, target.exporter_port)],
                    "labels": {"node": target.inventory_name},
                }
                for target in cluster_targets
            ],
        },
        node_job,
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
                    "replacement": host_port(exporters, settings.blackbox_port),
                },
            ],
        },
    ]


def _service_jobs(services: Sequence[ServiceEndpoint]) -> list[dict[str, Any]]:
    """One job per service host's /metrics, behind its TLS proxy, with its bearer token."""
    jobs: list[dict[str, Any]] = []
    for service, job in JOB_OF_SERVICE.items():
        endpoints = [endpoint for endpoint in services if endpoint.service == service]
        for endpoint in endpoints:
            jobs.append(
                {
                    "job_name": job if len(endpoints) == 1 else f"{job}_{endpoint.host}",
                    "scheme": "https",
                    "metrics_path": METRICS_PATH,
                    "tls_config": _client_tls(),
                    "authorization": {
                        "type": "Bearer",
                        "credentials_file": token_file(f"{service}-{endpoint.host}"),
                    },
                    "static_configs": [
                        {
                            "targets": [endpoint.base_url.split("://", 1)[1]],
                            "labels": {"host": endpoint.host, "job": job},
                        }
                    ],
                }
            )
    return jobs


def render_prometheus_yml(
    settings: MonitoringSettings,
    *,
    cluster_targets: Sequence[ClusterTarget],
    node_exporters: Sequence[tuple[str, str]],
    services: Sequence[ServiceEndpoint],
    extra_rules_files: Sequence[str] = (),
) -> str:
    """prometheus.yml: every job the rules read (docs/monitoring.md, "What is scraped")."""
    tls_targets = [
        *[target.url.split("://", 1)[1] for target in cluster_targets],
        *[target.transport for target in cluster_targets],
        *[endpoint.base_url.split("://", 1)[1] for endpoint in services],
    ]
    alertmanager = _https_job(
        "alertmanager",
        settings,
        [host_port(settings.alertmanager_listen, settings.alertmanager_port)],
    )
    del alertmanager["job_name"]
    document = {
        "global": {
            "scrape_interval": settings.scrape_interval,
            "evaluation_interval": settings.evaluation_interval,
        },
        "rule_files": [f"{PATHS['rules_dir']}/{RULES_FILE}", *extra_rules_files],
        "alerting": {"alertmanagers": [alertmanager]},
        "scrape_configs": [
            *_own_jobs(settings, cluster_targets, node_exporters, tls_targets),
            *_service_jobs(services),
        ],
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
        f"--web.listen-address={host_port(settings.exporters_listen, target.exporter_port)}",
        f"--es.uri={target.url}",
        f"--es.ca={PATHS['ca']}",
        "--es.node=_local",
        "--es.indices",
        # index.blocks.read_only_allow_delete per index: the OpenSearchIndicesReadOnly alert.
        "--es.indices_settings",
        "--es.snapshots",
        "--es.timeout=10s",
    ]
    lines = [f'ARGS="{" ".join(args)}"']
    if user is not None:
        lines += [f"ES_USERNAME={user.username}", f"ES_PASSWORD={user.password}"]
    return "\n".join(lines) + "\n"


def render_unit(name: str, **context: Any) -> str:
    return render_template(
        f"monitoring-{name}.service.j2", paths=PATHS, binaries=BINARIES, **context
    )
