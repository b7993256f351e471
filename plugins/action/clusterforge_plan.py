"""Action plugin: build the cluster model from the inventory and render every node's files.

Runs in the controller's Python (where the ``clusterforge`` package is installed), so
the roles never compute in Jinja what the library knows. Use it once per play with
``run_once: true``; the registered result carries one entry per node.

In a secured mode it also creates or reuses the CA and every certificate on the control
node (clusterforge.cluster_pki): the DNs in opensearch.yml come from them.

Arguments:
  group: the inventory group of the OpenSearch nodes (default: opensearch).
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
    _VALID_ARGS = frozenset({"group"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        group = self._task.args.get("group", "opensearch")
        hosts = task_vars.get("groups", {}).get(group, [])
        hostvars = task_vars.get("hostvars", {})
        nodes_vars = []
        for host in hosts:
            host_vars = hostvars[host]
            wanted = select_model_vars({key: None for key in host_vars})
            selected = {key: self._templar.template(host_vars[key]) for key in wanted}
            nodes_vars.append((host, selected))
        first = hostvars[hosts[0]] if hosts else {}
        inventory_dir = Path(first.get("inventory_dir") or Path.cwd())
        try:
            plan = plan_cluster(nodes_vars, inventory_dir=inventory_dir)
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(changed=False, **plan)
        return result
