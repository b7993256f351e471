"""Action plugin: a server certificate for a host beside the cluster, from the toolkit's PKI.

Runs on the control node (delegate it to localhost) through
:mod:`clusterforge.plan.cluster.host_certificates`: the CA is resolved from the inventory as the
task sees it (:func:`~clusterforge.plan.cluster.host_certificates.issuing_ca_for_task`, the same
one the TLS proxy's action uses: the cluster's, or the inventory's own ``.pki`` when there
is no ``opensearch`` group), then the task host's certificate for ``purpose`` is issued or
reused. Returns ``certificate_pem``, ``key_pem``, ``ca_bundle_pem``, ``serial``,
``days_left``; the result is no_log (it carries the key). ``changed`` says whether a
certificate was issued now.

Arguments:
  purpose: what the certificate serves (a key of ``PURPOSES``, e.g. ``postgresql``).
  alt_names: names and addresses clients use besides the inventory name.
  renew: issue it again now (playbooks/rotate_certs.yml).
  bundle_only: issue nothing; return only ``ca_bundle_pem`` (for a client host that
    verifies the server).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.plan.cluster.host_certificates import (
        PURPOSES,
        ca_bundle_pem,
        ensure_host_certificate,
        issuing_ca_for_task,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error


def unique_names(names: Sequence[Any]) -> list[str]:
    """``names`` as strings, empty ones dropped, each once, in their first order."""
    unique: list[str] = []
    for name in names:
        text = str(name or "").strip()
        if text and text not in unique:
            unique.append(text)
    return unique


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"purpose", "alt_names", "renew", "bundle_only"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        purpose = str(args.get("purpose") or "")
        if purpose not in PURPOSES:
            raise AnsibleActionFail(
                f"purpose is {purpose!r}; set it to one of {', '.join(sorted(PURPOSES))}"
            )
        alt_names = args.get("alt_names") or []
        if isinstance(alt_names, str) or not isinstance(alt_names, Sequence):
            raise AnsibleActionFail("alt_names must be a list of names and addresses")
        host = str(task_vars.get("inventory_hostname"))
        try:
            ca_source = issuing_ca_for_task(task_vars, self._templar.template).ca
            if boolean(args.get("bundle_only", False), strict=True):
                return {
                    **result,
                    "changed": False,
                    "ca_bundle_pem": ca_bundle_pem(ca_source),
                }
            certificate = ensure_host_certificate(
                ca_source,
                host=host,
                purpose=purpose,
                alt_names=unique_names(alt_names),
                renew=boolean(args.get("renew", False), strict=True),
            )
        except (ClusterforgeError, TypeError) as error:
            raise AnsibleActionFail(f"{host}: {error}") from None
        return {
            **result,
            "changed": certificate.changed,
            "certificate_pem": certificate.certificate_pem,
            "key_pem": certificate.key_pem,
            "ca_bundle_pem": certificate.ca_bundle_pem,
            "serial": certificate.serial,
            "days_left": certificate.days_left,
            "_ansible_no_log": True,
        }
