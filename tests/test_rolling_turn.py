"""clusterforge_rolling_turn: a node's whole turn (node mode, as before batches), and the
three parts a zone-mode batch runs - hold once, restart on every node, release once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from collection_plugins import load_action_using_api

turn = load_action_using_api("clusterforge_rolling_turn")

PLAN = {
    "cluster": {
        "security_mode": "open",
        "install_dir": "/opt/opensearch/opensearch-3.3.2",
        "home": "/opt/opensearch/current",
        "node_count": 6,
    },
    "nodes": {"os-1": {"url": "http://127.0.0.11:9200"}},
}
TASK_VARS = {"__clusterforge_plan": PLAN, "inventory_hostname": "os-1"}


def run(args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[str]]:
    """Run the action with every module answered and recorded as one line each."""
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    calls: list[str] = []

    def execute(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        if module_name == "ansible.builtin.uri":
            body = module_args.get("body", {}).get("persistent")
            calls.append(f"{module_args['method']} {module_args['url']} {body or ''}".strip())
        elif module_name.endswith("clusterforge_http_wait"):
            calls.append(f"wait {module_args['url']}")
        else:
            calls.append(module_name)
        return {"status": 200}

    module = object.__new__(turn.ActionModule)
    module._task = SimpleNamespace(args={"service": "opensearch", **args}, check_mode=False)
    module._execute_module = execute
    return module.run(task_vars=dict(TASK_VARS)), calls


URL = "http://127.0.0.11:9200"
# Before the hold, a short look: the node answers and the cluster counts its 6 nodes.
READY = f"wait {URL}/_cluster/health?wait_for_nodes=%3E%3D6&timeout=2s"
HOLD = [
    READY,
    f"PUT {URL}/_cluster/settings {{'cluster.routing.allocation.enable': 'primaries'}}",
    f"POST {URL}/_flush",
]
RESTART = [
    "ansible.builtin.file",
    "ansible.builtin.systemd_service",
    f"wait {URL}/_cluster/health?wait_for_nodes=%3E%3D6&timeout=10s",
]


def release(status: str) -> list[str]:
    return [
        f"PUT {URL}/_cluster/settings {{'cluster.routing.allocation.enable': None}}",
        f"wait {URL}/_cluster/health?wait_for_status={status}&timeout=10s",
    ]


def test_a_whole_turn_is_what_node_mode_always_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    result, calls = run({}, monkeypatch)
    assert calls == [*HOLD, *RESTART, *release("green")]
    assert list(result["seconds"]) == ["stop_and_start", "rejoined", "green"]
    assert result["msg"].startswith("os-1 restarted, rejoined and green in ")
    assert result["changed"] is True


def test_a_batch_holds_once_restarts_each_node_and_releases_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held, hold_calls = run({"phase": "hold"}, monkeypatch)
    restarted, restart_calls = run({"phase": "restart"}, monkeypatch)
    released, release_calls = run({"phase": "release"}, monkeypatch)
    # The three parts together are the whole turn, in the same order.
    assert [*hold_calls, *restart_calls, *release_calls] == [*HOLD, *RESTART, *release("green")]
    assert list(held["seconds"]) == ["held"]
    assert list(restarted["seconds"]) == ["stop_and_start", "rejoined"]
    assert list(released["seconds"]) == ["green"]


def test_an_upgrade_batch_may_release_to_yellow(monkeypatch: pytest.MonkeyPatch) -> None:
    result, calls = run({"phase": "release", "wait_for": "yellow"}, monkeypatch)
    assert calls == release("yellow")
    assert result["msg"].startswith("allocation released and yellow in ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"phase": "zone"}, "phase must be one of turn, hold, restart, release"),
        ({"phase": "release", "wait_for": "red"}, "wait_for must be one of green, yellow"),
    ],
)
def test_an_unknown_phase_or_wait_is_refused_before_any_call(
    args: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AnsibleActionFail, match=message):
        run(args, monkeypatch)


def test_a_node_that_does_not_rejoin_says_allocation_is_still_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def execute(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        if module_name.endswith("clusterforge_http_wait"):
            return {"failed": True, "msg": "timed out"}
        return {"status": 200}

    module = object.__new__(turn.ActionModule)
    args = {"service": "opensearch", "phase": "restart"}
    module._task = SimpleNamespace(args=args, check_mode=False)
    module._execute_module = execute
    with pytest.raises(AnsibleActionFail, match=r"os-1 to rejoin.*still limited to primaries"):
        module.run(task_vars=dict(TASK_VARS))


class StartingNode:
    """A node a killed run left restarting: its port refuses every call until the
    ``answers_after``-th wait on it (systemd's restart finishing), then all is well."""

    def __init__(self, answers_after: int | None) -> None:
        self.answers_after = answers_after
        self.waits = 0
        self.calls: list[str] = []

    @property
    def up(self) -> bool:
        return self.answers_after is not None and self.waits >= self.answers_after

    def execute(
        self, module_name: str, module_args: dict[str, Any], task_vars: Any
    ) -> dict[str, Any]:
        if module_name.endswith("clusterforge_http_wait"):
            self.waits += 1
            self.calls.append(f"wait {module_args['url']} {module_args['timeout']:.0f}s")
        elif module_name == "ansible.builtin.uri":
            self.calls.append(f"{module_args['method']} {module_args['url']}")
        else:
            self.calls.append(module_name)
        calls_the_node = module_name == "ansible.builtin.uri" or module_name.endswith(
            "clusterforge_http_wait"
        )
        if self.up or not calls_the_node:
            return {"status": 200}
        return {"failed": True, "status": -1, "msg": "Connection refused"}


def run_on(node: StartingNode, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[str]]:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    lines: list[str] = []
    printer = SimpleNamespace(display=lambda msg, *args, **kwargs: lines.append(msg))
    monkeypatch.setattr(turn, "display", printer, raising=False)
    module = object.__new__(turn.ActionModule)
    module._task = SimpleNamespace(args={"service": "opensearch"}, check_mode=False)
    module._execute_module = node.execute
    return module.run(task_vars=dict(TASK_VARS)), lines


def test_a_rerun_waits_for_a_node_still_starting_before_its_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 50, finding 1: the old turn sent its hold to the node's port at once and
    # failed with "Connection refused"; now it waits, says so, and finishes the turn.
    node = StartingNode(answers_after=2)
    result, lines = run_on(node, monkeypatch)
    members = f"{URL}/_cluster/health?wait_for_nodes=%3E%3D6"
    assert node.calls[:3] == [
        f"wait {members}&timeout=2s 5s",
        f"wait {members}&timeout=10s 900s",
        f"PUT {URL}/_cluster/settings",
    ]
    assert result["msg"].startswith("os-1 restarted, rejoined and green in ")
    assert len(lines) == 1
    assert lines[0].startswith("os-1: before its turn, waiting up to 900 s for it to answer")
    assert "Connection refused" in lines[0]


def test_a_ready_node_waits_for_nothing_and_prints_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = StartingNode(answers_after=0)
    _result, lines = run_on(node, monkeypatch)
    assert lines == []
    assert node.calls[1] == f"PUT {URL}/_cluster/settings"


def test_a_node_that_never_answers_is_named_with_the_fix_and_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = StartingNode(answers_after=None)
    with pytest.raises(AnsibleActionFail) as failure:
        run_on(node, monkeypatch)
    message = failure.value.message
    assert message.startswith("os-1 did not answer with all 6 nodes in the cluster within 900 s")
    assert "systemctl start opensearch" in message
    assert "then rerun the playbook" in message
    # No hold, no restart: the turn never started.
    assert [call.split()[0] for call in node.calls] == ["wait", "wait"]
