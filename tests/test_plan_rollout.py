"""The plan's rollout: decided from what the nodes report, before any host changes."""

from __future__ import annotations

from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.restarts import (
    DowngradeRefusedError,
    memory_megabytes,
    plan_rollout,
    restart_reasons,
)


def nodes(**overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    """Three open-mode nodes (as `running` reports them); tls is the schema's default."""
    base = {"opensearch_security_mode": "open"}
    return [
        (f"os-{i}", {"ansible_host": f"127.0.0.{10 + i}", **base, **overrides}) for i in (1, 2, 3)
    ]


def running(version: str = "2.19.4", **extra: Any) -> dict[str, Any]:
    return {"active": True, "version": version, "formed": True, "security_mode": "open", **extra}


def test_new_nodes_are_a_first_start_without_restarts() -> None:
    rollout = plan_rollout(build_cluster(nodes()), {})
    assert rollout["first_start"] is True
    assert rollout["mode_switch"] is False
    assert rollout["restart_order"] == ["os-1", "os-2", "os-3"]
    assert not any(node["active"] or node["upgrade"] for node in rollout["nodes"].values())


def test_the_elected_cluster_manager_restarts_last() -> None:
    cluster = build_cluster(nodes(opensearch_security_mode="open"))
    observed = {name: running(cluster_manager="os-1") for name in ("os-1", "os-2", "os-3")}
    rollout = plan_rollout(cluster, observed)
    assert rollout["first_start"] is False
    assert rollout["restart_order"] == ["os-2", "os-3", "os-1"]


def test_a_downgrade_is_refused_naming_every_node_and_the_fix() -> None:
    cluster = build_cluster(nodes(opensearch_version="2.19.3"))
    observed = {"os-1": running("2.19.4"), "os-2": running("2.19.4"), "os-3": running("2.19.3")}
    with pytest.raises(DowngradeRefusedError) as caught:
        plan_rollout(cluster, observed)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("os-1 runs OpenSearch 2.19.4, newer than opensearch_version 2.19.3")
    assert "Set opensearch_version to 2.19.4 or later" in lines[0]


def test_an_upgrade_restarts_running_nodes_only() -> None:
    cluster = build_cluster(nodes(opensearch_version="2.19.4"))
    observed = {"os-1": running("2.19.3"), "os-2": running("2.19.3")}
    plan = {"cluster": {"version": "2.19.4"}, "rollout": plan_rollout(cluster, observed)}
    assert restart_reasons(plan, "os-1", []) == ["upgrade 2.19.3 -> 2.19.4"]
    assert restart_reasons(plan, "os-3", [{"host": "os-3", "reason": "opensearch.yml"}]) == []


def test_recorded_changes_restart_their_host_once_per_reason() -> None:
    cluster = build_cluster(nodes())
    observed = {name: running() for name in ("os-1", "os-2", "os-3")}
    plan = {"cluster": {"version": "2.19.4"}, "rollout": plan_rollout(cluster, observed)}
    changes = [
        {"host": "os-2", "reason": "opensearch.yml"},
        {"host": "os-2", "reason": "certificates"},
        {"host": "os-2", "reason": "opensearch.yml"},
        {"host": "os-1", "reason": "plugins: analysis-smartcn"},
    ]
    assert restart_reasons(plan, "os-2", changes) == ["opensearch.yml", "certificates"]
    assert restart_reasons(plan, "os-3", changes) == []


def test_a_mode_switch_restarts_every_node_at_once_not_one_by_one() -> None:
    cluster = build_cluster(
        nodes(
            opensearch_security_mode="tls",
            opensearch_ca_passphrase="unit-test-passphrase",
            opensearch_security_passwords={
                "admin": "Unit-Admin-3f9a",
                "kibanaserver": "Unit-Kibanaserver-3f9a",
                "logstash": "Unit-Logstash-3f9a",
                "kibana": "Unit-Kibana-3f9a",
            },
        )
    )
    observed = {name: running() for name in ("os-1", "os-2", "os-3")}
    rollout = plan_rollout(cluster, observed)
    assert rollout["mode_switch"] is True
    plan = {"cluster": {"version": "2.19.4"}, "rollout": rollout}
    assert restart_reasons(plan, "os-1", [{"host": "os-1", "reason": "opensearch.yml"}]) == []


def test_a_heap_above_half_of_a_hosts_memory_is_refused_naming_the_host_and_the_fix() -> None:
    cluster = build_cluster(nodes(opensearch_heap_size="2g"))
    observed = {
        "os-1": {"memory_megabytes": 8000},
        "os-2": {"memory_megabytes": 3000},
        "os-3": {},  # not read: nothing to judge by
    }
    with pytest.raises(InventoryError) as caught:
        plan_rollout(cluster, observed)
    assert caught.value.problems == [
        "opensearch_heap_size 2g needs 2048 MB, more than half of os-2's 3000 MB; "
        "set opensearch_heap_size to 1500m or less"
    ]
    # Exactly half fits.
    plan_rollout(cluster, {"os-2": {"memory_megabytes": 4096}})


def test_the_look_reads_memtotal_as_ansible_does() -> None:
    meminfo = "MemTotal:       24575996 kB\nMemFree:        22000000 kB\n"
    assert memory_megabytes(meminfo) == 24575996 // 1024
    assert memory_megabytes(None) is None
    assert memory_megabytes("MemFree: 1 kB\n") is None


def test_all_joined_only_when_every_node_runs_answers_and_names_one_manager() -> None:
    """The engine play skips its waits on a rerun only then (roles/opensearch
    wait_formed.yml): anything less and the run waits for the formation as before."""
    cluster = build_cluster(nodes())
    names = ("os-1", "os-2", "os-3")
    formed = {name: running(cluster_manager="os-2") for name in names}
    assert plan_rollout(cluster, formed)["all_joined"] is True
    # A node still starting (active, no answer), a stopped node, a new node, a node with
    # no manager, two views of the manager: each keeps the waits.
    for host, seen in (
        ("os-3", running(version="", cluster_manager="os-2")),
        ("os-3", {**running(cluster_manager="os-2"), "active": False}),
        ("os-3", None),
        ("os-1", running(cluster_manager=None)),
        ("os-1", running(cluster_manager="os-1")),
    ):
        observed = (
            {**formed, host: seen}
            if seen is not None
            else {name: value for name, value in formed.items() if name != host}
        )
        assert plan_rollout(cluster, observed)["all_joined"] is False, (host, seen)
    assert plan_rollout(cluster, {})["all_joined"] is False


def test_the_rollout_says_which_nodes_run_enabled_at_boot() -> None:
    """roles/opensearch starts a node only when it was not active and enabled."""
    cluster = build_cluster(nodes())
    observed = {
        "os-1": running(enabled=True),
        "os-2": running(enabled=False),
        "os-3": {**running(enabled=True), "active": False},
    }
    rollout = plan_rollout(cluster, observed)["nodes"]
    assert [rollout[name]["enabled"] for name in ("os-1", "os-2", "os-3")] == [True, False, True]
    assert [rollout[name]["active"] for name in ("os-1", "os-2", "os-3")] == [True, True, False]
