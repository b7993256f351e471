"""Which opensearch.yml changes restart a running node is the plan's decision (issue 33):
playbooks/plan.yml's look (clusterforge_observe) reads the node's file, and the plan
answers ``rollout.nodes[host].config_restart``; roles/opensearch asks nothing after it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.plugins.action import ActionBase

from clusterforge.plan.cluster.restarts import restart_reasons, settings_needing_restart
from clusterforge.plan.plan import build_plan, with_observed
from collection_plugins import load_action_using_api
from test_scale import open_nodes, tls_nodes

REPO = Path(__file__).resolve().parents[1]
CONFIG = "/etc/opensearch/opensearch.yml"


observe = load_action_using_api("clusterforge_observe")
MARKERS = {"formed": "/var/lib/clusterforge/formed", "security_mode": "/var/lib/clusterforge/mode"}


def look(
    args: dict[str, Any], before: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The action on a node whose service does not run; what its one module run was asked
    (the module answers with the files of ``before``: tests/test_observe_module.py runs
    the real one)."""
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    asked: list[dict[str, Any]] = []

    def execute(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        assert module_name == "clusterforge.stack.clusterforge_observe"
        asked.append(module_args)
        config = module_args.get("config")
        return {
            "active": False,
            "markers": {name: before.get(path) for name, path in module_args["markers"].items()},
            "legacy_markers": {},
            "meminfo": None,
            "opensearch_yml": before.get(config) if config else None,
            "api": {},
        }

    module = object.__new__(observe.ActionModule)
    module._task = SimpleNamespace(
        args={"service": "opensearch", "markers": MARKERS, **args}, check_mode=True
    )
    module._execute_module = execute
    result = module.run(task_vars={"inventory_hostname": "os-1", "__clusterforge_plan": {}})
    return result["observed"], asked


def test_the_look_returns_the_nodes_opensearch_yml(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "cluster.name: a\ndiscovery.seed_hosts: [x]\n"
    seen, asked = look({"config": CONFIG}, {CONFIG: text}, monkeypatch)
    assert seen["opensearch_yml"] == text
    # Read with the markers and the memory in the look's one module run, which only reads.
    assert len(asked) == 1
    assert asked[0]["config"] == CONFIG
    assert set(asked[0]) == {"service", "markers", "legacy_markers", "config", "removal"}


def test_a_missing_file_or_no_path_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    seen, _ = look({"config": CONFIG}, {}, monkeypatch)
    assert seen["opensearch_yml"] is None
    seen, asked = look({}, {CONFIG: "cluster.name: a\n"}, monkeypatch)
    assert seen["opensearch_yml"] is None
    assert "config" not in asked[0]


def test_plan_yml_passes_the_config_path_to_the_look() -> None:
    text = (REPO / "playbooks" / "plan.yml").read_text()
    assert 'config: "{{ __clusterforge_plan.cluster.config_dir }}/opensearch.yml"' in text


def formed(text: str | None) -> dict[str, Any]:
    return {"active": True, "version": "2.19.4", "formed": True, "opensearch_yml": text}


def test_a_seed_hosts_change_alone_restarts_nothing_a_new_node_restarts(tmp_path: Path) -> None:
    three = build_plan(tls_nodes(tmp_path, ("os-1", "os-2", "os-3")), fetch=False)
    nodes = tls_nodes(tmp_path, ("os-1", "os-2", "os-3", "os-4"))
    observed = {
        host: formed(three["nodes"][host]["files"]["opensearch.yml"])
        for host in ("os-1", "os-2", "os-3")
    }
    build_plan(nodes, fetch=False)  # issues os-4's certificate; the calls below reuse it
    planned = build_plan(nodes, fetch=False)
    # The first call looked at nothing: no field, and the role restarts on any change.
    assert all("config_restart" not in entry for entry in planned["rollout"]["nodes"].values())
    rollout = with_observed(planned, nodes, observed)["rollout"]
    assert rollout["first_start"] is False
    assert {host: entry["config_restart"] for host, entry in rollout["nodes"].items()} == {
        "os-1": [],
        "os-2": [],
        "os-3": [],
        # Nobody observed it: no file to compare, as settings_needing_restart(None, ...).
        "os-4": ["opensearch.yml"],
    }
    # The rest of the node's rollout is kept.
    assert rollout["nodes"]["os-1"]["active"] is True
    assert with_observed(planned, nodes, observed) == build_plan(
        nodes, fetch=False, observed=observed
    )


def test_a_changed_setting_is_named_as_settings_needing_restart_names_it(tmp_path: Path) -> None:
    nodes = tls_nodes(tmp_path, ("os-1", "os-2", "os-3"))
    planned = build_plan(nodes, fetch=False)
    now = planned["nodes"]["os-1"]["files"]["opensearch.yml"]
    old = now.replace("cluster.name:", "cluster.name: old-name\nold.cluster.name:", 1)
    assert old != now
    observed = {
        "os-1": formed(old),
        "os-2": formed(planned["nodes"]["os-2"]["files"]["opensearch.yml"]),
        "os-3": formed("{not yaml"),
    }
    nodes_rollout = with_observed(planned, nodes, observed)["rollout"]["nodes"]
    assert nodes_rollout["os-1"]["config_restart"] == settings_needing_restart(old, now)
    assert nodes_rollout["os-1"]["config_restart"] == ["cluster.name", "old.cluster.name"]
    assert nodes_rollout["os-2"]["config_restart"] == []
    assert nodes_rollout["os-3"]["config_restart"] == ["opensearch.yml"]


def test_before_the_cluster_formed_the_first_start_file_is_compared() -> None:
    nodes = open_nodes(3)
    planned = build_plan(nodes, fetch=False)
    first = planned["nodes"]["os-1"]["files"]["opensearch.first-start.yml"]
    later = planned["nodes"]["os-1"]["files"]["opensearch.yml"]
    observed = {
        name: {"active": False, "formed": False, "opensearch_yml": first}
        for name in ("os-1", "os-2", "os-3")
    }
    rollout = with_observed(planned, nodes, observed)["rollout"]
    assert rollout["first_start"] is True
    assert rollout["nodes"]["os-1"]["config_restart"] == []
    # What the role writes decides: the first-start file, not the formed one.
    assert settings_needing_restart(later, first) == []
    observed["os-1"] = {"active": False, "formed": False, "opensearch_yml": None}
    rollout = with_observed(planned, nodes, observed)["rollout"]
    assert rollout["nodes"]["os-1"]["config_restart"] == ["opensearch.yml"]


ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def recorded_by_the_role(
    tmp_path: Path, plan: dict[str, Any], host: str, changed_paths: list[str]
) -> list[dict[str, Any]]:
    """What roles/opensearch's record_changes.yml adds to __clusterforge_changes, run by
    ansible-playbook on localhost (no connection) with the plan and the paths the files
    module reported changed."""
    variables = {
        "__clusterforge_plan": plan,
        "__opensearch_placed": {"changed_paths": changed_paths},
    }
    (tmp_path / "play.yml").write_text(
        textwrap.dedent(
            """\
            - hosts: localhost
              gather_facts: false
              vars_files: [vars.json]
              tasks:
                - ansible.builtin.include_role:
                    name: clusterforge.stack.opensearch
                    tasks_from: record_changes
                - ansible.builtin.copy:
                    dest: "{{ playbook_dir }}/recorded.json"
                    content: "{{ {'changes': __clusterforge_changes,
                                  'unit': __opensearch_unit_changed} | to_json }}"
            """
        )
    )
    # The plan's node is named like the play's host: localhost stands in for it.
    plan["rollout"]["nodes"]["localhost"] = plan["rollout"]["nodes"][host]
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    completed = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            *("-i", "localhost,", "-c", "local"),
            *("-e", f"ansible_python_interpreter={sys.executable}"),
            str(tmp_path / "play.yml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    recorded = json.loads((tmp_path / "recorded.json").read_text())
    return [*recorded["changes"], {"unit_changed": recorded["unit"]}]


def test_the_role_records_what_the_plan_decided_for_each_changed_file(tmp_path: Path) -> None:
    nodes = open_nodes(3)
    three = build_plan(nodes, fetch=False)
    # os-1's file differs in seed hosts alone (a node added elsewhere), os-2's in a setting
    # read at runtime: the plan decides, per node, what a changed opensearch.yml means.
    seed_only = three["nodes"]["os-1"]["files"]["opensearch.yml"].replace(
        "discovery.seed_hosts:", "discovery.seed_hosts:\n- 127.0.0.99:9300", 1
    )
    observed = {
        "os-1": formed(seed_only),
        "os-2": formed("cluster.name: another\n"),
        "os-3": formed(three["nodes"]["os-3"]["files"]["opensearch.yml"]),
    }
    plan = with_observed(three, nodes, observed)
    records = plan["rollout"]["nodes"]["os-1"]["change_records"]
    assert records["opensearch.yml"] == {
        "host": "os-1",
        "reason": "opensearch.yml (start-only settings: no restart)",
        "restart": False,
    }
    assert plan["rollout"]["nodes"]["os-2"]["change_records"]["opensearch.yml"]["restart"]
    config_dir = plan["cluster"]["config_dir"]
    changed = [f"{config_dir}/opensearch.yml", "/etc/systemd/system/opensearch.service"]
    assert recorded_by_the_role(tmp_path, plan, "os-1", changed) == [
        records["opensearch.yml"],
        records["opensearch.service"],
        {"unit_changed": True},
    ]
    assert restart_reasons(plan, "os-1", [records["opensearch.yml"]]) == []
    assert recorded_by_the_role(tmp_path, plan, "os-2", [f"{config_dir}/jvm.options.d/x"]) == [
        {"unit_changed": False}
    ]


def test_a_removal_look_reads_member_ids_the_voting_configuration_and_the_exclusion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The plan counts the voters, and finishes a removal an earlier run began (issue 50,
    # finding 3): the look keeps each member's node id, reads the configuration and the
    # persistent settings, where the begun removal's allocation exclusion is.
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    # What the module read from the node's API, by the name of each GET it made.
    api = {
        "root": {"version": {"number": "2.19.4"}},
        "cluster_manager": [{"node": "os-1"}],
        "members": {"nodes": {"id-1": {"name": "os-1", "roles": ["cluster_manager"]}}},
        "index_settings": None,
        "persistent_settings": {"persistent": {"cluster.routing.allocation.exclude._name": "os-3"}},
        "voting": {
            "metadata": {
                "cluster_coordination": {
                    "last_committed_config": ["id-1", "id-2", "id-3"],
                    "voting_config_exclusions": [{"node_id": "id-3", "node_name": "os-3"}],
                }
            }
        },
    }

    def execute(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        assert module_name == "clusterforge.stack.clusterforge_observe"
        # Asked for the removal's reads, on this node's URL.
        assert module_args["removal"] is True
        assert module_args["_api_url"] == "http://127.0.0.11:9200"
        return {"active": True, "markers": {}, "legacy_markers": {}, "api": api}

    module = object.__new__(observe.ActionModule)
    module._task = SimpleNamespace(
        args={"service": "opensearch", "markers": MARKERS, "removal": True}, check_mode=False
    )
    module._execute_module = execute
    plan = {"cluster": {}, "nodes": {"os-1": {"url": "http://127.0.0.11:9200"}}}
    seen = module.run(task_vars={"inventory_hostname": "os-1", "__clusterforge_plan": plan})[
        "observed"
    ]
    assert seen["cluster_nodes"] == [{"id": "id-1", "name": "os-1", "roles": ["cluster_manager"]}]
    assert seen["voting"] == {
        "last_committed_config": ["id-1", "id-2", "id-3"],
        "voting_config_exclusions": [{"node_id": "id-3", "node_name": "os-3"}],
    }
    assert seen["persistent_settings"] == {"cluster.routing.allocation.exclude._name": "os-3"}
