"""Action plugin: the monitoring host's plan, with its certificate and secrets.

Runs on the control node (delegate it to localhost) for the host of the group
``monitoring``, through :func:`clusterforge.plan.monitoring.plan_monitoring`: the cluster
model from the ``opensearch`` group, the services' endpoints from their TLS proxies'
plan, every host's address for its node exporter, the cluster's CA, the monitoring user's
password (generated once, as the plan's security files have it), the services' first
bearer tokens, and the web password (generated once into
``<inventory>/.monitoring/web.password``; the hosts get its bcrypt hash). Returns
``files`` for ``clusterforge_files`` (secrets marked), the units, the URLs and
``node_exporter`` (what every host's node exporter gets, each host's certificate and key
among it: one call issues or reuses them all, building the cluster model once and
unlocking the CA's key once, rather than one call per host). The web password's hash is
checked against the password with bcrypt only when the record of the last check
(``web.password.check`` beside it, an HMAC keyed from the CA's key) does not match. The
result is no_log; ``changed`` says whether a certificate was issued now.

Arguments:
  renew: issue the monitoring host's certificate again now (playbooks/rotate_certs.yml).
  renew_node_exporters: issue every host's node exporter certificate again now.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError, InventoryError
    from clusterforge.inventory.variables import TaskHosts, build_model
    from clusterforge.pki.certificates import write_file_atomically
    from clusterforge.pki.generated_secrets import GeneratedSecretError, read_or_generate, url_safe
    from clusterforge.pki.hashing import hash_password, verify_password
    from clusterforge.plan.cluster_pki import hash_check_key
    from clusterforge.plan.host_certificates import host_certificate_issuer, issuing_ca_for_task
    from clusterforge.plan.monitoring import (
        GROUP,
        PATHS,
        SERVICE_USER,
        WEB_HASH_FILE,
        WEB_PASSWORD_FILE,
        WEB_SECRETS_DIR_NAME,
        plan_monitoring,
        plan_monitoring_user,
        read_monitoring_inputs,
    )

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

# bcrypt's cost for the web password: every scrape of a node exporter checks it.
WEB_HASH_ROUNDS = 10
# Beside the hash: a record, keyed by a key derived from the CA's, that the hash was
# checked against the password, so a rerun spares bcrypt's check (0.2 s here), as the
# internal users' records do (clusterforge.plan.cluster_security).
WEB_CHECK_FILE = "web.password.check"
WEB_CHECK_CONTEXT = b"clusterforge: monitoring web password hash check, v1"


def web_check_key(ca_private_key: Any) -> bytes:
    """The key of the web password's check record: the cluster PKI's hash-check key, for
    this record alone."""
    return hmac.new(hash_check_key(ca_private_key), WEB_CHECK_CONTEXT, hashlib.sha256).digest()


def _check_record(check_key: bytes, password: str, password_hash: str) -> str:
    message = json.dumps([password_hash, password]).encode()
    return hmac.new(check_key, message, hashlib.sha256).hexdigest()


def web_password(inventory_dir: Path, check_key: bytes = b"") -> tuple[str, str]:
    """The web password and a bcrypt hash of it, both kept on the control node so a rerun
    renders the same web configs (a new salt every run would change them). A hash that
    no longer verifies (the password file was replaced) is made again; with
    ``check_key``, a kept record spares the bcrypt check while neither file changed."""
    directory = inventory_dir / WEB_SECRETS_DIR_NAME
    record_path = directory / WEB_CHECK_FILE
    try:
        password = read_or_generate(directory / WEB_PASSWORD_FILE, generate=url_safe(24))
        hash_path = directory / WEB_HASH_FILE
        password_hash = read_or_generate(
            hash_path, generate=lambda: hash_password(password, rounds=WEB_HASH_ROUNDS)
        )
        try:
            kept = record_path.read_text().strip()
        except OSError:
            kept = ""
        if (
            check_key
            and kept
            and hmac.compare_digest(kept, _check_record(check_key, password, password_hash))
        ):
            return password, password_hash
        if not verify_password(password, password_hash):
            hash_path.unlink()
            password_hash = read_or_generate(
                hash_path, generate=lambda: hash_password(password, rounds=WEB_HASH_ROUNDS)
            )
    except GeneratedSecretError as error:
        raise InventoryError([str(error)]) from None
    if check_key:
        record = _check_record(check_key, password, password_hash) + "\n"
        write_file_atomically(record_path, record.encode(), mode=0o600)
    return password, password_hash


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"renew", "renew_node_exporters"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            plan = self._plan(task_vars)
        except (ClusterforgeError, TypeError, ValueError) as error:
            raise AnsibleActionFail(str(error)) from None
        issued = plan.pop("issued")
        return {**result, **plan, "changed": issued, "_ansible_no_log": True}

    def _plan(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        template = self._templar.template
        host = str(task_vars.get("inventory_hostname"))
        hosts = TaskHosts(task_vars, template)
        # The cluster model once, for the CA and for the monitoring's inputs both.
        model = build_model(hosts, "opensearch") if hosts.hosts("opensearch") else None
        task_ca = issuing_ca_for_task(task_vars, template, model=model)
        inventory_dir = hosts.directory(["opensearch", GROUP])
        inputs = read_monitoring_inputs(
            hosts,
            inventory_dir=inventory_dir,
            tls_protocols=task_ca.tls_protocols,
            tls_ciphers=task_ca.tls_ciphers,
            model=model,
        )
        if inputs is None or inputs.host != host:
            raise InventoryError(
                [f"{host} is not the monitoring group's host; run the role on that host only"]
            )
        user = plan_monitoring_user(
            inputs.cluster, [(host, inputs.variables)], inventory_dir=inventory_dir
        )
        settings = inputs.settings
        alt_names = [settings.address, settings.prometheus_listen, settings.alertmanager_listen]
        renew_exporters = boolean(self._task.args.get("renew_node_exporters", False), strict=True)
        # One load of the CA (its key's decryption costs 0.15 s here) for the web
        # password's check key, the host's certificate and every node exporter's.
        with host_certificate_issuer(task_ca.ca) as issuer:
            password, password_hash = web_password(
                inventory_dir, web_check_key(issuer.ca.private_key)
            )
            certificate = issuer.issue(
                host=host,
                purpose="monitoring",
                alt_names=list(dict.fromkeys(name for name in alt_names if name)),
                renew=bool(self._task.args.get("renew")),
            )
            # Every host's node exporter certificate, named as the host's own task named
            # it before (its ansible_host, else its inventory name): reused unless due.
            exporters = {
                name: issuer.issue(
                    host=name,
                    purpose="node_exporter",
                    alt_names=[address.strip()] if address.strip() else [],
                    renew=renew_exporters,
                )
                for name, address in inputs.node_exporters
            }
        plan = plan_monitoring(
            settings,
            cluster=inputs.cluster,
            user=user,
            services=inputs.services,
            node_exporters=inputs.node_exporters,
            alerting=inputs.alerting,
            alerting_secrets=inputs.alerting_secrets,
            web_password=password,
            web_password_hash=password_hash,
        )
        owner = {"owner": "root", "group": SERVICE_USER}
        plan["files"] += [
            {"path": PATHS["ca"], "content": certificate.ca_bundle_pem, **owner, "mode": "0644"},
            {
                "path": PATHS["cert"],
                "content": certificate.certificate_pem,
                **owner,
                "mode": "0644",
            },
            {
                "path": PATHS["key"],
                "content": certificate.key_pem,
                **owner,
                "mode": "0640",
                "secret": True,
            },
        ]
        plan["node_exporter"]["certificates"] = {
            name: {"certificate_pem": issued.certificate_pem, "key_pem": issued.key_pem}
            for name, issued in exporters.items()
        }
        plan["issued"] = certificate.changed or any(issued.changed for issued in exporters.values())
        plan["certificate"] = certificate.public()
        plan["ca_bundle_control_path"] = str(task_ca.ca.pki_dir / "ca-bundle.pem")
        plan["web_password_file"] = str(inventory_dir / WEB_SECRETS_DIR_NAME / WEB_PASSWORD_FILE)
        plan["cluster_password_file"] = user.password_file if user else None
        return plan
