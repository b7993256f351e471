"""Action plugin: the one way the playbooks call a host's HTTP API.

Every call to the cluster (and the console's status) goes through here, so the CA, the
API user and its password are chosen in one place, from the plan, instead of being
repeated in every ``uri`` task. It runs ``ansible.builtin.uri`` on the host.

Reads (GET, HEAD) run in check mode too: they change nothing, and the decisions of a
preview (what runs, who is the cluster manager) need their answers. Writes are skipped
in check mode and reported as changes.

Arguments:
  path: the path on this node's cluster URL (``/_cluster/health``), or
  url: a full URL (for a host outside the plan's nodes, such as a console).
  method, body, status_code, timeout: as for ansible.builtin.uri (JSON bodies).
  wait_seconds: wait (GET only) until the answer is ``wait_status`` (default 200) and,
    with ``wait_json``, its JSON body holds those top-level values; the other statuses of
    ``status_code`` and no answer at all mean "not yet". The waiting runs on the host
    (plugins/modules/clusterforge_http_wait.py): one module run however long it takes,
    retried every 0.1 s while the port refuses and after 0.1-1 s pauses otherwise, rather
    than an ``until`` loop that costs a round trip and a whole second per try.
  auth: ``admin`` (default; the admin user in secured modes, nobody in open mode),
    ``cert`` (the admin client certificate in tls mode, the only identity the cluster
    accepts before its security index exists; the admin user in basic mode, where the
    init node loads that index itself), ``none``, or ``user`` with
    ``username`` and ``password`` given.
    ``cert`` works with ``wait_seconds`` only: the super-admin key stays on the control
    node, and goes to the host inside the arguments of that one module run
    (clusterforge_http_wait's ``client_key_content``, never logged), which keeps it in a
    file of its own for the run alone (issue 31); ansible.builtin.uri can only read a key
    the host keeps.
The plan is read from the ``__clusterforge_plan`` variable (playbooks/plan.yml), the
admin password from ``opensearch_security_passwords``.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible_collections.clusterforge.stack.plugins.plugin_utils.api_action import (
    READ_METHODS,
    ApiActionBase,
)


class ActionModule(ApiActionBase):  # type: ignore[misc]
    _VALID_ARGS = frozenset(
        {
            "path",
            "url",
            "method",
            "body",
            "status_code",
            "timeout",
            "auth",
            "username",
            "password",
            "wait_seconds",
            "wait_status",
            "wait_json",
        }
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        method = str(args.get("method", "GET")).upper()
        module_args = self._uri_args(args, method, task_vars)
        if "client_key_content" in module_args and "wait_seconds" not in args:
            raise AnsibleActionFail(
                "clusterforge_api auth: cert needs wait_seconds (the admin key reaches the "
                "host only for a clusterforge_http_wait run); add wait_seconds, or use "
                "auth: admin"
            )
        if "wait_seconds" in args:
            if method != "GET":
                raise AnsibleActionFail("clusterforge_api waits (wait_seconds) with GET only")
            result.update(
                self._wait(
                    module_args,
                    task_vars,
                    seconds=float(args["wait_seconds"]),
                    status=int(args.get("wait_status", 200)),
                    json_values=args.get("wait_json") or {},
                )
            )
            return result
        if self._task.check_mode and method not in READ_METHODS:
            result.update(changed=True, skipped=True, msg=f"check mode: {method} not sent")
            return result
        # A read changes nothing; let it run in a preview as well.
        with self._even_in_check_mode():
            result.update(
                self._execute_module(
                    module_name="ansible.builtin.uri", module_args=module_args, task_vars=task_vars
                )
            )
        if method in READ_METHODS:
            result["changed"] = False
        return result
