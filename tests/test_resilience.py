"""The resilience drills' own logic (clusterforge.testing.resilience, issue 50): the
--faults flag, the alerts read from a receiver log, and the table. The drills themselves
run on the lab (scripts/drill --faults all, docs/resilience.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterforge.testing.resilience import (
    FAULTS,
    DrillLab,
    DrillResult,
    alert_summary,
    alerts_settled,
    describe_processes,
    detached_ssh_masters,
    kill_tree,
    parse_faults,
    processes,
    still_running,
    table,
)


def test_all_is_the_seven_drills_with_the_scale_in_last() -> None:
    assert parse_faults("all") == list(FAULTS)
    assert len(FAULTS) == 7
    assert FAULTS[-1] == "kill-scale-in"


def test_a_list_is_run_in_the_drills_order_once_each() -> None:
    assert parse_faults("full-disk,partition-manager,full-disk") == [
        "partition-manager",
        "full-disk",
    ]


@pytest.mark.parametrize("text", ["", "partition", "all,crash-all"])
def test_an_unknown_fault_is_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="--faults takes 'all' or some of"):
        parse_faults(text)


def _log(path: Path, entries: list[tuple[str, str, str]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for at, name, status in entries:
            alert = {"labels": {"alertname": name}, "status": status}
            handle.write(json.dumps({"received_at": at, "notification": {"alerts": [alert]}}))
            handle.write("\n")


def test_alerts_settle_once_the_expected_fired_and_everything_resolved(tmp_path: Path) -> None:
    log = tmp_path / "receiver.jsonl"
    _log(log, [("2026-01-01T00:00:00+00:00", "Old", "firing")])
    offset = log.stat().st_size
    lab = DrillLab(facts={"monitoring": {"receiver_log": str(log)}}, repo=tmp_path)
    settled = alerts_settled(lab, offset, ["OpenSearchNodesMissing"])
    assert not settled()
    _log(log, [("2026-01-01T00:01:00+00:00", "OpenSearchNodesMissing", "firing")])
    assert not settled()
    _log(log, [("2026-01-01T00:01:30+00:00", "OpenSearchClusterYellow", "firing")])
    _log(log, [("2026-01-01T00:02:00+00:00", "OpenSearchNodesMissing", "resolved")])
    assert settled(), "an alert the drill does not expect is reported, not waited for"
    _log(log, [("2026-01-01T00:03:00+00:00", "OpenSearchClusterYellow", "resolved")])
    assert settled()
    started = 1767225600.0  # 2026-01-01T00:00:00Z
    assert alert_summary(lab, offset, started) == [
        "OpenSearchNodesMissing fired +60s, resolved +120s",
        "OpenSearchClusterYellow fired +90s, resolved +180s",
    ]


def test_the_table_has_a_row_per_drill_and_says_why_one_failed() -> None:
    passed = DrillResult(fault="crash-all", lost=0, copies_differ=0, alerts_ok=True)
    failed = DrillResult(fault="full-disk", lost=2, copies_differ=0, alerts_ok=True)
    failed.notes.append("finding: lost acknowledged ids [7, 9]")
    rows = table([passed, failed]).splitlines()
    assert len(rows) == 4
    assert rows[2].startswith("| crash-all |") and rows[2].endswith("| pass |")
    assert "FAIL: finding: lost acknowledged ids [7, 9]" in rows[3]


# -- the toolkit killed: every process of the run (issue 50, finding 2) ---------------

# A playbook's shape: the main process in a session of its own (the drill starts it so),
# a worker that calls setsid (ansible's workers do), and under it a client in yet another
# session (mitogen's ssh clients do). Each writes its pid; all sleep.
TREE = """
import os, subprocess, sys, time
out = sys.argv[1]
depth = int(sys.argv[2])
open(f"{out}.{depth}", "w").write(str(os.getpid()))
if depth < 2:
    subprocess.Popen([sys.executable, __file__, out, str(depth + 1)], start_new_session=True)
time.sleep(120)
"""


def start_tree(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    out = tmp_path / "pid"
    root = subprocess.Popen([sys.executable, str(script), str(out), "0"], start_new_session=True)
    deadline = time.monotonic() + 30
    while not all(Path(f"{out}.{depth}").exists() for depth in range(3)):
        assert time.monotonic() < deadline, "the process tree did not start"
        time.sleep(0.05)
    time.sleep(0.1)  # the pid files are written; let the last one close
    return root, [int(Path(f"{out}.{depth}").read_text()) for depth in range(3)]


def alive(pid: int) -> bool:
    entry = processes().get(pid)
    return entry is not None and entry.state != "Z"


def test_a_group_kill_misses_the_processes_in_sessions_of_their_own(tmp_path: Path) -> None:
    # What the drill did before: killpg of the playbook's group.
    root, pids = start_tree(tmp_path)
    try:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait(timeout=10)
        time.sleep(0.2)
        assert [alive(pid) for pid in pids] == [False, True, True]
    finally:
        for pid in pids[1:]:
            os.kill(pid, signal.SIGKILL)


def test_the_drills_kill_reaches_every_process_of_the_tree(tmp_path: Path) -> None:
    root, pids = start_tree(tmp_path)
    killed = kill_tree(root.pid)
    root.wait(timeout=10)
    assert sorted(process.pid for process in killed) == sorted(pids)
    deadline = time.monotonic() + 10
    while still_running(killed):
        assert time.monotonic() < deadline, f"still running: {still_running(killed)}"
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids)
    assert describe_processes(killed).startswith("3 processes in 3 sessions (python")


# -- where the playbooks run: the lab, or the tls molecule scenario (CI) ---------------


def test_on_the_lab_the_playbooks_run_with_the_checkout_s_config(tmp_path: Path) -> None:
    lab = DrillLab(facts={"nodes": []}, repo=tmp_path)
    argv, env = lab.playbook_command("playbooks/rolling_restart.yml")
    assert argv[1:] == [
        "-i",
        str(tmp_path / "inventories" / "lab"),
        str(tmp_path / "playbooks" / "rolling_restart.yml"),
    ]
    assert env["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert lab.playbook_log == tmp_path / "inventories" / "lab" / "drill-playbook.log"


def test_on_another_cluster_they_run_with_its_inventory_and_extra_vars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_CONFIG", "/molecule/ansible.cfg")
    lab = DrillLab(
        facts={"nodes": []},
        repo=tmp_path,
        inventory=tmp_path / "inventory.yml",
        extra_vars=(tmp_path / "changed_passwords.yml",),
        log_dir=tmp_path / "ephemeral",
    )
    argv, env = lab.playbook_command("playbooks/rolling_restart.yml")
    assert argv[1:] == [
        "-i",
        str(tmp_path / "inventory.yml"),
        "-e",
        f"@{tmp_path / 'changed_passwords.yml'}",
        str(tmp_path / "playbooks" / "rolling_restart.yml"),
    ]
    # Molecule's environment names its own ansible.cfg: kept.
    assert env["ANSIBLE_CONFIG"] == "/molecule/ansible.cfg"
    assert lab.playbook_log == tmp_path / "ephemeral" / "drill-playbook.log"


def test_the_cluster_s_containers_are_the_nodes_and_the_services_one() -> None:
    facts = {
        "nodes": [{"name": "n1", "address": "127.0.0.31", "url": "https://127.0.0.31:9200"}],
        "containers": {"n1": "cf-tls-1"},
        "orders_container": "cf-tls-1",
    }
    assert DrillLab(facts=facts, repo=Path()).containers == ["cf-tls-1"]
    lab_facts = {"nodes": [{"name": "opensearch-1", "address": "127.0.0.11", "url": "u"}]}
    assert DrillLab(facts=lab_facts, repo=Path()).containers == [
        "clusterforge-lab-opensearch-1",
        "clusterforge-lab-apps-1",
    ]


def test_the_kill_also_reaches_the_ssh_control_masters_the_run_detached(tmp_path: Path) -> None:
    # ssh -o ControlPersist forks a master that leaves its parent (ansible.cfg's
    # ssh_args): out of the tree, still the run's. Made here with a program named ssh
    # whose argv[0] reads as a master's, started by the tree and detached (double fork).
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_bytes(Path("/bin/sleep").read_bytes())
    fake_ssh.chmod(0o755)
    script = tmp_path / "detach.py"
    script.write_text(
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv({str(fake_ssh)!r}, ['ssh: /root/.ansible/cp/x [mux]', '120'])\n"
        "    os._exit(0)\n"
        "time.sleep(120)\n"
    )
    root = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    deadline = time.monotonic() + 10
    while not [p for p in processes().values() if p.name == "ssh" and p.parent != root.pid]:
        assert time.monotonic() < deadline, "the fake master did not start"
        time.sleep(0.05)
    started = int(processes()[root.pid].started)
    masters = detached_ssh_masters(since=started)
    assert len(masters) == 1
    killed = kill_tree(root.pid)
    root.wait(timeout=10)
    assert masters[0].pid in {process.pid for process in killed}
    deadline = time.monotonic() + 10
    while still_running(killed):
        assert time.monotonic() < deadline, f"still running: {still_running(killed)}"
        time.sleep(0.1)
