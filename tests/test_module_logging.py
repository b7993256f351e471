"""What this collection's modules write to a host's journal (issue 31): never a secret.

AnsibleModule logs its own invocation to the journal, or to syslog where there is none,
from its constructor. Each module here runs as Ansible runs it (its arguments in a JSON
file, in a Python of its own) with syslog standing in for the journal: the recorder below
keeps every message that the module's AnsibleModule.log sends, so the test reads exactly
what a host's journal would receive.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import SubjectFields
from clusterforge.pki.issuing import ensure_admin_certificate, ensure_node_certificate

MODULES = Path(__file__).resolve().parents[1] / "plugins" / "modules"
USER = "root" if os.geteuid() == 0 else Path.home().owner()

# Runs the module at argv[1] with its arguments file argv[2], and writes every message
# AnsibleModule sent to syslog (the journal forced off) to argv[3] as a JSON list.
RECORDER = """
import json, runpy, sys, syslog
import ansible.module_utils.basic as basic
module, arguments, record = sys.argv[1:4]
basic.has_journal = False
logged = []
syslog.syslog = lambda *args: logged.append(str(args[-1]))
sys.argv = [module, arguments]
try:
    runpy.run_path(module, run_name="__main__")
finally:
    with open(record, "w") as out:
        json.dump(logged, out)
"""


def run_logged(
    tmp_path: Path, module: str, env: dict[str, str] | None = None, **args: Any
) -> tuple[dict[str, Any], list[str], str]:
    """The module's result, the messages it logged, and its whole stdout."""
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    record = tmp_path / "logged.json"
    done = subprocess.run(
        [sys.executable, "-c", RECORDER, str(MODULES / module), str(arguments), str(record)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    result: dict[str, Any] = json.loads(done.stdout)
    logged: list[str] = json.loads(record.read_text())
    return result, logged, done.stdout + done.stderr


SECRET_SETTINGS = "database_url = postgresql://orders:Pw-7f3c1e9a@db/orders\ntoken = Tk-51aa0c\n"
PLAIN_CONFIG = "cluster.name: logged-test\n"


def test_files_logs_its_invocation_without_any_file_content(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    secret = {"path": str(conf / "settings.toml"), "owner": USER, "group": USER, "mode": "0600"}
    plain = {"path": str(conf / "plain.yml"), "owner": USER, "group": USER, "mode": "0644"}
    result, logged, output = run_logged(
        tmp_path,
        "clusterforge_files.py",
        files=[
            {**secret, "content": SECRET_SETTINGS, "secret": True},
            {**plain, "content": PLAIN_CONFIG},
        ],
    )
    assert result["changed"] is True, output
    assert (conf / "settings.toml").read_text() == SECRET_SETTINGS
    invocations = [message for message in logged if message.startswith("Invoked with")]
    assert len(invocations) == 1, logged
    # The journal still says what ran and where, ...
    assert str(conf / "settings.toml") in invocations[0]
    assert str(conf / "plain.yml") in invocations[0]
    assert f"({len(SECRET_SETTINGS)} characters, not logged)" in invocations[0]
    # ... but no line of either file, secret or not, and no piece of the secret.
    for text in ("Pw-7f3c1e9a", "Tk-51aa0c", "postgresql://", "cluster.name: logged-test"):
        assert not any(text in message for message in logged), text
    # The result's echo of the arguments masks the secret content, the other one stays.
    for text in ("Pw-7f3c1e9a", "Tk-51aa0c"):
        assert text not in output
    echoed = result["invocation"]["module_args"]["files"]
    assert echoed[0]["content"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert echoed[1]["content"] == PLAIN_CONFIG


def test_files_logs_nothing_when_the_task_is_no_log(tmp_path: Path) -> None:
    entry = {"path": str(tmp_path / "s"), "owner": USER, "group": USER, "mode": "0600"}
    result, logged, output = run_logged(
        tmp_path,
        "clusterforge_files.py",
        files=[{**entry, "content": SECRET_SETTINGS, "secret": True}],
        _ansible_no_log=True,
    )
    assert result["changed"] is True, output
    assert not any(message.startswith("Invoked") for message in logged), logged
    assert "Pw-7f3c1e9a" not in output


@pytest.fixture
def client_auth_server(tmp_path: Path) -> Iterator[tuple[str, Path, Path, Path, list[str]]]:
    """HTTPS on loopback that answers only a client holding a certificate of its CA.

    Yields the URL, the CA bundle, the client certificate and key (files on the control
    node), and the subjects of the clients it accepted.
    """
    pki = tmp_path / "pki"
    ca = load_or_create_ca(
        pki, passphrase=b"logging-test", subject=SubjectFields(common_name="log CA")
    )
    served = ensure_node_certificate(
        ca,
        directory=pki,
        name="node",
        subject=SubjectFields(common_name="node"),
        dns_names=[],
        ip_addresses=["127.0.0.1"],
    )
    admin = ensure_admin_certificate(ca, directory=pki, subject=SubjectFields(common_name="admin"))
    accepted: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]
            accepted.append(str(dict(item[0] for item in peer["subject"])["commonName"]))
            body = b'{"status": "green"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(served.cert_path, served.key_path)
    context.load_verify_locations(ca.cert_path)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}/_cluster/health"
        yield url, ca.cert_path, admin.cert_path, admin.key_path, accepted
    finally:
        server.shutdown()
        server.server_close()


def test_http_wait_holds_a_key_given_as_content_for_its_run_alone_and_never_logs_it(
    tmp_path: Path, client_auth_server: tuple[str, Path, Path, Path, list[str]]
) -> None:
    url, ca_cert, admin_cert, admin_key, accepted = client_auth_server
    key = admin_key.read_text()
    scratch = tmp_path / "host-tmp"
    scratch.mkdir()
    result, logged, output = run_logged(
        tmp_path,
        "clusterforge_http_wait.py",
        env={"TMPDIR": str(scratch)},
        url=url,
        ca_path=str(ca_cert),
        client_cert=str(admin_cert),
        client_key_content=key,
        timeout=20,
    )
    # The server saw the admin's certificate, proved with that key.
    assert result.get("status") == 200, output
    assert accepted == ["admin"]
    # The key's file is gone with the module run, and was nowhere else on the "host".
    assert list(scratch.iterdir()) == []
    key_body = key.splitlines()[1]
    assert not any(key_body in message for message in logged)
    assert any("client_key_content=NOT_LOGGING_PARAMETER" in message for message in logged)
    assert key_body not in output


def test_http_wait_removes_the_key_when_the_wait_fails(
    tmp_path: Path, client_auth_server: tuple[str, Path, Path, Path, list[str]]
) -> None:
    url, ca_cert, admin_cert, admin_key, _accepted = client_auth_server
    scratch = tmp_path / "host-tmp"
    scratch.mkdir()
    result, _logged, output = run_logged(
        tmp_path,
        "clusterforge_http_wait.py",
        env={"TMPDIR": str(scratch)},
        url=url,
        ca_path=str(ca_cert),
        client_cert=str(admin_cert),
        client_key_content=admin_key.read_text(),
        ready_status=204,
        retry_status=[],
        timeout=5,
    )
    assert result.get("failed") is True, output
    assert "HTTP 200" in result["msg"]
    assert list(scratch.iterdir()) == []
