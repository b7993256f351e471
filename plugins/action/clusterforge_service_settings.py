"""Action plugin: one host's settings of one service, as this run planned them.

Arguments:
  service: ``user_directory`` or ``order_service``.
  planned: the plan's ``services`` section (``{host: {service: settings}}``,
    clusterforge.plan.plan.build_plan), when playbooks/plan.yml planned this run
    (site.yml): the host's settings are copied from it.
  checked: the ``services`` the inventory check of this run returned
    (playbooks/check_inventory.yml keeps them as ``__clusterforge_checked_services``),
    for a run without a plan (services.yml alone): the host's settings are copied from
    it, with the order delivery's real password in place of the check's placeholder
    (clusterforge.plan.services_plan.with_search_password).

Neither copy validates anything again: the check validated the host's settings with the
service's own settings model, once, a PostgreSQL host's database URL included (the plan
builds it from the group postgresql's first host: clusterforge.plan.services_database;
copied from the check, its generated password is put in here, as the plan does). The host
is planned here, from its variables as the task sees them (inventory, facts set this
run, then role defaults), templated, through
:func:`clusterforge.plan.services_plan.plan_services`, only when neither holds it (the
role in a playbook of one's own). A refusal names every variable at fault; run it before
any task that changes the host, with ``any_errors_fatal: true``, so one bad host stops
every host.

Returns ``file_name``, ``public`` (the settings, secrets replaced by a mark),
``public_content``, ``arguments`` (the unit's command-line options) and ``content`` (the
settings file, secrets included); the result is marked no_log, so the content is never
printed, while a failure's message, which holds no secret, still is.

For the order service it also decides delivery into the inventory's cluster (the
``opensearch`` group) exactly as the plan does (clusterforge.plan.orders_search), and
returns ``orders_search``: its public part (enabled, URLs, user name, the CA bundle to
copy; never the password).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.inventory.variables import TaskHosts, build_model, database_vars, service_vars
    from clusterforge.plan.model import plain_data
    from clusterforge.plan.orders_search import DISABLED, OrdersSearch, plan_for_cluster
    from clusterforge.plan.services_database import database_server, with_database_passwords
    from clusterforge.plan.services_plan import (
        SERVICES,
        plan_services,
        service_hosts_variables,
        with_search_password,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

CLUSTER_GROUP = "opensearch"
# The services' role defaults are read from the collection this action belongs to (as
# the plan action finds its project), not from wherever the package is installed.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"service", "planned", "checked"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        service = self._task.args.get("service")
        if service not in SERVICES:
            raise AnsibleActionFail(
                f"clusterforge_service_settings: service is {service!r}; set it to one of "
                f"{', '.join(sorted(SERVICES))}"
            )
        host = str(task_vars.get("inventory_hostname"))
        planned = _section(self._task.args.get("planned"), "planned")
        checked = _section(self._task.args.get("checked"), "checked")
        hosts = TaskHosts(task_vars, self._templar.template)
        try:
            search = self._orders_search(hosts, task_vars) if service == "order_service" else None
            if _has_content(planned, host, service):
                settings = dict(planned[host][service])
            elif _has_content(checked, host, service):
                copied = with_search_password({host: {service: checked[host][service]}}, search)
                settings = with_database_passwords(copied)[host][service]
            else:
                settings = self._plan_here(service, host, hosts, task_vars, search)
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(settings)
        if service == "order_service":
            result["orders_search"] = search.public() if search else dict(DISABLED)
        result["changed"] = False
        result["_ansible_no_log"] = True
        return result

    def _plan_here(
        self,
        service: str,
        host: str,
        hosts: TaskHosts,
        task_vars: dict[str, Any],
        search: OrdersSearch | None,
    ) -> dict[str, Any]:
        """This host's settings planned from the variables as the task sees them
        (inventory, facts set this run, then role defaults), templated."""
        prefix = f"{service}_"
        variables = {
            name: self._templar.template(value)
            for name, value in task_vars.items()
            if name.startswith((prefix, "tls_proxy_listen_address"))
        }
        inventory_dir = Path(task_vars.get("inventory_dir") or Path.cwd())
        planned = plan_services(
            {service: [host]},
            {host: variables},
            defaults={service: {}},
            orders_search=search,
            database=database_server(database_vars(hosts), inventory_dir=inventory_dir),
        )[host][service].as_dict(with_secrets=True)
        return with_database_passwords({host: {service: planned}})[host][service]

    def _orders_search(self, hosts: TaskHosts, task_vars: dict[str, Any]) -> OrdersSearch | None:
        """Delivery as the plan decides it, from the cluster's and the services' variables."""
        cluster = None
        inventory_dir = hosts.directory(
            [CLUSTER_GROUP], default=Path(task_vars.get("inventory_dir") or Path.cwd())
        )
        if hosts.hosts(CLUSTER_GROUP):
            cluster, _node_models = build_model(hosts, CLUSTER_GROUP)
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
