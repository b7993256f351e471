"""Action plugin: the plan (clusterforge.plan.plan.build_plan), computed on the control node.

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
  validate_only: true checks the whole inventory (clusterforge.plan.plan.validate_inventory)
    and stops there: no certificate, no secret, no download, nothing written. The first
    play of every playbook (playbooks/check-inventory.yml) runs it on localhost, before
    any connection; its result holds only ``checked`` and ``model_warnings``.

The services' hosts (the groups named like their roles, user_directory and
order_service) are planned too: their settings are validated by the services' own
settings models here, before any host changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from clusterforge.cli import inventory_read_problem, select_model_vars, select_service_vars
from clusterforge.errors import ClusterforgeError, InventoryError
from clusterforge.plan.model import plain_data
from clusterforge.plan.plan import build_plan, validate_inventory, with_observed
from clusterforge.plan.services_plan import SERVICES

# Plugins built from this project's folders (source: build) are found relative to the
# checkout this action belongs to, whichever playbook (site.yml, a molecule verify) runs it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        {"group", "console_group", "observed", "planned", "security_files", "validate_only"}
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        try:
            return self._plan(result, task_vars or {})
        except AnsibleActionFail:
            raise
        except AnsibleError as error:
            # Reading a host's variables is where Ansible meets a vault without its
            # password or a group_vars file it cannot parse: say which file and what to do.
            raise AnsibleActionFail(inventory_read_problem(error)) from None

    def _plan(self, result: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        groups = task_vars.get("groups", {})
        hosts = groups.get(self._task.args.get("group", "opensearch"), [])
        console_hosts = groups.get(self._task.args.get("console_group", "dashboards"), [])
        hostvars = task_vars.get("hostvars", {})
        # The inventory's directory, from any host of the groups planned (a services-only
        # inventory has no OpenSearch host).
        anyone = next(
            iter([*hosts, *(host for service in SERVICES for host in groups.get(service, []))]),
            None,
        )
        first = hostvars[anyone] if anyone else {}
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
        nodes_vars = [(host, self._model_vars(hostvars[host])) for host in hosts]
        consoles_vars = [(host, self._model_vars(hostvars[host])) for host in console_hosts]
        services_vars = {
            service: [
                (host, self._templated(select_service_vars(hostvars[host])))
                for host in groups.get(service, [])
            ]
            for service in SERVICES
        }
        try:
            if boolean(self._task.args.get("validate_only", False)):
                if not nodes_vars and not any(services_vars.values()):
                    raise InventoryError(
                        [
                            "the inventory has no host in the group 'opensearch' nor in a "
                            f"service's group ({', '.join(SERVICES)}); check -i and the "
                            "inventory's files (a file Ansible could not parse is skipped "
                            "with a warning above)"
                        ]
                    )
                validated = validate_inventory(
                    nodes_vars,
                    inventory_dir=inventory_dir,
                    consoles_vars=consoles_vars,
                    project_root=PROJECT_ROOT,
                    services_vars=services_vars,
                )
                result.update(changed=False, checked=True, model_warnings=list(validated.warnings))
                return result
            plan = build_plan(
                nodes_vars,
                inventory_dir=inventory_dir,
                consoles_vars=consoles_vars,
                observed=plain_data(self._task.args.get("observed") or {}),
                project_root=PROJECT_ROOT,
                services_vars=services_vars,
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
