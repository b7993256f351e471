"""Turning a cluster's zones off (issue 41, item 6): allocation awareness pauses until
every node runs without them, and the lab steps a shrink down in runs that each keep the
quorum. The decisions are clusterforge.plan.cluster.rollout's, pure; the plan and the lab use
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from clusterforge.lab.cluster import shrink_steps
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.removal import plan_removal
from clusterforge.plan.cluster.restarts import plan_rollout
from clusterforge.plan.cluster.rollout import (
    AWARENESS_SETTING,
    awareness_pause,
    scale_in_steps,
    zoned_nodes,
)

ROOT = Path(__file__).resolve().parents[1]
ZONED_YML = yaml.safe_dump({"node.attr.zone": "zone-a", AWARENESS_SETTING: "zone"})
PLAIN_YML = yaml.safe_dump({"cluster.name": "lab"})


def hosts(count: int, *, zones: bool, absent: tuple[int, ...] = ()) -> list[tuple[str, Any]]:
    return [
        (
            f"os-{i}",
            {
                "ansible_host": f"127.0.0.{10 + i}",
                "opensearch_security_mode": "open",
                **({"opensearch_zone": f"zone-{'abc'[(i - 1) % 3]}"} if zones else {}),
                **({"opensearch_node_state": "absent"} if i in absent else {}),
            },
        )
        for i in range(1, count + 1)
    ]


def seen(count: int, *, zoned: bool) -> dict[str, Any]:
    members = [
        {"name": f"os-{i}", "roles": ["cluster_manager", "data", "ingest"]}
        for i in range(1, count + 1)
    ]
    return {
        f"os-{i}": {
            "active": True,
            "formed": True,
            "version": None,
            "cluster_nodes": members,
            "index_settings": {},
            "opensearch_yml": ZONED_YML if zoned else PLAIN_YML,
        }
        for i in range(1, count + 1)
    }


def test_turning_zones_off_pauses_awareness_until_the_restarts_are_done() -> None:
    rollout = plan_rollout(build_cluster(hosts(3, zones=False)), seen(3, zoned=True))
    assert rollout["awareness_pause"] == {
        "pause": True,
        "zoned": ["os-1", "os-2", "os-3"],
        "lifted_by": "restarts",
        "settings": {AWARENESS_SETTING: ""},
        "lift_settings": {AWARENESS_SETTING: None},
    }


@pytest.mark.parametrize(("zones", "zoned"), [(True, True), (False, False), (True, False)])
def test_a_cluster_that_keeps_or_never_had_zones_pauses_nothing(zones: bool, zoned: bool) -> None:
    rollout = plan_rollout(build_cluster(hosts(3, zones=zones)), seen(3, zoned=zoned))
    assert rollout["awareness_pause"]["pause"] is False
    assert rollout["awareness_pause"]["settings"] == {}


def test_zones_off_while_nodes_leave_holds_the_pause_until_they_have_left() -> None:
    """6 zoned nodes to 4 without zones: the leaving os-5 and os-6 never restart and one
    may be elected, so the drain keeps awareness paused and its cleanup lifts it."""
    cluster = build_cluster(hosts(6, zones=False, absent=(5, 6)))
    observed = seen(6, zoned=True)
    rollout = plan_rollout(cluster, observed)
    assert rollout["awareness_pause"]["lifted_by"] == "removal"
    removal = plan_removal(cluster, observed)
    assert removal["drain_settings"] == {
        "cluster.routing.allocation.exclude._name": "os-5,os-6",
        AWARENESS_SETTING: "",
    }
    # The same removal from a cluster that never had zones keeps awareness as it is.
    removal = plan_removal(cluster, seen(6, zoned=False))
    assert removal["drain_settings"] == {"cluster.routing.allocation.exclude._name": "os-5,os-6"}


def test_a_rerun_after_the_pause_was_lifted_pauses_nothing() -> None:
    rollout = plan_rollout(build_cluster(hosts(3, zones=False)), seen(3, zoned=False))
    assert rollout["awareness_pause"]["lifted_by"] is None


def test_zoned_nodes_reads_the_zone_attribute_only() -> None:
    configs = {
        "a": {"node.attr.zone": "zone-a"},
        "b": {"cluster.name": "x"},
        "c": None,
        "d": "not a mapping",
        "e": {"node.attr.zone": ""},
    }
    assert zoned_nodes(configs) == ["a"]


@given(
    zoned=st.sets(st.sampled_from(["n1", "n2", "n3", "n4"])),
    zones_planned=st.booleans(),
    removing=st.sets(st.sampled_from(["n5", "n6"])),
)
def test_the_pause_holds_exactly_while_zoned_nodes_meet_a_plan_without_zones(
    zoned: set[str], zones_planned: bool, removing: set[str]
) -> None:
    decision = awareness_pause(zoned, zones_planned=zones_planned, removing=removing)
    assert decision["pause"] == (bool(zoned) and not zones_planned)
    if decision["pause"]:
        # Something always lifts a pause: the restarts, or the removal's cleanup.
        assert decision["lifted_by"] == ("removal" if removing else "restarts")
        assert decision["settings"] == {AWARENESS_SETTING: ""}
        assert decision["lift_settings"] == {AWARENESS_SETTING: None}
    else:
        assert decision["lifted_by"] is None
        assert decision["settings"] == decision["lift_settings"] == {}


def test_six_managers_step_down_to_three_in_two_runs() -> None:
    assert scale_in_steps([True] * 6, 3) == [4, 3]
    assert scale_in_steps([True] * 9, 1) == [5, 3, 2, 1]
    # Dedicated managers first, data nodes after: the data nodes go in one run.
    assert scale_in_steps([True] * 3 + [False] * 6, 4) == [4]
    # One node fewer already loses the quorum of two: straight to the target, which the
    # plan then refuses with its reason.
    assert scale_in_steps([True, True], 1) == [1]


@given(
    eligible=st.lists(st.booleans(), min_size=2, max_size=40),
    data=st.data(),
)
def test_every_step_keeps_the_quorum_of_the_managers_before_it(
    eligible: list[bool], data: st.DataObject
) -> None:
    target = data.draw(st.integers(1, len(eligible) - 1))
    steps = scale_in_steps(eligible, target)
    assert steps and steps[-1] == target
    assert steps == sorted(set(steps), reverse=True)
    before = len(eligible)
    for index, count in enumerate(steps):
        managers_before = sum(eligible[:before])
        kept = sum(eligible[:count])
        last = index == len(steps) - 1
        # Only the last step may break the quorum, and only when the target itself does.
        if not last or kept >= managers_before // 2 + 1:
            assert managers_before == 0 or kept >= managers_before // 2 + 1
        assert count < before
        before = count


def test_the_lab_steps_its_shrinks_down_only_when_one_run_would_lose_the_quorum() -> None:
    assert shrink_steps(6, 3, zones=0) == [4, 3]
    assert shrink_steps(4, 3) == [3]
    assert shrink_steps(3, 6, zones=3) == [6]
    assert shrink_steps(3, 3) == [3]
    # Dedicated managers: only data nodes leave, in one run.
    assert shrink_steps(6, 4, managers=3, zones=3) == [4]


def test_rolling_yml_pauses_before_the_restart_plays_and_lifts_after_them() -> None:
    plays = yaml.safe_load((ROOT / "playbooks" / "rolling.yml").read_text())
    names = [play["name"] for play in plays]
    first_tasks = [task["name"] for task in plays[0]["tasks"]]
    assert "Pause allocation awareness while the nodes restart without zones" in first_tasks
    pause = next(task for task in plays[0]["tasks"] if task["name"].startswith("Pause"))
    assert (
        "awareness_pause.settings"
        in pause["clusterforge.stack.clusterforge_api"]["body"]["persistent"]
    )
    assert "awareness_pause.pause" in pause["when"]
    restarts = [i for i, name in enumerate(names) if name.startswith("Restart nodes")]
    lift = names.index("Lift the awareness pause once every node runs without zones")
    assert restarts and lift > max(restarts)
    block = plays[lift]["tasks"][0]
    assert "lifted_by | default(none) == 'restarts'" in " ".join(block["when"])
    body = block["block"][0]["clusterforge.stack.clusterforge_api"]["body"]
    assert "awareness_pause.lift_settings" in body["persistent"]
