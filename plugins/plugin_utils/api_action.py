"""What the collection's API actions share: calls to a host's HTTP API, from the plan.

:class:`ApiActionBase` is the base of every action plugin that talks to a node's API
(``clusterforge_api`` itself, ``clusterforge_observe``, ``clusterforge_rolling_turn``,
``clusterforge_cluster_config``): the URL, the CA, the API user and its password are
chosen here, in one place, from the plan (``__clusterforge_plan``) and the admin password
(``opensearch_security_passwords``); a call runs ``ansible.builtin.uri`` on the host, and
a wait runs ``clusterforge.stack.clusterforge_http_wait`` there. Reads may run in check
mode too (:meth:`ApiActionBase._even_in_check_mode`), since a preview's decisions need
their answers.

It lives in ``plugins/plugin_utils``, Ansible's place for code that a collection's
controller-side plugins share, and the actions import it by its collection name
(``ansible_collections.clusterforge.stack.plugins.plugin_utils.api_action``) rather than
import one another.
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


class ApiActionBase(ActionBase):  # type: ignore[misc]
    """An action plugin that calls the API of the host it runs for (see the module)."""

    TRANSFERS_FILES = False

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
