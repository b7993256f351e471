"""Action plugin: the cluster's own objects, made to match the inventory (docs/cluster-config.md).

Reads each declared kind once (one GET per kind), compares it with the declarations
(``clusterforge.plan.cluster_config``: normalised, so keys the engine adds are no difference),
and writes only the objects that differ, in an order where what an object names exists
first (action groups, tenants, roles, role mappings, component templates, index
templates, pipelines, settings). With ``prune`` it also deletes objects of the declared
kinds that the inventory does not name, never a built-in, reserved, hidden or static one,
one the toolkit writes itself, or an index template a data stream uses.

In check mode it reads and reports, writing nothing; with ``--diff`` each object's
change is shown as JSON before and after. The calls run on the node through
clusterforge_api's arguments (the CA, the admin user), so no other client is involved.

Arguments:
  config: the plan's ``cluster_config`` section: ``objects`` by kind variable, ``prune``,
    and ``keep``, the toolkit's own objects by kind variable (never pruned).
  kinds: the kind variables to visit (default: the plan's ``kinds``). site.yml visits one
    kind per task, so a run's recap counts each kind it changed.

Returns ``changes``: a list of {kind, name, action}, and ``changed`` when it is not empty.
"""

from __future__ import annotations

import json
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
    from clusterforge.plan.cluster_config import (
        INDEX_TEMPLATES,
        KINDS,
        Change,
        Kind,
        changes_for,
        request_for,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

DATA_STREAMS_PATH = "/_data_stream"


class ActionModule(ApiActionBase):  # type: ignore[misc]
    _VALID_ARGS = frozenset({"config", "kinds"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        config = self._task.args.get("config") or {}
        objects: dict[str, dict[str, Any]] = config.get("objects") or {}
        prune = bool(config.get("prune", False))
        keep_by_variable: dict[str, list[str]] = config.get("keep") or {}
        visit = set(self._task.args.get("kinds") or config.get("kinds") or [])
        unknown = visit - {kind.variable for kind in KINDS}
        if unknown:
            raise AnsibleActionFail(f"clusterforge_cluster_config: unknown kinds {sorted(unknown)}")
        planned: list[tuple[Kind, Change]] = []
        with self._even_in_check_mode():  # reads: a preview needs their answers
            if prune and INDEX_TEMPLATES.variable in visit:
                keep_by_variable = self._with_data_stream_templates(task_vars, keep_by_variable)
            for kind in KINDS:
                if kind.variable not in visit:
                    continue
                declared = objects.get(kind.variable) or {}
                answer = self._read(task_vars, kind)
                keep = frozenset(keep_by_variable.get(kind.variable) or [])
                found = changes_for(kind, declared, answer, prune=prune, keep=keep)
                planned.extend((kind, change) for change in found)
        if not self._task.check_mode:
            for kind, change in planned:
                method, path, body = request_for(kind, change, objects.get(kind.variable) or {})
                self._write(task_vars, method, path, body, change)
        result.update(
            changed=bool(planned),
            changes=[
                {"kind": change.kind, "name": change.name, "action": change.action}
                for _kind, change in planned
            ],
            msg="; ".join(change.describe() for _kind, change in planned) or "nothing to change",
        )
        if self._play_context.diff and planned:
            result["diff"] = [
                {
                    "before_header": f"{change.kind} {change.name} (cluster)",
                    "after_header": f"{change.kind} {change.name} (inventory)",
                    "before": _as_text(change.before),
                    "after": _as_text(change.after),
                }
                for _kind, change in planned
            ]
        return result

    def _read(self, task_vars: dict[str, Any], kind: Kind) -> Any:
        # 404: no object of the kind at all (the engine answers so for templates).
        args = {"path": kind.list_path, "status_code": [200, 404]}
        answer = self._run_module(
            "ansible.builtin.uri",
            {**self._uri_args(args, "GET", task_vars), "return_content": True},
            task_vars,
            failure=f"read the cluster's {kind.name}s (GET {kind.list_path})",
        )
        return answer.get("json") if answer.get("status") == 200 else {}

    def _write(
        self, task_vars: dict[str, Any], method: str, path: str, body: Any, change: Change
    ) -> None:
        args: dict[str, Any] = {"path": path, "status_code": [200, 201]}
        if body is not None:
            args["body"] = body
        answer = self._execute_module(
            module_name="ansible.builtin.uri",
            module_args={**self._uri_args(args, method, task_vars), "return_content": True},
            task_vars=task_vars,
        )
        if answer.get("failed"):
            reason = answer.get("json") or answer.get("msg") or "no message"
            raise AnsibleActionFail(
                f"could not {change.describe()} ({method} {path}): {reason}; fix its body in "
                "the inventory and rerun (objects before it in this run were written)"
            )

    def _with_data_stream_templates(
        self, task_vars: dict[str, Any], keep: dict[str, list[str]]
    ) -> dict[str, list[str]]:
        """``keep`` plus every index template an existing data stream uses."""
        answer = self._run_module(
            "ansible.builtin.uri",
            self._uri_args({"path": DATA_STREAMS_PATH, "status_code": [200]}, "GET", task_vars),
            task_vars,
            failure=f"read the data streams (GET {DATA_STREAMS_PATH})",
        )
        used = {
            str(stream.get("template"))
            for stream in (answer.get("json") or {}).get("data_streams", [])
        }
        merged = dict(keep)
        merged[INDEX_TEMPLATES.variable] = sorted(
            set(keep.get(INDEX_TEMPLATES.variable) or []) | used
        )
        return merged


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, indent=2, sort_keys=True) + "\n"
