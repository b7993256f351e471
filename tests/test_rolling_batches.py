"""Zone mode in the one rolling mechanism: which of the plan's batches restart
(clusterforge.plan.cluster.restarts.rolling_batches), the plan action deciding the restarts from the
run's recorded changes (clusterforge_plan with changes:, clusterforge.plan.plan.
with_restarts), and playbooks/rolling.yml cutting its hosts into exactly those batches, one
serial step each (a preview on local hosts: no node runs, nothing restarts). Node mode
keeps its one-node-at-a-time play."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.restarts import plan_rollout, restart_reasons, rolling_batches
from clusterforge.plan.plan import with_restarts
from collection_plugins import load_plugin

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
MANAGER = ["cluster_manager"]
DATA = ["data", "ingest"]
MIXED = ["cluster_manager", "data", "ingest"]


def host(index: int, zone: str | None, roles: list[str], mode: str) -> tuple[str, Any]:
    host_vars: dict[str, Any] = {
        "ansible_host": f"127.0.0.{10 + index}",
        "opensearch_security_mode": "open",
        "opensearch_node_roles": roles,
        "opensearch_rolling_batch": mode,
    }
    if zone is not None:
        host_vars["opensearch_zone"] = zone
    return (f"os-{index}", host_vars)


def nine_nodes(mode: str = "zone") -> list[tuple[str, Any]]:
    """A dedicated manager and two data nodes in each of zones a, b and c."""
    nodes = []
    for offset, zone in enumerate("abc"):
        nodes.append(host(offset * 3 + 1, zone, MANAGER, mode))
        nodes.append(host(offset * 3 + 2, zone, DATA, mode))
        nodes.append(host(offset * 3 + 3, zone, DATA, mode))
    return nodes


def plan_for(
    nodes: list[tuple[str, Any]], *, elected: str, version: str | None = None
) -> dict[str, Any]:
    """The parts of a plan the rolling play reads: the rollout from what the nodes report
    (running ``version``: an older one is an upgrade of every node; None: the planned
    one), the cluster's version."""
    cluster = build_cluster(nodes)
    version = version or cluster.version
    observed = {
        name: {
            "active": True,
            "version": version,
            "formed": True,
            "security_mode": "open",
            "cluster_manager": elected,
        }
        for name, _ in nodes
    }
    return {
        "cluster": {"version": cluster.version, "pki": None},
        "rollout": plan_rollout(cluster, observed),
    }


def test_every_batch_restarts_whole_when_every_node_has_a_reason() -> None:
    plan = plan_for(nine_nodes(), elected="os-4", version="2.19.3")
    batches = rolling_batches(plan, [])
    assert [batch["nodes"] for batch in batches] == [
        ["os-2", "os-3"],
        ["os-8", "os-9"],
        ["os-5", "os-6"],
        ["os-1"],
        ["os-7"],
        ["os-4"],
    ]
    assert [batch["wait_for"] for batch in batches] == ["yellow"] * 5 + ["green"]
    assert batches[0]["reasons"] == {
        "os-2": [f"upgrade 2.19.3 -> {plan['cluster']['version']}"],
        "os-3": [f"upgrade 2.19.3 -> {plan['cluster']['version']}"],
    }


def test_a_batch_keeps_only_the_nodes_that_restart_and_an_empty_one_goes() -> None:
    plan = plan_for(nine_nodes(), elected="os-4")
    changes = [
        {"host": "os-3", "reason": "opensearch.yml"},
        {"host": "os-7", "reason": "jvm.options"},
        {"host": "os-8", "reason": "opensearch.yml", "restart": False},
    ]
    batches = rolling_batches(plan, changes)
    assert [(batch["kind"], batch["nodes"]) for batch in batches] == [
        ("zone", ["os-3"]),
        ("cluster_manager", ["os-7"]),
    ]
    assert [batch["wait_for"] for batch in batches] == ["green", "green"]


def test_the_play_s_hosts_bound_the_batches() -> None:
    plan = plan_for(nine_nodes(), elected="os-4", version="2.19.3")
    hosts = ["os-1", "os-2", "os-5", "os-6", "os-4"]  # --limit, or others failed before
    assert [batch["nodes"] for batch in rolling_batches(plan, [], hosts)] == [
        ["os-2"],
        ["os-5", "os-6"],
        ["os-1"],
        ["os-4"],
    ]


def test_node_mode_has_no_batches_for_the_zone_play() -> None:
    plan = plan_for(nine_nodes("node"), elected="os-4", version="2.19.3")
    assert rolling_batches(plan, []) == []


def preview(
    tmp_path: Path,
    nodes: list[tuple[str, Any]],
    plan: dict[str, Any],
    changes: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """playbooks/rolling.yml in check mode on local hosts, its plays as the json callback
    reports them (a serial play once per batch). ``changes``: per host, the changes the
    roles recorded this run (``__clusterforge_changes``); none by default."""
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {name: dict(local) for name, _ in nodes}
    for name, recorded in (changes or {}).items():
        hosts[name]["__clusterforge_changes"] = recorded
    # opensearch_present: the group plan.yml makes of the nodes that stay, which the
    # rolling plays start from; here every node stays. The plan is a host variable, as
    # plan.yml's register leaves it (an extra variable would outrank rolling.yml's
    # register of the restart decision).
    inventory.write_text(
        yaml.safe_dump(
            {
                "opensearch": {"hosts": hosts},
                "opensearch_present": {
                    "hosts": dict.fromkeys(hosts),
                    "vars": {"__clusterforge_plan": plan},
                },
            }
        )
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STRATEGY": "linear",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
        "HOME": str(tmp_path),
    }
    completed = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory),
            str(ROOT / "playbooks" / "rolling.yml"),
            "--check",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def said(output: dict[str, Any], play_name: str, task_name: str) -> list[dict[str, Any]]:
    """Per run of ``play_name`` (one per serial batch): the hosts of the batch and what
    ``task_name`` said on them."""
    runs = []
    for play in output["plays"]:
        if play["play"]["name"] != play_name:
            continue
        for task in play["tasks"]:
            if task["task"]["name"] == task_name:
                runs.append(task["hosts"])
    return runs


@pytest.mark.slow
def test_zone_mode_runs_one_serial_step_per_batch(tmp_path: Path) -> None:
    nodes = nine_nodes()
    plan = plan_for(nodes, elected="os-4", version="2.19.3")
    output = preview(tmp_path, nodes, plan)
    runs = said(
        output,
        "Restart nodes batch by batch (opensearch_rolling_batch zone)",
        "Say which batch restarts and why",
    )
    # run_once: one host answers for its batch; the message names the batch.
    messages = [next(iter(hosts.values()))["msg"] for hosts in runs]
    assert [sorted(message["reasons"]) for message in messages] == [
        ["os-2", "os-3"],
        ["os-8", "os-9"],
        ["os-5", "os-6"],
        ["os-1"],
        ["os-7"],
        ["os-4"],
    ]
    assert messages[0]["batch"].startswith("zone a, 2 node(s) together, then yellow")
    assert messages[3]["batch"].startswith("cluster manager a, 1 node(s) together, then yellow")
    assert messages[-1]["batch"].startswith("elected cluster manager b, 1 node(s)")
    assert "then green" in messages[-1]["batch"]
    # The one-at-a-time play has no host in zone mode.
    assert not said(output, "Restart nodes one at a time", "Say why this node restarts")


@pytest.mark.slow
def test_node_mode_keeps_its_one_node_play(tmp_path: Path) -> None:
    nodes = [host(index, None, MIXED, "node") for index in (1, 2, 3)]
    plan = plan_for(nodes, elected="os-2", version="2.19.3")
    output = preview(tmp_path, nodes, plan)
    runs = said(output, "Restart nodes one at a time", "Say why this node restarts")
    assert [list(hosts) for hosts in runs] == [["os-1"], ["os-3"], ["os-2"]]
    assert not said(
        output,
        "Restart nodes batch by batch (opensearch_rolling_batch zone)",
        "Say which batch restarts and why",
    )


def test_the_plan_decides_the_restarts_from_the_recorded_changes() -> None:
    plan = plan_for(nine_nodes(), elected="os-4")
    changes = [
        {"host": "os-3", "reason": "opensearch.yml"},
        {"host": "os-3", "reason": "certificates"},
        {"host": "os-7", "reason": "jvm.options"},
        {"host": "os-8", "reason": "opensearch.yml", "restart": False},
    ]
    decided = with_restarts(plan, changes, [name for name, _ in nine_nodes()])
    # Only the nodes with a reason, each with what restart_reasons says of it.
    assert decided["rollout"]["restarts"] == {
        "os-3": ["opensearch.yml", "certificates"],
        "os-7": ["jvm.options"],
    }
    for name in plan["rollout"]["nodes"]:
        assert decided["rollout"]["restarts"].get(name, []) == restart_reasons(plan, name, changes)
    assert decided["rollout"]["restart_batches"] == rolling_batches(plan, changes)
    # The rest of the rollout and of the plan is kept as decided; the input is not changed.
    assert {key: decided["rollout"][key] for key in plan["rollout"]} == plan["rollout"]
    assert decided["cluster"] == plan["cluster"]
    assert "restarts" not in plan["rollout"]


def test_an_idempotent_rerun_decides_no_restart() -> None:
    plan = plan_for(nine_nodes(), elected="os-4")
    decided = with_restarts(plan, [])
    assert decided["rollout"]["restarts"] == {}
    assert decided["rollout"]["restart_batches"] == []


def test_the_play_s_hosts_bound_the_restart_batches_not_the_restarts() -> None:
    plan = plan_for(nine_nodes(), elected="os-4", version="2.19.3")
    hosts = ["os-1", "os-2", "os-5", "os-6", "os-4"]
    decided = with_restarts(plan, [], hosts)
    assert decided["rollout"]["restart_batches"] == rolling_batches(plan, [], hosts)
    # Node mode's play restricts itself to its hosts; every node's reason is decided.
    assert sorted(decided["rollout"]["restarts"]) == sorted(plan["rollout"]["nodes"])


def test_node_mode_decides_restarts_and_no_batches() -> None:
    plan = plan_for([host(index, None, MIXED, "node") for index in (1, 2, 3)], elected="os-2")
    decided = with_restarts(plan, [{"host": "os-1", "reason": "opensearch.yml"}])
    assert decided["rollout"]["restarts"] == {"os-1": ["opensearch.yml"]}
    assert decided["rollout"]["restart_batches"] == []


def plan_action(args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The action clusterforge_plan run with ``args`` and no inventory."""
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    module = object.__new__(load_plugin("action", "clusterforge_plan").ActionModule)
    module._task = SimpleNamespace(args=args, check_mode=True)
    result: dict[str, Any] = module.run(task_vars={})
    return result


def test_the_plan_action_adds_the_restart_decision_to_the_planned_rollout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = plan_for(nine_nodes(), elected="os-4", version="2.19.3")
    # A registered plan also carries Ansible's own keys; they do not come back as sections.
    registered = {**plan, "changed": False, "failed": False}
    changes = [{"host": "os-3", "reason": "opensearch.yml"}]
    hosts = ["os-1", "os-2", "os-3", "os-4"]
    result = plan_action({"planned": registered, "changes": changes, "hosts": hosts}, monkeypatch)
    expected = with_restarts(plan, changes, hosts)
    assert result["rollout"] == expected["rollout"]
    assert result["cluster"] == plan["cluster"]
    assert result["changed"] is False
    assert result["_ansible_no_log"] is True
    assert result["rollout"]["restarts"]["os-3"] == [
        "opensearch.yml",
        f"upgrade 2.19.3 -> {plan['cluster']['version']}",
    ]
    assert [batch["nodes"] for batch in result["rollout"]["restart_batches"]] == [
        ["os-2", "os-3"],
        ["os-1"],
        ["os-4"],
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"changes": []}, "changes needs planned"),
        ({"changes": "os-1", "planned": {"rollout": {}}}, "changes must be a list"),
        ({"changes": [], "hosts": "os-1", "planned": {"rollout": {}}}, "hosts must be a list"),
        ({"changes": [], "planned": {"cluster": {}}}, "planned is not a plan"),
    ],
)
def test_the_plan_action_refuses_changes_it_cannot_decide_from(
    args: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AnsibleActionFail, match=message):
        plan_action(args, monkeypatch)


@pytest.mark.slow
def test_node_mode_restarts_only_the_nodes_with_a_recorded_change(tmp_path: Path) -> None:
    nodes = [host(index, None, MIXED, "node") for index in (1, 2, 3)]
    plan = plan_for(nodes, elected="os-2")
    changes = {
        "os-3": [{"host": "os-3", "reason": "opensearch.yml"}],
        "os-1": [{"host": "os-1", "reason": "opensearch.yml", "restart": False}],
    }
    output = preview(tmp_path, nodes, plan, changes)
    runs = said(output, "Restart nodes one at a time", "Say why this node restarts")
    assert [list(hosts) for hosts in runs] == [["os-3"]]
    assert runs[0]["os-3"]["msg"] == "os-3 restarts (check mode: would restart): opensearch.yml"
    # A preview restarts nothing.
    restarted = said(output, "Restart nodes one at a time", "Restart this node if it needs it")
    assert all(result.get("skipped") for hosts in restarted for result in hosts.values())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["node", "zone"])
def test_a_rerun_with_no_change_has_no_host_in_the_serial_plays(tmp_path: Path, mode: str) -> None:
    nodes = nine_nodes(mode)
    plan = plan_for(nodes, elected="os-4")
    output = preview(tmp_path, nodes, plan)
    assert not said(output, "Restart nodes one at a time", "Say why this node restarts")
    assert not said(
        output,
        "Restart nodes batch by batch (opensearch_rolling_batch zone)",
        "Say which batch restarts and why",
    )
