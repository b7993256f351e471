"""The cluster's one TLS profile, spelled for every server the toolkit configures.

The inventory names it once (``opensearch_tls_protocols``, ``opensearch_tls_ciphers``, in
the JDK's names, which the nodes read as they are). Every other listener takes the same
versions and suites from here, in its own spelling: nginx and PostgreSQL (OpenSSL names),
Prometheus, Alertmanager and the node exporter (Go's exporter-toolkit, whose names are
the JDK's), and the lab's slapd (OpenSSL's, through GnuTLS or OpenSSL as Debian builds it).
A listener that took its own list offered CBC and 3DES suites beside the cluster's AEAD
ones (issue 51: testssl.sh graded Prometheus SWEET32-vulnerable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The cluster's TLS 1.2 suites by their JDK names, as OpenSSL names them. Only ECDHE key
# exchange with an AEAD cipher: the schema's choices are exactly these and TLS 1.3's.
OPENSSL_TLS12_NAMES = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
}
TLS13_SUITES = ("TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256")
# GnuTLS's names (Debian's slapd is built with GnuTLS) for the profile's parts.
_GNUTLS_VERSIONS = {"TLSv1.3": "VERS-TLS1.3", "TLSv1.2": "VERS-TLS1.2"}
_GNUTLS_CIPHERS = {
    "AES_256_GCM": "AES-256-GCM",
    "AES_128_GCM": "AES-128-GCM",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}
_GO_VERSIONS = {"TLSv1.2": "TLS12", "TLSv1.3": "TLS13"}
_OPENSSL_VERSIONS = {"TLSv1.2": "TLSv1.2", "TLSv1.3": "TLSv1.3"}


def default_profile() -> TlsProfile:
    """The profile of a cluster that leaves opensearch_tls_* at their defaults (the lab's)."""
    from clusterforge.schema import load_schema

    schema = load_schema()
    return TlsProfile.of(
        schema.default_of("opensearch_tls_protocols"), schema.default_of("opensearch_tls_ciphers")
    )


@dataclass(frozen=True, kw_only=True)
class TlsProfile:
    """The protocols and suites every TLS listener of the toolkit offers."""

    protocols: tuple[str, ...]
    ciphers: tuple[str, ...]

    @classmethod
    def of(cls, protocols: Sequence[str], ciphers: Sequence[str]) -> TlsProfile:
        return cls(protocols=tuple(protocols), ciphers=tuple(ciphers))

    def tls13_only(self) -> TlsProfile:
        """The profile's TLS 1.3 part alone, for a server that cannot refuse a client's
        TLS 1.2 renegotiation (GnuTLS in slapd); itself when it has no TLS 1.3."""
        if "TLSv1.3" not in self.protocols:
            return self
        return TlsProfile(protocols=("TLSv1.3",), ciphers=self.tls13_suites)

    @property
    def tls12_ciphers(self) -> tuple[str, ...]:
        """The TLS 1.2 suites in the JDK's (and Go's) names, in the cluster's order."""
        return tuple(name for name in self.ciphers if name in OPENSSL_TLS12_NAMES)

    @property
    def tls12_openssl_ciphers(self) -> tuple[str, ...]:
        return tuple(OPENSSL_TLS12_NAMES[name] for name in self.tls12_ciphers)

    @property
    def tls13_suites(self) -> tuple[str, ...]:
        return tuple(name for name in self.ciphers if name in TLS13_SUITES)

    @property
    def oldest_protocol(self) -> str:
        """The lowest version offered (the schema allows only TLSv1.2 and TLSv1.3)."""
        return "TLSv1.2" if "TLSv1.2" in self.protocols else "TLSv1.3"

    def problems(self) -> list[str]:
        """What no listener could serve; the inventory check reports these."""
        if "TLSv1.2" in self.protocols and not self.tls12_ciphers:
            return [
                "opensearch_tls_ciphers has no TLS 1.2 suite the toolkit's other listeners "
                "(nginx, Prometheus, PostgreSQL) know; add one such as "
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, or remove TLSv1.2"
            ]
        return []

    def go_server_config(self, cert_file: str, key_file: str) -> dict[str, Any]:
        """exporter-toolkit's ``tls_server_config`` (Prometheus, Alertmanager, exporters).

        Go offers its TLS 1.3 suites whatever the list says (all AEAD); ``cipher_suites``
        holds TLS 1.2 to the cluster's. Without it Go offered CBC and 3DES suites too.
        """
        config: dict[str, Any] = {
            "cert_file": cert_file,
            "key_file": key_file,
            "min_version": _GO_VERSIONS[self.oldest_protocol],
        }
        if self.oldest_protocol == "TLSv1.2":
            config["cipher_suites"] = list(self.tls12_ciphers)
            config["prefer_server_cipher_suites"] = True
        if "TLSv1.3" not in self.protocols:
            config["max_version"] = "TLS12"
        return config

    def gnutls_priority(self) -> str:
        """A GnuTLS priority string (slapd's TLSCipherSuite): the profile's versions, its
        AEAD ciphers and ECDHE key exchange only. Without it Debian's slapd offered TLS 1.0,
        CBC suites and RSA key transport beside them, whatever TLSProtocolMin said."""
        ciphers: list[str] = []
        exchanges: list[str] = []
        for name in self.ciphers:
            for part, gnutls in _GNUTLS_CIPHERS.items():
                if part in name and gnutls not in ciphers:
                    ciphers.append(gnutls)
            for exchange in ("ECDHE_RSA", "ECDHE_ECDSA"):
                if f"TLS_{exchange}_" in name and exchange.replace("_", "-") not in exchanges:
                    exchanges.append(exchange.replace("_", "-"))
        versions = [_GNUTLS_VERSIONS[version] for version in self.protocols]
        parts = ["NORMAL", "-VERS-ALL", *(f"+{v}" for v in versions), "-CIPHER-ALL"]
        parts += [f"+{cipher}" for cipher in ciphers]
        parts += ["-MAC-ALL", "+AEAD", "-KX-ALL", *(f"+{kx}" for kx in exchanges)]
        return ":".join(parts)
