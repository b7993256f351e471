"""Action plugin: render the security plugin's files from the inventory's passwords.

Run it with ``no_log: true``: its result carries bcrypt hashes. It reads the passwords
itself from the first node's variables (opensearch_security_passwords and
opensearch_security_users), so they never travel as task arguments.

Arguments:
  pki_dir: the control-node directory of the plan (where the hash state lives).
Returns ``files`` (name -> text), ``digests`` (config type -> sha256) and ``marker``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.cluster_security import render_cluster_security
from clusterforge.errors import ClusterforgeError
from clusterforge.model import plain_data


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"pki_dir", "group"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        group = self._task.args.get("group", "opensearch")
        first = task_vars["groups"][group][0]
        host_vars = task_vars["hostvars"][first]
        passwords = plain_data(self._templar.template(host_vars["opensearch_security_passwords"]))
        users = plain_data(self._templar.template(host_vars.get("opensearch_security_users", [])))
        try:
            rendered = render_cluster_security(
                pki_dir=Path(self._task.args["pki_dir"]), passwords=passwords, users=users
            )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(changed=False, **rendered)
        return result
