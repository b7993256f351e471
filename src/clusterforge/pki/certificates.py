"""The PKI's building blocks: certificate subjects, reading certificates back, and files.

:class:`SubjectFields` (the subject, in the order C, ST, L, O, OU, CN so that RFC 4514
renders it as ``CN=...,OU=...,O=...,L=...,ST=...,C=...``, the form
``plugins.security.nodes_dn`` and ``plugins.security.authcz.admin_dn`` take; defaults
OU=clusterforge, O=clusterforge, L=Local, ST=Local, C=US), :func:`subject_dn` (DNs are
read back, never retyped), :func:`certificate_expiry`, :func:`write_file_atomically`
(key files 0600 from the moment they exist, certificates 0644), and what the CA
(:mod:`clusterforge.pki.authority`), the leaf certificates
(:mod:`clusterforge.pki.issuing`) and the CA rotation (:mod:`clusterforge.pki.ca_rotation`)
share. Errors are :class:`PkiError`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    PrivateKeyTypes,
)
from cryptography.x509.oid import NameOID

from clusterforge.errors import ClusterforgeError
from clusterforge.schema import load_schema

# The subject fields besides CN and their defaults: opensearch_cert_subject's, in schema.yml.
SUBJECT_DEFAULTS: dict[str, str] = dict(load_schema().default_of("opensearch_cert_subject"))
CA_CERT_FILE = "ca.pem"


CA_KEY_FILE = "ca-key.pem"


CA_PASSPHRASE_ENV = "CLUSTERFORGE_CA_PASSPHRASE"  # noqa: S105 (a variable name, not a secret)


DEFAULT_CA_VALIDITY_DAYS = 3650


DEFAULT_LEAF_VALIDITY_DAYS = 3650


DEFAULT_RENEW_WITHIN_DAYS: int = load_schema().default_of("opensearch_cert_renew_within_days")


RSA_KEY_BITS = 2048


# Certificates start a little in the past so that a host whose clock lags the control node
# does not reject a certificate issued seconds ago.
_BACKDATE = dt.timedelta(minutes=5)


class PkiError(ClusterforgeError):
    """A CA or certificate cannot be created, loaded or issued; the message says what to do."""


@dataclass(frozen=True, kw_only=True)
class SubjectFields:
    """The distinguished name of a certificate, field by field.

    Only ``common_name`` has no default. ``country`` must be two letters (X.509 says so).
    """

    common_name: str
    organizational_unit: str = SUBJECT_DEFAULTS["organizational_unit"]
    organization: str = SUBJECT_DEFAULTS["organization"]
    locality: str = SUBJECT_DEFAULTS["locality"]
    state: str = SUBJECT_DEFAULTS["state"]
    country: str = SUBJECT_DEFAULTS["country"]

    def __post_init__(self) -> None:
        for field_name in (
            "common_name",
            "organizational_unit",
            "organization",
            "locality",
            "state",
        ):
            if not getattr(self, field_name).strip():
                raise PkiError(f"certificate subject field {field_name} is empty; give it a value")
        if not re.fullmatch(r"[A-Za-z]{2}", self.country):
            raise PkiError(
                f"certificate subject country {self.country!r} is not a two-letter code; "
                "set it to one such as US or DE"
            )

    def to_name(self) -> x509.Name:
        """Return the X.509 name, most general attribute first (C ... CN)."""
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COUNTRY_NAME, self.country.upper()),
                x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, self.state),
                x509.NameAttribute(NameOID.LOCALITY_NAME, self.locality),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.organization),
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, self.organizational_unit),
                x509.NameAttribute(NameOID.COMMON_NAME, self.common_name),
            ]
        )


@dataclass(frozen=True, kw_only=True)
class CertificateAuthority:
    """A loaded CA: its certificate, its decrypted key (in memory only) and where they live."""

    certificate: x509.Certificate
    private_key: CertificateIssuerPrivateKeyTypes
    cert_path: Path
    key_path: Path
    changed: bool
    user_supplied: bool

    @property
    def subject_dn(self) -> str:
        return self.certificate.subject.rfc4514_string()


@dataclass(frozen=True, kw_only=True)
class IssuedCertificate:
    """The result of an ``ensure_*`` call; ``reasons`` says why it was (re)issued."""

    changed: bool
    cert_path: Path
    key_path: Path
    subject_dn: str
    not_valid_after: dt.datetime
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CertificateExpiry:
    """When a certificate stops being valid, for the final report."""

    subject_dn: str
    not_valid_after: dt.datetime
    days_left: int


def load_certificate(source: bytes | str | Path) -> x509.Certificate:
    """Load a PEM certificate from bytes, PEM text, or a path (``str`` or ``Path``)."""
    if isinstance(source, bytes):
        pem = source
    elif isinstance(source, str) and source.lstrip().startswith("-----BEGIN"):
        pem = source.encode("ascii")
    else:
        path = Path(source)
        try:
            pem = path.read_bytes()
        except OSError as error:
            raise PkiError(f"cannot read certificate {path}: {error.strerror}") from error
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as error:
        raise PkiError(f"not a PEM certificate: {error}") from error


def subject_dn(certificate: x509.Certificate | bytes | str | Path) -> str:
    """Return the subject as ``CN=...,OU=...,...,C=...``, exactly as the certificate has it.

    This is the string ``openssl x509 -noout -subject -nameopt RFC2253`` prints.
    """
    if not isinstance(certificate, x509.Certificate):
        certificate = load_certificate(certificate)
    return certificate.subject.rfc4514_string()


def certificate_expiry(
    certificate: x509.Certificate | bytes | str | Path, *, now: dt.datetime | None = None
) -> CertificateExpiry:
    """Return when ``certificate`` expires and how many whole days are left (negative if past)."""
    if not isinstance(certificate, x509.Certificate):
        certificate = load_certificate(certificate)
    moment = now if now is not None else utcnow()
    not_after = certificate.not_valid_after_utc
    return CertificateExpiry(
        subject_dn=certificate.subject.rfc4514_string(),
        not_valid_after=not_after,
        days_left=(not_after - moment) // dt.timedelta(days=1),
    )


def ca_passphrase_from_environment(name: str = CA_PASSPHRASE_ENV) -> bytes:
    """Return the CA key passphrase from environment variable ``name`` (non-empty)."""
    value = os.environ.get(name, "")
    if not value:
        raise PkiError(
            f"environment variable {name} is not set or empty; export the CA key passphrase "
            f"in it (for example from a vault) before issuing certificates"
        )
    return value.encode("utf-8")


def split_alt_names(values: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split host names and IP addresses into ``(dns_names, ip_addresses)``, order kept."""
    dns_names: list[str] = []
    ip_addresses: list[str] = []
    for value in values:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            dns_names.append(value)
        else:
            ip_addresses.append(value)
    return dns_names, ip_addresses


def write_file_atomically(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``data`` to ``path`` through a same-directory temporary file and a rename.

    The temporary file is created 0600 (``mkstemp``), so a key is never readable by others,
    not even for a moment; it gets ``mode`` before the rename.
    """
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_key_and_certificate(
    *,
    key: rsa.RSAPrivateKey,
    key_encryption: serialization.KeySerializationEncryption,
    key_path: Path,
    cert_path: Path,
    certificate: x509.Certificate,
) -> None:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, key_encryption
    )
    # The key goes first: if the run stops in between, the next run sees a key that does not
    # match the certificate and issues both again.
    write_file_atomically(key_path, key_pem, mode=0o600)
    write_file_atomically(
        cert_path, certificate.public_bytes(serialization.Encoding.PEM), mode=0o644
    )


def certificate_builder(
    *,
    subject: x509.Name,
    issuer: x509.Name,
    key: rsa.RSAPrivateKey,
    now: dt.datetime,
    not_after: dt.datetime,
    ca: bool,
) -> x509.CertificateBuilder:
    """What a CA's and a leaf's certificate share: a random serial, the backdated start,
    and the basic constraints and key usage of a CA (signs certificates, no CA below it)
    or of a leaf (a TLS peer: signs handshakes, enciphers keys)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=not ca,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def authority_key_identifier(ca_certificate: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        identifier = ca_certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(
            _issuer_public_key(ca_certificate)
        )
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(identifier.value)


def _issuer_public_key(
    ca_certificate: x509.Certificate,
) -> rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey:
    public_key = ca_certificate.public_key()
    if not isinstance(
        public_key,
        rsa.RSAPublicKey
        | ec.EllipticCurvePublicKey
        | ed25519.Ed25519PublicKey
        | ed448.Ed448PublicKey,
    ):
        raise PkiError("the CA certificate's key type cannot sign certificates")
    return public_key


def signature_hash(key: CertificateIssuerPrivateKeyTypes) -> hashes.SHA256 | None:
    # Ed25519 and Ed448 sign the message itself and take no separate digest.
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    return hashes.SHA256()


def issued_by(certificate: x509.Certificate, ca_certificate: x509.Certificate) -> bool:
    """Whether ``ca_certificate``'s key signed ``certificate``."""
    try:
        certificate.verify_directly_issued_by(ca_certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def certificate_alt_names(certificate: x509.Certificate) -> frozenset[x509.GeneralName]:
    return _list_extension(certificate, x509.SubjectAlternativeName)


def extended_key_usages(certificate: x509.Certificate) -> frozenset[x509.ObjectIdentifier]:
    return _list_extension(certificate, x509.ExtendedKeyUsage)


def _list_extension(
    certificate: x509.Certificate,
    kind: type[x509.SubjectAlternativeName] | type[x509.ExtendedKeyUsage],
) -> frozenset[Any]:
    """The entries of an extension that is a list; none when the certificate lacks it."""
    try:
        extension = certificate.extensions.get_extension_for_class(kind)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(extension.value)


def alt_name_order(entry: x509.GeneralName) -> tuple[int, str]:
    return (0 if isinstance(entry, x509.DNSName) else 1, describe_alt_name(entry))


def describe_alt_name(entry: x509.GeneralName) -> str:
    if isinstance(entry, x509.DNSName):
        return f"DNS:{entry.value}"
    if isinstance(entry, x509.IPAddress):
        return f"IP:{entry.value}"
    return str(entry)


def public_key_bytes(holder: x509.Certificate | PrivateKeyTypes) -> bytes:
    return holder.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
