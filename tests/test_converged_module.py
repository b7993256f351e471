"""The converge gate (issue 54): clusterforge_converged run as Ansible runs it (its arguments
in a JSON file, in a Python of its own) on real files in a temporary directory, and the
digest the plan keeps the records under (clusterforge.plan.converged).

systemctl is the one stand-in (a script on PATH, as in test_files_module): the machine the
tests run on may have no systemd; molecule's hosts and the lab run the real one.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.plan.converged import code_digest, converge_digest, gate_enabled, without_run_only
from module_runner import run_module

MODULE = Path(__file__).resolve().parents[1] / "plugins" / "modules" / "clusterforge_converged.py"


def fake_systemctl(
    tmp_path: Path, active: str = "active", enabled: str = "enabled"
) -> dict[str, str]:
    """A systemctl that answers ``is-active`` and ``is-enabled`` for every unit asked."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "systemctl").write_text(
        "#!/bin/sh\n"
        'verb="$1"; shift; [ "$1" = "--" ] && shift\n'
        f'for unit in "$@"; do if [ "$verb" = is-active ]; then echo {active}; '
        f"else echo {enabled}; fi; done\n"
    )
    (tools / "systemctl").chmod(0o755)
    return {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}


def run(tmp_path: Path, env: dict[str, str], check: bool = False, **args: Any) -> dict[str, Any]:
    arguments = {"record_dir": str(tmp_path / "records"), **args, "_ansible_check_mode": check}
    return run_module(MODULE, tmp_path, arguments, env)


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Any]:
    """A service's files: a configuration tree, an install tree with a log directory the
    service writes, and a data directory whose contents are the service's own."""
    config = tmp_path / "etc" / "svc"
    (config / "conf.d").mkdir(parents=True)
    (config / "svc.yml").write_text("port: 9200\n")
    (config / "conf.d" / "heap.options").write_text("-Xms1g\n")
    install = tmp_path / "opt" / "svc"
    (install / "lib").mkdir(parents=True)
    (install / "lib" / "engine.jar").write_bytes(b"\0" * 4096)
    (install / "logs").mkdir()
    (install / "current").symlink_to(install / "lib")
    data = tmp_path / "var" / "lib" / "svc"
    data.mkdir(parents=True)
    return {
        "name": "svc",
        "digest": "inputs-1",
        "trees": [
            str(config),
            {"path": str(install), "exclude": ["logs", "logs/*"], "hash_limit": 0},
            {"path": str(data), "recurse": False},
        ],
        "units": ["svc"],
        "accounts": ["root"],
        "values": [str(tmp_path / "max_map_count")],
        "paths": {"config": config, "install": install, "data": data},
    }


def gate_args(host: dict[str, Any], **changes: Any) -> dict[str, Any]:
    args = {key: value for key, value in host.items() if key != "paths"}
    return {**args, **changes}


def recorded(tmp_path: Path, host: dict[str, Any], env: dict[str, str]) -> None:
    (tmp_path / "max_map_count").write_text("262144\n")
    result = run(tmp_path, env, state="record", **gate_args(host))
    assert result.get("failed") is not True, result
    assert result["changed"] is False


def test_no_record_does_not_hold_and_check_mode_writes_none(
    tmp_path: Path, host: dict[str, Any]
) -> None:
    env = fake_systemctl(tmp_path)
    assert run(tmp_path, env, **gate_args(host)) == {
        **run(tmp_path, env, **gate_args(host)),
        "holds": False,
        "reason": "no record of an earlier converge",
    }
    result = run(tmp_path, env, check=True, state="record", **gate_args(host))
    assert result["holds"] is False
    assert not (tmp_path / "records").exists()


def test_a_record_holds_until_anything_it_names_changes(
    tmp_path: Path, host: dict[str, Any]
) -> None:
    env = fake_systemctl(tmp_path)
    recorded(tmp_path, host, env)
    records = tmp_path / "records"
    assert stat.S_IMODE(records.stat().st_mode) == 0o700
    assert stat.S_IMODE((records / "svc.json").stat().st_mode) == 0o600
    assert run(tmp_path, env, **gate_args(host))["holds"] is True
    # What the service writes (its logs, its data) is not the play's: it still holds.
    (host["paths"]["install"] / "logs" / "gc.log").write_text("gc\n")
    (host["paths"]["data"] / "nodes").mkdir()
    assert run(tmp_path, env, **gate_args(host))["holds"] is True

    config = host["paths"]["config"] / "svc.yml"
    before = config.stat()
    # An edit that keeps the size and gives the file its time back still shows.
    config.write_text("port: 9201\n")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    result = run(tmp_path, env, **gate_args(host))
    assert result["holds"] is False
    assert str(config) in result["reason"]


@pytest.mark.parametrize(
    "change",
    [
        "new file",
        "removed file",
        "mode",
        "link target",
        "install file time",
        "data directory mode",
        "value",
    ],
)
def test_each_kind_of_hand_made_change_is_found(
    tmp_path: Path, host: dict[str, Any], change: str
) -> None:
    env = fake_systemctl(tmp_path)
    recorded(tmp_path, host, env)
    paths = host["paths"]
    if change == "new file":
        (paths["config"] / "conf.d" / "extra.options").write_text("-Xss1m\n")
    elif change == "removed file":
        (paths["config"] / "conf.d" / "heap.options").unlink()
    elif change == "mode":
        (paths["config"] / "svc.yml").chmod(0o666)
    elif change == "link target":
        (paths["install"] / "current").unlink()
        (paths["install"] / "current").symlink_to(paths["install"] / "logs")
    elif change == "install file time":
        # Install trees are told apart by size and time alone (hash_limit 0).
        jar = paths["install"] / "lib" / "engine.jar"
        os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1))
    elif change == "data directory mode":
        paths["data"].chmod(0o777)
    elif change == "value":
        (tmp_path / "max_map_count").write_text("65530\n")
    result = run(tmp_path, env, **gate_args(host))
    assert result["holds"] is False, change
    assert result["reason"], change


def test_changed_inputs_a_stopped_unit_or_another_play_shape_do_not_hold(
    tmp_path: Path, host: dict[str, Any]
) -> None:
    env = fake_systemctl(tmp_path)
    recorded(tmp_path, host, env)
    assert run(tmp_path, env, **gate_args(host, digest="inputs-2")) == {
        **run(tmp_path, env, **gate_args(host, digest="inputs-2")),
        "holds": False,
        "reason": "the planned inputs changed",
    }
    stopped = run(tmp_path, fake_systemctl(tmp_path, active="inactive"), **gate_args(host))
    assert (stopped["holds"], stopped["reason"]) == (False, "unit svc is inactive, not active")
    disabled = run(tmp_path, fake_systemctl(tmp_path, enabled="disabled"), **gate_args(host))
    assert (disabled["holds"], disabled["reason"]) == (False, "unit svc is disabled, not enabled")
    fewer = run(tmp_path, fake_systemctl(tmp_path), **gate_args(host, trees=host["trees"][:1]))
    assert (fewer["holds"], fewer["reason"]) == (
        False,
        "the play's trees, units, packages, accounts or values changed",
    )


def test_a_missing_package_does_not_hold_and_is_not_recorded(
    tmp_path: Path, host: dict[str, Any]
) -> None:
    env = fake_systemctl(tmp_path)
    args = gate_args(host, packages=["clusterforge-no-such-package"])
    refused = run(tmp_path, env, state="record", **args)
    assert refused["failed"] is True
    assert "clusterforge-no-such-package is not installed" in refused["msg"]
    assert not (tmp_path / "records" / "svc.json").exists()


def test_a_name_that_is_not_a_file_name_is_refused(tmp_path: Path, host: dict[str, Any]) -> None:
    result = run(tmp_path, fake_systemctl(tmp_path), **gate_args(host, name="../etc/passwd"))
    assert result["failed"] is True
    assert "plain file name" in result["msg"]


def test_the_digest_ignores_what_a_run_did_and_follows_what_a_host_gets(tmp_path: Path) -> None:
    plan: dict[str, Any] = {
        "cluster": {"name": "c", "pki": {"expiry_days": {"admin": 300}, "changed": True}},
        "artifacts": {"engine": "/cache/e.tar.gz", "fetched": True},
        "monitoring": {"issued": True, "files": {"a": "x"}},
        "model_warnings": ["w"],
        "nodes": {"n1": {"files": {"opensearch.yml": "a: 1\n"}}},
    }
    again = json.loads(json.dumps(plan))
    again["cluster"]["pki"] = {"expiry_days": {"admin": 299}, "changed": False}
    again["artifacts"]["fetched"] = False
    again["monitoring"]["issued"] = False
    again["model_warnings"] = []
    assert converge_digest(plan, "code") == converge_digest(again, "code")
    assert "fetched" in plan["artifacts"]  # the plan itself is left as it was
    assert without_run_only(plan)["artifacts"] == {"engine": "/cache/e.tar.gz"}
    edited = json.loads(json.dumps(again))
    edited["nodes"]["n1"]["files"]["opensearch.yml"] = "a: 2\n"
    assert converge_digest(edited, "code") != converge_digest(again, "code")
    assert converge_digest(again, "other code") != converge_digest(again, "code")


def test_the_code_digest_follows_the_code_not_its_place_or_its_caches(tmp_path: Path) -> None:
    def checkout(root: Path, task: str) -> Path:
        (root / "roles" / "r" / "tasks").mkdir(parents=True)
        (root / "roles" / "r" / "tasks" / "main.yml").write_text(task)
        (root / "roles" / "r" / "__pycache__").mkdir()
        (root / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(os.urandom(8))
        (root / "lib").mkdir()
        (root / "lib" / "plan.py").write_text("X = 1\n")
        return root

    one = checkout(tmp_path / "one", "- debug: {}\n")
    two = checkout(tmp_path / "two", "- debug: {}\n")
    assert code_digest(one, one / "lib") == code_digest(two, two / "lib")
    (two / "roles" / "r" / "tasks" / "main.yml").write_text("- debug: {msg: x}\n")
    assert code_digest(one, one / "lib") != code_digest(two, two / "lib")


@pytest.mark.parametrize(
    ("given", "enabled"),
    [(None, True), (True, True), ("yes", True), (False, False), ("false", False), ("off", False)],
)
def test_the_gate_is_on_unless_the_inventory_turns_it_off(given: Any, enabled: bool) -> None:
    node_vars = {} if given is None else {"opensearch_converge_gate": given}
    assert gate_enabled([("os-1", node_vars)]) is enabled
    assert gate_enabled([]) is False


ROOT = Path(__file__).resolve().parents[1]


def converged_includes(path: Path) -> dict[str, dict[str, Any]]:
    """Each include of roles/_converged in a task file: its tasks_from, with the vars it
    gives (the play's vars_files for site.yml's plays)."""
    found: dict[str, dict[str, Any]] = {}
    documents = yaml.safe_load(path.read_text())

    def visit(tasks: list[dict[str, Any]], inherited: dict[str, Any]) -> None:
        for task in tasks or []:
            include = task.get("ansible.builtin.include_role") or {}
            if include.get("name") == "clusterforge.stack._converged":
                found[include["tasks_from"]] = {**inherited, **(task.get("vars") or {})}

    for document in documents:
        if "tasks" in document or "hosts" in document:
            inherited: dict[str, Any] = {}
            for vars_file in document.get("vars_files") or []:
                inherited.update(yaml.safe_load((path.parent / vars_file).read_text()))
            visit(document.get("tasks") or [], inherited)
        else:
            visit([document], {})
    return found


@pytest.mark.parametrize(
    ("check_file", "record_file"),
    [
        ("playbooks/site.yml", "playbooks/site.yml"),
        ("roles/_python_service/tasks/install.yml", "roles/_python_service/tasks/run.yml"),
        ("roles/_debian_service/tasks/main.yml", "roles/_debian_service/tasks/main.yml"),
    ],
)
def test_every_gated_play_records_exactly_what_it_checks(check_file: str, record_file: str) -> None:
    # A record written with other trees, units or inputs than the check reads would never
    # hold (a rerun always in full) or, worse, hold for paths nobody checks.
    checks = converged_includes(ROOT / check_file)
    records = converged_includes(ROOT / record_file)
    assert "check.yml" in checks and "record.yml" in records
    assert checks["check.yml"] == records["record.yml"]
    assert {"_converged_name", "_converged_inputs", "_converged_trees"} <= set(checks["check.yml"])


def test_read_answers_every_record_at_once_for_the_plays_to_compare(
    tmp_path: Path, host: dict[str, Any]
) -> None:
    # The reach at the start of a run reads every record on the host in one module run;
    # each gated play then compares the digest it works out with the recorded one.
    env = fake_systemctl(tmp_path)
    recorded(tmp_path, host, env)
    other = gate_args(host, name="other", digest="inputs-9", trees=[str(tmp_path / "opt")])
    assert run(tmp_path, env, state="record", **other)["changed"] is False
    (tmp_path / "records" / "broken.json").write_text("{not json")

    answers = run(tmp_path, env, state="read")["records"]
    assert answers == {
        "svc": {"holds": True, "reason": "", "digest": "inputs-1"},
        "other": {"holds": True, "reason": "", "digest": "inputs-9"},
    }
    (host["paths"]["config"] / "svc.yml").write_text("port: 1\n")
    answers = run(tmp_path, env, state="read")["records"]
    assert answers["svc"]["holds"] is False
    assert str(host["paths"]["config"] / "svc.yml") in answers["svc"]["reason"]
    assert answers["other"]["holds"] is True
    stopped = run(tmp_path, fake_systemctl(tmp_path, active="failed"), state="read")["records"]
    assert stopped["other"] == {
        "holds": False,
        "reason": "unit svc is failed, not active",
        "digest": "inputs-9",
    }
    nothing = run(tmp_path, env, state="read", record_dir=str(tmp_path / "none"))
    assert nothing["records"] == {}
