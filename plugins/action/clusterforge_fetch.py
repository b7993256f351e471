"""Action plugin: put the engine (and security plugin) archives into the control node's
cache, once, and check the plugin fits the engine before any host is touched.

Arguments:
  cluster: the ``cluster`` mapping from clusterforge_plan's result.
Returns ``engine`` and ``security_plugin`` (a path, or None when the engine bundles it);
changed when anything was fetched.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.artifacts import fetch_engine, fetch_security_plugin
from clusterforge.errors import ClusterforgeError
from clusterforge.model import Distribution


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"cluster"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        cluster = self._task.args["cluster"]
        try:
            engine = fetch_engine(Distribution(**dict(cluster["distribution"])))
            plugin = None
            if not cluster["bundles_security_plugin"]:
                plugin = fetch_security_plugin(cluster["version"], cluster["security_plugin_path"])
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(
            changed=engine.fetched or bool(plugin and plugin.fetched),
            engine=str(engine.path),
            security_plugin=str(plugin.path) if plugin else None,
        )
        return result
