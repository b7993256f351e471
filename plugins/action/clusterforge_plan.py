"""Action plugin: build the cluster model from the inventory and render every node's files.

Runs in the controller's Python (where the ``clusterforge`` package is installed), so
the roles never compute in Jinja what the library knows. Use it once per play with
``run_once: true``; the registered result carries one entry per node.

In a secured mode it also creates or reuses the CA and every certificate on the control
node (clusterforge.cluster_pki): the DNs in opensearch.yml come from them.

It also plans the console hosts (``console_group``): their settings, and their
Dashboards archive fetched and checked against the engine version.

Arguments:
  group: the inventory group of the OpenSearch nodes (default: opensearch).
  console_group: the inventory group of the console hosts (default: dashboards; a group
    that does not exist plans no console).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.cli import select_model_vars
from clusterforge.errors import ClusterforgeError
from clusterforge.plan import plan_cluster


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"group", "console_group"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        groups = task_vars.get("groups", {})
        hosts = groups.get(self._task.args.get("group", "opensearch"), [])
        console_hosts = groups.get(self._task.args.get("console_group", "dashboards"), [])
        hostvars = task_vars.get("hostvars", {})
        first = hostvars[hosts[0]] if hosts else {}
        inventory_dir = Path(first.get("inventory_dir") or Path.cwd())
        try:
            plan = plan_cluster(
                [(host, self._model_vars(hostvars[host])) for host in hosts],
                inventory_dir=inventory_dir,
                consoles_vars=[(host, self._model_vars(hostvars[host])) for host in console_hosts],
            )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(changed=False, **plan)
        return result

    def _model_vars(self, host_vars: Any) -> dict[str, Any]:
        """The variables the model reads from one host, templated."""
        wanted = select_model_vars({key: None for key in host_vars})
        return {key: self._templar.template(host_vars[key]) for key in wanted}
