"""Scale out and in (issue 12, item 3): nodes_dn as a pattern, seed hosts that restart
nothing, the removal refusals, and ``scripts/up --nodes``."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.lab.__main__ import node_count
from clusterforge.pki.certificates import SubjectFields
from clusterforge.plan.cluster.cluster_pki import nodes_dn_pattern
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.removal import RemovalRefusedError, plan_groups, plan_removal
from clusterforge.plan.cluster.restarts import restart_reasons, settings_needing_restart
from clusterforge.plan.plan import build_plan
from nodes_dn_matcher import admits

PASSWORDS = {
    "admin": "Unit-Admin-5c1e",
    "kibanaserver": "Unit-Kibanaserver-5c1e",
    "logstash": "Unit-Logstash-5c1e",
    "kibana": "Unit-Kibana-5c1e",
}
# Node names of every shape a node name may take (letters, digits, '.', '_', '-').
NAMES = ("os-1", "search.b2", "data_node_3", "n", "Z9-a.b_c")


def tls_nodes(pki_dir: Path, names: tuple[str, ...], **common: Any) -> list[tuple[str, Any]]:
    shared = {
        "opensearch_security_mode": "tls",
        "opensearch_pki_dir": str(pki_dir),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
        **common,
    }
    return [
        (name, {"ansible_host": f"127.0.0.{70 + index}", **shared})
        for index, name in enumerate(names, start=1)
    ]


def java_style_subject(path: Path) -> str:
    """The DN as the plugin sees it (X500Principal.getName(), RFC 2253), via openssl."""
    printed = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return printed.strip().removeprefix("subject=")


def opensearch_yml(plan: dict[str, Any], host: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(plan["nodes"][host]["files"]["opensearch.yml"])
    return loaded


@pytest.mark.parametrize(
    "subject",
    [
        {},
        {"organization": "Acme, Inc.", "organizational_unit": "search (prod)", "country": "DE"},
    ],
)
def test_nodes_dn_admits_every_node_certificate_the_pki_issues(
    tmp_path: Path, subject: dict[str, str]
) -> None:
    extra = {"opensearch_cert_subject": subject} if subject else {}
    plan = build_plan(tls_nodes(tmp_path, NAMES, **extra), fetch=False)
    entries = opensearch_yml(plan, NAMES[0])["plugins.security.nodes_dn"]
    assert len(entries) == 1 and entries[0].startswith("/") and entries[0].endswith("/")
    for name in NAMES:
        assert admits(entries, java_style_subject(tmp_path / f"{name}.pem")), name
    # The admin certificate shares the subject fields; it must never pass as a node.
    assert not admits(entries, java_style_subject(tmp_path / "admin.pem"))
    # Every node carries the same pattern, whichever node it is.
    assert {opensearch_yml(plan, name)["plugins.security.nodes_dn"][0] for name in NAMES} == {
        entries[0]
    }


def test_nodes_dn_refuses_other_subjects() -> None:
    entries = [nodes_dn_pattern(SubjectFields(common_name="unused"), "admin")]
    ours = "CN=os-9,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US"
    assert admits(entries, ours)
    for other in (
        # The demo certificates' style, and another CA's usual subjects.
        "CN=node-0.example.com,OU=node,O=node,L=test,DC=de",
        "CN=os-9,OU=other-team,O=clusterforge,L=Local,ST=Local,C=US",
        "CN=os-9,O=clusterforge,L=Local,ST=Local,C=US",
        "CN=os-9,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US,DC=evil",
        "CN=admin,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US",
        "CN=a\\,OU=x,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US",
        "CN=,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US",
    ):
        assert not admits(entries, other), other


def test_adding_a_node_changes_only_seed_hosts_on_the_others(tmp_path: Path) -> None:
    three = build_plan(tls_nodes(tmp_path, ("os-1", "os-2", "os-3")), fetch=False)
    four = build_plan(tls_nodes(tmp_path, ("os-1", "os-2", "os-3", "os-4")), fetch=False)
    for host in ("os-1", "os-2", "os-3"):
        before = three["nodes"][host]["files"]["opensearch.yml"]
        after = four["nodes"][host]["files"]["opensearch.yml"]
        assert before != after
        assert settings_needing_restart(before, after) == []
        changed = {
            key
            for key in yaml.safe_load(after)
            if yaml.safe_load(before).get(key) != yaml.safe_load(after)[key]
        }
        assert changed == {"discovery.seed_hosts"}
    # The new node joins: no first-election setting once the cluster has formed.
    assert "cluster.initial_cluster_manager_nodes" not in opensearch_yml(four, "os-4")


def test_other_setting_changes_still_need_a_restart() -> None:
    before = "cluster.name: a\ndiscovery.seed_hosts: [x]\n"
    assert settings_needing_restart(before, "cluster.name: b\ndiscovery.seed_hosts: [y]\n") == [
        "cluster.name"
    ]
    assert settings_needing_restart(None, "cluster.name: a\n") == ["opensearch.yml"]
    assert settings_needing_restart("{not yaml", "cluster.name: a\n") == ["opensearch.yml"]


def test_a_seed_hosts_only_change_gives_no_restart_reason() -> None:
    plan = {
        "cluster": {"version": "2.19.4"},
        "rollout": {
            "mode_switch": False,
            "nodes": {"os-1": {"active": True, "upgrade": False}},
        },
    }
    seed_only = {"host": "os-1", "reason": "opensearch.yml (start-only)", "restart": False}
    assert restart_reasons(plan, "os-1", [seed_only]) == []
    real = {"host": "os-1", "reason": "opensearch.yml (cluster.name)", "restart": True}
    assert restart_reasons(plan, "os-1", [seed_only, real]) == ["opensearch.yml (cluster.name)"]


# -- removal ---------------------------------------------------------------------------


def open_nodes(count: int, absent: tuple[int, ...] = (), **host_overrides: Any) -> Any:
    return [
        (
            f"os-{i}",
            {
                "ansible_host": f"127.0.0.{10 + i}",
                "opensearch_security_mode": "open",
                **({"opensearch_node_state": "absent"} if i in absent else {}),
                **host_overrides.get(f"os_{i}", {}),
            },
        )
        for i in range(1, count + 1)
    ]


def members(count: int, roles: tuple[str, ...] = ("cluster_manager", "data", "ingest")) -> Any:
    return [{"name": f"os-{i}", "roles": list(roles)} for i in range(1, count + 1)]


def observed(
    count: int, replicas: dict[str, Any] | None = None, cluster: Any = None
) -> dict[str, Any]:
    seen = {
        "active": True,
        "cluster_nodes": cluster if cluster is not None else members(count),
        "index_settings": replicas or {},
    }
    return {f"os-{i}": seen for i in range(1, count + 1)}


def index(replicas: int, auto_expand: str | None = None) -> dict[str, Any]:
    settings = {"index.number_of_replicas": str(replicas)}
    if auto_expand:
        settings["index.auto_expand_replicas"] = auto_expand
    return {"settings": settings}


def test_an_absent_node_leaves_the_configuration_of_the_others() -> None:
    cluster = build_cluster(open_nodes(4, absent=(4,)))
    assert [node.inventory_name for node in cluster.nodes] == ["os-1", "os-2", "os-3"]
    assert [node.inventory_name for node in cluster.removed_nodes] == ["os-4"]
    removal = plan_removal(cluster, observed(4, {"logs": index(1)}))
    assert removal["nodes"] == {
        "os-4": {"name": "os-4", "member": True, "cluster_manager_eligible": True}
    }
    assert removal["names"] == ["os-4"]
    assert removal["via"] == "os-1"


def test_the_plan_names_the_groups_every_play_targets() -> None:
    # playbooks/plan.yml puts the hosts in these once; no play guards host by host.
    cluster = build_cluster(open_nodes(4, absent=(2,)))
    seen = observed(4)
    seen["os-3"] = {**seen["os-3"], "active": False}  # a new node: nothing runs there yet
    assert plan_groups(cluster, seen) == {
        "opensearch_present": ["os-1", "os-3", "os-4"],
        "opensearch_serving": ["os-1", "os-3", "os-4"],
        "opensearch_removed": ["os-2"],
    }
    # A preview starts nothing: it talks to the cluster only through the nodes that run.
    preview = plan_groups(cluster, seen, preview=True)
    assert preview["opensearch_serving"] == ["os-1", "os-4"]
    assert preview["opensearch_present"] == ["os-1", "os-3", "os-4"]
    # A preview of a cluster that does not run yet talks to no node.
    assert plan_groups(cluster, {}, preview=True)["opensearch_serving"] == []


def test_a_removal_below_the_quorum_of_current_managers_is_refused() -> None:
    cluster = build_cluster(open_nodes(3, absent=(2, 3)))
    with pytest.raises(RemovalRefusedError) as caught:
        plan_removal(cluster, observed(3))
    message = str(caught.value)
    assert "os-2, os-3" in message
    assert "1 of the cluster's 3 cluster-manager-eligible nodes" in message
    assert "quorum of 2" in message
    assert "opensearch_node_state: present" in message


def test_the_quorum_counts_the_managers_the_cluster_has_now() -> None:
    # The inventory lists 4, the cluster runs 5 managers (one not in this inventory):
    # removing two leaves 3 of 5, a quorum.
    # The inventory may not keep exactly two cluster-manager-eligible nodes; the cluster's
    # own member list (observed) decides the quorum, whatever os-2's roles are here.
    data_only = {"opensearch_node_roles": ["data", "ingest"]}
    cluster = build_cluster(open_nodes(4, absent=(3, 4), os_2=data_only))
    allowed = plan_removal(cluster, observed(4, cluster=members(5)))
    assert set(allowed["nodes"]) == {"os-3", "os-4"}
    # The same removal from a cluster of exactly those 4 leaves 2 of 4: refused.
    with pytest.raises(RemovalRefusedError, match="quorum of 3"):
        plan_removal(cluster, observed(4))


def test_a_removal_below_the_replicas_needs_is_refused() -> None:
    cluster = build_cluster(open_nodes(4, absent=(4,)))
    replicas = {"logs": index(3), "small": index(0), ".system": index(3, auto_expand="0-all")}
    with pytest.raises(RemovalRefusedError) as caught:
        plan_removal(cluster, observed(4, replicas))
    message = str(caught.value)
    assert "os-4" in message
    assert "3 data node(s)" in message
    assert "index logs needs 4" in message
    assert "number_of_replicas" in message


def test_auto_expanding_indices_need_no_fixed_number_of_nodes() -> None:
    cluster = build_cluster(open_nodes(4, absent=(4,)))
    replicas = {".opendistro_security": index(3, auto_expand="0-all"), "logs": index(2)}
    assert plan_removal(cluster, observed(4, replicas))["names"] == ["os-4"]


def test_a_node_that_is_not_a_member_is_removed_without_a_check() -> None:
    cluster = build_cluster(open_nodes(3, absent=(2, 3)))
    removal = plan_removal(cluster, observed(1))
    assert removal["nodes"]["os-2"]["member"] is False


def test_every_node_absent_is_an_inventory_error() -> None:
    with pytest.raises(InventoryError, match="keep at least one node present"):
        build_cluster(open_nodes(2, absent=(1, 2)))


def test_node_state_takes_present_or_absent_only() -> None:
    with pytest.raises(InventoryError, match="opensearch_node_state"):
        build_cluster(open_nodes(2, os_2={"opensearch_node_state": "gone"}))


# -- scripts/up --nodes ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "count"), [("1", 1), ("3", 3), ("5", 5), ("6", 6), ("9", 9)])
def test_nodes_takes_one_to_nine(text: str, count: int) -> None:
    assert node_count(text) == count


@pytest.mark.parametrize("text", ["0", "10", "-1", "three", "", "2.5", "03"])
def test_a_bad_nodes_value_names_the_option(text: str) -> None:
    with pytest.raises(
        argparse.ArgumentTypeError, match="--nodes takes a whole number from 1 to 9"
    ):
        node_count(text)


def test_scripts_up_refuses_a_bad_nodes_value_before_doing_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterforge.lab.__main__ import main
    from clusterforge.lab.cluster import Lab

    def no_docker(self: Lab) -> str:
        # A value the flag accepts would bring a real lab up (and take over the
        # machine's one lab): fail instead of reaching docker.
        pytest.fail("scripts/up accepted the value and reached docker")

    monkeypatch.setattr(Lab, "prepare", no_docker)

    with pytest.raises(SystemExit) as exited:
        main(["up", "--nodes", "10"])
    assert exited.value.code == 2
    assert "--nodes takes a whole number from 1 to 9, not '10'" in capsys.readouterr().err


def test_a_removal_is_refused_when_the_replicas_could_not_be_read() -> None:
    cluster = build_cluster(open_nodes(4, absent=(4,)))
    seen = observed(4)
    seen["os-1"] = {**seen["os-1"], "index_settings": None}
    with pytest.raises(RemovalRefusedError, match="did not answer GET /_settings"):
        plan_removal(cluster, seen)


def _tasks_with_until(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for task in tasks:
        found += _tasks_with_until(task.get("block") or [])
        if "until" in task:
            found.append(task)
    return found


def test_a_preview_of_a_removal_waits_for_no_shard_move() -> None:
    """In check mode the drain's exclusion (a write) is skipped, so no shard ever moves:
    a wait for the node to empty would retry for 15 minutes and fail the preview (seen on
    the 9-node lab). Every wait of the drain that a skipped write would have to bring
    about is skipped in check mode; the nodes-gone wait already was."""
    drain = Path(__file__).resolve().parents[1] / "roles/opensearch_decommission/tasks/drain.yml"
    waits = _tasks_with_until(yaml.safe_load(drain.read_text()))
    assert [task["name"] for task in waits] == [
        "Wait until this node holds no shard",
        "Wait until the cluster no longer lists this node",
    ]
    for task in waits:
        conditions = task.get("when")
        conditions = conditions if isinstance(conditions, list) else [conditions]
        assert "not ansible_check_mode" in conditions, task["name"]


def test_a_whole_zone_leaving_pauses_awareness_for_the_drain() -> None:
    """Awareness counts a zone while any of its nodes is in the cluster, so the zones
    that stay could not take a leaving zone's copies (the 9-node lab's zone-c drain never
    ended): the drain settings pause awareness then, and only then."""
    zones = {f"os_{i}": {"opensearch_zone": f"zone-{'abc'[(i - 1) % 3]}"} for i in range(1, 7)}
    removal = plan_removal(build_cluster(open_nodes(6, absent=(3, 6), **zones)), observed(6))
    assert removal["zones_leaving"] == ["zone-c"]
    assert removal["drain_settings"] == {
        "cluster.routing.allocation.exclude._name": "os-3,os-6",
        "cluster.routing.allocation.awareness.attributes": "",
    }
    # One node of zone-c stays: the zone can still hold copies, awareness stays on.
    removal = plan_removal(build_cluster(open_nodes(6, absent=(6,), **zones)), observed(6))
    assert removal["zones_leaving"] == []
    assert removal["drain_settings"] == {"cluster.routing.allocation.exclude._name": "os-6"}


# -- a scale-in killed halfway, judged again by its rerun (issue 50, finding 3) --------


def lab_shrink_inventory() -> Any:
    """The hosts scripts/up writes for `--nodes 2` on a 3-node lab, for the first run and
    for its rerun alike: os-3 marked absent, and os-2 data and ingest only (two
    cluster-manager-eligible nodes survive the loss of neither)."""
    from clusterforge.lab.lab_inventory import inventory_groups
    from clusterforge.lab.topology import LabNode

    nodes = [LabNode(f"os-{i}", f"127.0.0.{10 + i}", 22) for i in (1, 2, 3)]
    hosts = inventory_groups(nodes, absent=("os-3",))["opensearch"]["hosts"]
    return [
        (name, {**hostvars, "opensearch_security_mode": "open"}) for name, hostvars in hosts.items()
    ]


ELIGIBLE = ["cluster_manager", "data", "ingest"]


def shrink_observed(
    os_2_roles: list[str], voting: dict[str, Any] | None, excluded: str | None = None
) -> dict[str, Any]:
    seen = {
        "active": True,
        "cluster_nodes": [
            {"id": "id-1", "name": "os-1", "roles": ELIGIBLE},
            {"id": "id-2", "name": "os-2", "roles": os_2_roles},
            {"id": "id-3", "name": "os-3", "roles": ELIGIBLE},
        ],
        "index_settings": {"drill-writes": index(1)},
        "voting": voting,
        "persistent_settings": (
            {} if excluded is None else {"cluster.routing.allocation.exclude._name": excluded}
        ),
    }
    return {f"os-{i}": seen for i in (1, 2, 3)}


ALL_VOTE = {"last_committed_config": ["id-1", "id-2", "id-3"], "voting_config_exclusions": []}
# What OpenSearch 2.19.4 holds once os-2 rejoined without the manager role, seen on the lab
# (issue 50, finding 3): the configuration shrank to the elected manager, os-3, alone.
SHRUNK_VOTE = {"last_committed_config": ["id-3"], "voting_config_exclusions": []}


def test_the_lab_writes_the_same_shrink_inventory_for_the_first_run_and_its_rerun() -> None:
    cluster = build_cluster(lab_shrink_inventory())
    assert [node.inventory_name for node in cluster.removed_nodes] == ["os-3"]
    roles = {node.inventory_name: node.cluster_manager_eligible for node in cluster.nodes}
    assert roles == {"os-1": True, "os-2": False}


def test_a_first_run_of_the_lab_shrink_is_allowed() -> None:
    cluster = build_cluster(lab_shrink_inventory())
    removal = plan_removal(cluster, shrink_observed(ELIGIBLE, ALL_VOTE))
    assert removal["names"] == ["os-3"]
    # The mark site.yml sets before any node restarts, and the drain sets again.
    assert removal["drain_settings"] == {"cluster.routing.allocation.exclude._name": "os-3"}


def test_the_rerun_of_a_shrink_killed_after_the_demotion_finishes_it() -> None:
    # The killed run had begun the removal (the exclusion) before its rolling restart
    # took the manager role from os-2; the engine then shrank its voting configuration to
    # os-3. Judged again on those roles, the removal would leave 1 of 2 managers.
    cluster = build_cluster(lab_shrink_inventory())
    removal = plan_removal(cluster, shrink_observed(["data", "ingest"], SHRUNK_VOTE, "os-3"))
    assert removal["names"] == ["os-3"]
    assert removal["nodes"]["os-3"]["member"] is True
    assert removal["drain_settings"] == {"cluster.routing.allocation.exclude._name": "os-3"}


def test_without_the_mark_of_a_begun_removal_the_same_cluster_is_judged_on_its_roles() -> None:
    # No exclusion: no run began this removal, and 1 of 2 managers is no quorum.
    cluster = build_cluster(lab_shrink_inventory())
    with pytest.raises(RemovalRefusedError, match=r"1 of the cluster.s 2 .*quorum of 2"):
        plan_removal(cluster, shrink_observed(["data", "ingest"], SHRUNK_VOTE))
    # An exclusion of other nodes is not the mark of this removal.
    with pytest.raises(RemovalRefusedError, match="quorum of 2"):
        plan_removal(cluster, shrink_observed(["data", "ingest"], SHRUNK_VOTE, "os-9"))


def test_a_begun_removal_still_keeps_one_cluster_manager() -> None:
    # Even begun, a removal that leaves the cluster, as it runs now, no
    # cluster-manager-eligible node is refused (os-2 gets the role only at its restart).
    data_only = {"opensearch_node_roles": ["data", "ingest"]}
    cluster = build_cluster(open_nodes(3, absent=(1,), os_3=data_only))
    seen = shrink_observed(["data", "ingest"], {"last_committed_config": ["id-1"]}, "os-1")
    for value in seen.values():
        value["cluster_nodes"][2]["roles"] = ["data", "ingest"]
    with pytest.raises(RemovalRefusedError, match="no cluster-manager-eligible node"):
        plan_removal(cluster, seen)


def test_the_rerun_of_a_shrink_killed_after_the_voting_exclusion_finishes_it() -> None:
    # os-3 has given its vote up already: the configuration is os-1 alone.
    voting = {
        "last_committed_config": ["id-1"],
        "voting_config_exclusions": [{"node_id": "id-3", "node_name": "os-3"}],
    }
    cluster = build_cluster(lab_shrink_inventory())
    assert plan_removal(cluster, shrink_observed(["data", "ingest"], voting))["names"] == ["os-3"]


def test_without_the_voting_configuration_the_rerun_is_refused_as_before() -> None:
    # The read failed: the roles alone are counted, and the plan refuses rather than guess.
    cluster = build_cluster(lab_shrink_inventory())
    with pytest.raises(RemovalRefusedError, match=r"1 of the cluster.s 2 .*quorum of 2"):
        plan_removal(cluster, shrink_observed(["data", "ingest"], None))


def test_counting_voters_still_refuses_two_of_three_managers_at_once() -> None:
    # Two of three eligible nodes leave, neither excluded from voting yet: refused, with
    # the configuration read as without it.
    cluster = build_cluster(open_nodes(3, absent=(2, 3)))
    seen = observed(3, cluster=[{"id": f"id-{i}", **m} for i, m in enumerate(members(3), 1)])
    seen = {host: {**value, "voting": ALL_VOTE} for host, value in seen.items()}
    with pytest.raises(RemovalRefusedError, match="1 of the cluster's 3"):
        plan_removal(cluster, seen)


def test_every_node_gets_one_and_the_same_tls_configuration(tmp_path: Path) -> None:
    # The tls molecule scenario grades one node's TLS ports for the three
    # (molecule/tls/day2_tls_grades.yml, which also compares the running nodes' files):
    # that holds because the plan renders the same TLS settings for every node.
    plan = build_plan(tls_nodes(tmp_path, ("os-1", "os-2", "os-3")), fetch=False)
    tls = [
        {
            key: value
            for key, value in yaml.safe_load(plan["nodes"][host]["files"]["opensearch.yml"]).items()
            if key.startswith("plugins.security.ssl.")
        }
        for host in ("os-1", "os-2", "os-3")
    ]
    assert tls[0]["plugins.security.ssl.http.enabled_protocols"]
    assert tls[0]["plugins.security.ssl.transport.enabled_ciphers"]
    assert tls[1] == tls[0]
    assert tls[2] == tls[0]
