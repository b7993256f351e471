"""Leaf certificates: node, admin and server (:func:`ensure_node_certificate`,
:func:`ensure_admin_certificate`, :func:`ensure_server_certificate`).

Each returns an :class:`~clusterforge.pki.certificates.IssuedCertificate` (``changed``,
paths, ``subject_dn``, ``not_valid_after``, ``reasons``) and writes ``<name>.pem`` and
``<name>-key.pem`` (unencrypted PKCS#8, which the plugin's ``pemkey_filepath`` needs). An
existing certificate is kept untouched (files not rewritten) unless one of these holds,
each of which is listed in ``reasons``: a file is missing or unreadable, the key does not
match the certificate, the subject or the set of SANs differs from the one asked for, the
certificate was not signed by the current CA, its key-usage profile differs, or it expires
within ``renew_within_days`` (default 30) and the CA would let a new one live longer.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from clusterforge.pki.certificates import (
    DEFAULT_LEAF_VALIDITY_DAYS,
    DEFAULT_RENEW_WITHIN_DAYS,
    RSA_KEY_BITS,
    CertificateAuthority,
    IssuedCertificate,
    PkiError,
    SubjectFields,
    alt_name_order,
    authority_key_identifier,
    certificate_alt_names,
    certificate_builder,
    describe_alt_name,
    extended_key_usages,
    issued_by,
    load_certificate,
    public_key_bytes,
    signature_hash,
    split_alt_names,
    utcnow,
    write_key_and_certificate,
)

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# Host names as they appear in inventories: letters, digits, '-' and '_' (Docker and some
# DNS setups use it), dot-separated, optionally a leading wildcard label.
_DNS_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"


_DNS_PATTERN = re.compile(rf"^(?:\*\.)?{_DNS_LABEL}(?:\.{_DNS_LABEL})*\.?$")


_NODE_USAGES = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)


_ADMIN_USAGES = (ExtendedKeyUsageOID.CLIENT_AUTH,)


# A server that is no node (the services' TLS proxy, PostgreSQL): it authenticates to
# nobody, so a stolen key cannot act as a client of the cluster's transport layer.
_SERVER_USAGES = (ExtendedKeyUsageOID.SERVER_AUTH,)


def ensure_node_certificate(
    ca: CertificateAuthority,
    *,
    directory: Path,
    name: str,
    subject: SubjectFields,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    renew_within_days: int = DEFAULT_RENEW_WITHIN_DAYS,
    validity_days: int = DEFAULT_LEAF_VALIDITY_DAYS,
    force: bool = False,
) -> IssuedCertificate:
    """Make sure ``directory/<name>.pem`` is a current node certificate (serverAuth+clientAuth).

    ``dns_names`` and ``ip_addresses`` are every name the node is reached by (inventory
    name, ansible_host, publish host, extra SANs); duplicates are dropped, DNS names compare
    case-insensitively, and an IP address given among the DNS names is treated as an IP.
    """
    for address in ip_addresses:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise PkiError(
                f"node certificate {name!r}: {address!r} is not an IP address; fix the "
                "address in the inventory or list it as a host name"
            ) from None
    all_dns, all_ips = split_alt_names([*dns_names, *ip_addresses])
    if not all_dns and not all_ips:
        raise PkiError(
            f"node certificate {name!r} has no subject alternative names; give at least the "
            "node's host name or address"
        )
    return _ensure_leaf_certificate(
        ca,
        directory=directory,
        name=name,
        subject=subject,
        alt_names=_alt_names(name, all_dns, all_ips),
        usages=_NODE_USAGES,
        renew_within_days=renew_within_days,
        validity_days=validity_days,
        force=force,
    )


def ensure_admin_certificate(
    ca: CertificateAuthority,
    *,
    directory: Path,
    subject: SubjectFields,
    name: str = "admin",
    renew_within_days: int = DEFAULT_RENEW_WITHIN_DAYS,
    validity_days: int = DEFAULT_LEAF_VALIDITY_DAYS,
    force: bool = False,
) -> IssuedCertificate:
    """Make sure ``directory/<name>.pem`` is a current admin client certificate (clientAuth).

    Its DN (``subject_dn`` of the result) is what ``plugins.security.authcz.admin_dn`` lists.
    """
    return _ensure_leaf_certificate(
        ca,
        directory=directory,
        name=name,
        subject=subject,
        alt_names=frozenset(),
        usages=_ADMIN_USAGES,
        renew_within_days=renew_within_days,
        validity_days=validity_days,
        force=force,
    )


def ensure_server_certificate(
    ca: CertificateAuthority,
    *,
    directory: Path,
    name: str,
    subject: SubjectFields,
    alt_names: Sequence[str],
    renew_within_days: int = DEFAULT_RENEW_WITHIN_DAYS,
    validity_days: int = DEFAULT_LEAF_VALIDITY_DAYS,
    force: bool = False,
) -> IssuedCertificate:
    """Make sure ``directory/<name>.pem`` is a current server-only certificate (serverAuth).

    For the hosts beside the cluster that serve TLS (the services' proxy, the database):
    ``alt_names`` are the names and addresses clients reach it by. Give such certificates
    a subject no node certificate has (another OU): ``plugins.security.nodes_dn`` is a
    pattern over the nodes' subject fields.
    """
    all_dns, all_ips = split_alt_names(list(alt_names))
    if not all_dns and not all_ips:
        raise PkiError(
            f"server certificate {name!r} has no subject alternative names; give at least "
            "the host's name or address"
        )
    return _ensure_leaf_certificate(
        ca,
        directory=directory,
        name=name,
        subject=subject,
        alt_names=_alt_names(subject.common_name, all_dns, all_ips),
        usages=_SERVER_USAGES,
        renew_within_days=renew_within_days,
        validity_days=validity_days,
        force=force,
    )


def _alt_names(
    name: str, dns_names: Sequence[str], ip_addresses: Sequence[str]
) -> frozenset[x509.GeneralName]:
    entries: set[x509.GeneralName] = set()
    for dns_name in dns_names:
        if not _DNS_PATTERN.fullmatch(dns_name):
            raise PkiError(
                f"node certificate {name!r}: {dns_name!r} is neither a host name nor an IP "
                "address; fix the inventory name, ansible_host, publish host or extra SAN"
            )
        entries.add(x509.DNSName(dns_name.lower().rstrip(".")))
    for address in ip_addresses:
        entries.add(x509.IPAddress(ipaddress.ip_address(address)))
    return frozenset(entries)


def _ensure_leaf_certificate(
    ca: CertificateAuthority,
    *,
    directory: Path,
    name: str,
    subject: SubjectFields,
    alt_names: frozenset[x509.GeneralName],
    usages: tuple[x509.ObjectIdentifier, ...],
    renew_within_days: int,
    validity_days: int,
    force: bool = False,
) -> IssuedCertificate:
    if not _NAME_PATTERN.fullmatch(name) or name in {"ca", "ca-key"}:
        raise PkiError(
            f"certificate name {name!r} cannot be a file name here; use letters, digits, "
            "'.', '_' or '-', not starting with a dot, and not 'ca'"
        )
    if validity_days < 1 or renew_within_days < 0:
        raise PkiError("validity_days must be at least 1 and renew_within_days at least 0")
    cert_path = directory / f"{name}.pem"
    key_path = directory / f"{name}-key.pem"
    reasons = _reasons_to_issue(
        ca,
        cert_path=cert_path,
        key_path=key_path,
        subject=subject.to_name(),
        alt_names=alt_names,
        usages=usages,
        renew_within_days=renew_within_days,
    )
    if force and not reasons:
        # playbooks/rotate_certs.yml: a new key and serial now, whatever the expiry.
        reasons = ["renewal forced (rotate_certs)"]
    if reasons:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
        certificate = _sign_leaf(
            ca,
            key=key,
            subject=subject.to_name(),
            alt_names=alt_names,
            usages=usages,
            validity_days=validity_days,
        )
        write_key_and_certificate(
            key=key,
            key_encryption=serialization.NoEncryption(),
            key_path=key_path,
            cert_path=cert_path,
            certificate=certificate,
        )
    else:
        certificate = load_certificate(cert_path)
    return IssuedCertificate(
        changed=bool(reasons),
        cert_path=cert_path,
        key_path=key_path,
        subject_dn=certificate.subject.rfc4514_string(),
        not_valid_after=certificate.not_valid_after_utc,
        reasons=tuple(reasons),
    )


def _reasons_to_issue(
    ca: CertificateAuthority,
    *,
    cert_path: Path,
    key_path: Path,
    subject: x509.Name,
    alt_names: frozenset[x509.GeneralName],
    usages: tuple[x509.ObjectIdentifier, ...],
    renew_within_days: int,
) -> list[str]:
    if not cert_path.exists() or not key_path.exists():
        return ["no certificate yet"]
    try:
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        # Only the public half is compared here, on every run of every playbook; the RSA
        # consistency check costs 34 ms per key (0.14 s of each plan for the lab's four)
        # and proves nothing about a key this toolkit generated and keeps 0600.
        key = serialization.load_pem_private_key(
            key_path.read_bytes(), password=None, unsafe_skip_rsa_key_validation=True
        )
    except (ValueError, TypeError, OSError):
        return ["the certificate or its key cannot be read"]
    reasons: list[str] = []
    if public_key_bytes(key) != public_key_bytes(certificate):
        reasons.append("the key does not match the certificate")
    if certificate.subject != subject:
        reasons.append(
            f"subject changed from {certificate.subject.rfc4514_string()} "
            f"to {subject.rfc4514_string()}"
        )
    current_alt_names = certificate_alt_names(certificate)
    if current_alt_names != alt_names:
        added = sorted(describe_alt_name(entry) for entry in alt_names - current_alt_names)
        removed = sorted(describe_alt_name(entry) for entry in current_alt_names - alt_names)
        reasons.append(f"SANs changed (added {added}, removed {removed})")
    if not issued_by(certificate, ca.certificate):
        reasons.append("not signed by the current CA")
    if extended_key_usages(certificate) != frozenset(usages):
        reasons.append("extended key usage differs from the profile")
    remaining = certificate.not_valid_after_utc - utcnow()
    # Renewing only helps when the CA outlives the current certificate; otherwise every run
    # would issue again and the CA itself is what needs renewing (the expiry report says so).
    ca_allows_longer = ca.certificate.not_valid_after_utc > (
        certificate.not_valid_after_utc + dt.timedelta(days=1)
    )
    if remaining < dt.timedelta(days=renew_within_days) and ca_allows_longer:
        reasons.append(
            f"expires in {remaining // dt.timedelta(days=1)} days, within the "
            f"{renew_within_days}-day renewal window"
        )
    return reasons


def _sign_leaf(
    ca: CertificateAuthority,
    *,
    key: rsa.RSAPrivateKey,
    subject: x509.Name,
    alt_names: frozenset[x509.GeneralName],
    usages: tuple[x509.ObjectIdentifier, ...],
    validity_days: int,
) -> x509.Certificate:
    now = utcnow()
    not_after = min(now + dt.timedelta(days=validity_days), ca.certificate.not_valid_after_utc)
    builder = (
        certificate_builder(
            subject=subject,
            issuer=ca.certificate.subject,
            key=key,
            now=now,
            not_after=not_after,
            ca=False,
        )
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(authority_key_identifier(ca.certificate), critical=False)
    )
    if alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(sorted(alt_names, key=alt_name_order)), critical=False
        )
    return builder.sign(ca.private_key, signature_hash(ca.private_key))
