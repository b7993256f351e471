"""Rendered node files: what the role copies and scripts/render writes."""

from __future__ import annotations

from typing import Any

import yaml

from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.render import render_node_files
from clusterforge.plan.plan import build_plan


def nodes(**overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    # Open mode named explicitly: tls is the default, and these cases need no PKI.
    common = {"opensearch_security_mode": "open", **overrides}
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{10 + i}", **common}) for i in (1, 2, 3)]


def settings_of(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def test_opensearch_yml_carries_the_spec_keys() -> None:
    cluster = build_cluster(nodes(opensearch_cluster_name="blue"))
    files = render_node_files(cluster, cluster.nodes[1])
    settings = settings_of(files["opensearch.yml"])
    assert settings["cluster.name"] == "blue"
    assert settings["node.name"] == "os-2"
    assert settings["network.host"] == "127.0.0.12"
    assert settings["network.publish_host"] == "127.0.0.12"
    assert settings["http.port"] == 9200
    assert settings["transport.port"] == 9300
    assert settings["discovery.seed_hosts"] == [
        "127.0.0.11:9300",
        "127.0.0.12:9300",
        "127.0.0.13:9300",
    ]
    assert settings["discovery.initial_state_timeout"] == "10m"
    assert settings["path.data"] == "/var/lib/opensearch"
    assert settings["path.repo"] == ["/var/backups/opensearch"]
    assert "cluster.initial_cluster_manager_nodes" not in settings
    assert files["opensearch.yml"].startswith("# Managed by clusterforge")


def test_first_start_names_the_cluster_manager_eligible_nodes() -> None:
    cluster = build_cluster(nodes())
    settings = settings_of(
        render_node_files(cluster, cluster.nodes[0])["opensearch.first-start.yml"]
    )
    assert settings["cluster.initial_cluster_manager_nodes"] == ["os-1", "os-2", "os-3"]


def test_cors_uses_the_spec_sample_headers() -> None:
    cluster = build_cluster(
        nodes(opensearch_cors_enabled=True, opensearch_cors_allow_origin="https://console.test")
    )
    settings = settings_of(render_node_files(cluster, cluster.nodes[0])["opensearch.yml"])
    assert settings["http.cors.enabled"] is True
    assert settings["http.cors.allow-origin"] == "https://console.test"
    assert settings["http.cors.allow-credentials"] is True
    assert settings["http.cors.allow-headers"] == (
        "X-Requested-With, X-Auth-Token, Content-Type, Content-Length, Authorization"
    )


def test_heap_is_fixed_and_unit_has_the_limits() -> None:
    cluster = build_cluster(nodes(opensearch_heap_size="1g", opensearch_limit_nofile=20000))
    files = render_node_files(cluster, cluster.nodes[0])
    assert "-Xms1g\n-Xmx1g\n" in files["heap.options"]
    unit = files["opensearch.service"]
    assert "LimitNOFILE=20000" in unit
    assert "LimitNPROC=4096" in unit
    assert "LimitMEMLOCK=infinity" in unit
    assert "Environment=OPENSEARCH_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64" in unit


def test_jvm_options_follow_the_heap_lines_and_none_leave_the_file_as_it_was() -> None:
    plain = build_cluster(nodes())
    plain_heap = render_node_files(plain, plain.nodes[0])["heap.options"]
    # The default adds nothing: a toolkit upgrade must not restart every node.
    assert "opensearch_jvm_options" not in plain_heap
    assert plain_heap.endswith("/hs_err_pid%p.log\n")
    tuned = build_cluster(nodes(opensearch_jvm_options=["-XX:TieredStopAtLevel=1", "-Dx.y=z"]))
    tuned_heap = render_node_files(tuned, tuned.nodes[0])["heap.options"]
    assert tuned_heap == plain_heap + (
        "# opensearch_jvm_options\n-XX:TieredStopAtLevel=1\n-Dx.y=z\n"
    )


def test_the_tarball_uses_its_bundled_jdk() -> None:
    cluster = build_cluster(nodes(opensearch_distribution_source="tarball"))
    unit = render_node_files(cluster, cluster.nodes[0])["opensearch.service"]
    assert "OPENSEARCH_JAVA_HOME" not in unit


def test_the_engine_tools_get_the_jdk_the_config_and_the_short_lived_jvm_options() -> None:
    maven = build_plan(nodes(), fetch=False)["cluster"]["tool_environment"]
    tarball = build_plan(nodes(opensearch_distribution_source="tarball"), fetch=False)["cluster"][
        "tool_environment"
    ]
    assert maven["OPENSEARCH_JAVA_HOME"] == "/usr/lib/jvm/java-17-openjdk-amd64"
    assert tarball["OPENSEARCH_JAVA_HOME"] == ""  # the archive's bundled JDK
    for environment in (maven, tarball):
        assert environment["OPENSEARCH_PATH_CONF"] == "/etc/opensearch"
        assert environment["OPENSEARCH_JAVA_OPTS"] == "-XX:TieredStopAtLevel=1"


def test_extra_settings_are_rendered() -> None:
    cluster = build_cluster(
        nodes(opensearch_extra_settings={"indices.query.bool.max_clause_count": 2048})
    )
    settings = settings_of(render_node_files(cluster, cluster.nodes[0])["opensearch.yml"])
    assert settings["indices.query.bool.max_clause_count"] == 2048


def test_rendering_is_deterministic() -> None:
    first = build_plan(nodes(), fetch=False)
    second = build_plan(nodes(), fetch=False)
    assert first == second
    assert first["cluster"]["nodes"][0]["url"] == "http://127.0.0.11:9200"
