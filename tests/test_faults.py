"""The lab's fault injection (clusterforge.testing.faults, issue 50): which rules a
partition writes, that none is ever written outside the lab, and that every rule tagged
``clusterforge`` is found and removed from a real iptables."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterforge.testing import faults
from clusterforge.testing.faults import FaultError, LabNodeTarget, partition_rules

NODES = [
    LabNodeTarget(name=f"opensearch-{n}", address=f"127.0.0.1{n}", container=f"c{n}")
    for n in (1, 2, 3)
]
CGROUPS = {f"c{n}": f"/docker/id{n}" for n in (1, 2, 3)}
REPO = Path(__file__).resolve().parents[1]


def test_a_partition_cuts_both_ways_by_the_senders_cgroup() -> None:
    rules = partition_rules(NODES[0], NODES[1:], CGROUPS)
    pairs = {(rule[rule.index("--path") + 1], rule[1]) for rule in rules}
    # The isolated node's packets to each other node, and each other node's to it.
    assert pairs == {
        ("/docker/id1", "127.0.0.12/32"),
        ("/docker/id1", "127.0.0.13/32"),
        ("/docker/id2", "127.0.0.11/32"),
        ("/docker/id3", "127.0.0.11/32"),
    }
    for rule in rules:
        assert rule[-2:] == ["-j", "DROP"]
        assert rule[rule.index("--comment") + 1].startswith(faults.RULE_COMMENT + " ")


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "127.0.0.21", "127.0.0.30", "127.0.0.34", "10.0.0.11", "::1", "node"]
)
def test_no_rule_names_an_address_outside_the_lab(address: str) -> None:
    outsider = LabNodeTarget(name="x", address=address, container="c1")
    with pytest.raises(FaultError, match="lab"):
        partition_rules(outsider, NODES[1:], CGROUPS)
    with pytest.raises(FaultError, match="lab"):
        partition_rules(NODES[1], [outsider], CGROUPS)


def test_the_molecule_scenario_s_nodes_are_allowed_and_are_the_ones_it_declares() -> None:
    # CI runs three drills on the tls molecule scenario (molecule/tls/day2_resilience.yml):
    # its nodes' addresses, as molecule.yml gives them, and nothing more.
    scenario = yaml.safe_load((REPO / "molecule" / "tls" / "molecule.yml").read_text())
    host_vars = scenario["provisioner"]["inventory"]["host_vars"]
    declared = {variables["opensearch_network_host"] for variables in host_vars.values()}
    assert declared == faults.MOLECULE_TLS_NODE_ADDRESSES
    molecule_nodes = [
        LabNodeTarget(name=f"cf-tls-{n}", address=f"127.0.0.3{n}", container=f"c{n}")
        for n in (1, 2, 3)
    ]
    assert len(partition_rules(molecule_nodes[0], molecule_nodes[1:], CGROUPS)) == 4


def test_a_container_in_the_root_cgroup_is_refused() -> None:
    with pytest.raises(FaultError, match="root cgroup"):
        partition_rules(NODES[0], NODES[1:], {**CGROUPS, "c2": "/"})


SAVED = """*nat
:OUTPUT ACCEPT [0:0]
-A OUTPUT -d 127.0.0.11/32 -m comment --comment "clusterforge partition x" -j RETURN
COMMIT
*filter
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -j ACCEPT
-A OUTPUT -d 127.0.0.12/32 -m cgroup --path /d/a -m comment --comment "clusterforge p n1" -j DROP
-A OUTPUT -m comment --comment "not-clusterforge" -j ACCEPT
-A OUTPUT -d 127.0.0.11/32 -m cgroup --path /d/b -m comment --comment "clusterforge p n1" -j DROP
COMMIT
"""


def test_tagged_rules_are_deleted_by_number_highest_first() -> None:
    assert faults.tagged_rules(SAVED) == [
        ["-t", "filter", "-D", "OUTPUT", "4"],
        ["-t", "filter", "-D", "OUTPUT", "2"],
        ["-t", "nat", "-D", "OUTPUT", "1"],
    ]


def test_full_disk_watermarks_sit_above_the_free_space_in_order() -> None:
    settings = faults.full_disk_settings(50 * 1024**3, margin_mb=1024)
    low, high, flood = (int(settings[key].removesuffix("mb")) for key in faults.WATERMARK_SETTINGS)
    assert flood > 50 * 1024
    assert low > high > flood
    assert set(faults.reset_disk_settings()) == set(settings)
    assert all(value is None for value in faults.reset_disk_settings().values())


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables"
)
def test_remove_rules_removes_every_tagged_rule_from_a_real_iptables() -> None:
    # RETURN: the rules change nothing for the traffic while they exist.
    added = []
    for octet in (17, 18):
        rule = [
            "OUTPUT",
            "-d",
            f"127.0.0.{octet}/32",
            "-m",
            "comment",
            "--comment",
            f"{faults.RULE_COMMENT} test {octet}",
            "-j",
            "RETURN",
        ]
        subprocess.run(["iptables", "-w", "-A", *rule], check=True)
        added.append(rule)
    try:
        assert faults.count_rules() >= 2
        assert faults.remove_rules() >= 2
        assert faults.count_rules() == 0
        saved = subprocess.run(["iptables-save"], check=True, capture_output=True, text=True).stdout
        assert f"{faults.RULE_COMMENT} test" not in saved
    finally:
        for rule in added:
            subprocess.run(["iptables", "-w", "-D", *rule], check=False, capture_output=True)
