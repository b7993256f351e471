"""Action plugin: day-two certificate work on the control node (docs/certificates.md).

Runs before playbooks/plan.yml in playbooks/rotate_certs.yml and playbooks/rotate_ca.yml;
the plan that follows finds the new files and places them. The CA key never leaves the
control node. Use it with ``run_once: true`` and ``delegate_to: localhost``.

Arguments:
  group: the inventory group of the OpenSearch nodes (default: opensearch).
  renew: true issues every node and admin certificate again now, under the issuing CA,
    whatever their expiry (rotate_certs.yml).
  ca_rotation_step: trust, reissue or finish: one step of a CA rotation (rotate_ca.yml).
  wait_served: instead of the above, wait until every node serves the certificate the
    plan placed (its serial, read from a TLS handshake on the HTTP port, verified
    against the CA bundle); needs ``nodes`` (the plan's ``nodes``), ``ca_cert`` and
    ``http_scheme`` (from the plan's ``cluster``) and takes ``timeout_s`` (default 90).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.inventory.variables import TaskHosts, build_model
    from clusterforge.plan.cluster.cluster_pki import (
        ca_passphrase,
        ensure_cluster_pki,
        resolve_pki_dir,
        rotate_cluster_ca,
    )
    from clusterforge.plan.cluster.model import plain_data
    from clusterforge.status.probe import served_certificate

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        {
            "group",
            "renew",
            "ca_rotation_step",
            "wait_served",
            "nodes",
            "ca_cert",
            "http_scheme",
            "timeout_s",
        }
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        if args.get("wait_served"):
            return {**result, **self._wait_served(plain_data(args.get("nodes") or {}), args)}
        group = args.get("group", "opensearch")
        hosts = TaskHosts(task_vars, self._templar.template)
        if not hosts.hosts(group):
            raise AnsibleActionFail("no hosts in the OpenSearch group; check the inventory")
        inventory_dir = hosts.directory([group])
        try:
            cluster, nodes_vars = build_model(hosts, group)
            if not cluster.secured:
                raise ClusterforgeError(
                    "opensearch_security_mode is open: there are no certificates to renew; "
                    "set it to tls or basic"
                )
            pki_dir = resolve_pki_dir(cluster, inventory_dir)
            passphrase = ca_passphrase(nodes_vars[0][1])
            messages = []
            step = args.get("ca_rotation_step")
            if step:
                messages.append(
                    rotate_cluster_ca(cluster, pki_dir=pki_dir, passphrase=passphrase, step=step)
                )
            if args.get("renew") or step == "reissue":
                pki = ensure_cluster_pki(
                    cluster,
                    pki_dir=pki_dir,
                    passphrase=passphrase,
                    renew_all=bool(args.get("renew")),
                )
                renewed = [name for name, node in pki.nodes.items() if node.changed]
                if pki.admin.changed:
                    renewed.append("admin")
                messages.append(f"issued again: {', '.join(renewed) or 'nothing'}")
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        return {**result, "changed": True, "msg": "; ".join(messages)}

    def _wait_served(self, nodes: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        if args.get("http_scheme") != "https":
            # basic mode: HTTP is plain; the transport layer's TLS is not probed here.
            return {"changed": False, "skipped_reason": "HTTP is not TLS in this mode"}
        ca_cert = Path(str(args["ca_cert"]))
        wanted = {host: node["tls"]["serial"] for host, node in nodes.items()}
        urls = {host: node["url"] for host, node in nodes.items()}
        deadline = time.monotonic() + float(args.get("timeout_s") or 90)
        served: dict[str, Any] = {}
        while True:
            served = {host: served_certificate(urls[host], ca_cert, timeout=5.0) for host in wanted}
            late = [
                host
                for host, serial in wanted.items()
                if served[host].get("serial") != serial or not served[host].get("verified")
            ]
            if not late:
                return {"changed": False, "served": served}
            if time.monotonic() > deadline:
                details = ", ".join(
                    f"{host} serves {served[host].get('serial', served[host].get('error'))} "
                    f"(verified {served[host].get('verified')}), placed {wanted[host]}"
                    for host in late
                )
                raise AnsibleActionFail(
                    f"not loaded in time: {details}. Look for 'SSL context' in the node's "
                    "log; the plugin reloads certs/live/* within seconds of a change"
                )
            time.sleep(2)
