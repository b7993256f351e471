"""Action plugin: what one node runs now, for the plan's rollout (playbooks/plan.yml).

One task reads what six tasks read before (issue 14: every task costs the controller
more than its reads): the service's state, the markers a formed cluster leaves, the
version the node answers, the elected cluster manager, the host's memory (the plan
refuses a heap above half of it, so no play gathers facts for it), and, only when nodes
are being removed, the cluster's members and its indices' replica settings. Everything
here is a read, so it runs in check mode as well: a preview decides what restarts as a
run would.

The reads run on the node, in one run of the module of the same name
(plugins/modules/clusterforge_observe.py): the unit's state, the markers, the memory and
opensearch.yml, and the node's own API with the URL, the CA and the admin user that
clusterforge_api would use (ApiActionBase._uri_args, from the plan). They were four
module runs per node, each a round trip, on every rerun (issue 54). A node whose service
does not run is asked nothing; a node that does not answer reports no version, as a new
node does. This side decides only what needs the controller (whether the host is a node
of the plan, its URL and credentials) and shapes the module's reads into ``observed``.

Arguments:
  service: the systemd unit (opensearch).
  markers: ``{"formed": path, "security_mode": path, ...}`` on the node, in the toolkit's
    root-only state directory.
  legacy_markers: the same markers where releases before issue 32 kept them (the data
    path, which the service user owns). A node not rerun since still has them there
    until roles/opensearch moves them; until then an old formed marker counts, so a
    formed cluster is not bootstrapped again. They are tested for, never read (the
    service user could have left a link to any file there): an old mode marker tells no
    mode until it is moved, so a mode switch in that same run is not seen.
  config: the node's opensearch.yml (the plan's ``cluster.config_dir``/opensearch.yml). Its
    text comes back as ``opensearch_yml`` (None when the file is missing, or when no path
    was given), so the plan decides which of its changed settings need a restart
    (``rollout.nodes[host].config_restart``). It holds no secret: the plan renders it with
    none (its text is in the plan, and roles/opensearch reads it back the same way).
  removal: true when the plan removes nodes (``removal.names``), to read the members (with
    their node ids), the replica settings and the voting configuration the plan judges a
    removal by.

Returns ``observed`` in the shape clusterforge.plan.cluster.restarts.plan_rollout and plan_removal
read.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible_collections.clusterforge.stack.plugins.plugin_utils.api_action import (
    ApiActionBase,
)
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.plan.cluster.restarts import memory_megabytes

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

READ_TIMEOUT_S = 10
# The markers the plan judges by; the others (what securityadmin loaded) are the
# security role's.
OBSERVED_MARKERS = ("formed", "security_mode")
# ApiActionBase._uri_args' keys the module takes, by the name of its hidden argument.
# Observe reads with the default auth (admin: basic auth when the cluster is secured), so
# no client certificate or key is ever sent to the node.
API_ARGUMENTS = {
    "url": "_api_url",
    "ca_path": "_api_ca_path",
    "url_username": "_api_username",
    "url_password": "_api_password",
    "force_basic_auth": "_api_force_basic_auth",
    "timeout": "_api_timeout",
}


class ActionModule(ApiActionBase):  # type: ignore[misc]
    _VALID_ARGS = frozenset({"service", "markers", "legacy_markers", "config", "removal"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        with self._even_in_check_mode():  # reads only; a preview needs their answers
            observed = self._observe(args, task_vars)
        result.update(changed=False, observed=observed)
        return result

    def _observe(self, args: Any, task_vars: dict[str, Any]) -> dict[str, Any]:
        markers = dict(args["markers"])
        config = args.get("config")
        module_args: dict[str, Any] = {
            "service": args["service"],
            "markers": {key: markers[key] for key in OBSERVED_MARKERS},
            # The old places are only tested, never read: the service user could have put
            # a link to any file (or to /dev/zero) there.
            "legacy_markers": dict(args.get("legacy_markers") or {}),
            "removal": args.get("removal", False),
        }
        if config:
            module_args["config"] = config
        plan = task_vars.get("__clusterforge_plan") or {}
        # A node marked absent has no URL in the plan, and what it runs does not matter:
        # it is about to be drained and stopped. Without a URL the module asks nothing.
        if task_vars.get("inventory_hostname") in (plan.get("nodes") or {}):
            module_args.update(self._api_arguments(task_vars))
        seen = self._run_module(
            "clusterforge.stack.clusterforge_observe",
            module_args,
            task_vars,
            failure="look at what the node runs",
        )
        read = seen.get("markers") or {}
        left = seen.get("legacy_markers") or {}
        mode_text = read.get("security_mode")
        observed: dict[str, Any] = {
            "memory_megabytes": memory_megabytes(seen.get("meminfo")),
            "active": bool(seen.get("active")),
            # Enabled at boot: running and enabled, the engine play starts nothing.
            "enabled": bool(seen.get("enabled")),
            "version": None,
            "cluster_manager": None,
            "formed": read.get("formed") is not None or bool(left.get("formed")),
            "cluster_nodes": [],
            "index_settings": None,
            "voting": None,
            "persistent_settings": None,
            "security_mode": None if mode_text is None else mode_text.strip(),
            # Any file left at an old place: roles/opensearch moves it this run.
            "legacy_markers": any(left.values()),
            # What the node's opensearch.yml holds now (None: missing, or not asked for).
            "opensearch_yml": seen.get("opensearch_yml") if config else None,
        }
        # Empty when the service does not run or the host is no node of the plan.
        api = seen.get("api") or {}
        root = api.get("root")
        if isinstance(root, dict):
            observed["version"] = (root.get("version") or {}).get("number")
        managers = api.get("cluster_manager")
        if isinstance(managers, list) and managers:
            observed["cluster_manager"] = managers[0].get("node")
        if "members" in api:
            # The plan refuses a removal that would cost the cluster its quorum or its
            # replicas; it judges from the cluster's own view, not the inventory's.
            members = api["members"] or {}
            observed["cluster_nodes"] = [
                {"id": node_id, **node} for node_id, node in (members.get("nodes") or {}).items()
            ]
            # None when the read failed: the plan then refuses to judge a removal blind.
            observed["index_settings"] = api.get("index_settings")
            # None when the read failed: the plan then counts the roles alone.
            state = api.get("voting")
            if isinstance(state, dict):
                coordination = (state.get("metadata") or {}).get("cluster_coordination") or {}
                observed["voting"] = {
                    "last_committed_config": list(coordination.get("last_committed_config") or []),
                    "voting_config_exclusions": list(
                        coordination.get("voting_config_exclusions") or []
                    ),
                }
            settings = api.get("persistent_settings")
            if isinstance(settings, dict):
                observed["persistent_settings"] = dict(settings.get("persistent") or {})
        return observed

    def _api_arguments(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        """The module's hidden ``_api_*`` arguments: this node's URL (the paths are the
        module's), the CA and the credentials clusterforge_api would use for a read."""
        uri_args = self._uri_args({"path": "", "timeout": READ_TIMEOUT_S}, "GET", task_vars)
        return {name: uri_args[key] for key, name in API_ARGUMENTS.items() if key in uri_args}
