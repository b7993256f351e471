"""The CA: :func:`load_or_create_ca` returns a
:class:`~clusterforge.pki.certificates.CertificateAuthority`.

It creates ``ca.pem`` and ``ca-key.pem`` (RSA 2048, 3650 days, the key as encrypted PKCS#8
under the caller's passphrase) once and loads them afterwards. A user's own CA
(certificate plus key, encrypted or not) is used in place when ``user_ca_cert`` and
``user_ca_key`` are given; nothing is written then.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    PrivateKeyTypes,
)

from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CA_PASSPHRASE_ENV,
    DEFAULT_CA_VALIDITY_DAYS,
    RSA_KEY_BITS,
    CertificateAuthority,
    PkiError,
    SubjectFields,
    certificate_builder,
    load_certificate,
    public_key_bytes,
    utcnow,
    write_key_and_certificate,
)


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
        return load_ca(user_ca_cert, user_ca_key, passphrase=passphrase, user_supplied=True)

    cert_path = directory / CA_CERT_FILE
    key_path = directory / CA_KEY_FILE
    if not passphrase:
        raise PkiError(
            f"the CA key passphrase is empty; set {CA_PASSPHRASE_ENV} (or the vaulted "
            "variable the role reads) to a non-empty passphrase"
        )
    if cert_path.exists() and key_path.exists():
        return load_ca(cert_path, key_path, passphrase=passphrase, user_supplied=False)
    if cert_path.exists() or key_path.exists():
        present, missing = (cert_path, key_path) if cert_path.exists() else (key_path, cert_path)
        raise PkiError(
            f"found {present} but not {missing}; restore {missing.name}, or remove both "
            "files to create a new CA (every node certificate is then issued again)"
        )
    return create_ca(directory, passphrase=passphrase, subject=subject, validity_days=validity_days)


def create_ca(
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
    now = utcnow()
    name = subject.to_name()
    certificate = (
        certificate_builder(
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
    write_key_and_certificate(
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


def load_ca(
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
    if public_key_bytes(key) != public_key_bytes(certificate):
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
    if certificate.not_valid_after_utc <= utcnow():
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
