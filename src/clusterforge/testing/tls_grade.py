"""Every TLS port the toolkit serves, graded by Debian's ``testssl`` (testssl.sh), a grader
nobody here wrote (issue 51). A port fails on:

- a protocol below TLS 1.2 offered;
- an offered suite with CBC, 3DES, RC4 or NULL encryption, or RSA key transport (no
  forward secrecy): the cluster's profile is ECDHE with AEAD only
  (clusterforge.plan.security.tls_profile);
- any finding the grader marks vulnerable.

    python -m clusterforge.testing.tls_grade 127.0.0.11:9200 127.0.0.35:389/ldap ...

``/ldap`` (or ``/postgres``) after a port grades it through StartTLS. Ports are graded a few
at a time (each run is about 20 s, mostly waiting); the exit status is 1 when any fails,
with one line per problem. Traffic goes to the addresses given only, the lab's own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GRADER_NAMES = ("testssl", "testssl.sh")
# Encryption and key exchange the profile never offers, as testssl names them.
_WEAK_ENCRYPTION = ("CBC", "3DES", "DES", "RC4", "NULL", "IDEA", "SEED", "CAMELLIA", "ARIA")
_OLD_PROTOCOLS = ("SSLv2", "SSLv3", "TLS1", "TLS1_1")
RUN_TIMEOUT_SECONDS = 300
PARALLEL_GRADES = 3


@dataclass(frozen=True)
class Port:
    host: str
    port: int
    starttls: str | None = None  # "ldap", "postgres"

    @classmethod
    def parse(cls, text: str) -> Port:
        address, _slash, starttls = text.partition("/")
        host, _colon, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{text!r} is not host:port[/ldap|/postgres]")
        return cls(host.strip("[]"), int(port), starttls or None)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}" + (
            f" (StartTLS {self.starttls})" if self.starttls else ""
        )


@dataclass
class Grade:
    port: Port
    problems: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.problems


def grader() -> str:
    """The grader's path; install Debian's testssl.sh when missing."""
    for name in GRADER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError("testssl.sh is not installed: apt-get install testssl.sh")


def judge(findings: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(problems, offered suites) from testssl's flat JSON findings."""
    problems: list[str] = []
    offered: list[str] = []
    for finding in findings:
        ident = str(finding.get("id", ""))
        text = str(finding.get("finding", ""))
        severity = str(finding.get("severity", ""))
        if ident in _OLD_PROTOCOLS and text.startswith("offered"):
            problems.append(f"{ident} offered: nothing below TLS 1.2 may be")
        elif ident.startswith("cipher-") and not ident.startswith("cipher_order"):
            columns = text.split()
            # "TLS 1.2  xc02c  ECDHE-ECDSA-AES256-GCM-SHA384  ECDH 253  AESGCM  256  TLS_..."
            name = columns[3] if len(columns) > 3 else text
            offered.append(name)
            if _weak_suite(name, columns):
                problems.append(f"offers {name}: CBC, 3DES or RSA key transport ({text.strip()})")
        elif "VULNERABLE" in text.upper() and "NOT VULNERABLE" not in text.upper():
            problems.append(f"{ident}: {text}")
        elif severity in ("HIGH", "CRITICAL") and ident not in ("scanProblem",):
            problems.append(f"{ident} ({severity}): {text}")
        elif ident == "scanProblem":
            problems.append(f"the grader could not finish: {text}")
    return problems, offered


def _weak_suite(name: str, columns: Sequence[str]) -> bool:
    if name.startswith("TLS_AES_") or name.startswith("TLS_CHACHA20_"):
        return False  # TLS 1.3's suites: all AEAD with ephemeral keys
    if not name.startswith("ECDHE-"):
        return True  # RSA key transport, static or finite-field DH: not the profile's
    return not ("GCM" in name or "CHACHA20" in name or "CCM" in name) or any(
        weak in name for weak in _WEAK_ENCRYPTION if weak != "CBC"
    )


def grade(port: Port, *, tool: str | None = None) -> Grade:
    """Run the grader on ``port`` (protocols, every suite per protocol, the vulnerabilities)."""
    import time

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="clusterforge-tls-grade-") as workdir:
        report = Path(workdir) / "findings.json"
        command = [tool or grader(), "--quiet", "--color", "0", "--warnings", "batch"]
        command += ["--protocols", "--cipher-per-proto", "--vulnerable", "--fast"]
        command += ["--jsonfile", str(report)]
        if port.starttls:
            command += ["--starttls", port.starttls]
            if port.starttls == "ldap":
                # testssl 3.0 speaks LDAP's StartTLS through openssl only.
                command.append("--ssl-native")
        command.append(f"{port.host}:{port.port}")
        try:
            completed = subprocess.run(  # noqa: S603 - the grader with fixed options
                command,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Grade(port, [f"the grader took over {RUN_TIMEOUT_SECONDS} s"])
        if not report.is_file() or not report.read_text().strip():
            tail = (completed.stdout + completed.stderr).strip().splitlines()[-3:]
            return Grade(port, [f"the grader wrote no findings: {' | '.join(tail)}"])
        findings = json.loads(report.read_text())
    problems, offered = judge(findings)
    if not offered:
        problems.append("no suite offered: the port did not answer TLS")
    return Grade(port, problems, offered, time.monotonic() - started)


def grade_all(ports: Sequence[Port], *, parallel: int = PARALLEL_GRADES) -> list[Grade]:
    tool = grader()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(lambda port: grade(port, tool=tool), ports))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterforge.testing.tls_grade")
    parser.add_argument("ports", nargs="+", help="host:port, or host:port/ldap for StartTLS")
    parser.add_argument("--parallel", type=int, default=PARALLEL_GRADES)
    args = parser.parse_args(argv)
    try:
        ports = [Port.parse(text) for text in args.ports]
    except ValueError as error:
        parser.error(str(error))
    failed = 0
    for result in grade_all(ports, parallel=args.parallel):
        verdict = "clean" if result.clean else "FAILED"
        offers = ", ".join(result.offered)
        print(f"{result.port}: {verdict} in {result.seconds:.0f} s; offers {offers}")
        for problem in result.problems:
            print(f"  - {problem}")
        failed += not result.clean
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
