"""The cluster's PKI: one CA, one certificate per node, an admin client certificate.

Everything here runs on the control node; the roles copy the results to the hosts (never
the CA key) and set ownership. Public API:

- :class:`SubjectFields`: the subject of a certificate. It is built in the order C, ST, L,
  O, OU, CN so that RFC 4514 renders it as ``CN=...,OU=...,O=...,L=...,ST=...,C=...``, the
  form ``plugins.security.nodes_dn`` and ``plugins.security.authcz.admin_dn`` take.
  Defaults: OU=clusterforge, O=clusterforge, L=Local, ST=Local, C=US.
- :func:`load_or_create_ca` returns a :class:`CertificateAuthority`. It creates
  ``ca.pem`` and ``ca-key.pem`` (RSA 2048, 3650 days, the key as encrypted PKCS#8 under the
  caller's passphrase) once and loads them afterwards. A user's own CA (certificate plus
  key, encrypted or not) is used in place when ``user_ca_cert`` and ``user_ca_key`` are
  given; nothing is written then.
- :func:`ensure_node_certificate` and :func:`ensure_admin_certificate` return an
  :class:`IssuedCertificate` (``changed``, paths, ``subject_dn``, ``not_valid_after``,
  ``reasons``). They write ``<name>.pem`` and ``<name>-key.pem`` (unencrypted PKCS#8, which
  the plugin's ``pemkey_filepath`` needs). An existing certificate is kept untouched (files
  not rewritten) unless one of these holds, each of which is listed in ``reasons``:
  a file is missing or unreadable, the key does not match the certificate, the subject or
  the set of SANs differs from the one asked for, the certificate was not signed by the
  current CA, its key-usage profile differs, or it expires within ``renew_within_days``
  (default 30) and the CA would let a new one live longer.
- :func:`subject_dn` reads the DN string back from a certificate; DNs are never retyped.
- :func:`certificate_expiry` reports ``not_valid_after`` and whole days left.
- :func:`ca_passphrase_from_environment` reads the CA passphrase from
  ``CLUSTERFORGE_CA_PASSPHRASE`` (never from argv).
- :func:`main` is ``scripts/certs`` (``python -m clusterforge.pki.pki``).

Key files are written 0600 from the moment they exist (a temporary file in the same
directory, then an atomic rename); certificate files 0644. Errors are :class:`PkiError`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import re
import sys
import tempfile
from collections.abc import Collection, Sequence
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
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from clusterforge.errors import ClusterforgeError
from clusterforge.schema import load_schema

__all__ = [
    "CA_BUNDLE_FILE",
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CA_PASSPHRASE_ENV",
    "CA_ROTATION_STEPS",
    "CA_ROTATION_VARIABLE",
    "DEFAULT_CA_VALIDITY_DAYS",
    "DEFAULT_LEAF_VALIDITY_DAYS",
    "DEFAULT_RENEW_WITHIN_DAYS",
    "CaRotationOrderError",
    "CertificateAuthority",
    "CertificateExpiry",
    "IssuedCertificate",
    "PkiError",
    "SubjectFields",
    "ca_bundle_certificates",
    "ca_passphrase_from_environment",
    "ca_rotation_state",
    "certificate_expiry",
    "ensure_admin_certificate",
    "ensure_node_certificate",
    "issued_by",
    "load_certificate",
    "load_or_create_ca",
    "main",
    "retire_node_certificates",
    "rotate_ca",
    "split_alt_names",
    "subject_dn",
    "write_ca_bundle",
    "write_file_atomically",
]

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


class PkiError(ClusterforgeError):
    """A CA or certificate cannot be created, loaded or issued; the message says what to do."""


# The subject fields besides CN and their defaults: opensearch_cert_subject's, in schema.yml.
SUBJECT_DEFAULTS: dict[str, str] = dict(load_schema().default_of("opensearch_cert_subject"))


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


# --- reading ------------------------------------------------------------------------------


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
    moment = now if now is not None else _utcnow()
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


# --- writing ------------------------------------------------------------------------------


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


def _write_key_and_certificate(
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


# --- the CA -------------------------------------------------------------------------------


def load_or_create_ca(
    directory: Path,
    *,
    passphrase: bytes | None,
    subject: SubjectFields,
    validity_days: int = DEFAULT_CA_VALIDITY_DAYS,
    user_ca_cert: Path | None = None,
    user_ca_key: Path | None = None,
) -> CertificateAuthority:
    """Load the CA from ``directory`` (or the user's CA), creating it on the first call.

    ``passphrase`` encrypts the key of a CA created here and decrypts the existing one; it
    must not be empty then. For a user's CA it is only needed when that key is encrypted.
    An existing CA is reused as it is, whatever ``subject`` says now: a new CA would
    invalidate every certificate it signed.
    """
    if (user_ca_cert is None) != (user_ca_key is None):
        raise PkiError(
            "a user CA needs both its certificate and its key; give both paths or neither"
        )
    if user_ca_cert is not None and user_ca_key is not None:
        return _load_ca(user_ca_cert, user_ca_key, passphrase=passphrase, user_supplied=True)

    cert_path = directory / CA_CERT_FILE
    key_path = directory / CA_KEY_FILE
    if not passphrase:
        raise PkiError(
            f"the CA key passphrase is empty; set {CA_PASSPHRASE_ENV} (or the vaulted "
            "variable the role reads) to a non-empty passphrase"
        )
    if cert_path.exists() and key_path.exists():
        return _load_ca(cert_path, key_path, passphrase=passphrase, user_supplied=False)
    if cert_path.exists() or key_path.exists():
        present, missing = (cert_path, key_path) if cert_path.exists() else (key_path, cert_path)
        raise PkiError(
            f"found {present} but not {missing}; restore {missing.name}, or remove both "
            "files to create a new CA (every node certificate is then issued again)"
        )
    return _create_ca(
        directory, passphrase=passphrase, subject=subject, validity_days=validity_days
    )


def _create_ca(
    directory: Path,
    *,
    passphrase: bytes,
    subject: SubjectFields,
    validity_days: int,
    cert_name: str = CA_CERT_FILE,
    key_name: str = CA_KEY_FILE,
) -> CertificateAuthority:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    now = _utcnow()
    name = subject.to_name()
    certificate = (
        _certificate_builder(
            subject=name,
            issuer=name,
            key=key,
            now=now,
            not_after=now + dt.timedelta(days=validity_days),
            ca=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / cert_name
    key_path = directory / key_name
    _write_key_and_certificate(
        key=key,
        key_encryption=serialization.BestAvailableEncryption(passphrase),
        key_path=key_path,
        cert_path=cert_path,
        certificate=certificate,
    )
    return CertificateAuthority(
        certificate=certificate,
        private_key=key,
        cert_path=cert_path,
        key_path=key_path,
        changed=True,
        user_supplied=False,
    )


def _load_ca(
    cert_path: Path, key_path: Path, *, passphrase: bytes | None, user_supplied: bool
) -> CertificateAuthority:
    certificate = load_certificate(cert_path)
    try:
        key_pem = key_path.read_bytes()
    except OSError as error:
        raise PkiError(f"cannot read CA key {key_path}: {error.strerror}") from error
    key = _load_ca_key(
        key_pem, key_path=key_path, passphrase=passphrase, user_supplied=user_supplied
    )
    if not isinstance(
        key,
        rsa.RSAPrivateKey
        | ec.EllipticCurvePrivateKey
        | ed25519.Ed25519PrivateKey
        | ed448.Ed448PrivateKey,
    ):
        raise PkiError(
            f"the CA key {key_path} is of type {type(key).__name__}, which cannot sign "
            "certificates; use an RSA, EC, Ed25519 or Ed448 key"
        )
    if _public_key_bytes(key) != _public_key_bytes(certificate):
        raise PkiError(
            f"the CA key {key_path} does not belong to the CA certificate {cert_path}; "
            "give the key that was issued with that certificate"
        )
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is not None and not constraints.value.ca:
        raise PkiError(
            f"{cert_path} is not a CA certificate (basicConstraints CA:FALSE); give a CA"
        )
    if certificate.not_valid_after_utc <= _utcnow():
        raise PkiError(
            f"the CA certificate {cert_path} expired on "
            f"{certificate.not_valid_after_utc:%Y-%m-%d}; create or supply a new CA"
        )
    return CertificateAuthority(
        certificate=certificate,
        private_key=key,
        cert_path=cert_path,
        key_path=key_path,
        changed=False,
        user_supplied=user_supplied,
    )


def _load_ca_key(
    key_pem: bytes, *, key_path: Path, passphrase: bytes | None, user_supplied: bool
) -> PrivateKeyTypes:
    try:
        return _load_unencrypted_ca_key(key_pem, key_path=key_path, user_supplied=user_supplied)
    except _EncryptedKeyError:
        pass
    if not passphrase:
        raise PkiError(
            f"the CA key {key_path} is encrypted; set {CA_PASSPHRASE_ENV} (or the vaulted "
            "variable the role reads) to its passphrase"
        )
    try:
        return serialization.load_pem_private_key(key_pem, password=passphrase)
    except (ValueError, TypeError) as error:
        raise PkiError(
            f"the CA key {key_path} cannot be decrypted with the passphrase given; set "
            f"{CA_PASSPHRASE_ENV} (or the vaulted variable) to the passphrase it was "
            "created with"
        ) from error


class _EncryptedKeyError(Exception):
    pass


def _load_unencrypted_ca_key(
    key_pem: bytes, *, key_path: Path, user_supplied: bool
) -> PrivateKeyTypes:
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError as error:
        # cryptography's way of saying "this key needs a password".
        raise _EncryptedKeyError from error
    except ValueError as error:
        raise PkiError(f"the CA key {key_path} is not a readable PEM private key") from error
    if not user_supplied:
        raise PkiError(
            f"the CA key {key_path} is not encrypted, but clusterforge keeps its CA key "
            "encrypted; encrypt it with the passphrase (openssl pkcs8 -topk8 -v2 aes256) "
            "or remove both CA files to create a new CA"
        )
    return key


# --- CA rotation --------------------------------------------------------------------------
#
# Three steps, each a run of playbooks/rotate-ca.yml, so that no node ever meets a peer
# or a client whose certificate it does not trust:
#
#   trust    a new CA is created beside the current one (ca-next.pem, ca-next-key.pem);
#            every node is given a bundle of both and still serves its old certificate.
#   reissue  the new CA becomes the current one; the old one is kept as ca-previous.pem
#            (its key too, so that the step can still be understood and undone by hand);
#            every node and admin certificate is issued again, under the new CA, and the
#            bundle holds both CAs until every node serves the new certificate.
#   finish   the old CA leaves the bundle; its certificate moves to retired/, its key is
#            deleted. Refused while a certificate the cluster uses was signed by the old CA.
#
# The state is ca-rotation.json beside the CA; the bundle (ca-bundle.pem) is what nodes
# and clients trust, in every state.

CA_BUNDLE_FILE = "ca-bundle.pem"
CA_NEXT_CERT_FILE = "ca-next.pem"
CA_NEXT_KEY_FILE = "ca-next-key.pem"
CA_PREVIOUS_CERT_FILE = "ca-previous.pem"
CA_PREVIOUS_KEY_FILE = "ca-previous-key.pem"
CA_ROTATION_STATE_FILE = "ca-rotation.json"
CA_RETIRED_DIR = "retired"
CA_ROTATION_STEPS = ("trust", "reissue", "finish")
CA_ROTATION_VARIABLE = "clusterforge_ca_rotation_step"
# Which step must have run last before each step may run (a step may also be rerun).
_STEP_AFTER = {"trust": ("idle", "finished"), "reissue": ("trust",), "finish": ("reissue",)}
_STEP_DONE = {"trust": "trust", "reissue": "reissue", "finish": "finished"}


class CaRotationOrderError(PkiError):
    """A CA rotation step was asked for out of order; the message names the step to run."""


def ca_rotation_state(directory: Path) -> str:
    """The last CA rotation step that ran in ``directory``: idle (never rotated), trust,
    reissue or finished."""
    path = directory / CA_ROTATION_STATE_FILE
    if not path.exists():
        return "idle"
    try:
        state = json.loads(path.read_text(encoding="utf-8")).get("step", "idle")
    except (OSError, ValueError, AttributeError) as error:
        raise PkiError(
            f"cannot read the CA rotation state {path}; restore it, or remove it if no "
            "rotation is under way"
        ) from error
    if state not in ("idle", "trust", "reissue", "finished"):
        raise PkiError(f"{path} names an unknown step {state!r}; restore the file")
    return str(state)


def _write_rotation_state(directory: Path, step: str) -> None:
    document = {"step": step, "at": _utcnow().isoformat(timespec="seconds")}
    write_file_atomically(
        directory / CA_ROTATION_STATE_FILE,
        (json.dumps(document) + "\n").encode("utf-8"),
        mode=0o644,
    )


def ca_bundle_certificates(directory: Path) -> list[x509.Certificate]:
    """The CAs the nodes must trust in the current state, the issuing CA first."""
    state = ca_rotation_state(directory)
    certificates = [load_certificate(directory / CA_CERT_FILE)]
    if state == "trust":
        certificates.append(load_certificate(directory / CA_NEXT_CERT_FILE))
    elif state == "reissue":
        certificates.append(load_certificate(directory / CA_PREVIOUS_CERT_FILE))
    return certificates


def write_ca_bundle(directory: Path, *, ca_cert_path: Path | None = None) -> Path:
    """Write ``ca-bundle.pem`` from the rotation state; rewritten only when it differs.

    ``ca_cert_path`` is a user's own CA (no rotation then): the bundle is that CA alone.
    """
    if ca_cert_path is not None:
        certificates = [load_certificate(ca_cert_path)]
    else:
        certificates = ca_bundle_certificates(directory)
    data = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certificates)
    path = directory / CA_BUNDLE_FILE
    if not path.exists() or path.read_bytes() != data:
        write_file_atomically(path, data, mode=0o644)
    return path


def rotate_ca(
    directory: Path,
    step: str,
    *,
    passphrase: bytes | None,
    subject: SubjectFields,
    validity_days: int = DEFAULT_CA_VALIDITY_DAYS,
    leaves_signed_by_previous: Sequence[str] = (),
) -> str:
    """Run one CA rotation step in ``directory`` (the control node's PKI directory).

    Returns what it did, one line. A step repeated right after itself changes nothing
    (a rerun after a failed playbook is safe); any other order raises
    :class:`CaRotationOrderError`. ``leaves_signed_by_previous`` names the certificates
    still signed by the old CA: ``finish`` refuses while there are any.
    """
    if step not in CA_ROTATION_STEPS:
        raise CaRotationOrderError(
            f"{CA_ROTATION_VARIABLE}={step!r} is not a step; give one of "
            f"{', '.join(CA_ROTATION_STEPS)}, in that order"
        )
    if not passphrase:
        raise PkiError(
            f"the CA key passphrase is empty; set {CA_PASSPHRASE_ENV} (or the vaulted "
            "variable the role reads) before rotating the CA"
        )
    state = ca_rotation_state(directory)
    if state == _STEP_DONE[step]:
        return f"{step}: already done, nothing to change"
    if state not in _STEP_AFTER[step]:
        raise CaRotationOrderError(_order_message(step, state))
    current = load_or_create_ca(directory, passphrase=passphrase, subject=subject)
    if step == "trust":
        _create_ca(
            directory,
            passphrase=passphrase,
            subject=subject,
            validity_days=validity_days,
            cert_name=CA_NEXT_CERT_FILE,
            key_name=CA_NEXT_KEY_FILE,
        )
        _write_rotation_state(directory, "trust")
        write_ca_bundle(directory)
        new_dn = subject_dn(directory / CA_NEXT_CERT_FILE)
        return f"trust: new CA {new_dn} created beside the current one"
    if step == "reissue":
        following = _load_ca(
            directory / CA_NEXT_CERT_FILE,
            directory / CA_NEXT_KEY_FILE,
            passphrase=passphrase,
            user_supplied=False,
        )
        # Keep the old CA first, then swap: a run stopped in between still has every file.
        write_file_atomically(
            directory / CA_PREVIOUS_KEY_FILE, current.key_path.read_bytes(), mode=0o600
        )
        write_file_atomically(
            directory / CA_PREVIOUS_CERT_FILE, current.cert_path.read_bytes(), mode=0o644
        )
        os.replace(following.key_path, current.key_path)
        os.replace(following.cert_path, current.cert_path)
        _write_rotation_state(directory, "reissue")
        write_ca_bundle(directory)
        return f"reissue: {following.subject_dn} is now the issuing CA"
    # finish
    if leaves_signed_by_previous:
        raise CaRotationOrderError(
            f"{CA_ROTATION_VARIABLE}=finish: {', '.join(leaves_signed_by_previous)} still "
            "signed by the old CA; rerun playbooks/rotate-ca.yml with "
            f"{CA_ROTATION_VARIABLE}=reissue first"
        )
    previous = load_certificate(directory / CA_PREVIOUS_CERT_FILE)
    retired = directory / CA_RETIRED_DIR
    retired.mkdir(mode=0o700, exist_ok=True)
    write_file_atomically(
        retired / f"ca-{previous.serial_number:x}.pem",
        previous.public_bytes(serialization.Encoding.PEM),
        mode=0o644,
    )
    (directory / CA_PREVIOUS_KEY_FILE).unlink(missing_ok=True)
    (directory / CA_PREVIOUS_CERT_FILE).unlink(missing_ok=True)
    _write_rotation_state(directory, "finished")
    write_ca_bundle(directory)
    return f"finish: old CA {previous.subject.rfc4514_string()} retired; its key is deleted"


def retire_node_certificates(
    directory: Path,
    *,
    keep: Collection[str],
    issuers: Sequence[x509.Certificate] = (),
    now: dt.datetime | None = None,
) -> list[str]:
    """Retire the node certificates in ``directory`` of every name not in ``keep``.

    A node certificate is a ``<name>.pem`` with serverAuth (the CA has no extended key
    usage, the admin certificate clientAuth only) issued by one of ``issuers`` (a user's
    own CA) or a CA of this directory (current, previous, next, or retired by an earlier
    rotation); its key is ``<name>-key.pem``. Anything else is left alone.
    The key is **deleted**: ``plugins.security.nodes_dn`` is a pattern that admits any
    node name with this cluster's subject fields, so the key of a node that left would
    still let its holder join the transport layer as a node until the certificate
    expires. The certificate, which holds no secret, moves to
    ``retired/<name>-<UTC time>.pem`` (0700 directory) so its serial stays on record.
    A node that comes back later simply gets a new key and certificate.

    Returns the retired names, sorted.
    """
    own_cas = [
        directory / name for name in (CA_CERT_FILE, CA_PREVIOUS_CERT_FILE, CA_NEXT_CERT_FILE)
    ]
    own_cas += sorted((directory / CA_RETIRED_DIR).glob("ca-*.pem"))
    issuers = [*issuers, *(load_certificate(path) for path in own_cas if path.is_file())]
    if not issuers:
        return []
    stamp = (now or _utcnow()).strftime("%Y%m%dT%H%M%SZ")
    retired: list[str] = []
    for key_path in sorted(directory.glob("*-key.pem")):
        name = key_path.name.removesuffix("-key.pem")
        cert_path = directory / f"{name}.pem"
        if name in keep or not cert_path.is_file() or not _is_node_certificate(cert_path, issuers):
            continue
        retired_dir = directory / CA_RETIRED_DIR
        retired_dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(retired_dir, 0o700)
        # The key goes first: a run stopped in between leaves a certificate without its
        # key, which the next run issues again if the node returns, and nothing secret.
        key_path.unlink()
        os.replace(cert_path, retired_dir / f"{name}-{stamp}.pem")
        retired.append(name)
    return retired


def _is_node_certificate(path: Path, issuers: Sequence[x509.Certificate]) -> bool:
    try:
        certificate = load_certificate(path)
    except PkiError:
        return False
    return ExtendedKeyUsageOID.SERVER_AUTH in _extended_key_usages(certificate) and any(
        _issued_by(certificate, issuer) for issuer in issuers
    )


def _order_message(step: str, state: str) -> str:
    last = {"idle": "none", "finished": "finish", "trust": "trust", "reissue": "reissue"}[state]
    following = {"idle": "trust", "finished": "trust", "trust": "reissue", "reissue": "finish"}[
        state
    ]
    return (
        f"{CA_ROTATION_VARIABLE}={step} cannot run now: the last step was {last}. The steps "
        f"run in the order trust, reissue, finish; run playbooks/rotate-ca.yml with "
        f"-e {CA_ROTATION_VARIABLE}={following} next"
    )


# --- node and admin certificates ----------------------------------------------------------


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
        # playbooks/rotate-certs.yml: a new key and serial now, whatever the expiry.
        reasons = ["renewal forced (rotate-certs)"]
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
        _write_key_and_certificate(
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
    if _public_key_bytes(key) != _public_key_bytes(certificate):
        reasons.append("the key does not match the certificate")
    if certificate.subject != subject:
        reasons.append(
            f"subject changed from {certificate.subject.rfc4514_string()} "
            f"to {subject.rfc4514_string()}"
        )
    current_alt_names = _certificate_alt_names(certificate)
    if current_alt_names != alt_names:
        added = sorted(_describe(entry) for entry in alt_names - current_alt_names)
        removed = sorted(_describe(entry) for entry in current_alt_names - alt_names)
        reasons.append(f"SANs changed (added {added}, removed {removed})")
    if not _issued_by(certificate, ca.certificate):
        reasons.append("not signed by the current CA")
    if _extended_key_usages(certificate) != frozenset(usages):
        reasons.append("extended key usage differs from the profile")
    remaining = certificate.not_valid_after_utc - _utcnow()
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
    now = _utcnow()
    not_after = min(now + dt.timedelta(days=validity_days), ca.certificate.not_valid_after_utc)
    builder = (
        _certificate_builder(
            subject=subject,
            issuer=ca.certificate.subject,
            key=key,
            now=now,
            not_after=not_after,
            ca=False,
        )
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_identifier(ca.certificate), critical=False)
    )
    if alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(sorted(alt_names, key=_alt_name_order)), critical=False
        )
    return builder.sign(ca.private_key, _signature_hash(ca.private_key))


def _certificate_builder(
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


def _authority_key_identifier(ca_certificate: x509.Certificate) -> x509.AuthorityKeyIdentifier:
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


def _signature_hash(key: CertificateIssuerPrivateKeyTypes) -> hashes.SHA256 | None:
    # Ed25519 and Ed448 sign the message itself and take no separate digest.
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    return hashes.SHA256()


def issued_by(certificate: x509.Certificate, ca_certificate: x509.Certificate) -> bool:
    """Whether ``ca_certificate``'s key signed ``certificate``."""
    return _issued_by(certificate, ca_certificate)


def _issued_by(certificate: x509.Certificate, ca_certificate: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca_certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _certificate_alt_names(certificate: x509.Certificate) -> frozenset[x509.GeneralName]:
    return _list_extension(certificate, x509.SubjectAlternativeName)


def _extended_key_usages(certificate: x509.Certificate) -> frozenset[x509.ObjectIdentifier]:
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


def _alt_name_order(entry: x509.GeneralName) -> tuple[int, str]:
    return (0 if isinstance(entry, x509.DNSName) else 1, _describe(entry))


def _describe(entry: x509.GeneralName) -> str:
    if isinstance(entry, x509.DNSName):
        return f"DNS:{entry.value}"
    if isinstance(entry, x509.IPAddress):
        return f"IP:{entry.value}"
    return str(entry)


def _public_key_bytes(holder: x509.Certificate | PrivateKeyTypes) -> bytes:
    return holder.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# --- scripts/certs ------------------------------------------------------------------------


def _parse_node(spec: str) -> tuple[str, list[str]]:
    name, _, alt_names = spec.partition(":")
    entries = [entry.strip() for entry in alt_names.split(",") if entry.strip()]
    return name.strip(), [name.strip(), *entries]


def main(argv: Sequence[str] | None = None) -> int:
    """Issue (or reuse) the CA, node certificates and the admin certificate into ``--out``."""
    parser = argparse.ArgumentParser(
        prog="certs",
        description=(
            "Create or reuse a CA and issue node and admin certificates for the cluster. "
            f"The CA key passphrase is read from ${CA_PASSPHRASE_ENV}, never from the "
            "command line. Reruns change nothing unless a subject or SAN changed, the CA "
            "changed, or a certificate is close to expiry."
        ),
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for all files")
    parser.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="NAME[:SAN,...]",
        help="a node: its name (CN and first SAN) and more host names or IP addresses",
    )
    parser.add_argument("--admin-cn", default="admin", help="CN of the admin certificate")
    parser.add_argument("--ca-cn", default="clusterforge root CA", help="CN of a new CA")
    parser.add_argument("--ca-cert", type=Path, help="use your own CA certificate")
    parser.add_argument("--ca-key", type=Path, help="the key of --ca-cert")
    for subject_field, default in SUBJECT_DEFAULTS.items():
        parser.add_argument(f"--{subject_field.replace('_', '-')}", default=default)
    parser.add_argument(
        "--renew-within-days", type=int, default=DEFAULT_RENEW_WITHIN_DAYS, metavar="DAYS"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    def fields(common_name: str) -> SubjectFields:
        return SubjectFields(
            common_name=common_name,
            organizational_unit=args.organizational_unit,
            organization=args.organization,
            locality=args.locality,
            state=args.state,
            country=args.country,
        )

    try:
        user_ca = args.ca_cert is not None or args.ca_key is not None
        # A user's CA key may be unencrypted; only then may the passphrase be absent.
        passphrase = (
            (os.environ.get(CA_PASSPHRASE_ENV, "").encode("utf-8") or None)
            if user_ca
            else ca_passphrase_from_environment()
        )
        nodes = [_parse_node(spec) for spec in args.node]
        names = [name for name, _ in nodes]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        admin_file = _file_name_for(args.admin_cn)
        if duplicates or admin_file in names:
            raise PkiError(
                f"node names must be unique and differ from the admin certificate's file "
                f"name {admin_file!r}; rename {duplicates or [admin_file]}"
            )
        args.out.mkdir(mode=0o700, parents=True, exist_ok=True)
        ca = load_or_create_ca(
            args.out,
            passphrase=passphrase,
            subject=fields(args.ca_cn),
            user_ca_cert=args.ca_cert,
            user_ca_key=args.ca_key,
        )
        issued: dict[str, IssuedCertificate] = {}
        for name, alt_names in nodes:
            dns_names, ip_addresses = split_alt_names(alt_names)
            issued[name] = ensure_node_certificate(
                ca,
                directory=args.out,
                name=name,
                subject=fields(name),
                dns_names=dns_names,
                ip_addresses=ip_addresses,
                renew_within_days=args.renew_within_days,
            )
        admin = ensure_admin_certificate(
            ca,
            directory=args.out,
            subject=fields(args.admin_cn),
            name=admin_file,
            renew_within_days=args.renew_within_days,
        )
    except PkiError as error:
        print(f"certs: {error}", file=sys.stderr)
        return 2
    _print_summary(ca, issued, admin, as_json=args.json)
    return 0


def _file_name_for(common_name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", common_name).strip("-.")
    return cleaned or "admin"


def _print_summary(
    ca: CertificateAuthority,
    issued: dict[str, IssuedCertificate],
    admin: IssuedCertificate,
    *,
    as_json: bool,
) -> None:
    def entry(result: IssuedCertificate) -> dict[str, object]:
        return {
            "changed": result.changed,
            "cert": str(result.cert_path),
            "key": str(result.key_path),
            "subject_dn": result.subject_dn,
            "not_valid_after": result.not_valid_after.isoformat(),
            "reasons": list(result.reasons),
        }

    if as_json:
        document = {
            "ca": {
                "changed": ca.changed,
                "cert": str(ca.cert_path),
                "subject_dn": ca.subject_dn,
                "not_valid_after": ca.certificate.not_valid_after_utc.isoformat(),
            },
            "nodes": {name: entry(result) for name, result in issued.items()},
            "admin": entry(admin),
            "nodes_dn": [result.subject_dn for result in issued.values()],
            "admin_dn": [admin.subject_dn],
        }
        print(json.dumps(document, indent=2))
        return
    status = "created" if ca.changed else "reused"
    print(f"CA      {status:8} {ca.cert_path}  {ca.subject_dn}")
    for name, result in [*issued.items(), ("admin", admin)]:
        status = "issued" if result.changed else "reused"
        why = f"  ({'; '.join(result.reasons)})" if result.reasons else ""
        print(f"{name:7} {status:8} {result.cert_path}  {result.subject_dn}{why}")
    print("plugins.security.nodes_dn:")
    for result in issued.values():
        print(f"  - {json.dumps(result.subject_dn)}")
    print("plugins.security.authcz.admin_dn:")
    print(f"  - {json.dumps(admin.subject_dn)}")


if __name__ == "__main__":
    raise SystemExit(main())
