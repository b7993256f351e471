"""scripts/up --nodes N --zones Z --managers M without containers: the lab inventory's
zones and roles, the heap, lab.json's nodes, and what is refused before a container
starts. Without the flags the inventory is the three-node lab it always was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import LabError
from clusterforge.lab.__main__ import main
from clusterforge.lab.cluster import (
    HEAP,
    HEAP_MANY,
    Lab,
    LabNode,
    Placement,
    check_managers_unchanged,
    lab_placements,
    node_facts,
)
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.restarts import plan_rollout


def nodes(count: int) -> list[LabNode]:
    return [
        LabNode(f"opensearch-{index}", f"127.0.0.{10 + index}", 2222)
        for index in range(1, count + 1)
    ]


def written(tmp_path: Path, count: int, **topology: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hosts of the opensearch group, group_vars/opensearch.yml) as scripts/up writes them."""
    lab_dir = tmp_path / "inventories" / "lab"
    lab_dir.mkdir(parents=True, exist_ok=True)
    lab = Lab(repo=tmp_path, lab_dir=lab_dir)
    lab.write_inventory(nodes(count), network="loopback", mode="open", apps=None, **topology)
    hosts = yaml.safe_load((lab_dir / "hosts.yml").read_text())["all"]["children"]["opensearch"]
    group_vars = yaml.safe_load((lab_dir / "group_vars" / "opensearch.yml").read_text())
    return hosts["hosts"], group_vars


def test_without_the_flags_the_lab_is_the_three_node_lab_it_was(tmp_path: Path) -> None:
    hosts, group_vars = written(tmp_path, 3)
    assert hosts == {
        f"opensearch-{index}": {"ansible_host": f"127.0.0.{10 + index}", "ansible_port": 2222}
        for index in (1, 2, 3)
    }
    assert group_vars["opensearch_heap_size"] == HEAP == "512m"
    assert not any("zone" in key or "roles" in key for key in group_vars)


def test_six_nodes_in_three_zones_go_round_robin_with_a_smaller_heap(tmp_path: Path) -> None:
    hosts, group_vars = written(tmp_path, 6, zones=3)
    assert [host["opensearch_zone"] for host in hosts.values()] == [
        "zone-a",
        "zone-b",
        "zone-c",
        "zone-a",
        "zone-b",
        "zone-c",
    ]
    assert not any("opensearch_node_roles" in host for host in hosts.values())
    assert group_vars["opensearch_heap_size"] == HEAP_MANY


def test_three_managers_are_the_first_nodes_one_per_zone(tmp_path: Path) -> None:
    hosts, _ = written(tmp_path, 9, zones=3, managers=3)
    placed = [(host["opensearch_zone"], host["opensearch_node_roles"]) for host in hosts.values()]
    assert placed[:3] == [
        ("zone-a", ["cluster_manager"]),
        ("zone-b", ["cluster_manager"]),
        ("zone-c", ["cluster_manager"]),
    ]
    assert {zone for zone, _ in placed[3:]} == {"zone-a", "zone-b", "zone-c"}
    assert all(roles == ["data", "ingest"] for _, roles in placed[3:])


def as_model(hosts: dict[str, Any], mode: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, {**host, "opensearch_security_mode": "open", "opensearch_rolling_batch": mode})
        for name, host in hosts.items()
    ]


@pytest.mark.parametrize(
    ("count", "topology", "batches"),
    [
        # Every node manager-eligible and data: one batch per zone, the elected one's last.
        (6, {"zones": 3}, [2, 2, 2]),
        # Three managers and three data nodes: a data node per zone, then the managers.
        (6, {"zones": 3, "managers": 3}, [1, 1, 1, 1, 1, 1]),
        # Three managers and six data nodes: two data nodes per zone together.
        (9, {"zones": 3, "managers": 3}, [2, 2, 2, 1, 1, 1]),
        (9, {"zones": 3}, [3, 3, 3]),
    ],
)
def test_the_plan_accepts_the_lab_and_rolls_it_by_zone(
    tmp_path: Path, count: int, topology: dict[str, int], batches: list[int]
) -> None:
    hosts, _ = written(tmp_path, count, **topology)
    cluster = build_cluster(as_model(hosts, "zone"))
    elected = "opensearch-2"  # a manager in every case above
    observed = {
        name: {
            "active": True,
            "version": cluster.version,
            "formed": True,
            "cluster_manager": elected,
        }
        for name in hosts
    }
    rollout = plan_rollout(cluster, observed)
    assert [len(batch["nodes"]) for batch in rollout["batches"]["batches"]] == batches
    assert rollout["batches"]["batches"][-1]["nodes"][-1] == elected


@pytest.mark.parametrize(
    ("count", "zones", "managers", "message"),
    [
        (3, 0, 2, "--managers 2 is refused"),
        (3, 0, 3, "--managers 3 leaves no data node among 3"),
        (2, 3, 0, "--zones 3 needs at least 3 nodes"),
        (6, 3, 1, "use --managers 3"),
        (6, 4, 0, "--zones takes 1 to 3"),
    ],
)
def test_a_lab_the_plan_would_refuse_is_refused_before_any_container(
    tmp_path: Path,
    count: int,
    zones: int,
    managers: int,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_docker(self: Lab) -> str:
        pytest.fail("scripts/up reached docker before refusing the lab")

    monkeypatch.setattr(Lab, "prepare", no_docker)
    with pytest.raises(LabError, match=message):
        lab_placements(count, zones=zones, managers=managers)
    lab = Lab(repo=tmp_path, lab_dir=tmp_path / "lab")
    with pytest.raises(LabError, match=message):
        # up() checks before it reaches docker.
        lab.up(network="loopback", mode="open", node_count=count, zones=zones, managers=managers)


def test_a_running_lab_keeps_its_managers(tmp_path: Path) -> None:
    lab_json = tmp_path / "lab.json"
    check_managers_unchanged(lab_json, 3)  # no lab yet: anything goes
    lab_json.write_text(json.dumps({"nodes": []}))  # a lab from before --managers
    check_managers_unchanged(lab_json, 0)
    with pytest.raises(LabError, match=r"runs with --managers 0, not 3.*scripts/down first"):
        check_managers_unchanged(lab_json, 3)
    lab_json.write_text(json.dumps({"managers": 3}))
    check_managers_unchanged(lab_json, 3)


def test_lab_json_gives_each_node_its_zone_and_roles() -> None:
    lab_nodes = nodes(4)
    cat_nodes = [
        {"name": "opensearch-1", "ip": "127.0.0.11", "node.role": "m", "cluster_manager": "*"},
        {"name": "opensearch-4", "ip": "127.0.0.14", "node.role": "di", "cluster_manager": "-"},
    ]
    placements = lab_placements(4, zones=3, managers=3)
    urls = [f"https://{node.address}:9200" for node in lab_nodes]
    facts = node_facts(lab_nodes, urls, cat_nodes, placements)
    assert facts[0] == {
        "name": "opensearch-1",
        "url": "https://127.0.0.11:9200",
        "address": "127.0.0.11",
        "roles": "m",
        "cluster_manager": True,
        "zone": "zone-a",
        "node_roles": ["cluster_manager"],
    }
    assert (facts[3]["zone"], facts[3]["node_roles"]) == ("zone-a", ["data", "ingest"])
    plain = node_facts(lab_nodes[:1], urls[:1], cat_nodes, [Placement()])
    assert (plain[0]["zone"], plain[0]["node_roles"]) == (
        None,
        ["cluster_manager", "data", "ingest"],
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["up", "--nodes", "10"],
        ["up", "--zones", "4"],
        ["up", "--zones", "0"],
        ["up", "--managers", "x"],
    ],
)
def test_the_flags_refuse_what_the_lab_cannot_hold(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_docker(self: Lab) -> str:
        pytest.fail("scripts/up accepted the flags and reached docker")

    monkeypatch.setattr(Lab, "prepare", no_docker)
    with pytest.raises(SystemExit):
        main(argv)
    assert "takes a whole number" in capsys.readouterr().err
