"""The monitoring's section of the plan (issue 51: planned once, in the plan).

:func:`clusterforge.plan.plan.build_plan` calls :func:`plan_monitoring_host` with the
cluster model it validated, the monitoring user it put in the security files and the
cluster's CA: the monitoring host's files
(:func:`clusterforge.plan.monitoring.monitoring.plan_monitoring`) with its certificate and key,
every node exporter's certificate and key, and the web password (generated once into
``<inventory>/.monitoring/web.password``; the hosts get its bcrypt hash). roles/monitoring and
roles/node_exporter copy what it returns; no action plans the monitoring again.

The web password's hash is checked against the password with bcrypt only when the
record of the last check (``web.password.check`` beside it, an HMAC keyed from the CA's
key) does not match.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.errors import InventoryError
from clusterforge.pki.certificates import write_file_atomically
from clusterforge.pki.generated_secrets import GeneratedSecretError, read_or_generate, url_safe
from clusterforge.pki.hashing import hash_password, verify_password
from clusterforge.plan.cluster.cluster_pki import hash_check_key
from clusterforge.plan.cluster.host_certificates import IssuingCa, host_certificate_issuer
from clusterforge.plan.monitoring.monitoring import (
    PATHS,
    SERVICE_USER,
    WEB_HASH_FILE,
    WEB_PASSWORD_FILE,
    WEB_SECRETS_DIR_NAME,
    MonitoringUser,
    plan_monitoring,
    read_monitoring_inputs,
)

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

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


def plan_monitoring_host(
    source: Any,
    *,
    cluster: Cluster,
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    user: MonitoringUser | None,
    ca: IssuingCa,
    inventory_dir: Path,
    renew: bool = False,
    renew_node_exporters: bool = False,
) -> dict[str, Any] | None:
    """The plan's ``monitoring`` section: None without a monitoring host in ``source`` (a
    clusterforge.plan.cluster.host_variables.HostSource).

    Its ``files`` are the monitoring host's, its certificate, key and CA bundle among them
    (secrets marked), and ``node_exporter.certificates`` every host's exporter certificate
    and key: one load of the CA issues or reuses them all. ``renew`` issues the monitoring
    host's certificate again now, ``renew_node_exporters`` every exporter's
    (playbooks/rotate_certs.yml). ``issued`` says whether a certificate was issued now.
    """
    inputs = read_monitoring_inputs(
        source,
        inventory_dir=inventory_dir,
        tls_protocols=cluster.tls_protocols,
        tls_ciphers=cluster.tls_ciphers,
        model=(cluster, nodes_vars),
    )
    if inputs is None:
        return None
    settings = inputs.settings
    alt_names = [settings.address, settings.prometheus_listen, settings.alertmanager_listen]
    # One load of the CA (its key's decryption costs 0.15 s here) for the web password's
    # check key, the host's certificate and every node exporter's.
    with host_certificate_issuer(ca) as issuer:
        password, password_hash = web_password(inventory_dir, web_check_key(issuer.ca.private_key))
        certificate = issuer.issue(
            host=inputs.host,
            purpose="monitoring",
            alt_names=list(dict.fromkeys(name for name in alt_names if name)),
            renew=renew,
        )
        # Every host's node exporter certificate, named by the host's ansible_host (else
        # its inventory name): reused unless due.
        exporters = {
            name: issuer.issue(
                host=name,
                purpose="node_exporter",
                alt_names=[address.strip()] if address.strip() else [],
                renew=renew_node_exporters,
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
        {"path": PATHS["cert"], "content": certificate.certificate_pem, **owner, "mode": "0644"},
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
    plan["host"] = inputs.host
    plan["issued"] = certificate.changed or any(issued.changed for issued in exporters.values())
    plan["certificate"] = certificate.public()
    plan["ca_bundle_control_path"] = str(ca.pki_dir / "ca-bundle.pem")
    plan["web_password_file"] = str(inventory_dir / WEB_SECRETS_DIR_NAME / WEB_PASSWORD_FILE)
    plan["cluster_password_file"] = user.password_file if user else None
    return plan
