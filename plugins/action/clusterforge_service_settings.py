"""Action plugin: one host's settings of one service, validated by the service's own model.

Arguments:
  service: ``user_directory`` or ``order_service``.
Runs on the control node (no connection to the host) through
:func:`clusterforge.services_plan.plan_services`, with the host's ``<service>_*``
variables as the task sees them (inventory, then role defaults), templated. Fails,
naming every variable at fault, when the service would refuse its settings. Returns
``file_name``, ``public`` (the settings, secrets replaced by a mark), ``arguments`` (the
unit's command-line options) and ``content`` (the settings file, secrets included); the
result is marked no_log, so the content is never printed, while a failure's message,
which holds no secret, still is. Run it before any task that changes the host, with
``any_errors_fatal: true``, so one bad host stops every host.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.errors import ClusterforgeError
from clusterforge.services_plan import SERVICES, plan_services


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
            if name.startswith(prefix)
        }
        try:
            planned = plan_services({service: [host]}, {host: variables}, defaults={service: {}})[
                host
            ][service]
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(planned.as_dict(with_secrets=True))
        result["changed"] = False
        result["_ansible_no_log"] = True
        return result
