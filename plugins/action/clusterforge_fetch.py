"""Action plugin: put the engine (and security plugin) archives into the control node's
cache, once, and check the plugin fits the engine before any host is touched.

Arguments:
  cluster: the ``cluster`` mapping from clusterforge_plan's result.
Returns ``engine``, ``security_plugin`` (a path, or None when the engine bundles it) and
``plugins`` (per plugin: name, state, and for present ones the cached zip and the
version its descriptor names); changed when anything was fetched or built. Plugins with
source ``build`` are built with Maven from this project's folders, relative paths taken
from the project root (the folder above playbooks/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.artifacts import fetch_engine, fetch_security_plugin
from clusterforge.errors import ClusterforgeError
from clusterforge.model import Distribution, PluginSpec
from clusterforge.plugins import fetch_plugin


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
            project_root = Path((task_vars or {}).get("playbook_dir") or Path.cwd()).parent
            plugins = []
            fetched_any = False
            for entry in cluster["plugins"]:
                spec = PluginSpec(**dict(entry))
                if spec.state == "absent":
                    plugins.append({"name": spec.name, "state": "absent"})
                    continue
                artifact, descriptor = fetch_plugin(
                    spec,
                    engine_version=cluster["version"],
                    engine_archive=engine.path,
                    project_root=project_root,
                )
                fetched_any = fetched_any or artifact.fetched
                plugins.append(
                    {
                        "name": spec.name,
                        "state": "present",
                        "path": str(artifact.path),
                        "version": descriptor.version,
                    }
                )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(
            changed=engine.fetched or bool(plugin and plugin.fetched) or fetched_any,
            engine=str(engine.path),
            security_plugin=str(plugin.path) if plugin else None,
            plugins=plugins,
        )
        return result
