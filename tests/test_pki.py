"""The PKI: CA once, node and admin certificates reissued only when they must be.

openssl (the real binary) checks what the library writes: chains verify, DN strings are
byte-equal to what ``openssl x509 -subject -nameopt RFC2253`` prints, keys parse.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import (
    CA_PASSPHRASE_ENV,
    CertificateAuthority,
    IssuedCertificate,
    PkiError,
    SubjectFields,
    certificate_expiry,
    load_certificate,
    split_alt_names,
    subject_dn,
)
from clusterforge.pki.issuing import ensure_admin_certificate, ensure_node_certificate

REPO = Path(__file__).resolve().parents[1]
PASSPHRASE = b"correct horse battery staple"


def openssl(*arguments: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(
        ["openssl", *arguments],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return completed.stdout


def openssl_subject(path: Path) -> str:
    line = openssl("x509", "-in", str(path), "-noout", "-subject", "-nameopt", "RFC2253").strip()
    assert line.startswith("subject=")
    return line.removeprefix("subject=")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def fingerprint(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return load_or_create_ca(
        tmp_path / "ca",
        passphrase=PASSPHRASE,
        subject=SubjectFields(common_name="test root CA"),
    )


def issue_node(
    ca: CertificateAuthority,
    directory: Path,
    *,
    dns_names: tuple[str, ...] = ("node-1", "node-1.lab.internal"),
    ip_addresses: tuple[str, ...] = ("127.0.0.11",),
    common_name: str = "node-1",
    **options: int,
) -> IssuedCertificate:
    return ensure_node_certificate(
        ca,
        directory=directory,
        name="node-1",
        subject=SubjectFields(common_name=common_name),
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        **options,
    )


# --- the CA -------------------------------------------------------------------------------


def test_ca_is_rsa_2048_for_3650_days_with_an_encrypted_key(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    certificate = ca.certificate
    public_key = certificate.public_key()
    assert isinstance(public_key, rsa.RSAPublicKey)
    assert public_key.key_size == 2048
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert dt.timedelta(days=3650) <= lifetime <= dt.timedelta(days=3650, minutes=10)
    constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca and constraints.critical

    key_pem = ca.key_path.read_bytes()
    assert key_pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(key_pem, password=None)
    # openssl opens it with the passphrase (given through the environment, not argv).
    openssl(
        "pkey",
        "-in",
        str(ca.key_path),
        "-passin",
        "env:TEST_CA_PASS",
        "-noout",
        env={"TEST_CA_PASS": PASSPHRASE.decode()},
    )
    assert mode_of(ca.key_path) == 0o600
    assert mode_of(ca.cert_path) == 0o644
    assert ca.changed and not ca.user_supplied
    assert ca.subject_dn == openssl_subject(ca.cert_path)


def test_ca_is_created_once_and_reused_untouched(ca: CertificateAuthority, tmp_path: Path) -> None:
    before = (fingerprint(ca.cert_path), fingerprint(ca.key_path))
    again = load_or_create_ca(
        tmp_path / "ca",
        passphrase=PASSPHRASE,
        # A different subject does not replace an existing CA: that would orphan every cert.
        subject=SubjectFields(common_name="another name"),
    )
    assert not again.changed
    assert again.certificate == ca.certificate
    assert (fingerprint(again.cert_path), fingerprint(again.key_path)) == before


def test_wrong_or_missing_ca_passphrase_is_refused(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    with pytest.raises(PkiError, match="cannot be decrypted"):
        load_or_create_ca(
            tmp_path / "ca", passphrase=b"wrong", subject=SubjectFields(common_name="x")
        )
    with pytest.raises(PkiError, match=CA_PASSPHRASE_ENV):
        load_or_create_ca(tmp_path / "ca", passphrase=b"", subject=SubjectFields(common_name="x"))


def test_half_a_ca_is_not_silently_replaced(ca: CertificateAuthority, tmp_path: Path) -> None:
    ca.key_path.unlink()
    with pytest.raises(PkiError, match=r"restore ca-key\.pem"):
        load_or_create_ca(
            tmp_path / "ca", passphrase=PASSPHRASE, subject=SubjectFields(common_name="x")
        )


def test_an_unencrypted_managed_ca_key_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "ca"
    directory.mkdir()
    make_openssl_ca(directory / "ca.pem", directory / "ca-key.pem", passphrase=None)
    with pytest.raises(PkiError, match="not encrypted"):
        load_or_create_ca(directory, passphrase=PASSPHRASE, subject=SubjectFields(common_name="x"))


def make_openssl_ca(cert: Path, key: Path, *, passphrase: str | None) -> None:
    """A CA made by openssl itself, standing for a user's own CA."""
    arguments = [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-days",
        "30",
        "-subj",
        "/C=DE/O=Example Corp/CN=Example Corp Root",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        str(key),
        "-out",
        str(cert),
    ]
    if passphrase is None:
        openssl(*arguments, "-noenc")
    else:
        openssl(*arguments, "-passout", "env:USER_CA_PASS", env={"USER_CA_PASS": passphrase})


@pytest.mark.parametrize("passphrase", [None, "user-ca-secret"])
def test_a_users_own_ca_is_used_in_place(tmp_path: Path, passphrase: str | None) -> None:
    user_cert, user_key = tmp_path / "corp-ca.pem", tmp_path / "corp-ca.key"
    make_openssl_ca(user_cert, user_key, passphrase=passphrase)
    managed = tmp_path / "pki"
    ca = load_or_create_ca(
        managed,
        passphrase=passphrase.encode() if passphrase else None,
        subject=SubjectFields(common_name="unused"),
        user_ca_cert=user_cert,
        user_ca_key=user_key,
    )
    assert ca.user_supplied and not ca.changed
    assert ca.cert_path == user_cert
    assert not managed.exists()  # nothing of the user's CA is copied or created
    node = issue_node(ca, tmp_path / "certs")
    openssl("verify", "-CAfile", str(user_cert), str(node.cert_path))


def test_an_encrypted_user_ca_key_needs_its_passphrase(tmp_path: Path) -> None:
    user_cert, user_key = tmp_path / "corp-ca.pem", tmp_path / "corp-ca.key"
    make_openssl_ca(user_cert, user_key, passphrase="user-ca-secret")
    with pytest.raises(PkiError, match=CA_PASSPHRASE_ENV):
        load_or_create_ca(
            tmp_path,
            passphrase=None,
            subject=SubjectFields(common_name="unused"),
            user_ca_cert=user_cert,
            user_ca_key=user_key,
        )


# --- node certificates --------------------------------------------------------------------


def test_node_certificate_has_the_profile_opensearch_needs(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    result = ensure_node_certificate(
        ca,
        directory=tmp_path / "certs",
        name="node-1",
        subject=SubjectFields(common_name="node-1"),
        dns_names=["node-1", "node-1.lab.internal", "127.0.0.11"],
        ip_addresses=["::1"],
    )
    assert result.changed
    certificate = load_certificate(result.cert_path)
    alt_names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(alt_names.get_values_for_type(x509.DNSName)) == {"node-1", "node-1.lab.internal"}
    assert set(alt_names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.11"),
        ipaddress.ip_address("::1"),
    }
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    key_usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
    assert key_usage.digital_signature and key_usage.key_encipherment
    assert not key_usage.key_cert_sign
    constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca is False
    ski = certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    aki = certificate.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    assert ski.digest != ca_ski.digest

    key_pem = result.key_path.read_bytes()
    assert key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    assert mode_of(result.key_path) == 0o600
    assert mode_of(result.cert_path) == 0o644
    openssl("verify", "-CAfile", str(ca.cert_path), str(result.cert_path))
    assert certificate.not_valid_after_utc <= ca.certificate.not_valid_after_utc


def test_dn_strings_are_byte_equal_to_what_openssl_prints(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    subject = SubjectFields(
        common_name="node-1.lab.internal",
        organizational_unit="Search",
        organization="Example, Inc.",  # a comma must come back escaped, as openssl prints it
        locality="Berlin",
        state="Berlin",
        country="DE",
    )
    node = ensure_node_certificate(
        ca, directory=tmp_path, name="node-1", subject=subject, dns_names=["node-1"]
    )
    admin = ensure_admin_certificate(
        ca, directory=tmp_path, subject=SubjectFields(common_name="admin")
    )
    for result in (node, admin):
        printed = openssl_subject(result.cert_path)
        assert result.subject_dn == printed
        assert subject_dn(result.cert_path) == printed
        assert subject_dn(result.cert_path.read_bytes()) == printed
        assert subject_dn(result.cert_path.read_text()) == printed
    assert node.subject_dn == (
        "CN=node-1.lab.internal,OU=Search,O=Example\\, Inc.,L=Berlin,ST=Berlin,C=DE"
    )
    assert admin.subject_dn == "CN=admin,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US"


def test_unchanged_input_reuses_the_certificate_untouched(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    first = issue_node(ca, tmp_path)
    before = (fingerprint(first.cert_path), fingerprint(first.key_path))
    # Same names in another order, with duplicates and other letter case: the same SAN set.
    again = issue_node(
        ca,
        tmp_path,
        dns_names=("NODE-1.lab.internal", "node-1", "node-1"),
        ip_addresses=("127.0.0.11", "127.0.0.11"),
    )
    assert not again.changed
    assert again.reasons == ()
    assert (fingerprint(again.cert_path), fingerprint(again.key_path)) == before


def test_a_san_change_reissues(ca: CertificateAuthority, tmp_path: Path) -> None:
    first = issue_node(ca, tmp_path)
    old_serial = load_certificate(first.cert_path).serial_number
    added = issue_node(ca, tmp_path, ip_addresses=("127.0.0.11", "10.0.0.5"))
    assert added.changed
    assert any("IP:10.0.0.5" in reason for reason in added.reasons)
    assert load_certificate(added.cert_path).serial_number != old_serial
    removed = issue_node(
        ca, tmp_path, dns_names=("node-1",), ip_addresses=("127.0.0.11", "10.0.0.5")
    )
    assert removed.changed
    assert any("removed ['DNS:node-1.lab.internal']" in reason for reason in removed.reasons)
    assert not issue_node(
        ca, tmp_path, dns_names=("node-1",), ip_addresses=("127.0.0.11", "10.0.0.5")
    ).changed


def test_a_subject_change_reissues(ca: CertificateAuthority, tmp_path: Path) -> None:
    issue_node(ca, tmp_path)
    renamed = issue_node(ca, tmp_path, common_name="node-1.lab.internal")
    assert renamed.changed
    assert renamed.subject_dn.startswith("CN=node-1.lab.internal,")


def test_near_expiry_reissues_and_the_window_is_a_parameter(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    short = issue_node(ca, tmp_path, validity_days=10)
    before = fingerprint(short.cert_path)
    # 10 days left is outside a 5-day window: reused.
    assert not issue_node(ca, tmp_path, renew_within_days=5).changed
    assert fingerprint(short.cert_path) == before
    # ... and inside the default 30-day window: reissued, with the full validity again.
    renewed = issue_node(ca, tmp_path)
    assert renewed.changed
    assert any("renewal window" in reason for reason in renewed.reasons)
    assert certificate_expiry(renewed.cert_path).days_left > 3000
    assert not issue_node(ca, tmp_path).changed


def test_a_new_ca_reissues_node_certificates(ca: CertificateAuthority, tmp_path: Path) -> None:
    issue_node(ca, tmp_path / "certs")
    other_ca = load_or_create_ca(
        tmp_path / "other-ca",
        passphrase=PASSPHRASE,
        subject=SubjectFields(common_name="test root CA"),
    )
    result = issue_node(other_ca, tmp_path / "certs")
    assert result.changed
    assert "not signed by the current CA" in result.reasons
    openssl("verify", "-CAfile", str(other_ca.cert_path), str(result.cert_path))


def test_a_key_that_does_not_match_reissues(ca: CertificateAuthority, tmp_path: Path) -> None:
    first = issue_node(ca, tmp_path)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    first.key_path.write_bytes(
        stranger.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    result = issue_node(ca, tmp_path)
    assert result.changed
    assert "the key does not match the certificate" in result.reasons


def test_admin_certificate_is_a_client_certificate(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    admin = ensure_admin_certificate(
        ca, directory=tmp_path, subject=SubjectFields(common_name="admin")
    )
    assert admin.changed and admin.cert_path.name == "admin.pem"
    certificate = load_certificate(admin.cert_path)
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert admin.key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert mode_of(admin.key_path) == 0o600
    openssl("verify", "-CAfile", str(ca.cert_path), "-purpose", "sslclient", str(admin.cert_path))
    before = fingerprint(admin.cert_path)
    again = ensure_admin_certificate(
        ca, directory=tmp_path, subject=SubjectFields(common_name="admin")
    )
    assert not again.changed and fingerprint(again.cert_path) == before


def test_node_certificates_pass_openssl_as_tls_servers(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    result = issue_node(ca, tmp_path)
    openssl(
        "verify",
        "-CAfile",
        str(ca.cert_path),
        "-purpose",
        "sslserver",
        "-verify_hostname",
        "node-1.lab.internal",
        str(result.cert_path),
    )
    openssl(
        "verify",
        "-CAfile",
        str(ca.cert_path),
        "-purpose",
        "sslclient",
        "-verify_ip",
        "127.0.0.11",
        str(result.cert_path),
    )


def test_expiry_report(ca: CertificateAuthority, tmp_path: Path) -> None:
    result = issue_node(ca, tmp_path, validity_days=40)
    expiry = certificate_expiry(result.cert_path)
    assert expiry.days_left in (39, 40)
    assert expiry.subject_dn == result.subject_dn
    later = certificate_expiry(
        result.cert_path,
        now=expiry.not_valid_after + dt.timedelta(days=2),
    )
    assert later.days_left == -2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"dns_names": ["bad name"], "ip_addresses": []}, "neither a host name nor an IP"),
        ({"dns_names": ["node-1"], "ip_addresses": ["10.0.0.300"]}, "is not an IP address"),
        ({"dns_names": [], "ip_addresses": []}, "no subject alternative names"),
    ],
)
def test_bad_alternative_names_are_refused(
    ca: CertificateAuthority, tmp_path: Path, arguments: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(PkiError, match=message):
        ensure_node_certificate(
            ca,
            directory=tmp_path,
            name="node-1",
            subject=SubjectFields(common_name="node-1"),
            dns_names=arguments["dns_names"],
            ip_addresses=arguments["ip_addresses"],
        )


def test_bad_names_and_subjects_are_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    with pytest.raises(PkiError, match="two-letter"):
        SubjectFields(common_name="x", country="USA")
    with pytest.raises(PkiError, match="empty"):
        SubjectFields(common_name=" ")
    for name in ("../escape", "ca", ".hidden"):
        with pytest.raises(PkiError, match="file name"):
            ensure_node_certificate(
                ca,
                directory=tmp_path,
                name=name,
                subject=SubjectFields(common_name="x"),
                dns_names=["x"],
            )


def test_split_alt_names() -> None:
    assert split_alt_names(["node-1", "127.0.0.1", "::1", "db.example"]) == (
        ["node-1", "db.example"],
        ["127.0.0.1", "::1"],
    )


# --- scripts/certs ------------------------------------------------------------------------


def run_certs(*arguments: str, passphrase: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != CA_PASSPHRASE_ENV}
    if passphrase is not None:
        env[CA_PASSPHRASE_ENV] = passphrase
    return subprocess.run(
        [str(REPO / "scripts" / "certs"), *arguments],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_scripts_certs_refuses_to_run_without_the_passphrase_variable(tmp_path: Path) -> None:
    result = run_certs("--out", str(tmp_path / "pki"), "--node", "n1:127.0.0.11", passphrase=None)
    assert result.returncode == 2
    assert CA_PASSPHRASE_ENV in result.stderr
    assert not (tmp_path / "pki").exists()


def test_scripts_certs_issues_then_reuses(tmp_path: Path) -> None:
    out = tmp_path / "pki"
    arguments = ("--out", str(out), "--node", "n1:127.0.0.11,n1.lab", "--node", "n2:127.0.0.12")
    first = run_certs(*arguments, passphrase="script-pass")
    assert first.returncode == 0, first.stderr
    assert "script-pass" not in first.stdout + first.stderr
    names = sorted(path.name for path in out.iterdir())
    assert names == [
        "admin-key.pem",
        "admin.pem",
        "ca-key.pem",
        "ca.pem",
        "n1-key.pem",
        "n1.pem",
        "n2-key.pem",
        "n2.pem",
    ]
    for name in names:
        assert mode_of(out / name) == (0o600 if name.endswith("-key.pem") else 0o644)
    openssl("verify", "-CAfile", str(out / "ca.pem"), str(out / "n1.pem"), str(out / "n2.pem"))
    assert f'  - "{openssl_subject(out / "n1.pem")}"' in first.stdout

    second = run_certs(*arguments, "--json", passphrase="script-pass")
    assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    assert document["ca"]["changed"] is False
    assert all(node["changed"] is False for node in document["nodes"].values())
    assert document["admin"]["changed"] is False
    assert document["admin_dn"] == [openssl_subject(out / "admin.pem")]
    assert document["nodes_dn"] == [
        openssl_subject(out / "n1.pem"),
        openssl_subject(out / "n2.pem"),
    ]

    wrong = run_certs(*arguments, passphrase="not-the-passphrase")
    assert wrong.returncode == 2
    assert "cannot be decrypted" in wrong.stderr
