"""The client over TLS: verified by default, against a CA bundle file when given one.

The services will be served over HTTPS through a TLS proxy whose certificates the
cluster's CA signs; the client must verify them against that CA's bundle file. A
stand-in HTTPS server on 127.0.0.1 presents a certificate from a CA made here.
"""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusterforge_userdir import ClientConfig, UserDirectoryClient, load_client_config
from clusterforge_userdir.errors import ClientConfigError, RemoteAccessError

x509 = pytest.importorskip("cryptography.x509")
hashes = pytest.importorskip("cryptography.hazmat.primitives.hashes")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
ec = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")
NameOID = x509.oid.NameOID


@dataclass(frozen=True)
class Bundle:
    ca_file: Path
    cert_file: Path
    key_file: Path


def _name(common_name: str) -> Any:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str, *, issuer: str, key: Any, signer: Any, extensions: list[tuple[Any, bool]]
) -> Any:
    now = datetime.datetime.now(datetime.UTC)
    builder = x509.CertificateBuilder(
        subject_name=_name(subject),
        issuer_name=_name(issuer),
        public_key=key.public_key(),
        serial_number=x509.random_serial_number(),
        not_valid_before=now - datetime.timedelta(minutes=5),
        not_valid_after=now + datetime.timedelta(days=1),
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def _pem(certificate: Any) -> bytes:
    return bytes(certificate.public_bytes(serialization.Encoding.PEM))


def _issue(directory: Path) -> Bundle:
    ca_name = "userdir client test CA (stand-in)"
    ca_key = ec.generate_private_key(ec.SECP256R1())
    signing_only = dict.fromkeys(
        (
            "digital_signature",
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    ca = _certificate(
        ca_name,
        issuer=ca_name,
        key=ca_key,
        signer=ca_key,
        extensions=[
            (x509.BasicConstraints(ca=True, path_length=None), True),
            (x509.KeyUsage(key_cert_sign=True, crl_sign=True, **signing_only), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _certificate(
        "localhost",
        issuer=ca_name,
        key=server_key,
        signer=ca_key,
        extensions=[
            (x509.SubjectAlternativeName([x509.DNSName("localhost")]), False),
            (x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False),
        ],
    )
    bundle = Bundle(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    bundle.ca_file.write_bytes(_pem(ca))
    bundle.cert_file.write_bytes(_pem(server))
    bundle.key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return _issue(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_base_url(bundle: Bundle) -> Iterator[str]:
    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"UP"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(bundle.cert_file, bundle.key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="stand-in-https", daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_ca_bundle_setting_verifies_the_server(https_base_url: str, bundle: Bundle) -> None:
    config = ClientConfig(root_uri=https_base_url, ca_bundle=str(bundle.ca_file))
    with UserDirectoryClient(config=config) as client:
        assert client.health() == "UP"


def test_verify_takes_a_ca_file_or_a_context(https_base_url: str, bundle: Bundle) -> None:
    config = ClientConfig(root_uri=https_base_url)
    with UserDirectoryClient(config=config, verify=str(bundle.ca_file)) as client:
        assert client.health() == "UP"
    context = ssl.create_default_context(cafile=str(bundle.ca_file))
    with UserDirectoryClient(config=config, verify=context) as client:
        assert client.health() == "UP"


def test_a_server_the_system_cas_do_not_know_is_refused_by_default(https_base_url: str) -> None:
    config = ClientConfig(root_uri=https_base_url)
    with UserDirectoryClient(config=config) as client, pytest.raises(RemoteAccessError) as refused:
        client.health()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value.__cause__)


def test_the_hostname_is_verified_too(https_base_url: str, bundle: Bundle) -> None:
    # The same server by its address, which the certificate (localhost only) does not name.
    port = https_base_url.rsplit(":", 1)[1]
    config = ClientConfig(root_uri=f"https://127.0.0.1:{port}", ca_bundle=str(bundle.ca_file))
    with UserDirectoryClient(config=config) as client, pytest.raises(RemoteAccessError) as refused:
        client.health()
    assert "mismatch" in repr(refused.value.__cause__).lower()


def test_the_ca_bundle_comes_from_the_environment(https_base_url: str, bundle: Bundle) -> None:
    config = load_client_config(
        environ={
            "DEMO_REST_TEMPLATE_ROOT_URI": https_base_url,
            "DEMO_REST_TEMPLATE_CA_BUNDLE": str(bundle.ca_file),
        }
    )
    assert config.ca_bundle == str(bundle.ca_file)
    with UserDirectoryClient(config=config) as client:
        assert client.health() == "UP"


def test_a_ca_bundle_that_is_no_pem_is_refused_by_name(tmp_path: Path) -> None:
    wrong = tmp_path / "not-a-ca.pem"
    wrong.write_text("not a certificate\n", encoding="utf-8")
    with pytest.raises(ClientConfigError, match=str(wrong)):
        UserDirectoryClient(
            config=ClientConfig(root_uri="https://localhost:1", ca_bundle=str(wrong))
        )
