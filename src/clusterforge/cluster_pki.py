"""The cluster's certificates, from the model: one CA, a certificate per node, an admin.

Thin on purpose: :mod:`clusterforge.pki` does the cryptography; this module decides
which certificates a cluster needs, with which subjects and names, and reads the DNs
back for ``plugins.security.nodes_dn`` and ``plugins.security.authcz.admin_dn``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from clusterforge.model import Cluster
from clusterforge.pki import (
    SubjectFields,
    certificate_expiry,
    ensure_admin_certificate,
    ensure_node_certificate,
    load_or_create_ca,
)

CA_COMMON_NAME_SUFFIX = " root CA"


@dataclass(frozen=True, kw_only=True)
class NodeCertificate:
    cert_path: str
    key_path: str
    subject_dn: str
    changed: bool
    days_left: int


@dataclass(frozen=True, kw_only=True)
class ClusterPki:
    pki_dir: str
    ca_cert_path: str
    ca_changed: bool
    nodes: dict[str, NodeCertificate]  # by inventory name
    admin: NodeCertificate
    nodes_dn_pattern: str = ""

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


def _subject(cluster: Cluster, common_name: str) -> SubjectFields:
    return SubjectFields(common_name=common_name, **dict(cluster.security.cert_subject))


def ensure_cluster_pki(cluster: Cluster, *, pki_dir: Path, passphrase: bytes | None) -> ClusterPki:
    """Create or reuse the CA and every certificate the cluster needs."""
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    security = cluster.security
    ca = load_or_create_ca(
        pki_dir,
        passphrase=passphrase,
        subject=_subject(cluster, f"{cluster.name}{CA_COMMON_NAME_SUFFIX}"),
        user_ca_cert=Path(security.ca_cert_path) if security.ca_cert_path else None,
        user_ca_key=Path(security.ca_key_path) if security.ca_key_path else None,
    )
    nodes = {}
    for node in cluster.nodes:
        issued = ensure_node_certificate(
            ca,
            directory=pki_dir,
            name=node.inventory_name,
            subject=_subject(cluster, node.name),
            dns_names=node.subject_alt_names,
            renew_within_days=security.renew_within_days,
        )
        nodes[node.inventory_name] = NodeCertificate(
            cert_path=str(issued.cert_path),
            key_path=str(issued.key_path),
            subject_dn=issued.subject_dn,
            changed=issued.changed,
            days_left=certificate_expiry(issued.cert_path).days_left,
        )
    admin = ensure_admin_certificate(
        ca,
        directory=pki_dir,
        subject=_subject(cluster, security.admin_common_name),
        name="admin",
        renew_within_days=security.renew_within_days,
    )
    return ClusterPki(
        pki_dir=str(pki_dir),
        ca_cert_path=str(ca.cert_path),
        ca_changed=ca.changed,
        nodes=nodes,
        admin=NodeCertificate(
            cert_path=str(admin.cert_path),
            key_path=str(admin.key_path),
            subject_dn=admin.subject_dn,
            changed=admin.changed,
            days_left=certificate_expiry(admin.cert_path).days_left,
        ),
        nodes_dn_pattern=nodes_dn_pattern(
            _subject(cluster, security.admin_common_name), security.admin_common_name
        ),
    )
