"""Action plugin: put the engine archive into the control node's cache, once.

Arguments:
  distribution: the ``distribution`` mapping from clusterforge_plan's result.
Returns ``path`` (the cached archive on the control node); changed when it was fetched.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.artifacts import fetch_engine
from clusterforge.errors import ClusterforgeError
from clusterforge.model import Distribution


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"distribution"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        spec = dict(self._task.args["distribution"])
        try:
            fetched = fetch_engine(Distribution(**spec))
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(changed=fetched.fetched, path=str(fetched.path))
        return result
