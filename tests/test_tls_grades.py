"""The toolkit's TLS listeners graded by Debian's testssl.sh, a grader nobody here wrote
(issue 51, item 1), served by the real programs from what the plan renders:

- Alertmanager with the exporter-toolkit web config the monitoring plan renders
  (Prometheus and the node exporter read the same file; the tls molecule scenario grades
  the deployed Prometheus, and checks every exporter-toolkit unit runs this one TLS
  configuration, so grading Prometheus here too cost about 8 CPU-seconds of CI for
  nothing more);
- the lab's slapd, LDAPS and StartTLS, from clusterforge.lab.directory's config (the
  profile's TLS 1.3 part: GnuTLS in slapd accepts any client's TLS 1.2 renegotiation).

Each with a certificate the toolkit's own PKI issues (RSA, as on the hosts). A port fails
on a protocol below TLS 1.2, an offered CBC, 3DES or RSA-key-transport suite, or any
finding marked vulnerable (clusterforge.testing.tls_grade). The cluster's ports and the
services' proxy are graded on a running cluster by the tls molecule scenario.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from clusterforge.lab.directory import LAB_PEOPLE, DirectoryFiles, slapd_argv, write_directory
from clusterforge.pki.pki import SubjectFields, ensure_server_certificate, load_or_create_ca
from clusterforge.plan.monitoring.monitoring import render_web_config
from clusterforge.plan.security.tls_profile import default_profile
from clusterforge.testing.tls_grade import Grade, Port, grade_all, judge

ADDRESS = "127.0.0.1"
PROGRAMS = {
    "testssl": shutil.which("testssl") or shutil.which("testssl.sh"),
    "alertmanager": shutil.which("prometheus-alertmanager"),
    "slapd": shutil.which("slapd", path="/usr/sbin:/usr/bin"),
}
pytestmark = pytest.mark.skipif(
    None in PROGRAMS.values(),
    reason=f"not installed (.ci/run installs them): {[k for k, v in PROGRAMS.items() if not v]}",
)
PROFILE = default_profile()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


def wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex((ADDRESS, port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def grades(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Grade]]:
    root = tmp_path_factory.mktemp("tls-grades")
    ca = load_or_create_ca(
        root / "pki", passphrase=b"grade-ca-5e2d", subject=SubjectFields(common_name="grade ca")
    )
    issued = ensure_server_certificate(
        ca,
        directory=root / "pki",
        name="server",
        subject=SubjectFields(common_name="server", organizational_unit="grade"),
        alt_names=[ADDRESS, "localhost"],
    )
    web = root / "web.yml"
    web.write_text(
        render_web_config(
            str(issued.cert_path),
            str(issued.key_path),
            "clusterforge",
            "$2b$10$abcdefghijklmnopqrstuuKDkq0r2lH1bJ1q3Xq1v5V0PZ1rYQx6m",
            profile=PROFILE,
        )
    )
    (root / "alertmanager.yml").write_text("route: {receiver: none}\nreceivers: [{name: none}]\n")
    ports = {name: free_port() for name in ("alertmanager", "ldaps", "ldap")}
    files = DirectoryFiles(
        root=root / "slapd", cert=issued.cert_path, key=issued.key_path, ca=ca.cert_path
    )
    write_directory(
        files,
        people_passwords={name: f"Person-{name}-5e2d" for name in LAB_PEOPLE},
        bind_password="Bind-Grade-5e2d",
    )
    commands = {
        "alertmanager": [
            str(PROGRAMS["alertmanager"]),
            f"--config.file={root / 'alertmanager.yml'}",
            f"--web.config.file={web}",
            f"--web.listen-address={ADDRESS}:{ports['alertmanager']}",
            f"--storage.path={root / 'alertmanager-data'}",
            "--cluster.listen-address=",
        ],
        "slapd": slapd_argv(
            files, address=ADDRESS, ldaps_port=ports["ldaps"], ldap_port=ports["ldap"]
        ),
    }
    processes = [
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for argv in commands.values()
    ]
    try:
        for name, process in zip(commands, processes, strict=True):
            wait_for(ports["ldaps" if name == "slapd" else name], process)
        targets = {
            "alertmanager": Port(ADDRESS, ports["alertmanager"]),
            "slapd ldaps": Port(ADDRESS, ports["ldaps"]),
            "slapd starttls": Port(ADDRESS, ports["ldap"], "ldap"),
        }
        yield dict(zip(targets, grade_all(list(targets.values()), parallel=4), strict=True))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


@pytest.mark.parametrize("listener", ["alertmanager", "slapd ldaps", "slapd starttls"])
def test_the_listener_grades_clean(grades: dict[str, Grade], listener: str) -> None:
    result = grades[listener]
    assert result.problems == [], f"{result.port} offers {result.offered}"
    assert "TLS_AES_256_GCM_SHA384" in result.offered
    if listener.startswith("slapd"):
        # The profile's TLS 1.3 part only: slapd cannot refuse a TLS 1.2 renegotiation.
        assert all(name.startswith("TLS_") for name in result.offered), result.offered
    else:  # the profile's TLS 1.2 suites for an RSA key, and TLS 1.3's
        assert "ECDHE-RSA-AES256-GCM-SHA384" in result.offered


def test_the_grader_fails_cbc_3des_rsa_key_transport_and_old_protocols() -> None:
    """The judging itself, on findings as testssl writes them."""

    def cipher(name: str, iana: str) -> dict[str, str]:
        finding = f"TLS 1.2   xc030   {name}   ECDH 253   AESGCM   256   {iana}"
        return {"id": f"cipher-tls1_2_{name}", "severity": "INFO", "finding": finding}

    problems, offered = judge(
        [
            {"id": "TLS1_1", "severity": "LOW", "finding": "offered (deprecated)"},
            cipher("ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
            cipher("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"),
            cipher("AES128-SHA", "TLS_RSA_WITH_AES_128_CBC_SHA"),
            cipher("AES256-GCM-SHA384", "TLS_RSA_WITH_AES_256_GCM_SHA384"),
            cipher("ECDHE-RSA-DES-CBC3-SHA", "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"),
            {
                "id": "SWEET32",
                "severity": "LOW",
                "finding": "VULNERABLE, uses 64 bit block ciphers",
            },
            {"id": "LUCKY13", "severity": "LOW", "finding": "potentially vulnerable, uses CBC"},
        ]
    )
    assert len(offered) == 5
    flagged = " ".join(problems)
    for name in (
        "TLS1_1",
        "ECDHE-RSA-AES128-SHA",
        "offers AES128-SHA",
        "AES256-GCM-SHA384 ",
        "DES-CBC3",
        "SWEET32",
    ):
        assert name in flagged + " ", (name, problems)
    assert "ECDHE-RSA-AES256-GCM-SHA384:" not in flagged
