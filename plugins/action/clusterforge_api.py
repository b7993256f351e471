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

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

PLAN_VARIABLE = "__clusterforge_plan"
PASSWORDS_VARIABLE = "opensearch_security_passwords"
READ_METHODS = frozenset({"GET", "HEAD"})
DEFAULT_TIMEOUT_S = 30


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
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

    def _run_module(
        self,
        name: str,
        module_args: dict[str, Any],
        task_vars: Any,
        *,
        failure: str | None = None,
    ) -> dict[str, Any]:
        """Run module ``name`` on the host and return its answer.

        With ``failure`` (what the call was for: ``GET /_cluster/health``), a failed answer
        stops the action with that and the module's message; without it the caller reads
        ``failed`` itself (an observation, where a node that does not answer is an answer).
        """
        answer: dict[str, Any] = self._execute_module(
            module_name=name, module_args=module_args, task_vars=task_vars
        )
        if failure is not None and answer.get("failed"):
            raise AnsibleActionFail(f"could not {failure}: {answer.get('msg', 'no message')}")
        return answer

    def _wait(
        self,
        uri_args: dict[str, Any],
        task_vars: Any,
        *,
        seconds: float,
        status: int = 200,
        json_values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run clusterforge_http_wait on the host with ``uri_args``' URL and identity; its
        answer (status, json, waited, attempts; failed with a message after ``seconds``)."""
        retry = [code for code in uri_args["status_code"] if code != status]
        wait_args = {
            key: uri_args[key]
            for key in (
                "url",
                "ca_path",
                "client_cert",
                "client_key_content",
                "url_username",
                "url_password",
                "force_basic_auth",
            )
            if key in uri_args
        }
        wait_args.update(
            ready_status=status,
            ready_json=json_values or {},
            retry_status=retry,
            timeout=seconds,
            request_timeout=float(uri_args["timeout"]),
        )
        with self._even_in_check_mode():  # a read: a preview waits as a run would
            answer: dict[str, Any] = self._execute_module(
                module_name="clusterforge.stack.clusterforge_http_wait",
                module_args=wait_args,
                task_vars=task_vars,
            )
        return answer

    @contextmanager
    def _even_in_check_mode(self) -> Iterator[None]:
        """Run the modules called inside for real in a preview too; for reads only, whose
        answers a preview's decisions need."""
        saved_check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            yield
        finally:
            self._task.check_mode = saved_check_mode

    def _uri_args(self, args: Any, method: str, task_vars: dict[str, Any]) -> dict[str, Any]:
        plan = task_vars.get(PLAN_VARIABLE) or {}
        cluster = plan.get("cluster") or {}
        pki = cluster.get("pki") or {}
        on_node = pki.get("on_node") or {}
        if "url" in args:
            url = str(args["url"])
        elif "path" in args:
            host = task_vars.get("inventory_hostname")
            node = (plan.get("nodes") or {}).get(host)
            if node is None:
                raise AnsibleActionFail(
                    f"{host} is not a node of the plan; give clusterforge_api a full url"
                )
            url = str(node["url"]) + str(args["path"])
        else:
            raise AnsibleActionFail("clusterforge_api needs path or url")
        module_args: dict[str, Any] = {
            "url": url,
            "method": method,
            "timeout": int(args.get("timeout", DEFAULT_TIMEOUT_S)),
            "status_code": args.get("status_code", [200]),
        }
        if "body" in args:
            module_args.update(body=args["body"], body_format="json")
        if cluster.get("security_mode") == "tls" and on_node.get("ca_cert"):
            module_args["ca_path"] = on_node["ca_cert"]
        auth = str(args.get("auth", "admin"))
        if auth == "cert" and cluster.get("security_mode") == "tls":
            module_args.update(
                client_cert=on_node["admin_cert"],
                client_key_content=_control_node_file(pki, "admin_key"),
            )
        elif auth in ("admin", "cert") and cluster.get("secured"):
            passwords = self._templar.template(task_vars.get(PASSWORDS_VARIABLE) or {})
            module_args.update(
                url_username="admin",
                url_password=str(passwords.get("admin", "")),
                force_basic_auth=True,
            )
        elif auth == "user":
            module_args.update(
                url_username=str(args["username"]),
                url_password=str(args["password"]),
                force_basic_auth=True,
            )
        elif auth not in ("admin", "cert", "none"):
            raise AnsibleActionFail(
                f"clusterforge_api auth {auth!r}: use admin, cert, none or user"
            )
        return module_args


def _control_node_file(pki: dict[str, Any], name: str) -> str:
    """The content of the plan's PKI file ``name`` (a path on the control node)."""
    path = pki.get(name)
    try:
        return Path(str(path)).read_text()
    except OSError as error:
        raise AnsibleActionFail(
            f"clusterforge_api auth: cert reads the admin key on the control node, at "
            f"{path}: {error.strerror}. Run playbooks/plan.yml first, which issues it into "
            "opensearch_pki_dir"
        ) from None
