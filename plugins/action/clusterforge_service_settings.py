"""Action plugin: one host's settings of one service, copied from this run's plan.

Arguments:
  service: ``user_directory`` or ``order_service``.
  planned: the services' part of this run's plan, ``{services, orders_search}``: the
    plan's (site.yml: playbooks/plan.yml, clusterforge.plan.plan.build_plan) or, in a run
    without that plan (services.yml alone), playbooks/services_plan.yml's
    (``__clusterforge_services_plan``: the inventory check's settings with the run's
    passwords put in, on the control node).

Nothing is planned or validated here: the inventory check validated each service host's
settings once, with the service's own settings model, and the plan put the passwords in.
A host the plan does not hold (the role in a playbook of one's own, without the check
and the plan) is refused, naming the playbooks that plan it; run this before any task
that changes the host, with ``any_errors_fatal: true``, so one such host stops every
host.

Returns ``file_name``, ``public`` (the settings, secrets replaced by a mark),
``public_content``, ``arguments`` (the unit's command-line options) and ``content`` (the
settings file, secrets included); the result is marked no_log, so the content is never
printed, while a failure's message, which holds no secret, still is. For the order
service it also returns ``orders_search``, the public part of its delivery into the
cluster as the plan decided it (enabled, URLs, user name, the CA bundle to copy; never
the password).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.plan.cluster.model import plain_data
    from clusterforge.schema import load_schema

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

PLANNED_BY = (
    "run the role through playbooks/services.yml or playbooks/site.yml, which check the "
    "inventory and plan the services' settings on the control node first"
)


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"service", "planned"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        service = self._task.args.get("service")
        services = load_schema().services
        if service not in services:
            raise AnsibleActionFail(
                f"clusterforge_service_settings: service is {service!r}; set it to one of "
                f"{', '.join(sorted(services))}"
            )
        host = str(task_vars.get("inventory_hostname"))
        planned = _mapping(self._task.args.get("planned"), "planned")
        settings = (_mapping(planned.get("services"), "planned.services").get(host) or {}).get(
            service
        )
        if not isinstance(settings, Mapping) or "content" not in settings:
            raise AnsibleActionFail(
                f"clusterforge_service_settings: this run planned no {service} settings for "
                f"{host}: {PLANNED_BY}"
            )
        result.update(settings)
        if service == "order_service":
            search = planned.get("orders_search")
            if not isinstance(search, Mapping) or "enabled" not in search:
                raise AnsibleActionFail(
                    "clusterforge_service_settings: this run planned no order delivery "
                    f"(planned.orders_search): {PLANNED_BY}"
                )
            result["orders_search"] = dict(search)
        result["changed"] = False
        result["_ansible_no_log"] = True
        return result


def _mapping(value: Any, name: str) -> dict[str, Any]:
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise AnsibleActionFail(f"clusterforge_service_settings: {name} must be a mapping")
    section: dict[str, Any] = plain_data(value)
    return section
