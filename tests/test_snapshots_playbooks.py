"""roles/opensearch_snapshots' take and restore tasks, run with ansible-playbook here.

They run against ``StandinSnapshotApi``, a stand-in (not OpenSearch: no cluster may run
here) for the endpoints the tasks call, on loopback; the drill on a real cluster is
``molecule/tls/day2_snapshots.yml``. The plays include the role's tasks the way
playbooks/snapshot.yml and restore.yml do, with the plan given as a variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from clusterforge.plan.snapshots.snapshot_schedule import schedule_removal

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
REPOSITORY = "backups"


class StandinSnapshotApi(ThreadingHTTPServer):
    """Stand-in for the repository, snapshot, restore and index calls (not OpenSearch)."""

    def __init__(self, location: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.location = location
        self.registered: dict[str, Any] | None = None
        self.snapshots: dict[str, list[str]] = {}
        self.indices = ["orders", "users"]
        self.requests: list[str] = []
        self.states: dict[str, str] = {}
        self.restores: list[tuple[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: StandinSnapshotApi

    def _answer(self, status: int, body: Any = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> None:
        server = self.server
        server.requests.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        path = urlsplit(self.path).path
        parts = [part for part in path.split("/") if part]
        if parts == ["_snapshot", REPOSITORY]:
            if self.command == "PUT":
                server.registered = body
                self._answer(200, {"acknowledged": True})
            elif server.registered is None:
                self._answer(404, {"error": {"type": "repository_missing_exception"}})
            else:
                self._answer(200, {REPOSITORY: server.registered})
        elif parts == ["_snapshot", REPOSITORY, "_all"]:
            listed = [
                {"snapshot": name, "state": server.states.get(name, "SUCCESS"),
                 "end_time_in_millis": 1000 * position, "indices": indices}
                for position, (name, indices) in enumerate(server.snapshots.items())
            ]  # fmt: skip
            self._answer(200, {"snapshots": listed})
        elif parts == ["_snapshot", REPOSITORY, "_verify"]:
            self._answer(200, {"nodes": {"abc": {"name": "node-1"}}})
        elif parts[:2] == ["_snapshot", REPOSITORY] and len(parts) == 3:
            name = parts[2]
            if self.command == "PUT":
                server.snapshots[name] = list(server.indices)
                shards = {"total": 2, "failed": 0, "successful": 2}
                taken = {"state": "SUCCESS", "shards": shards, "indices": server.indices}
                self._answer(200, {"snapshot": {**taken, "duration_in_millis": 1200}})
            elif name in server.snapshots:
                held = {"state": "SUCCESS", "indices": server.snapshots[name]}
                self._answer(200, {"snapshots": [held]})
            else:
                self._answer(404, {"error": {"type": "snapshot_missing_exception"}})
        elif parts[:2] == ["_snapshot", REPOSITORY] and parts[3:] == ["_restore"]:
            server.restores.append((parts[2], body))
            self._answer(200, {"snapshot": {"shards": {"total": 2, "failed": 0}}})
        elif parts == ["_cat", "snapshots", REPOSITORY]:
            self._answer(200, [{"id": name, "status": "SUCCESS"} for name in server.snapshots])
        elif parts == ["_cat", "indices"]:
            self._answer(200, [{"index": index, "status": "open"} for index in server.indices])
        elif len(parts) == 2 and parts[1] == "_close":
            self._answer(200, {"acknowledged": True})
        elif parts[:2] == ["_cluster", "health"]:
            self._answer(200, {"status": "green"})
        else:
            self._answer(404, {"error": {"type": "standin_unknown_path"}})

    def do_GET(self) -> None:
        self._route()

    def do_PUT(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandinSnapshotApi]:
    location = tmp_path / "repository"
    location.mkdir()
    server = StandinSnapshotApi(str(location))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def play(tmp_path: Path, standin: StandinSnapshotApi, tasks: list[str], **inputs: str) -> Path:
    plan = {
        "cluster": {
            "name": "Unit",
            "security_mode": "open",
            "secured": False,
            "pki": None,
            # Who writes the repository directory: the user running this test.
            "service_user": subprocess.run(
                ["id", "-un"], capture_output=True, text=True, check=True
            ).stdout.strip(),
            "nodes": [{"name": "node-1"}],
            "node_count": 1,
        },
        "nodes": {"localhost": {"url": standin.url}},
        "snapshots": {"repository": REPOSITORY, "location": standin.location, "policy": None},
        # No schedule: schedule.yml stops and removes a timer here, at the plan's paths.
        "timer_removal": {"snapshots": schedule_removal()},
    }
    (tmp_path / "plan.yml").write_text(yaml.safe_dump({"__clusterforge_plan": plan}))
    document = [
        {
            "name": "The snapshot role's tasks against the stand-in",
            "hosts": "localhost",
            "gather_facts": False,
            "any_errors_fatal": True,
            "vars_files": [str(tmp_path / "plan.yml")],
            "tasks": [
                {
                    "name": f"Run {task}",
                    "ansible.builtin.include_role": {
                        "name": "clusterforge.stack.opensearch_snapshots",
                        "tasks_from": task,
                    },
                    "vars": inputs,
                }
                for task in tasks
            ],
        }
    ]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(path),
        ],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def changed(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("localhost "))
    return int(line.split("changed=")[1].split()[0])


def test_a_snapshot_is_taken_once_and_a_rerun_keeps_it(
    tmp_path: Path, standin: StandinSnapshotApi
) -> None:
    take = play(tmp_path, standin, ["take.yml", "take_verify.yml"], opensearch_snapshots_name="s1")
    first = run(take)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "took snapshot s1 in backups: 2 indices, 2 shards" in first.stdout
    # The repository registration and the snapshot.
    assert changed(first.stdout) == 2
    assert standin.registered == {"type": "fs", "settings": {"location": standin.location}}
    second = run(take)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "kept the existing snapshot s1 in backups" in second.stdout
    assert changed(second.stdout) == 0


def test_a_restore_closes_what_it_replaces_and_refuses_a_missing_snapshot(
    tmp_path: Path, standin: StandinSnapshotApi
) -> None:
    standin.registered = {"type": "fs", "settings": {"location": standin.location}}
    standin.snapshots["s1"] = ["orders", "users"]
    tasks = ["restore.yml", "restore_verify.yml"]
    restored = run(
        play(
            tmp_path,
            standin,
            tasks,
            opensearch_snapshots_name="s1",
            opensearch_snapshots_restore_indices="orders",
            opensearch_snapshots_restore_mode="",
        )
    )
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "restored orders from s1 (close: orders replaced); health green" in restored.stdout
    assert "POST /orders/_close" in standin.requests
    missing = run(play(tmp_path, standin, tasks, opensearch_snapshots_name="nope"))
    assert missing.returncode != 0
    assert "Snapshot nope does not exist in repository backups. It holds: s1." in missing.stdout
    unnamed = run(play(tmp_path, standin, tasks, opensearch_snapshots_name=""))
    assert unnamed.returncode != 0
    assert "Name the snapshot to restore: -e snapshot_name=NAME" in unnamed.stdout


def test_latest_restores_the_newest_success_beside_the_live_indices(
    tmp_path: Path, standin: StandinSnapshotApi
) -> None:
    standin.registered = {"type": "fs", "settings": {"location": standin.location}}
    standin.snapshots.update(old=["orders", "users"], newer=["orders", "users"], broken=["orders"])
    standin.states["broken"] = "PARTIAL"
    restored = run(
        play(
            tmp_path,
            standin,
            ["restore.yml", "restore_verify.yml"],
            opensearch_snapshots_name="latest",
            opensearch_snapshots_restore_rename_prefix="restored-",
        )
    )
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert standin.restores == [
        (
            "newer",
            {
                "indices": "orders,users",
                "include_global_state": False,
                "rename_pattern": "(.+)",
                "rename_replacement": "restored-$1",
                "include_aliases": False,
            },
        )
    ]
    # The live indices are neither closed nor deleted.
    assert not [request for request in standin.requests if "_close" in request]
    # The YAML callback wraps long messages.
    assert (
        "restored orders, users as restored-orders, restored-users from newer (close: nothing "
        "replaced)" in " ".join(restored.stdout.split())
    )
    bad = run(
        play(
            tmp_path,
            standin,
            ["restore.yml"],
            opensearch_snapshots_name="latest",
            opensearch_snapshots_restore_rename_prefix="_bad",
        )
    )
    assert bad.returncode != 0
    assert "restore_rename_prefix _bad cannot start an index name" in bad.stdout


def test_latest_over_a_repository_without_a_success_is_refused_before_any_restore(
    tmp_path: Path, standin: StandinSnapshotApi
) -> None:
    standin.registered = {"type": "fs", "settings": {"location": standin.location}}
    standin.snapshots.update(broken=["orders"])
    standin.states["broken"] = "PARTIAL"
    refused = run(play(tmp_path, standin, ["restore.yml"], opensearch_snapshots_name="latest"))
    assert refused.returncode != 0
    output = " ".join(refused.stdout.split())
    assert "repository backups holds no successful snapshot (it holds: broken (PARTIAL))" in output
    # The plan refused it: nothing was looked up by name, closed or restored.
    assert standin.restores == []
    assert not [request for request in standin.requests if "/_snapshot/backups/broken" in request]
