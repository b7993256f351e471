"""Action plugin: one host's settings of one service, validated by the service's own model.

Arguments:
  service: ``user_directory`` or ``order_service``.
Runs on the control node (no connection to the host) through
:func:`clusterforge.plan.services_plan.plan_services`, with the host's ``<service>_*``
variables as the task sees them (inventory, then role defaults), templated. Fails,
naming every variable at fault, when the service would refuse its settings. Returns
``file_name``, ``public`` (the settings, secrets replaced by a mark), ``arguments`` (the
unit's command-line options) and ``content`` (the settings file, secrets included); the
result is marked no_log, so the content is never printed, while a failure's message,
which holds no secret, still is. Run it before any task that changes the host, with
``any_errors_fatal: true``, so one bad host stops every host.

For the order service it also decides delivery into the inventory's cluster (the
``opensearch`` group) exactly as the plan does (clusterforge.plan.orders_search), so a run of
playbooks/services.yml alone writes what site.yml planned, and returns ``orders_search``:
its public part (enabled, URLs, user name, the CA bundle to copy; never the password).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.errors import ClusterforgeError
from clusterforge.inventory.variables import TaskHosts, build_model, service_vars
from clusterforge.plan.orders_search import DISABLED, OrdersSearch, plan_for_cluster
from clusterforge.plan.services_plan import SERVICES, plan_services, service_hosts_variables

CLUSTER_GROUP = "opensearch"
# The order_service role's defaults are read from the collection this action belongs to
# (as the plan action finds its project), not from wherever the package is installed.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"service"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        service = self._task.args.get("service")
        if service not in SERVICES:
            raise AnsibleActionFail(
                f"clusterforge_service_settings: service is {service!r}; set it to one of "
                f"{', '.join(sorted(SERVICES))}"
            )
        host = str(task_vars.get("inventory_hostname"))
        prefix = f"{service}_"
        # Role defaults are in task_vars here, so a variable the inventory leaves out gets
        # the value the role would use.
        variables = {
            name: self._templar.template(value)
            for name, value in task_vars.items()
            if name.startswith((prefix, "tls_proxy_listen_address"))
        }
        try:
            search = self._orders_search(task_vars) if service == "order_service" else None
            planned = plan_services(
                {service: [host]},
                {host: variables},
                defaults={service: {}},
                orders_search=search,
            )[host][service]
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(planned.as_dict(with_secrets=True))
        if service == "order_service":
            result["orders_search"] = search.public() if search else dict(DISABLED)
        result["changed"] = False
        result["_ansible_no_log"] = True
        return result

    def _orders_search(self, task_vars: dict[str, Any]) -> OrdersSearch | None:
        """Delivery as the plan decides it, from the cluster's and the services' variables."""
        hosts = TaskHosts(task_vars, self._templar.template)
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
