"""Action plugin: the settings of one service's hosts in the play, as this run planned them.

Arguments:
  service: ``user_directory`` or ``order_service``.
  planned: the plan's ``services`` section (``{host: {service: settings}}``,
    clusterforge.plan.plan.build_plan), when playbooks/plan.yml planned this run
    (site.yml): a host's settings are copied from it.
  checked: the ``services`` the inventory check of this run returned
    (playbooks/check-inventory.yml keeps them as ``__clusterforge_checked_services``),
    for a run without a plan (services.yml alone): a host's settings are copied from it,
    with the order delivery's real password in place of the check's placeholder
    (clusterforge.plan.services_plan.with_search_password).

Run it once per play (``run_once: true``, ``delegate_to: localhost``). Neither source
validates anything again: the check validated each host's settings with the service's
own settings model, once. Only a host that neither holds (the role included in a play of
one's own, without check-inventory.yml) is planned here, all such hosts in one call of
:func:`clusterforge.plan.services_plan.plan_services_section`; a refusal names every
variable at fault.

Returns ``hosts``: per host of the play, ``file_name``, ``public`` (the settings, secrets
replaced by a mark), ``public_content``, ``arguments`` (the unit's command-line options)
and ``content`` (the settings file, secrets included), and for the order service
``orders_search``, the delivery's public part (enabled, URLs, user name, the CA bundle to
copy; never the password), decided from the cluster's and the services' variables as the
plan decides it (clusterforge.plan.orders_search). The result is marked no_log, so the
content is never printed, while a failure's message, which holds no secret, still is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.errors import ClusterforgeError
from clusterforge.inventory.variables import TaskHosts, build_model, service_vars
from clusterforge.plan.model import plain_data
from clusterforge.plan.orders_search import DISABLED, OrdersSearch, plan_for_cluster
from clusterforge.plan.services_plan import (
    SERVICES,
    plan_services_section,
    service_hosts_variables,
    with_search_password,
)

CLUSTER_GROUP = "opensearch"
# The services' role defaults are read from the collection this action belongs to (as
# the plan action finds its project), not from wherever the package is installed.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"service", "planned", "checked"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        service = self._task.args.get("service")
        if service not in SERVICES:
            raise AnsibleActionFail(
                f"clusterforge_service_settings: service is {service!r}; set it to one of "
                f"{', '.join(sorted(SERVICES))}"
            )
        play_hosts = [str(host) for host in task_vars.get("ansible_play_hosts_all") or []]
        if not play_hosts:
            play_hosts = [str(task_vars.get("inventory_hostname"))]
        planned = _section(self._task.args.get("planned"), "planned")
        checked = _section(self._task.args.get("checked"), "checked")
        hosts = TaskHosts(task_vars, self._templar.template)
        try:
            search = self._orders_search(hosts, task_vars) if service == "order_service" else None
            settings = self._settings(service, play_hosts, planned, checked, search, hosts)
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        if service == "order_service":
            public_search = search.public() if search else dict(DISABLED)
            for host_settings in settings.values():
                host_settings["orders_search"] = public_search
        result.update(hosts=settings, changed=False, _ansible_no_log=True)
        return result

    def _settings(
        self,
        service: str,
        play_hosts: list[str],
        planned: dict[str, Any],
        checked: dict[str, Any],
        search: OrdersSearch | None,
        hosts: TaskHosts,
    ) -> dict[str, dict[str, Any]]:
        """Each play host's settings: the plan's, else the check's with the real password,
        else (neither holds the host) planned here, every such host in one call."""
        settings: dict[str, dict[str, Any]] = {}
        from_check: dict[str, dict[str, Any]] = {}
        for host in play_hosts:
            if _has_content(planned, host, service):
                settings[host] = dict(planned[host][service])
            elif _has_content(checked, host, service):
                from_check[host] = {service: checked[host][service]}
        for host, by_service in with_search_password(from_check, search).items():
            settings[host] = by_service[service]
        missing = [host for host in play_hosts if host not in settings]
        if missing:
            own = [(host, variables) for host, variables in service_vars(hosts, service)]
            section = plan_services_section(
                {service: [(host, variables) for host, variables in own if host in missing]},
                PROJECT_ROOT,
                search,
                with_secrets=True,
            )
            for host, by_service in section.items():
                settings[host] = by_service[service]
        unplanned = [host for host in play_hosts if host not in settings]
        if unplanned:
            raise ClusterforgeError(
                f"{', '.join(unplanned)}: not in the inventory group {service!r}, so no "
                f"{service} settings are planned for it; run the {service} role on the hosts "
                "of that group"
            )
        return settings

    def _orders_search(self, hosts: TaskHosts, task_vars: dict[str, Any]) -> OrdersSearch | None:
        """Delivery as the plan decides it, from the cluster's and the services' variables."""
        cluster = None
        inventory_dir = hosts.directory(
            [CLUSTER_GROUP], default=Path(task_vars.get("inventory_dir") or Path.cwd())
        )
        if hosts.hosts(CLUSTER_GROUP):
            cluster, _ = build_model(hosts, CLUSTER_GROUP)
        service_hosts = service_vars(hosts, "order_service")
        return plan_for_cluster(
            cluster,
            service_hosts_variables("order_service", service_hosts, checkout=PROJECT_ROOT),
            inventory_dir=inventory_dir,
        )


def _section(value: Any, name: str) -> dict[str, Any]:
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise AnsibleActionFail(f"clusterforge_service_settings: {name} must be a mapping")
    section: dict[str, Any] = plain_data(value)
    return section


def _has_content(section: Mapping[str, Any], host: str, service: str) -> bool:
    settings = (section.get(host) or {}).get(service)
    return isinstance(settings, Mapping) and "content" in settings
