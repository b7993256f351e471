"""Action plugin: one service host's TLS proxy, as the inventory check planned it, with
the host's certificate.

Runs on the control node (no connection to the host). The proxy is planned once, by the
inventory check (:func:`clusterforge.plan.services.tls_proxy.plan_tls_proxies`, through
playbooks/check_inventory.yml, which keeps every host's as
``__clusterforge_checked_tls_proxies``): its port clashes, binds and suites were refused
there, before any host was contacted. This action copies the host's entry and adds its
certificate, through :mod:`clusterforge.plan.cluster.host_certificates`: issued or reused by the
cluster's CA (an inventory with services only gets a CA of its own in
``<inventory dir>/.pki``), or the user's own (``tls_proxy_cert_path``,
``tls_proxy_key_path``), checked against the names the plan gives it. Returns
``enabled``, ``files`` (for ``clusterforge_files``: the nginx configuration, the unit, the
certificate chain, the CA bundle and the key, the key marked secret), ``unit_path``,
``urls``, ``health`` (each proxied service's health URL through the proxy) and
``certificate`` (serial, days left, whether it is the user's own). The result is no_log:
it carries the key.

Arguments:
  planned: every service host's proxy as the inventory check planned it
    (``__clusterforge_checked_tls_proxies``); a host without an entry has no proxy.
  renew: issue the host's certificate again now (playbooks/rotate_certs.yml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.plan.cluster.host_certificates import (
        ensure_host_certificate,
        issuing_ca_for_task,
        own_host_certificate,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

NOT_PLANNED = (
    "the TLS proxy is planned by the inventory check (playbooks/check_inventory.yml keeps "
    "it as __clusterforge_checked_tls_proxies), which did not run in this play; run the "
    "role through playbooks/services.yml or playbooks/site.yml, which check first"
)


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"planned", "renew"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        host = str(task_vars.get("inventory_hostname"))
        planned = self._task.args.get("planned")
        if not isinstance(planned, Mapping):
            raise AnsibleActionFail(NOT_PLANNED)
        plan = planned.get(host)
        if plan is None:
            return {**result, "changed": False, "enabled": False}
        try:
            task_ca = issuing_ca_for_task(task_vars, self._templar.template)
            ca_source = task_ca.ca
            if plan["own_cert_path"] or plan["own_key_path"]:
                bundle = ca_source.pki_dir / "ca-bundle.pem"
                certificate = own_host_certificate(
                    host=host,
                    purpose="tls_proxy",
                    cert_path=plan["own_cert_path"],
                    key_path=plan["own_key_path"],
                    alt_names=list(plan["alt_names"]),
                    ca_bundle_pem=bundle.read_text() if bundle.is_file() else "",
                    variable_prefix="tls_proxy",
                )
            else:
                certificate = ensure_host_certificate(
                    ca_source,
                    host=host,
                    purpose="tls_proxy",
                    alt_names=list(plan["alt_names"]),
                    renew=bool(self._task.args.get("renew")),
                )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        user = plan["user"]
        placed = [
            (plan["cert_path"], certificate.certificate_pem),
            (plan["ca_bundle_path"], certificate.ca_bundle_pem),
        ]
        files = [
            *plan["files"],
            *(
                {"path": path, "content": content, "owner": "root", "group": user, "mode": "0644"}
                for path, content in placed
            ),
            {
                "path": plan["key_path"],
                "content": certificate.key_pem,
                "owner": user,
                "group": user,
                "mode": "0600",
                "secret": True,
            },
        ]
        return {
            **result,
            "changed": False,
            "enabled": True,
            "files": files,
            **{
                name: plan[name]
                for name in (
                    "user",
                    "config_dir",
                    "service_name",
                    "unit_path",
                    # The package and Debian's unit to mask (roles/_debian_service).
                    "install",
                    "ca_bundle_path",
                    "urls",
                    "health",
                )
            },
            # What verifies the proxy from the control node (rotate_certs.yml's wait).
            "ca_bundle_control_path": str(ca_source.pki_dir / "ca-bundle.pem"),
            "own_certificate": certificate.own,
            "certificate": certificate.public(),
            "_ansible_no_log": True,
        }
