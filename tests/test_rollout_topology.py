"""Zones and roles from the inventory: refused before any host is contacted when the
topology cannot survive what it is for, rendered into opensearch.yml, and planned into
the batches that the plan carries and scripts/render prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.cli import main
from clusterforge.errors import InventoryError
from clusterforge.inventory.variables import load_inventory_nodes
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.render import opensearch_settings
from clusterforge.plan.cluster.restarts import plan_rollout

EXAMPLE_ZONES = Path(__file__).resolve().parents[1] / "inventories" / "example-zones"
MANAGER = ["cluster_manager"]
DATA = ["data", "ingest"]


def node(index: int, zone: str | None, roles: list[str], **extra: Any) -> tuple[str, Any]:
    host_vars: dict[str, Any] = {
        "ansible_host": f"127.0.0.{10 + index}",
        "opensearch_security_mode": "open",
        "opensearch_node_roles": roles,
        **extra,
    }
    if zone is not None:
        host_vars["opensearch_zone"] = zone
    return (f"os-{index}", host_vars)


def three_zones(**extra: Any) -> list[tuple[str, Any]]:
    """A manager and two data nodes in each of zones a, b and c."""
    nodes = []
    for offset, zone in enumerate("abc"):
        base = offset * 3
        nodes.append(node(base + 1, zone, MANAGER, **extra))
        nodes.append(node(base + 2, zone, DATA, **extra))
        nodes.append(node(base + 3, zone, DATA, **extra))
    return nodes


def problems_of(nodes: list[tuple[str, Any]]) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        build_cluster(nodes)
    return list(caught.value.problems)


def test_zones_on_some_nodes_only_are_refused_naming_the_hosts_without_one() -> None:
    nodes = three_zones()
    del nodes[4][1]["opensearch_zone"]
    del nodes[7][1]["opensearch_zone"]
    [problem] = problems_of(nodes)
    assert problem.startswith("opensearch_zone is set on 7 of 9 nodes; os-5, os-8 have none")
    assert "set opensearch_zone on every node" in problem


def test_forced_awareness_with_a_zone_without_data_nodes_is_refused() -> None:
    nodes = three_zones(opensearch_zone_forced=True)
    nodes.append(node(10, "d", MANAGER, opensearch_zone_forced=True))
    nodes.append(node(11, "d", [], opensearch_zone_forced=True))
    problems = problems_of(nodes)
    assert any(
        problem.startswith("opensearch_zone_forced is true and zone 'd' (os-10, os-11)")
        and "set opensearch_zone_forced: false" in problem
        for problem in problems
    ), problems


def test_forced_awareness_without_zones_is_refused() -> None:
    nodes = [node(i, None, [*MANAGER, *DATA], opensearch_zone_forced=True) for i in (1, 2, 3)]
    [problem] = problems_of(nodes)
    assert "no node has opensearch_zone" in problem


def test_managers_not_spread_over_three_zones_are_refused() -> None:
    nodes = three_zones()
    # The manager of zone c moves to zone a: losing zone a loses two of three.
    nodes[6][1]["opensearch_zone"] = "a"
    [problem] = problems_of(nodes)
    assert problem.startswith("zone 'a' holds 2 of the 3 cluster-manager-eligible nodes")
    assert "spread them across the zones" in problem


def test_two_zones_need_no_spread_of_three_managers() -> None:
    nodes = three_zones()
    for index in (6, 7, 8):
        nodes[index][1]["opensearch_zone"] = "a"
    assert build_cluster(nodes).zones == ("a", "b")


def test_zone_batches_need_two_zones() -> None:
    nodes = [node(i, "a", [*MANAGER, *DATA], opensearch_rolling_batch="zone") for i in (1, 2, 3)]
    [problem] = problems_of(nodes)
    assert "opensearch_rolling_batch is zone but the nodes have the one zone 'a'" in problem
    assert "set opensearch_rolling_batch: node" in problem


def test_awareness_settings_are_managed_not_extra() -> None:
    nodes = three_zones(
        opensearch_extra_settings={"cluster.routing.allocation.awareness.attributes": "rack"}
    )
    [problem] = problems_of(nodes)
    assert "'cluster.routing.allocation.awareness.attributes'" in problem


def test_a_zoned_node_renders_its_zone_and_the_awareness() -> None:
    cluster = build_cluster(three_zones(opensearch_zone_forced=True))
    settings = opensearch_settings(cluster, cluster.node("os-5"), first_start=False)
    assert settings["node.attr.zone"] == "b"
    assert settings["cluster.routing.allocation.awareness.attributes"] == "zone"
    assert settings["cluster.routing.allocation.awareness.force.zone.values"] == ["a", "b", "c"]
    unforced = build_cluster(three_zones())
    plain = opensearch_settings(unforced, unforced.node("os-5"), first_start=False)
    assert "cluster.routing.allocation.awareness.force.zone.values" not in plain


def test_a_cluster_without_zones_renders_no_awareness() -> None:
    cluster = build_cluster([node(i, None, [*MANAGER, *DATA]) for i in (1, 2, 3)])
    settings = opensearch_settings(cluster, cluster.node("os-1"), first_start=False)
    assert not [key for key in settings if "zone" in key or "awareness" in key]


def test_a_coordinating_only_node_has_no_roles() -> None:
    nodes = three_zones()
    nodes.append(node(10, "a", []))
    cluster = build_cluster(nodes)
    assert (
        opensearch_settings(cluster, cluster.node("os-10"), first_start=False)["node.roles"] == []
    )


def running(manager: str, version: str = "2.19.4") -> dict[str, Any]:
    return {
        "active": True,
        "version": version,
        "formed": True,
        "security_mode": "open",
        "cluster_manager": manager,
    }


def test_the_plan_batches_by_zone_with_the_elected_manager_last() -> None:
    cluster = build_cluster(three_zones(opensearch_rolling_batch="zone"))
    observed = {name: running("os-4") for name, _ in three_zones()}
    rollout = plan_rollout(cluster, observed)
    batches = rollout["batches"]
    assert batches["operation"] == "restart"
    assert [(batch["kind"], batch["nodes"]) for batch in batches["batches"]] == [
        ("zone", ["os-2", "os-3"]),
        ("zone", ["os-8", "os-9"]),
        ("zone", ["os-5", "os-6"]),  # the elected manager's zone goes last of the zones
        ("cluster_manager", ["os-1"]),
        ("cluster_manager", ["os-7"]),
        ("elected_cluster_manager", ["os-4"]),
    ]
    # The batches' order, one node at a time: node mode's play reads it; zone mode's
    # play runs the batches themselves (tests/test_rolling_batches.py).
    assert rollout["restart_order"] == [n for b in batches["batches"] for n in b["nodes"]]


def test_mixed_nodes_in_three_zones_roll_in_three_batches_the_elected_zone_last() -> None:
    # The lab's scripts/up --nodes 6 --zones 3: every node manager-eligible and data.
    nodes = [
        node(index, "abc"[(index - 1) % 3], [*MANAGER, *DATA], opensearch_rolling_batch="zone")
        for index in range(1, 7)
    ]
    observed = {name: running("os-2") for name, _ in nodes}
    batches = plan_rollout(build_cluster(nodes), observed)["batches"]["batches"]
    assert [(batch["kind"], batch["nodes"]) for batch in batches] == [
        ("zone", ["os-1", "os-4"]),
        ("zone", ["os-3", "os-6"]),
        ("zone", ["os-5", "os-2"]),  # the elected manager's zone, the elected one in it, last
    ]


def test_an_upgrade_waits_for_yellow_while_versions_are_mixed() -> None:
    cluster = build_cluster(three_zones(opensearch_rolling_batch="zone"))
    observed = {name: running("os-4", "2.19.3") for name, _ in three_zones()}
    batches = plan_rollout(cluster, observed)["batches"]
    assert batches["operation"] == "upgrade"
    assert [batch["wait_for"] for batch in batches["batches"]] == ["yellow"] * 5 + ["green"]
    assert any("versions are mixed" in note for note in batches["notes"])


def test_node_mode_keeps_todays_order() -> None:
    nodes = [node(i, None, [*MANAGER, *DATA]) for i in (1, 2, 3)]
    rollout = plan_rollout(build_cluster(nodes), {name: running("os-2") for name, _ in nodes})
    assert rollout["batch_mode"] == "node"
    assert rollout["restart_order"] == ["os-1", "os-3", "os-2"]
    assert all(len(batch["nodes"]) == 1 for batch in rollout["batches"]["batches"])
    assert rollout["scale_in"] is None


def test_a_scale_in_is_planned_for_the_nodes_marked_absent() -> None:
    nodes = three_zones(opensearch_rolling_batch="zone")
    for index in (1, 2):  # os-2 and os-3, zone a's data nodes
        nodes[index][1]["opensearch_node_state"] = "absent"
    nodes.append(node(10, "a", DATA, opensearch_rolling_batch="zone"))
    scale_in = plan_rollout(build_cluster(nodes), {})["scale_in"]
    assert scale_in["operation"] == "scale_in"
    assert [batch["nodes"] for batch in scale_in["batches"]] == [["os-2", "os-3"]]
    assert any("allocation.exclude._name" in step for step in scale_in["before_batch"])


def test_a_leaving_elected_manager_goes_last_of_the_scale_in() -> None:
    nodes = three_zones()
    for index in (3, 4):  # os-4 (zone b's manager, elected) and os-5
        nodes[index][1]["opensearch_node_state"] = "absent"
    nodes.append(node(10, "b", MANAGER))
    observed = {name: running("os-4") for name, _ in nodes}
    rollout = plan_rollout(build_cluster(nodes), observed)
    assert [batch["nodes"] for batch in rollout["scale_in"]["batches"]] == [["os-5"], ["os-4"]]
    assert rollout["scale_in"]["elected_observed"] is True


def test_the_zones_example_validates_and_render_prints_its_batches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = load_inventory_nodes(EXAMPLE_ZONES, "opensearch")
    cluster = build_cluster(nodes)
    assert len(cluster.nodes) == 60
    assert cluster.zones == ("zone-a", "zone-b", "zone-c")
    assert all(address.startswith("10.20.") for address in (n.publish_host for n in cluster.nodes))
    assert main(["render", "--inventory", str(EXAMPLE_ZONES), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rollout: restart in 6 batch(es), opensearch_rolling_batch: zone"
    batch_lines = [line for line in out if line.startswith("  ") and ". " in line[:8]]
    assert len(batch_lines) == 6
    assert batch_lines[0].startswith("  1. zone zone-a, 19 nodes, then green: coordinating-a,")
    assert batch_lines[-1] == "  6. elected cluster manager (zone zone-c), then green: manager-c"
    rendered = yaml.safe_load((tmp_path / "data-b-07" / "opensearch.yml").read_text())
    assert rendered["node.attr.zone"] == "zone-b"
    assert rendered["node.roles"] == ["data", "ingest"]
