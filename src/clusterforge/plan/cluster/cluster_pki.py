"""The cluster's certificates, from the model: one CA, a certificate per node, an admin.

Thin on purpose: :mod:`clusterforge.pki` does the cryptography; this module decides
which certificates a cluster needs, with which subjects and names, and reads the DNs
back for ``plugins.security.nodes_dn`` and ``plugins.security.authcz.admin_dn``.

Nodes and clients trust ``ca-bundle.pem`` (written here on every plan), never ``ca.pem``
directly: during a CA rotation the bundle holds the old and the new CA (see
:func:`clusterforge.pki.ca_rotation.rotate_ca` and docs/certificates.md).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.ca_rotation import retire_node_certificates, rotate_ca, write_ca_bundle
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_PASSPHRASE_ENV,
    PkiError,
    SubjectFields,
    certificate_expiry,
    issued_by,
    load_certificate,
)
from clusterforge.pki.issuing import ensure_admin_certificate, ensure_node_certificate
from clusterforge.plan.cluster.model import Cluster

CA_COMMON_NAME_SUFFIX = " root CA"
ADMIN_FILE_NAME = "admin"


@dataclass(frozen=True, kw_only=True)
class NodeCertificate:
    cert_path: str
    key_path: str
    subject_dn: str
    changed: bool
    days_left: int
    serial: str = ""


@dataclass(frozen=True, kw_only=True)
class ClusterPki:
    pki_dir: str
    ca_cert_path: str  # the bundle every node and client trusts
    ca_changed: bool
    nodes: dict[str, NodeCertificate]  # by inventory name
    admin: NodeCertificate
    # Names the set of files a node holds (bundle, certificate): a new one whenever any
    # of them changes, so the role can place them as one directory and swap a link.
    generations: dict[str, str] | None = None
    nodes_dn_pattern: str = ""
    # Inventory names whose key and certificate this plan retired: they left the group
    # opensearch (clusterforge.pki.ca_rotation.retire_node_certificates).
    retired: tuple[str, ...] = ()
    # Keys the record that a kept internal-user hash still matches its password
    # (clusterforge.plan.cluster_security); derived from the CA key, so only whoever can issue
    # an admin certificate could compute it. In memory only, never in a repr.
    hash_check_key: bytes = field(default=b"", repr=False, compare=False)

    @property
    def nodes_dn(self) -> list[str]:
        """One pattern, not a list of DNs: a node added later is admitted by the nodes
        already running, which read this setting only at start (scale out, issue 12)."""
        if self.nodes_dn_pattern:
            return [self.nodes_dn_pattern]
        return [certificate.subject_dn for certificate in self.nodes.values()]

    @property
    def admin_dn(self) -> list[str]:
        return [self.admin.subject_dn]


def resolve_pki_dir(cluster: Cluster, inventory_dir: Path) -> Path:
    """The configured directory, or <inventory directory>/.pki when none is configured.

    Hidden, because Ansible reads every other file of an inventory directory as inventory.
    """
    configured = cluster.security.pki_dir
    return Path(configured) if configured else inventory_dir / ".pki"


# The characters a node name may carry (model.py's node-name rule); the CN of every node
# certificate is the node name.
_NODE_CN = "[A-Za-z0-9][A-Za-z0-9._-]*"


def nodes_dn_pattern(subject: SubjectFields, admin_common_name: str) -> str:
    """``plugins.security.nodes_dn`` as one regular expression (the plugin's ``/.../``
    form, matched against the whole RFC 2253 DN of the peer's certificate): any node name
    as CN, followed by exactly the subject fields this toolkit gives node certificates.
    The admin certificate shares those fields, so its CN is excluded: it must never pass
    as a node. Other subjects (another CA's style, another OU) do not match; only this
    cluster's CA is trusted on the transport layer anyway."""
    rest = x509.Name(
        [attr for attr in subject.to_name() if attr.oid != NameOID.COMMON_NAME]
    ).rfc4514_string()
    admin = re.escape(admin_common_name)
    return f"/^CN=(?!{admin},){_NODE_CN},{re.escape(rest)}$/"


# Names what the key derived from the CA key is for, so it can serve nothing else.
HASH_CHECK_CONTEXT = b"clusterforge: internal user hash check, v1"


def hash_check_key(ca_private_key: CertificateIssuerPrivateKeyTypes) -> bytes:
    """The key of the internal users' hash-check record, derived from the CA's key."""
    secret = ca_private_key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return hmac.new(secret, HASH_CHECK_CONTEXT, hashlib.sha256).digest()


def _subject(cluster: Cluster, common_name: str) -> SubjectFields:
    return SubjectFields(common_name=common_name, **dict(cluster.security.cert_subject))


def _user_ca(cluster: Cluster) -> tuple[Path | None, Path | None]:
    security = cluster.security
    return (
        Path(security.ca_cert_path) if security.ca_cert_path else None,
        Path(security.ca_key_path) if security.ca_key_path else None,
    )


def ensure_cluster_pki(
    cluster: Cluster, *, pki_dir: Path, passphrase: bytes | None, renew_all: bool = False
) -> ClusterPki:
    """Create or reuse the CA and every certificate the cluster needs.

    A certificate is issued again when it falls within the renewal window
    (``opensearch_cert_renew_within_days``), no longer matches the inventory, or was not
    signed by the issuing CA (a CA rotation's reissue step); ``renew_all``
    (playbooks/rotate_certs.yml) issues every node and admin certificate again now.
    """
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    security = cluster.security
    user_ca_cert, user_ca_key = _user_ca(cluster)
    ca = load_or_create_ca(
        pki_dir,
        passphrase=passphrase,
        subject=_subject(cluster, f"{cluster.name}{CA_COMMON_NAME_SUFFIX}"),
        user_ca_cert=user_ca_cert,
        user_ca_key=user_ca_key,
    )
    bundle = write_ca_bundle(pki_dir, ca_cert_path=user_ca_cert)
    bundle_bytes = bundle.read_bytes()
    nodes = {}
    generations = {}
    for node in cluster.nodes:
        issued = ensure_node_certificate(
            ca,
            directory=pki_dir,
            name=node.inventory_name,
            subject=_subject(cluster, node.name),
            dns_names=node.subject_alt_names,
            renew_within_days=security.renew_within_days,
            force=renew_all,
        )
        nodes[node.inventory_name] = _described(issued.cert_path, issued.key_path, issued.changed)
        digest = hashlib.sha256(bundle_bytes + issued.cert_path.read_bytes()).hexdigest()
        generations[node.inventory_name] = digest[:16]
    # A node that left the inventory loses its key here; one marked
    # opensearch_node_state: absent keeps it until the run that decommissions it is over
    # and the inventory no longer lists it (docs/security.md).
    retired = retire_node_certificates(
        pki_dir,
        keep={node.inventory_name for node in (*cluster.nodes, *cluster.removed_nodes)}
        | {ADMIN_FILE_NAME},
        issuers=[ca.certificate],
    )
    admin = ensure_admin_certificate(
        ca,
        directory=pki_dir,
        subject=_subject(cluster, security.admin_common_name),
        name=ADMIN_FILE_NAME,
        renew_within_days=security.renew_within_days,
        force=renew_all,
    )
    return ClusterPki(
        pki_dir=str(pki_dir),
        ca_cert_path=str(bundle),
        ca_changed=ca.changed,
        nodes=nodes,
        admin=_described(admin.cert_path, admin.key_path, admin.changed),
        generations=generations,
        nodes_dn_pattern=nodes_dn_pattern(
            _subject(cluster, security.admin_common_name), security.admin_common_name
        ),
        hash_check_key=hash_check_key(ca.private_key),
        retired=tuple(retired),
    )


def _described(cert_path: Path, key_path: Path, changed: bool) -> NodeCertificate:
    certificate = load_certificate(cert_path)
    return NodeCertificate(
        cert_path=str(cert_path),
        key_path=str(key_path),
        subject_dn=certificate.subject.rfc4514_string(),
        changed=changed,
        days_left=certificate_expiry(certificate).days_left,
        serial=f"{certificate.serial_number:x}",
    )


def rotate_cluster_ca(
    cluster: Cluster, *, pki_dir: Path, passphrase: bytes | None, step: str
) -> str:
    """One step of a CA rotation for this cluster (trust, reissue, finish); one line back."""
    user_ca_cert, _user_ca_key = _user_ca(cluster)
    if user_ca_cert is not None:
        raise PkiError(
            "the cluster uses your own CA (opensearch_ca_cert_path); clusterforge rotates "
            "only the CA it created. Rotate yours by hand, or unset opensearch_ca_cert_path "
            "and opensearch_ca_key_path"
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%MZ")
    current = pki_dir / CA_CERT_FILE
    stale: list[str] = []
    if step == "finish" and current.exists():
        ca_certificate = load_certificate(current)
        names = [node.inventory_name for node in cluster.nodes] + [ADMIN_FILE_NAME]
        for name in names:
            path = pki_dir / f"{name}.pem"
            if path.exists() and not issued_by(load_certificate(path), ca_certificate):
                stale.append(name)
    return rotate_ca(
        pki_dir,
        step,
        passphrase=passphrase,
        # A distinct name, so operators (and the plugin's logs) can tell the CAs apart.
        subject=_subject(cluster, f"{cluster.name}{CA_COMMON_NAME_SUFFIX} {stamp}"),
        leaves_signed_by_previous=stale,
    )


CA_PASSPHRASE_VARIABLE = "opensearch_ca_passphrase"  # noqa: S105 - a variable name


def ca_passphrase(first_host_vars: Mapping[str, Any]) -> bytes | None:
    """The CA passphrase: the (vaulted) variable, else the environment."""
    value = first_host_vars.get(CA_PASSPHRASE_VARIABLE) or os.environ.get(CA_PASSPHRASE_ENV)
    return str(value).encode() if value else None
