"""The web config the plan renders, served by Debian's real Prometheus: TLS from a CA,
and the web user's password checked against the bcrypt hash the host holds (no password:
401; the wrong CA: refused)."""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge.pki.hashing import hash_password
from clusterforge.plan.monitoring.monitoring import render_web_config
from clusterforge.plan.security.tls_profile import TlsProfile
from clusterforge.schema import load_schema

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed")
PASSWORD = "unit-web-password-0123456789"
# The cluster's defaults, as the plan hands them to every listener.
CLUSTER_PROFILE = TlsProfile.of(
    load_schema().default_of("opensearch_tls_protocols"),
    load_schema().default_of("opensearch_tls_ciphers"),
)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    ca_key, ca, key, csr, cert = (
        tmp_path / n for n in ("ca.key", "ca.pem", "k.pem", "c.csr", "c.pem")
    )
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "1",
        "-subj",
        "/CN=unit-ca",
    )
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        "/CN=127.0.0.1",
    )
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "1",
        "-extfile",
        str(ext),
    )
    web = tmp_path / "web.yml"
    web.write_text(
        render_web_config(
            str(cert),
            str(key),
            "clusterforge",
            hash_password(PASSWORD, rounds=10),
            profile=CLUSTER_PROFILE,
        )
    )
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1m}\n")
    port = _free_port()
    process = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--web.config.file={web}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"https://127.0.0.1:{port}", ca
    finally:
        process.terminate()
        process.wait(timeout=30)


def _get(url: str, ca: Path | None, password: str | None) -> int:
    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl.create_default_context()
    headers = {}
    if password is not None:
        headers["Authorization"] = (
            "Basic " + base64.b64encode(f"clusterforge:{password}".encode()).decode()
        )
    request = urllib.request.Request(url + "/-/healthy", headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_tls_and_the_password(prometheus: tuple[str, Path]) -> None:
    url, ca = prometheus
    assert _get(url, ca, PASSWORD) == 200
    assert _get(url, ca, None) == 401
    assert _get(url, ca, "wrong-password-0123456789") == 401
    with pytest.raises(urllib.error.URLError):
        _get(url, None, PASSWORD)  # the system's CAs do not verify it
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url.replace("https", "http") + "/-/healthy", timeout=5)  # noqa: S310


def _handshake(url: str, ca: Path, *, cipher: str, version: ssl.TLSVersion) -> bool:
    """Whether the server completes a handshake offering only ``cipher`` at ``version``."""
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = version
    context.maximum_version = version
    context.set_ciphers(cipher)
    port = int(url.rsplit(":", 1)[1])
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return True
    except (ssl.SSLError, ConnectionError):
        return False


# Suites Go offers for an ECDSA key unless told otherwise: CBC with SHA-1 or SHA-256 MACs
# (LUCKY13), as testssl.sh found on Prometheus, Alertmanager and the node exporter.
WEAK_ECDSA_SUITES = (
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-ECDSA-AES128-SHA256",
)


@pytest.mark.parametrize("cipher", WEAK_ECDSA_SUITES)
def test_no_cbc_suite_is_offered(prometheus: tuple[str, Path], cipher: str) -> None:
    url, ca = prometheus
    assert not _handshake(url, ca, cipher=cipher, version=ssl.TLSVersion.TLSv1_2)


def test_the_clusters_aead_suites_are(prometheus: tuple[str, Path]) -> None:
    url, ca = prometheus
    assert _handshake(
        url, ca, cipher="ECDHE-ECDSA-AES256-GCM-SHA384", version=ssl.TLSVersion.TLSv1_2
    )
    assert _handshake(
        url, ca, cipher="ECDHE-ECDSA-CHACHA20-POLY1305", version=ssl.TLSVersion.TLSv1_2
    )
