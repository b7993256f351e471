"""The network side of ``scripts/status``: HTTP answers and served certificates.

Everything here records what the cluster said (status, JSON body, or the error) and
decides nothing: the rules in ``clusterforge.status.report`` turn the recording into a
report, so they can be tested on recorded answers without a network.
"""

from __future__ import annotations

import hashlib
import socket
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509

from clusterforge.client import ClusterClient
from clusterforge.status.snapshots import collect_snapshots
from clusterforge.status.target import SECURITY_CONFIG_TYPES, Target


def served_certificate(url: str, ca_cert: Path | None, *, timeout: float) -> dict[str, Any]:
    """The certificate a node serves on its HTTP port, from a TLS handshake with it.

    Verified against the cluster CA with hostname checks. When verification fails, the
    handshake is repeated without it so the report can still show what is served.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or 443
    verified_context = ssl.create_default_context(cafile=str(ca_cert) if ca_cert else None)
    try:
        der = _handshake(host, port, verified_context, timeout)
        verification_error = None
    except ssl.SSLCertVerificationError as error:
        verification_error = error.verify_message or str(error)
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        try:
            der = _handshake(host, port, unverified, timeout)
        except OSError as again:
            return {"error": f"{type(again).__name__}: {again}"}
    except OSError as error:
        return {"error": f"{type(error).__name__}: {error}"}
    certificate = x509.load_der_x509_certificate(der)
    return {
        "subject": certificate.subject.rfc4514_string(),
        "issuer": certificate.issuer.rfc4514_string(),
        "serial": format(certificate.serial_number, "x"),
        "not_after": certificate.not_valid_after_utc.isoformat(),
        "sha256": hashlib.sha256(der).hexdigest(),
        "verified": verification_error is None,
        "verify_error": verification_error,
    }


def _handshake(host: str, port: int, context: ssl.SSLContext, timeout: float) -> bytes:
    with (
        socket.create_connection((host, port), timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise ssl.SSLError(f"{host}:{port} sent no certificate")
    return der


def collect(target: Target, client: ClusterClient, *, timeout: float) -> dict[str, Any]:
    """Ask the cluster, every node, the console and the services; record every answer."""
    recorded: dict[str, Any] = {"nodes_root": {}, "certificates": {}, "services": {}}
    for node in target.nodes:
        recorded["nodes_root"][node.name] = client.get(f"{node.url}/")
    reachable = [
        node.url for node in target.nodes if recorded["nodes_root"][node.name].get("status") == 200
    ]
    # Cluster-wide questions go to the first node that answered; any node can answer them.
    base = reachable[0] if reachable else None
    for key, path in (
        ("health", "/_cluster/health"),
        ("nodes_info", "/_nodes/jvm,http,plugins"),
        ("nodes_stats", "/_nodes/stats/jvm,fs"),
        (
            "settings",
            "/_cluster/settings?include_defaults=true&flat_settings=true",
        ),
    ):
        recorded[key] = (
            client.get(base + path) if base else {"error": "no node answered GET / with 200"}
        )
    # Scheduled snapshots (clusterforge.status.snapshots): the repositories' snapshots.
    recorded["snapshots"] = collect_snapshots(client, base)
    if target.secured:
        # It answers without credentials, so any node that answered HTTP at all will do.
        answering = [
            node.url for node in target.nodes if "status" in recorded["nodes_root"][node.name]
        ]
        any_url = base or (answering[0] if answering else None)
        recorded["security_health"] = (
            client.get(f"{any_url}/_plugins/_security/health", auth=False)
            if any_url
            else {"error": "no node to ask"}
        )
        recorded["security_config"] = {
            kind: client.get(f"{base}/_plugins/_security/api/{kind}")
            if base
            else {"error": "no node answered GET / with 200"}
            for kind in SECURITY_CONFIG_TYPES
        }
    if target.mode == "tls":
        for node in target.nodes:
            recorded["certificates"][node.name] = served_certificate(
                node.url, target.ca_cert, timeout=timeout
            )
    if target.console:
        recorded["console"] = client.get(f"{target.console.rstrip('/')}/api/status")
    for name, url in target.services.items():
        recorded["services"][name] = client.get(url, auth=False)
    return recorded
