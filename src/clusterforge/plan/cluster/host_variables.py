"""The host variables the model and the services' plan read, wherever they come from.

Which host variables the model reads (``opensearch_*``, ``dashboards_*``, ``ansible_host``)
and which the services' plan reads (``<service>_*``), taken from a :class:`HostSource`
and templated, and the cluster model built from them. Two sources exist: the variables a
task sees (:class:`TaskHosts`, for the action plugins) and an inventory read from disk
(clusterforge.inventory.variables, for ``scripts/render`` and ``scripts/status``). Kept in
the plan's package so that planners which read a source (the monitoring's inputs, the
issuing CA) import nothing above the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from clusterforge.plan.cluster.model import Cluster, build_cluster, plain_data
from clusterforge.schema import load_schema

CLUSTER_GROUP = "opensearch"
CONSOLE_GROUP = "dashboards"
# The services, from the schema as services_plan takes them: importing them from
# services_plan would make the cluster's package import the services' above it.
SERVICES = load_schema().services
# The prefixes of the variables the model reads (and checks names of): schema.yml's.
_MODEL_PREFIXES = load_schema().checked_prefixes
_MODEL_KEYS = ("ansible_host",)
# tls_proxy_: where the services' proxy listens decides who reaches them.
_SERVICE_PREFIXES = (*(f"{service}_" for service in SERVICES), "tls_proxy_")

HostVars = list[tuple[str, dict[str, Any]]]


def is_model_variable(name: str) -> bool:
    """A variable the model reads (the cluster's and the console's, and ``ansible_host``)."""
    return name.startswith(_MODEL_PREFIXES) or name in _MODEL_KEYS


def is_service_variable(name: str) -> bool:
    """A variable the services' plan reads (``user_directory_*``, ``order_service_*``)."""
    return name.startswith(_SERVICE_PREFIXES)


class HostSource(Protocol):
    """Where host variables come from: an inventory on disk, or a task's variables."""

    def hosts(self, group: str) -> list[str]:
        """The inventory names of ``group``'s hosts."""

    def variables(self, host: str, wanted: Callable[[str], bool]) -> dict[str, Any]:
        """``host``'s variables whose names are ``wanted``, templated."""


class TaskHosts:
    """The inventory as an action plugin sees it: the task's ``groups`` and ``hostvars``,
    each value templated by the action's templar only once it is wanted."""

    def __init__(self, task_vars: Mapping[str, Any], template: Callable[[Any], Any]) -> None:
        self._task_vars = task_vars
        self._groups: Mapping[str, Sequence[str]] = task_vars.get("groups", {})
        self._hostvars: Mapping[str, Mapping[str, Any]] = task_vars.get("hostvars", {})
        self._template = template

    def hosts(self, group: str) -> list[str]:
        return list(self._groups.get(group, []))

    def variables(self, host: str, wanted: Callable[[str], bool]) -> dict[str, Any]:
        host_vars = self._hostvars[host]
        return {key: self._template(host_vars[key]) for key in host_vars if wanted(key)}

    def directory(self, groups: Sequence[str], default: Path | None = None) -> Path:
        """The inventory's directory, from the first host of ``groups`` that has one."""
        first = next((host for group in groups for host in self.hosts(group)), None)
        found = self._hostvars[first].get("inventory_dir") if first else None
        return Path(found) if found else (default or Path.cwd())


def model_vars(source: HostSource, group: str = CLUSTER_GROUP) -> HostVars:
    """(inventory name, the variables the model reads, templated) for every host of
    ``group``: the only place they are chosen."""
    return [(host, source.variables(host, is_model_variable)) for host in source.hosts(group)]


def service_vars(source: HostSource, service: str) -> HostVars:
    """(inventory name, the services' variables, templated) for every host of the group
    ``service``."""
    return [
        (host, plain_data(source.variables(host, is_service_variable)))
        for host in source.hosts(service)
    ]


def services_vars(source: HostSource) -> dict[str, HostVars]:
    """:func:`service_vars` of every service's group."""
    return {service: service_vars(source, service) for service in SERVICES}


def host_address(source: HostSource, host: str) -> str:
    """``host``'s ``ansible_host``, templated; empty when it has none."""
    found = source.variables(host, lambda name: name == "ansible_host").get("ansible_host")
    return str(found or "")


def service_addresses(source: HostSource) -> dict[str, str]:
    """Every service host's ``ansible_host`` (empty when it has none): where its TLS
    proxy is reached (clusterforge.plan.services.tls_proxy.plan_tls_proxies)."""
    return {
        host: host_address(source, host) for service in SERVICES for host in source.hosts(service)
    }


def database_vars(source: HostSource) -> HostVars:
    """(inventory name, its ``postgresql_*`` variables, templated) for every host of the
    group postgresql: the db host a service on PostgreSQL connects to
    (clusterforge.plan.services.services_database)."""
    return [
        (host, plain_data(source.variables(host, lambda name: name.startswith("postgresql_"))))
        for host in source.hosts("postgresql")
    ]


def build_model(source: HostSource, group: str = CLUSTER_GROUP) -> tuple[Cluster, HostVars]:
    """The cluster model of ``group``'s hosts, with the variables it was built from."""
    nodes = model_vars(source, group)
    return build_cluster(nodes), nodes
