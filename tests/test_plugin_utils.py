"""Code the action plugins share lives in plugins/plugin_utils (issue 41, item 3).

Ansible's convention for a collection: controller-side code that several plugins use sits
in ``plugins/plugin_utils`` and is imported by its collection name; one action plugin does
not import another. These tests check that no action does, and run the API actions through
Ansible's own collection loader (a real ``ansible-playbook`` on localhost against an HTTP
server on 127.0.0.1), so the collection name of the shared base resolves as it does in a
run from the checkout or the installed tarball.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = sorted((ROOT / "plugins" / "action").glob("*.py"))
COLLECTION = "ansible_collections.clusterforge.stack"
# Beside the interpreter running the tests: the virtualenv's own Ansible.
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


@pytest.mark.parametrize("path", ACTIONS, ids=lambda path: path.stem)
def test_no_action_plugin_imports_another(path: Path) -> None:
    for module in imported_modules(path):
        assert not module.startswith(f"{COLLECTION}.plugins.action"), (
            f"{path.name} imports {module}; share the code through plugins/plugin_utils"
        )


def test_the_api_actions_share_one_base_from_plugin_utils() -> None:
    users = [
        path.stem
        for path in ACTIONS
        if f"{COLLECTION}.plugins.plugin_utils.api_action" in imported_modules(path)
    ]
    assert users == [
        "clusterforge_api",
        "clusterforge_cluster_config",
        "clusterforge_observe",
        "clusterforge_rolling_turn",
    ]


def test_every_action_plugin_loads_through_ansibles_collection_loader() -> None:
    script = (
        "import importlib, sys\n"
        "from ansible.plugins.loader import init_plugin_loader\n"
        f"init_plugin_loader([{str(ROOT / '.collections')!r}])\n"
        "for name in sys.argv[1:]:\n"
        f"    module = importlib.import_module('{COLLECTION}.plugins.action.' + name)\n"
        "    assert module.ActionModule.run, name\n"
        "print('loaded', len(sys.argv) - 1)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, *(path.stem for path in ACTIONS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"loaded {len(ACTIONS)}"


class _Cluster(BaseHTTPRequestHandler):
    """A stand-in for a node's API, on 127.0.0.1: health and the cluster settings."""

    settings: ClassVar[dict[str, Any]] = {}
    written: ClassVar[list[dict[str, Any]]] = []

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/_cluster/settings"):
            self._answer({"persistent": dict(self.settings), "transient": {}})
        else:
            self._answer({"status": "green"})

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.written.append({"path": self.path, "body": body})
        self._answer({"acknowledged": True})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def node_api() -> Iterator[tuple[str, type[_Cluster]]]:
    handler = type("Cluster", (_Cluster,), {"settings": {}, "written": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_api_actions_call_a_node_through_the_shared_base(
    tmp_path: Path, node_api: tuple[str, type[_Cluster]]
) -> None:
    url, handler = node_api
    out = tmp_path / "answers.json"
    plan = {
        "cluster": {"security_mode": "open", "secured": False},
        "nodes": {"localhost": {"url": url}},
    }
    tasks = [
        {
            "name": "A call by URL",
            "clusterforge.stack.clusterforge_api": {"url": f"{url}/health", "auth": "none"},
            "register": "by_url",
        },
        {
            "name": "A wait on the node's path (clusterforge_http_wait on the host)",
            "clusterforge.stack.clusterforge_api": {"path": "/health", "wait_seconds": 10},
            "register": "waited",
        },
        {
            "name": "The cluster's settings made to match",
            "clusterforge.stack.clusterforge_cluster_config": {
                "config": {
                    "objects": {
                        "opensearch_cluster_settings": {
                            "cluster.routing.allocation.enable": "primaries"
                        }
                    },
                    "prune": False,
                    "keep": {},
                },
                "kinds": ["opensearch_cluster_settings"],
            },
            "register": "configured",
        },
        {
            "ansible.builtin.copy": {
                "content": "{{ {'by_url': by_url.json, 'waited': waited.json, "
                "'configured': configured.changes} | to_json }}",
                "dest": str(out),
                "mode": "0600",
            }
        },
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars": {"__clusterforge_plan": plan},
                    "tasks": tasks,
                }
            ],
            sort_keys=False,
        )
    )
    completed = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(playbook)],
        cwd=ROOT,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "ANSIBLE_STRATEGY": "linear",
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            "ANSIBLE_NOCOLOR": "1",
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    answers = json.loads(out.read_text())
    assert answers["by_url"] == {"status": "green"}
    assert answers["waited"] == {"status": "green"}
    # The stand-in holds no persistent setting, so the declared one is created.
    assert answers["configured"] == [
        {"kind": "cluster setting", "name": "cluster.routing.allocation.enable", "action": "create"}
    ]
    assert handler.written == [
        {
            "path": "/_cluster/settings",
            "body": {"persistent": {"cluster.routing.allocation.enable": "primaries"}},
        }
    ]
