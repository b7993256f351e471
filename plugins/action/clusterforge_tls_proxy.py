"""Action plugin: one service host's TLS proxy, planned and given its certificate.

Runs on the control node (no connection to the host) through
:func:`clusterforge.plan.tls_proxy.plan_tls_proxy` and
:mod:`clusterforge.plan.host_certificates`, with the host's ``tls_proxy_*`` and services'
variables as the task sees them. The cluster's TLS profile and CA come from the
inventory's ``opensearch`` group; an inventory with services only gets a CA of its own in
``<inventory dir>/.pki``. Fails, naming the variable, when a proxied service binds off
loopback or the host's own certificate does not fit. Returns ``enabled``, ``files`` (for
``clusterforge_files``: the nginx configuration, the unit, the certificate chain, the CA
bundle and the key, the key marked secret), ``unit_path``, ``urls``, ``health`` (each
proxied service's health URL through the proxy) and ``certificate`` (serial, days left,
whether it is the user's own). The result is no_log: it carries the key.

Arguments:
  renew: issue the host's certificate again now (playbooks/rotate_certs.yml).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.plan.host_certificates import (
        ensure_host_certificate,
        issuing_ca_for_task,
        own_host_certificate,
    )
    from clusterforge.plan.tls_proxy import (
        PROXIED_SERVICES,
        TlsProxyPlan,
        plan_tls_proxy,
        planned_files,
    )
    from clusterforge.schema import load_schema

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error


def _prefixes() -> tuple[str, ...]:
    """The variables the proxy's plan reads: its own and those of the services it fronts."""
    return ("tls_proxy_", *(f"{service}_" for service in PROXIED_SERVICES))


_WILDCARDS = {"", "0.0.0.0", "::"}  # noqa: S104 (names, not a bind)


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"renew"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        host = str(task_vars.get("inventory_hostname"))
        groups = task_vars.get("groups", {})
        services = [service for service in PROXIED_SERVICES if host in groups.get(service, [])]
        variables = {
            name: self._templar.template(value)
            for name, value in task_vars.items()
            if name.startswith(_prefixes())
        }
        try:
            task_ca = issuing_ca_for_task(task_vars, self._templar.template)
            ca_source = task_ca.ca
            plan = plan_tls_proxy(
                host,
                variables,
                services,
                tls_protocols=task_ca.tls_protocols,
                tls_ciphers=task_ca.tls_ciphers,
            )
            if plan is None:
                return {**result, "changed": False, "enabled": False}
            alt_names = self._alt_names(task_vars, plan, variables)
            own_cert = str(variables.get("tls_proxy_cert_path") or "")
            own_key = str(variables.get("tls_proxy_key_path") or "")
            if own_cert or own_key:
                bundle = ca_source.pki_dir / "ca-bundle.pem"
                certificate = own_host_certificate(
                    host=host,
                    purpose="tls_proxy",
                    cert_path=own_cert,
                    key_path=own_key,
                    alt_names=alt_names,
                    ca_bundle_pem=bundle.read_text() if bundle.is_file() else "",
                    variable_prefix="tls_proxy",
                )
            else:
                certificate = ensure_host_certificate(
                    ca_source,
                    host=host,
                    purpose="tls_proxy",
                    alt_names=alt_names,
                    renew=bool(self._task.args.get("renew")),
                )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        reach = str(task_vars.get("ansible_host") or host)
        files = self._files(plan, certificate.certificate_pem, certificate.ca_bundle_pem)
        files.append(
            {
                "path": plan.key_path,
                "content": certificate.key_pem,
                "owner": plan.user,
                "group": plan.user,
                "mode": "0600",
                "secret": True,
            }
        )
        health_host = plan.listen_address if plan.listen_address not in _WILDCARDS else "127.0.0.1"
        health_host = f"[{health_host}]" if ":" in health_host else health_host
        definitions = load_schema().services
        return {
            **result,
            "changed": False,
            "enabled": True,
            "files": files,
            "user": plan.user,
            "config_dir": plan.config_dir,
            "service_name": plan.service_name,
            "unit_path": f"/etc/systemd/system/{plan.service_name}.service",
            "ca_bundle_path": plan.ca_bundle_path,
            # What verifies the proxy from the control node (rotate_certs.yml's wait).
            "ca_bundle_control_path": str(ca_source.pki_dir / "ca-bundle.pem"),
            "own_certificate": certificate.own,
            "urls": plan.urls(reach),
            "health": {
                entry.service: f"https://{health_host}:{entry.public_port}"
                f"{definitions[entry.service].health_path}"
                for entry in plan.services
            },
            "certificate": certificate.public(),
            "_ansible_no_log": True,
        }

    @staticmethod
    def _alt_names(
        task_vars: dict[str, Any], plan: TlsProxyPlan, variables: dict[str, Any]
    ) -> list[str]:
        names = [str(task_vars.get("ansible_host") or "")]
        if plan.listen_address not in _WILDCARDS:
            names.append(plan.listen_address)
        names += [str(name) for name in variables.get("tls_proxy_extra_sans") or []]
        unique: list[str] = []
        for name in names:
            if name and name not in unique:
                unique.append(name)
        return unique

    @staticmethod
    def _files(plan: TlsProxyPlan, chain_pem: str, bundle_pem: str) -> list[dict[str, Any]]:
        """The files the host holds besides the key (the unit root's; the rest read by
        the proxy's group only where they are its configuration)."""
        files: list[dict[str, Any]] = []
        for path, content in planned_files(plan).items():
            unit = path.startswith("/etc/systemd/")
            group, mode = ("root", "0644") if unit else (plan.user, "0640")
            files.append(
                {"path": path, "content": content, "owner": "root", "group": group, "mode": mode}
            )
        for path, content in ((plan.cert_path, chain_pem), (plan.ca_bundle_path, bundle_pem)):
            files.append(
                {
                    "path": path,
                    "content": content,
                    "owner": "root",
                    "group": plan.user,
                    "mode": "0644",
                }
            )
        return files
