"""Action plugin: what one node runs now, for the plan's rollout (playbooks/plan.yml).

One task reads what six tasks read before (issue 14: every task costs the controller
more than its reads): the service's state, the markers a formed cluster leaves, the
version the node answers, the elected cluster manager, the host's memory (the plan
refuses a heap above half of it, so no play gathers facts for it), and, only when nodes
are being removed, the cluster's members and its indices' replica settings. Everything
here is a read, so it runs in check mode as well: a preview decides what restarts as a
run would.

The reads run on the node: systemd_service and clusterforge_files (read only) for the
service and the markers, and the node's own API through clusterforge_api's arguments
(the CA and the admin user from the plan). A node whose service does not run is asked
nothing; a node that does not answer reports no version, as a new node does.

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

ROOT_PATH = "/"
MANAGER_PATH = "/_cat/cluster_manager?format=json"
MEMBERS_PATH = "/_nodes?filter_path=nodes.*.name,nodes.*.roles"
REPLICAS_PATH = (
    "/_settings/index.number_of_replicas,index.auto_expand_replicas"
    "?flat_settings=true&expand_wildcards=all"
)
# The committed voting configuration (node ids) and the voting exclusions: a node demoted
# by the run that began a removal still votes here
# (clusterforge.plan.cluster.removal.counted_managers).
VOTING_PATH = (
    "/_cluster/state/metadata?filter_path=metadata.cluster_coordination.last_committed_config,"
    "metadata.cluster_coordination.voting_config_exclusions"
)
# The persistent settings, for the allocation exclusion a removal's drain sets: a removal
# an earlier run began is finished rather than judged again (clusterforge.plan.cluster.removal).
SETTINGS_PATH = "/_cluster/settings?flat_settings=true&filter_path=persistent"
READ_TIMEOUT_S = 10
MEMINFO_PATH = "/proc/meminfo"
# The markers the plan judges by; the others (what securityadmin loaded) are the
# security role's.
OBSERVED_MARKERS = ("formed", "security_mode")


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
        service = self._run_module(
            "ansible.builtin.systemd_service", {"name": args["service"]}, task_vars
        )
        active = (service.get("status") or {}).get("ActiveState") == "active"
        markers = dict(args["markers"])
        legacy = dict(args.get("legacy_markers") or {})
        config = args.get("config")
        # The old places are only tested, never read: the service user could have put a
        # link to any file (or to /dev/zero) there.
        read = self._run_module(
            "clusterforge.stack.clusterforge_files",
            {
                "read": [
                    *(markers[key] for key in OBSERVED_MARKERS),
                    MEMINFO_PATH,
                    *([config] if config else []),
                ],
                "exists": list(legacy.values()),
            },
            task_vars,
        )
        before = read.get("before") or {}
        left = [path for path, there in (read.get("existed") or {}).items() if there]
        mode_text = before.get(markers["security_mode"])
        formed = before.get(markers["formed"]) is not None or (
            bool(legacy) and legacy["formed"] in left
        )
        observed: dict[str, Any] = {
            "memory_megabytes": memory_megabytes(before.get(MEMINFO_PATH)),
            "active": active,
            "version": None,
            "cluster_manager": None,
            "formed": formed,
            "cluster_nodes": [],
            "index_settings": None,
            "voting": None,
            "persistent_settings": None,
            "security_mode": None if mode_text is None else mode_text.strip(),
            # Any file left at an old place: roles/opensearch moves it this run.
            "legacy_markers": bool(left),
            # What the node's opensearch.yml holds now (None: missing, or not asked for).
            "opensearch_yml": before.get(config) if config else None,
        }
        plan = task_vars.get("__clusterforge_plan") or {}
        # A node marked absent has no URL in the plan, and what it runs does not matter:
        # it is about to be drained and stopped.
        if not active or task_vars.get("inventory_hostname") not in (plan.get("nodes") or {}):
            return observed
        root = self._read(ROOT_PATH, task_vars)
        observed["version"] = ((root or {}).get("version") or {}).get("number")
        managers = self._read(MANAGER_PATH, task_vars)
        if isinstance(managers, list) and managers:
            observed["cluster_manager"] = managers[0].get("node")
        if args.get("removal"):
            # The plan refuses a removal that would cost the cluster its quorum or its
            # replicas; it judges from the cluster's own view, not the inventory's.
            members = self._read(MEMBERS_PATH, task_vars) or {}
            observed["cluster_nodes"] = [
                {"id": node_id, **node} for node_id, node in (members.get("nodes") or {}).items()
            ]
            # None when the read failed: the plan then refuses to judge a removal blind.
            observed["index_settings"] = self._read(REPLICAS_PATH, task_vars)
            # None when the read failed: the plan then counts the roles alone.
            state = self._read(VOTING_PATH, task_vars)
            if isinstance(state, dict):
                coordination = (state.get("metadata") or {}).get("cluster_coordination") or {}
                observed["voting"] = {
                    "last_committed_config": list(coordination.get("last_committed_config") or []),
                    "voting_config_exclusions": list(
                        coordination.get("voting_config_exclusions") or []
                    ),
                }
            settings = self._read(SETTINGS_PATH, task_vars)
            if isinstance(settings, dict):
                observed["persistent_settings"] = dict(settings.get("persistent") or {})
        return observed

    def _read(self, path: str, task_vars: dict[str, Any]) -> Any:
        """The JSON a GET of ``path`` on this node answers, or None when it fails."""
        module_args = self._uri_args({"path": path, "timeout": READ_TIMEOUT_S}, "GET", task_vars)
        answer = self._run_module("ansible.builtin.uri", module_args, task_vars)
        if answer.get("failed") or answer.get("status") != 200:
            return None
        return answer.get("json")
