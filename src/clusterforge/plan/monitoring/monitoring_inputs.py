"""What the monitoring host's plan is made from, read from the inventory (the plan's
``monitoring`` section, clusterforge.plan.monitoring.monitoring_host, and scripts/render): the
monitoring host and its ``monitoring_*`` variables, the cluster's model, the services'
endpoints behind their TLS proxies (clusterforge.plan.services.tls_proxy) with the token each
/metrics takes, every host that runs a node exporter, and the alerting
(clusterforge.plan.monitoring.alerting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.host_groups import HOST_GROUPS
from clusterforge.plan.monitoring.alerting import Alerting, build_alerting
from clusterforge.plan.monitoring.monitoring_config import MonitoringSettings, ServiceEndpoint
from clusterforge.plan.monitoring.monitoring_user import GROUP, PREFIX
from clusterforge.plan.snapshots.snapshot_schedule import declared_schedule
from clusterforge.schema import load_schema

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

# Groups whose hosts run a node exporter (every host the toolkit deploys).
# Per host: where its node exporter listens, when ansible_host is no address of the host.
NODE_EXPORTER_ADDRESS = "monitoring_node_exporter_address"
NODE_STATE = "opensearch_node_state"


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


def build_host_alerting(
    cluster: Cluster,
    variables: Mapping[str, Any],
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path | None,
) -> Alerting:
    """:func:`clusterforge.plan.monitoring.alerting.build_alerting` for the monitoring host, with
    the engine's watermark settings and certificate renewal window from the cluster's nodes."""
    first = nodes_vars[0][1] if nodes_vars else {}
    engine_settings = [
        dict(cluster.extra_settings),
        dict(first.get("opensearch_cluster_settings") or {}),
    ]
    renew = first.get("opensearch_cert_renew_within_days")
    if renew is None:
        renew = load_schema().default_of("opensearch_cert_renew_within_days")
    # The schedule as scripts/status judges it, so the age alert and status agree.
    schedule = declared_schedule(first)
    return build_alerting(
        variables,
        engine_settings=engine_settings,
        cert_renew_within_days=int(renew),
        rules_base_dir=inventory_dir,
        snapshot_schedule_allows=(
            None if schedule is None else int(schedule["allowed_age_seconds"])
        ),
    )


def _address(source: Any, name: str) -> str:
    """The host's ``ansible_host``, else its inventory name."""
    from clusterforge.plan.cluster.host_variables import host_address

    return host_address(source, name) or name


def more_than_one_host(names: Sequence[str]) -> str:
    """The refusal of a monitoring group of several hosts (the inventory check's and the
    plan's one wording)."""
    return (
        f"the monitoring group holds {', '.join(names)}; monitoring runs on exactly one "
        "host: put one host in the group monitoring"
    )


NO_CLUSTER = "the monitoring group needs the cluster it watches: the group opensearch is empty"


def _monitoring_host(source: Any) -> str | None:
    """The one host of the group monitoring (None without one); more than one, or one
    without a cluster, is refused."""
    monitoring_hosts = [str(name) for name in source.hosts(GROUP)]
    if not monitoring_hosts:
        return None
    if len(monitoring_hosts) > 1:
        raise InventoryError([more_than_one_host(monitoring_hosts)])
    if not source.hosts("opensearch"):
        raise InventoryError([NO_CLUSTER])
    return monitoring_hosts[0]


def _service_endpoints(
    source: Any, *, tls_protocols: Sequence[str], tls_ciphers: Sequence[str]
) -> list[ServiceEndpoint]:
    """Every proxied service host's HTTPS base URL and the first of its tokens; a service
    without a token is refused (Prometheus scrapes its /metrics with one)."""
    from clusterforge.plan.cluster.host_variables import services_vars
    from clusterforge.plan.services.tls_proxy import PROXIED_SERVICES, plan_tls_proxy

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
            url = proxy.urls(_address(source, service_host)).get(service)
            if url:
                endpoints.append(
                    ServiceEndpoint(
                        service=service,
                        host=str(service_host),
                        base_url=url,
                        token=str(tokens[0]),
                    )
                )
    return endpoints


def _exporter_hosts(source: Any) -> list[tuple[str, str]]:
    """(host, address) of every host of :data:`HOST_GROUPS`, each once; a node being
    removed (``opensearch_node_state: absent``) leaves the scrape targets in the run that
    removes it, or its exporter's ``up == 0`` fired until a later run."""
    exporter_hosts: list[tuple[str, str]] = []
    for group in HOST_GROUPS:
        for name in map(str, source.hosts(group)):
            if group == "opensearch" and _being_removed(source, name):
                continue
            if name not in {known for known, _address in exporter_hosts}:
                exporter_hosts.append((name, _exporter_address(source, name)))
    return exporter_hosts


def _being_removed(source: Any, name: str) -> bool:
    state = source.variables(name, NODE_STATE.__eq__).get(NODE_STATE)
    return str(state or "present") == "absent"


def _exporter_address(source: Any, name: str) -> str:
    """Where the host's node exporter listens: its own variable, else its address."""
    given = source.variables(name, NODE_EXPORTER_ADDRESS.__eq__).get(NODE_EXPORTER_ADDRESS)
    return str(given) if given else _address(source, name)


def read_monitoring_inputs(
    source: Any,
    *,
    inventory_dir: Path,
    tls_protocols: Sequence[str],
    tls_ciphers: Sequence[str],
    model: tuple[Cluster, Sequence[tuple[str, Mapping[str, Any]]]] | None = None,
) -> MonitoringInputs | None:
    """The monitoring host's inputs from ``source`` (a
    clusterforge.plan.cluster.host_variables.HostSource: a task's or an inventory on disk); None
    without a monitoring host. Refuses more than one, or none without a cluster.
    ``model``: the cluster model the caller built from the same source already."""
    from clusterforge.plan.cluster.host_variables import build_model
    from clusterforge.plan.cluster.model import plain_data

    host = _monitoring_host(source)
    if host is None:
        return None
    variables = dict(plain_data(source.variables(host, lambda name: name.startswith(PREFIX))))
    cluster, nodes_vars = model if model is not None else build_model(source, "opensearch")
    endpoints = _service_endpoints(source, tls_protocols=tls_protocols, tls_ciphers=tls_ciphers)
    alerting = build_host_alerting(cluster, variables, nodes_vars, inventory_dir=inventory_dir)
    wanted = set(alerting.secret_variables)
    secrets = dict(plain_data(source.variables(host, wanted.__contains__))) if wanted else {}
    return MonitoringInputs(
        host=host,
        variables=variables,
        cluster=cluster,
        settings=MonitoringSettings.of(host, _address(source, host), variables),
        services=tuple(endpoints),
        node_exporters=tuple(_exporter_hosts(source)),
        alerting=alerting,
        alerting_secrets=secrets,
    )
