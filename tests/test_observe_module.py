"""The look at a node (clusterforge_observe) as one module run (issue 54).

The action plugin runs plugins/modules/clusterforge_observe.py once per node; here the
module runs as Ansible runs it (its arguments in a JSON file, in a Python of its own, with
syslog standing in for the journal: test_module_logging.RECORDER), driven by the real
action plugin, against a real HTTPS server on 127.0.0.1 with a CA made for the test and
the admin's basic authentication. systemctl is the one stand-in: a script on PATH that
answers the unit's ActiveState and records how it was called (no systemd here).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.plugins.action import ActionBase

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.certificates import SubjectFields
from clusterforge.plan.cluster.restarts import memory_megabytes
from collection_plugins import load_action_using_api
from loopback_pki import loopback_server_certificate
from test_module_logging import RECORDER

MODULE = Path(__file__).resolve().parents[1] / "plugins" / "modules" / "clusterforge_observe.py"
observe = load_action_using_api("clusterforge_observe")

PASSWORD = "Adm1n-obs3rve-7c1f"
VERSION = "2.19.4"
OPENSEARCH_YML = "cluster.name: observe-test\nnode.name: os-1\n"
# A module run that blocks (a FIFO opened for reading) fails the test instead of hanging it.
MODULE_TIMEOUT_S = 20


@dataclass
class Engine:
    """What the HTTPS server answers, and every request it got (path, Authorization)."""

    password: str = PASSWORD
    requests: list[tuple[str, str]] = field(default_factory=list)
    answers: dict[str, Any] = field(
        default_factory=lambda: {
            "/": {"name": "os-1", "version": {"number": VERSION}},
            "/_cat/cluster_manager": [{"id": "id-2", "host": "127.0.0.12", "node": "os-2"}],
            "/_nodes": {"nodes": {"id-1": {"name": "os-1", "roles": ["cluster_manager"]}}},
            "/_settings/index.number_of_replicas,index.auto_expand_replicas": {
                "orders": {"settings": {"index.number_of_replicas": "1"}}
            },
            "/_cluster/state/metadata": {
                "metadata": {
                    "cluster_coordination": {
                        "last_committed_config": ["id-1", "id-2", "id-3"],
                        "voting_config_exclusions": [],
                    }
                }
            },
            "/_cluster/settings": {"persistent": {"cluster.routing.allocation.enable": "all"}},
        }
    )


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Engine, str, Path]]:
    """A real HTTPS server on loopback answering as a node, its URL and the CA's file."""
    ca, cert, key = loopback_server_certificate(tmp_path / "pki", "observe-test")
    state = Engine()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            authorization = self.headers.get("Authorization") or ""
            state.requests.append((self.path, authorization))
            wanted = "Basic " + base64.b64encode(f"admin:{state.password}".encode()).decode()
            answer = state.answers.get(self.path.split("?", 1)[0])
            status = 401 if authorization != wanted else 200 if answer is not None else 404
            if status != 200:
                answer = {"error": "no", "status": status}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"https://127.0.0.1:{server.server_address[1]}", ca
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Node:
    """The node's files in tmp_path, and the stand-in systemctl's state and call log."""

    root: Path
    markers: dict[str, str]
    legacy_markers: dict[str, str]
    config: str
    bin_dir: Path
    systemctl_calls: Path

    def unit(self, state: str, file_state: str = "enabled") -> None:
        script = self.bin_dir / "systemctl"
        script.write_text(
            "#!/bin/sh\n"
            f'printf "%s\\n" "$*" >> "{self.systemctl_calls}"\n'
            f"printf 'ActiveState={state}\\nUnitFileState={file_state}\\n'\n"
        )
        script.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "formed").write_text("2026-11-29T10:00:00Z\n")
    (state_dir / "security_mode").write_text("tls\n")
    (tmp_path / "opensearch.yml").write_text(OPENSEARCH_YML)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    built = Node(
        root=tmp_path,
        markers={
            "formed": str(state_dir / "formed"),
            "security_mode": str(state_dir / "security_mode"),
            # Not one the plan judges by: the action does not ask the module for it.
            "security_config": str(state_dir / "security_config"),
        },
        legacy_markers={
            "formed": str(tmp_path / "data" / ".formed"),
            "security_mode": str(tmp_path / "data" / ".security_mode"),
        },
        config=str(tmp_path / "opensearch.yml"),
        bin_dir=bin_dir,
        systemctl_calls=tmp_path / "systemctl.calls",
    )
    built.unit("active")
    return built


@dataclass
class Run:
    """One run of the action: its result, and each module run it made, as it ran."""

    observed: dict[str, Any]
    module_runs: list[dict[str, Any]]

    @property
    def answer(self) -> dict[str, Any]:
        return dict(self.module_runs[0]["answer"])


def run_module(
    tmp_path: Path, module_args: dict[str, Any], node: Node
) -> tuple[dict[str, Any], list[str], str]:
    """The module run as Ansible runs it: its answer, its journal lines, its output."""
    arguments = tmp_path / "observe-args.json"
    arguments.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    record = tmp_path / "observe-logged.json"
    env = {**os.environ, "PATH": f"{node.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", RECORDER, str(MODULE), str(arguments), str(record)],
        capture_output=True,
        text=True,
        check=False,
        timeout=MODULE_TIMEOUT_S,
        env=env,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    logged: list[str] = json.loads(record.read_text())
    return answer, logged, done.stdout + done.stderr


def look(
    tmp_path: Path,
    node: Node,
    monkeypatch: pytest.MonkeyPatch,
    *,
    url: str | None,
    ca: Path | None,
    password: str = PASSWORD,
    removal: bool = False,
    plan_node: bool = True,
) -> Run:
    """The real action plugin on host os-1 of a secured tls plan, in check mode (a preview
    reads as a run does), running the real module for every module it asks for."""
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    runs: list[dict[str, Any]] = []
    action = object.__new__(observe.ActionModule)

    def execute(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        assert module_name == "clusterforge.stack.clusterforge_observe"
        # Even in check mode: the reads' answers decide the preview.
        assert action._task.check_mode is False
        answer, logged, output = run_module(tmp_path, module_args, node)
        runs.append({"args": module_args, "answer": answer, "logged": logged, "output": output})
        return answer

    action._task = SimpleNamespace(
        args={
            "service": "opensearch",
            "markers": node.markers,
            "legacy_markers": node.legacy_markers,
            "config": node.config,
            "removal": removal,
        },
        check_mode=True,
    )
    action._execute_module = execute
    action._templar = SimpleNamespace(template=lambda value: value)
    plan = {
        "cluster": {
            "secured": True,
            "security_mode": "tls",
            "pki": {"on_node": {"ca_cert": str(ca) if ca else None}},
        },
        "nodes": {"os-1": {"url": url}} if plan_node else {},
    }
    result = action.run(
        task_vars={
            "inventory_hostname": "os-1",
            "__clusterforge_plan": plan,
            "opensearch_security_passwords": {"admin": password},
        }
    )
    assert action._task.check_mode is True
    return Run(observed=result["observed"], module_runs=runs)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"https://127.0.0.1:{port}"


def test_one_module_run_reads_the_unit_the_files_and_the_api(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url, ca = engine
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca)
    assert len(run.module_runs) == 1, "one module run per node"
    assert run.observed == {
        # The host's own /proc/meminfo, read by the module.
        "memory_megabytes": memory_megabytes(Path("/proc/meminfo").read_text()),
        "active": True,
        "enabled": True,
        "version": VERSION,
        "cluster_manager": "os-2",
        "formed": True,
        "cluster_nodes": [],
        "index_settings": None,
        "voting": None,
        "persistent_settings": None,
        "security_mode": "tls",
        "legacy_markers": False,
        "opensearch_yml": OPENSEARCH_YML,
    }
    # The two GETs the look made before, verified by the test's CA, with the admin's
    # basic authentication on the first request.
    assert [path for path, _ in state.requests] == ["/", "/_cat/cluster_manager?format=json"]
    assert all(authorization.startswith("Basic ") for _, authorization in state.requests)
    # The unit asked by name, after the end of the options.
    assert (
        node.systemctl_calls.read_text().split("\n")[0]
        == "show --property=ActiveState,UnitFileState -- opensearch"
    )
    # The marker the plan does not judge by is not read.
    assert set(run.answer["markers"]) == {"formed", "security_mode"}


def test_the_password_is_never_in_argv_the_journal_or_the_answer(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, url, ca = engine
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca)
    only = run.module_runs[0]
    assert only["args"]["_api_password"] == PASSWORD  # it did go, as a module argument
    assert PASSWORD not in only["output"]  # the answer, its invocation included
    assert only["answer"]["invocation"]["module_args"]["_api_password"] != PASSWORD
    invocations = [line for line in only["logged"] if line.startswith("Invoked with")]
    assert len(invocations) == 1, only["logged"]
    assert PASSWORD not in "\n".join(only["logged"])
    assert PASSWORD not in node.systemctl_calls.read_text()
    assert PASSWORD not in json.dumps(run.observed)


def test_a_wrong_password_reports_no_version(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url, ca = engine
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca, password="not-the-password")
    assert run.observed["version"] is None
    assert run.observed["cluster_manager"] is None
    assert run.observed["active"] is True
    assert len(state.requests) == 2  # asked, and refused


def test_a_node_that_does_not_answer_reports_no_version(
    tmp_path: Path, node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = look(tmp_path, node, monkeypatch, url=closed_port_url(), ca=None)
    assert run.observed["active"] is True
    assert run.observed["version"] is None
    assert run.observed["cluster_manager"] is None
    assert run.observed["formed"] is True  # the files were read all the same


def test_a_ca_that_did_not_sign_the_node_gets_no_answer(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url, _ = engine
    other = load_or_create_ca(
        tmp_path / "other", passphrase=b"other", subject=SubjectFields(common_name="Other CA")
    )
    run = look(tmp_path, node, monkeypatch, url=url, ca=Path(other.cert_path))
    assert run.observed["version"] is None
    assert state.requests == []  # the handshake failed: no request was sent


def test_an_inactive_unit_is_asked_nothing(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url, ca = engine
    node.unit("inactive")
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca, removal=True)
    assert state.requests == []
    assert run.observed["active"] is False
    assert run.observed["version"] is None
    assert run.observed["formed"] is True
    assert run.answer["api"] == {}


def test_a_host_that_is_no_node_of_the_plan_is_asked_nothing(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _, _ = engine
    run = look(tmp_path, node, monkeypatch, url=None, ca=None, plan_node=False)
    assert state.requests == []
    assert run.observed["active"] is True
    assert run.observed["version"] is None
    assert "_api_url" not in run.module_runs[0]["args"]
    assert "_api_password" not in run.module_runs[0]["args"]


def test_legacy_markers_are_tested_never_opened(
    tmp_path: Path, node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The formed marker's old place is a link to a FIFO: opening it to read would block
    # until the module's time runs out. The mode marker's is a link to nothing.
    data = tmp_path / "data"
    data.mkdir()
    fifo = tmp_path / "planted.fifo"
    os.mkfifo(fifo)
    Path(node.legacy_markers["formed"]).symlink_to(fifo)
    Path(node.legacy_markers["security_mode"]).symlink_to(tmp_path / "nothing-here")
    Path(node.markers["formed"]).unlink()
    Path(node.markers["security_mode"]).unlink()
    run = look(tmp_path, node, monkeypatch, url=closed_port_url(), ca=None)
    # An old formed marker counts, so a formed cluster is not bootstrapped again; an old
    # mode marker tells no mode until roles/opensearch moves it.
    assert run.observed["formed"] is True
    assert run.observed["legacy_markers"] is True
    assert run.observed["security_mode"] is None
    assert run.answer["legacy_markers"] == {"formed": True, "security_mode": True}


def test_missing_files_are_none_and_no_config_path_reads_none(
    tmp_path: Path, node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    Path(node.markers["formed"]).unlink()
    Path(node.markers["security_mode"]).unlink()
    Path(node.config).unlink()
    node.unit("inactive")
    run = look(tmp_path, node, monkeypatch, url=None, ca=None)
    assert run.observed["formed"] is False
    assert run.observed["security_mode"] is None
    assert run.observed["opensearch_yml"] is None
    assert run.observed["legacy_markers"] is False


def test_an_unreadable_marker_fails_the_look_naming_it(
    tmp_path: Path, node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A formed marker that cannot be read must not pass for a missing one (the cluster
    # would be bootstrapped again): here it is a directory.
    formed = Path(node.markers["formed"])
    formed.unlink()
    formed.mkdir()
    with pytest.raises(observe.AnsibleActionFail) as failure:
        look(tmp_path, node, monkeypatch, url=None, ca=None)
    assert str(formed) in str(failure.value)
    assert "could not look at what the node runs" in str(failure.value)


def test_a_removal_reads_the_members_voting_settings_and_replicas(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url, ca = engine
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca, removal=True)
    assert len(run.module_runs) == 1
    assert [path.split("?", 1)[0] for path, _ in state.requests] == [
        "/",
        "/_cat/cluster_manager",
        "/_nodes",
        "/_settings/index.number_of_replicas,index.auto_expand_replicas",
        "/_cluster/state/metadata",
        "/_cluster/settings",
    ]
    assert run.observed["cluster_nodes"] == [
        {"id": "id-1", "name": "os-1", "roles": ["cluster_manager"]}
    ]
    assert run.observed["voting"] == {
        "last_committed_config": ["id-1", "id-2", "id-3"],
        "voting_config_exclusions": [],
    }
    assert run.observed["persistent_settings"] == {"cluster.routing.allocation.enable": "all"}
    assert run.observed["index_settings"] == {
        "orders": {"settings": {"index.number_of_replicas": "1"}}
    }


def test_what_the_node_holds_is_returned_whole_even_where_it_holds_the_password(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # AnsibleModule masks a no_log value wherever it occurs in an answer: with a short
    # admin password, opensearch.yml's admin_dn would come back starred and look changed
    # to the plan. The password is masked in the echo of the arguments alone.
    state, url, ca = engine
    state.password = "admin"
    config = "plugins.security.authcz.admin_dn: ['CN=admin,OU=ops']\n"
    Path(node.config).write_text(config)
    state.answers["/_cat/cluster_manager"] = [{"node": "admin-1"}]
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca, password="admin")
    assert run.observed["opensearch_yml"] == config
    assert run.observed["cluster_manager"] == "admin-1"
    assert run.observed["version"] == VERSION
    echoed = run.answer["invocation"]["module_args"]
    assert echoed["_api_password"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    invocations = [line for line in run.module_runs[0]["logged"] if "Invoked with" in line]
    assert len(invocations) == 1
    assert "_api_password=NOT_LOGGING_PARAMETER" in invocations[0], invocations[0]


@pytest.mark.parametrize(
    ("file_state", "enabled"),
    [("enabled", True), ("enabled-runtime", True), ("disabled", False), ("masked", False)],
)
def test_the_look_says_whether_the_unit_starts_at_boot(
    tmp_path: Path,
    node: Node,
    engine: tuple[Engine, str, Path],
    monkeypatch: pytest.MonkeyPatch,
    file_state: str,
    enabled: bool,
) -> None:
    """The engine play starts a node only when the look did not find it active and
    enabled (roles/opensearch, tasks/run.yml): a disabled unit must read as such."""
    _, url, ca = engine
    node.unit("active", file_state)
    run = look(tmp_path, node, monkeypatch, url=url, ca=ca)
    assert run.observed["active"] is True
    assert run.observed["enabled"] is enabled
    assert "--property=ActiveState,UnitFileState" in node.systemctl_calls.read_text()
