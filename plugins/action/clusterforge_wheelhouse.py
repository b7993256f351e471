"""Action plugin: build the services' wheelhouse on the control node, once per key.

Arguments:
  project_root: the clusterforge checkout to build (default: the checkout this plugin
    belongs to, two folders above plugins/action/).
Returns ``path`` (the wheelhouse directory in the control node's cache), ``key``,
``digest`` (hosts record it to know what they installed), ``project_wheel``,
``project_version``, ``python_version`` and ``machine`` (of the interpreter that built
the wheels; hosts must match both), and ``wheels``; changed only when it was built now.
Run it with ``run_once: true`` and ``delegate_to: localhost``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.errors import ClusterforgeError
from clusterforge.wheelhouse import build_wheelhouse

DEFAULT_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"project_root"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        project_root = Path(self._task.args.get("project_root") or DEFAULT_PROJECT_ROOT)
        try:
            wheelhouse = build_wheelhouse(project_root)
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(
            changed=wheelhouse.built,
            path=str(wheelhouse.path),
            key=wheelhouse.key,
            digest=wheelhouse.digest,
            project_wheel=wheelhouse.project_wheel,
            project_version=wheelhouse.project_version,
            python_version=wheelhouse.python_version,
            machine=wheelhouse.machine,
            wheels=list(wheelhouse.wheels),
        )
        return result
