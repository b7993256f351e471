"""Action plugin: the plan (clusterforge.plan.build_plan), computed on the control node.

The one place the playbooks get what the hosts must hold: the validated model, every
node's files, the certificates (created or reused), the security files (bcrypt hashes,
never passwords), the archives fetched and checked, the console, and the rollout
decided from what the nodes report (``observed``). ``scripts/render`` calls the same
function. Use it once per play with ``run_once: true`` and ``delegate_to: localhost``.

Its result holds password hashes, so a successful result is censored in the output
(``_ansible_no_log``); a refusal (bad inventory, downgrade, bad archive) is shown in full.

Arguments:
  group: the inventory group of the OpenSearch nodes (default: opensearch).
  console_group: the group of the console hosts (default: dashboards; none plans none).
  security_files: false leaves the security files out of the plan (default true), for a
    playbook that places none: their bcrypt checks are most of a plan's time.
  observed: per inventory name, what playbooks/plan.yml's read-only look found on the
    node (version, active, formed, security_mode, cluster_manager); default: nothing,
    every node is new.

The services' hosts (the groups named like their roles, user_directory and
order_service) are planned too: their settings are validated by the services' own
settings models here, before any host changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from clusterforge.cli import select_model_vars, select_service_vars
from clusterforge.errors import ClusterforgeError
from clusterforge.model import plain_data
from clusterforge.plan import build_plan, with_observed
from clusterforge.services_plan import SERVICES

# Plugins built from this project's folders (source: build) are found relative to the
# checkout this action belongs to, whichever playbook (site.yml, a molecule verify) runs it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"group", "console_group", "observed", "planned", "security_files"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        groups = task_vars.get("groups", {})
        hosts = groups.get(self._task.args.get("group", "opensearch"), [])
        console_hosts = groups.get(self._task.args.get("console_group", "dashboards"), [])
        hostvars = task_vars.get("hostvars", {})
        first = hostvars[hosts[0]] if hosts else {}
        inventory_dir = Path(first.get("inventory_dir") or Path.cwd())
        planned = self._task.args.get("planned")
        if planned:
            try:
                plan = with_observed(
                    plain_data(planned),
                    [(host, self._model_vars(hostvars[host])) for host in hosts],
                    plain_data(self._task.args.get("observed") or {}),
                )
            except ClusterforgeError as error:
                raise AnsibleActionFail(str(error)) from None
            result.update(changed=False, _ansible_no_log=True, **plan)
            return result
        try:
            plan = build_plan(
                [(host, self._model_vars(hostvars[host])) for host in hosts],
                inventory_dir=inventory_dir,
                consoles_vars=[(host, self._model_vars(hostvars[host])) for host in console_hosts],
                observed=plain_data(self._task.args.get("observed") or {}),
                project_root=PROJECT_ROOT,
                services_vars={
                    service: [
                        (host, self._templated(select_service_vars(hostvars[host])))
                        for host in groups.get(service, [])
                    ]
                    for service in SERVICES
                },
                security_files=boolean(self._task.args.get("security_files", True)),
            )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        changed = bool(plan["artifacts"] and plan["artifacts"]["fetched"])
        result.update(changed=changed, _ansible_no_log=True, **plan)
        return result

    def _model_vars(self, host_vars: Any) -> dict[str, Any]:
        """The variables the model reads from one host, templated."""
        wanted = select_model_vars({key: None for key in host_vars})
        return {key: self._templar.template(host_vars[key]) for key in wanted}

    def _templated(self, variables: dict[str, Any]) -> dict[str, Any]:
        return {key: plain_data(self._templar.template(value)) for key, value in variables.items()}
