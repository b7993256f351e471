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
HOLD = [
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
