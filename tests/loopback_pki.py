"""A CA and a server certificate for 127.0.0.1, issued by the toolkit's own PKI code, for
tests that serve HTTPS on loopback as a node would."""

from __future__ import annotations

from pathlib import Path

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import SubjectFields
from clusterforge.pki.issuing import ensure_node_certificate


def loopback_server_certificate(directory: Path, label: str) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) files under ``directory``: a new
    CA named after ``label`` and a certificate for 127.0.0.1 signed by it."""
    ca = load_or_create_ca(
        directory, passphrase=label.encode(), subject=SubjectFields(common_name=f"{label} Root CA")
    )
    issued = ensure_node_certificate(
        ca,
        directory=directory,
        name="node",
        subject=SubjectFields(common_name="node"),
        dns_names=[],
        ip_addresses=["127.0.0.1"],
    )
    return Path(ca.cert_path), Path(issued.cert_path), Path(issued.key_path)
