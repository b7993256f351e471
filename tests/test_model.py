"""The inventory model: every problem reported together, each naming its variable."""

from __future__ import annotations

from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.model_checks import heap_megabytes


def three_nodes(**overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    """Three nodes in open mode, named explicitly (tls, the default, needs passwords)."""
    nodes = []
    for index in range(1, 4):
        host_vars: dict[str, Any] = {
            "ansible_host": f"10.0.0.{index}",
            "opensearch_security_mode": "open",
        }
        host_vars.update(overrides)
        nodes.append((f"os-{index}", host_vars))
    return nodes


def problems_of(nodes: list[tuple[str, dict[str, Any]]]) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        build_cluster(nodes)
    return caught.value.problems


def test_the_default_mode_is_tls_and_needs_passwords() -> None:
    nodes = [(f"os-{i}", {"ansible_host": f"10.0.0.{i}"}) for i in (1, 2, 3)]
    problems = problems_of(nodes)
    assert all("opensearch_security_passwords." in problem for problem in problems)
    assert len(problems) == 4  # one per predefined user


def test_a_valid_inventory_builds_with_defaults() -> None:
    cluster = build_cluster(three_nodes())
    assert cluster.name == "clusterforge"
    assert cluster.version == "2.19.4"
    assert cluster.heap_size == "512m"
    assert [node.name for node in cluster.nodes] == ["os-1", "os-2", "os-3"]
    assert all(node.cluster_manager_eligible for node in cluster.nodes)
    assert cluster.warnings == ()


def test_duplicate_node_names_are_refused() -> None:
    nodes = three_nodes()
    nodes[1][1]["opensearch_node_name"] = "os-1"
    [problem] = problems_of(nodes)
    assert "node name 'os-1'" in problem and "opensearch_node_name" in problem


def test_missing_address_is_refused() -> None:
    nodes = three_nodes()
    del nodes[2][1]["ansible_host"]
    [problem] = problems_of(nodes)
    assert problem.startswith("os-3: no address") and "ansible_host" in problem


def test_duplicate_addresses_are_refused() -> None:
    nodes = three_nodes()
    nodes[1][1]["ansible_host"] = "10.0.0.1"
    [problem] = problems_of(nodes)
    assert "address 10.0.0.1" in problem and "os-1, os-2" in problem


def test_no_cluster_manager_eligible_node_is_refused() -> None:
    [problem] = problems_of(three_nodes(opensearch_node_roles=["data"]))
    assert "cluster-manager-eligible" in problem and "opensearch_node_roles" in problem


def test_an_even_number_of_cluster_managers_is_a_warning() -> None:
    nodes = three_nodes()
    nodes.append(("os-4", {**nodes[0][1], "ansible_host": "10.0.0.4"}))
    cluster = build_cluster(nodes)
    [warning] = cluster.warnings
    assert warning.startswith("4 cluster-manager-eligible nodes is an even number")


def test_exactly_two_cluster_managers_are_refused_naming_both_fixes() -> None:
    # Issue 35: two tolerate no failure at all, so the plan refuses them outright.
    nodes = three_nodes()
    nodes[2][1]["opensearch_node_roles"] = ["data"]
    nodes.append(("os-4", {**nodes[0][1], "ansible_host": "10.0.0.4"}))
    nodes[3][1]["opensearch_node_roles"] = ["data"]
    [problem] = problems_of(nodes)
    assert problem.startswith("exactly two cluster-manager-eligible nodes (os-1, os-2)")
    assert "a third node" in problem and "opensearch_node_roles: [data, ingest]" in problem


@pytest.mark.parametrize(
    ("heap", "fragment"),
    [
        ("lots", "malformed"),
        ("4 g", "malformed"),
        ("64g", "exceeds 31g"),
        ("32768m", "exceeds 31g"),
        ("64m", "below 128m"),
    ],
)
def test_bad_heap_sizes_are_refused(heap: str, fragment: str) -> None:
    [problem] = problems_of(three_nodes(opensearch_heap_size=heap))
    assert problem.startswith(f"opensearch_heap_size {heap!r}") and fragment in problem


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("XX:TieredStopAtLevel=1", "starting with '-'"),
        ("-XX:+UseG1GC -XX:+AlwaysPreTouch", "one JVM flag"),
        ("-Xmx2g", "set opensearch_heap_size instead"),
        ("-XX:MaxHeapSize=2g", "set opensearch_heap_size instead"),
    ],
)
def test_bad_jvm_options_are_refused(option: str, fragment: str) -> None:
    [problem] = problems_of(three_nodes(opensearch_jvm_options=["-XX:+UseG1GC", option]))
    assert problem.startswith(f"opensearch_jvm_options item {option!r}") and fragment in problem


def test_heap_units() -> None:
    assert heap_megabytes("512m") == 512
    assert heap_megabytes("31g") == 31 * 1024


def test_unknown_security_mode_is_refused() -> None:
    [problem] = problems_of(three_nodes(opensearch_security_mode="secure"))
    assert "opensearch_security_mode 'secure'" in problem and "open, tls, basic" in problem


@pytest.mark.parametrize("version", ["2.19", "v2.19.4", "2.19.4-SNAPSHOT", 2.19])
def test_malformed_versions_are_refused(version: Any) -> None:
    [problem] = problems_of(three_nodes(opensearch_version=version))
    assert "opensearch_version" in problem and "major.minor.patch" in problem


def test_every_problem_is_reported_together() -> None:
    nodes = three_nodes(opensearch_heap_size="64g", opensearch_security_mode="x")
    nodes[1][1]["opensearch_node_name"] = "os-1"
    problems = problems_of(nodes)
    assert len(problems) == 3
    message = str(InventoryError(problems))
    assert message.startswith("the inventory has 3 problem(s)")


def test_a_cluster_wide_variable_must_agree_on_every_node() -> None:
    nodes = three_nodes()
    nodes[0][1]["opensearch_cluster_name"] = "blue"
    [problem] = problems_of(nodes)
    assert problem.startswith("opensearch_cluster_name differs between nodes")
    assert "group_vars" in problem


def test_extra_settings_may_not_override_managed_keys() -> None:
    [problem] = problems_of(three_nodes(opensearch_extra_settings={"cluster.name": "x"}))
    assert "'cluster.name'" in problem and "opensearch_extra_settings" in problem


def test_file_source_needs_a_path() -> None:
    [problem] = problems_of(three_nodes(opensearch_distribution_source="file"))
    assert "opensearch_distribution_path" in problem


def test_unknown_node_role_is_refused() -> None:
    problems = problems_of(three_nodes(opensearch_node_roles=["cluster_manager", "boss"]))
    assert len(problems) == 3
    for index, problem in enumerate(problems, start=1):
        assert problem.startswith(f"os-{index}: opensearch_node_roles has unknown entries boss")
        assert "cluster_manager" in problem  # the known roles are listed


def test_empty_group_is_refused() -> None:
    assert "empty" in problems_of([])[0]


def test_subclassed_strings_and_lists_become_plain_values() -> None:
    class TaggedStr(str):
        pass

    class TaggedList(list):  # type: ignore[type-arg]
        pass

    cluster = build_cluster(
        three_nodes(opensearch_node_roles=TaggedList([TaggedStr("cluster_manager")]))
    )
    assert type(cluster.nodes[0].roles[0]) is str
