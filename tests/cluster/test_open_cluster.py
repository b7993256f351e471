"""The spec's REST interface, exercised with opensearch-py against a real cluster."""

from __future__ import annotations

import uuid
from typing import Any

from opensearchpy import OpenSearch

SPEC_INFO_FIELDS = (
    "name",
    "cluster_name",
    "cluster_uuid",
    "tagline",
)
SPEC_VERSION_FIELDS = (
    "distribution",
    "number",
    "build_type",
    "build_hash",
    "build_date",
    "build_snapshot",
    "lucene_version",
    "minimum_wire_compatibility_version",
    "minimum_index_compatibility_version",
)


def test_every_node_is_listed(cluster: dict[str, Any], clients: list[OpenSearch]) -> None:
    table = clients[0].cat.nodes(v=True)
    lines = [line for line in table.splitlines() if line.strip()]
    assert lines[0].split()[0] == "ip"
    names = {line.split()[-1] for line in lines[1:]}
    assert names == {node["name"] for node in cluster["nodes"]}
    assert len(lines) - 1 == 3


def test_health_is_green(clients: list[OpenSearch]) -> None:
    health = clients[0].cluster.health(wait_for_status="green")
    assert health["status"] == "green"
    assert health["number_of_nodes"] == 3


def test_cluster_information_has_every_spec_field(
    cluster: dict[str, Any], clients: list[OpenSearch]
) -> None:
    for client, node in zip(clients, cluster["nodes"], strict=True):
        info = client.info()
        for field in SPEC_INFO_FIELDS:
            assert field in info, field
        for field in SPEC_VERSION_FIELDS:
            assert field in info["version"], field
        assert info["name"] == node["name"]
        assert info["cluster_name"] == cluster["cluster_name"]
        assert info["version"]["number"] == cluster["version"]
        assert info["version"]["distribution"] == "opensearch"
        assert isinstance(info["version"]["build_snapshot"], bool)


def test_an_index_round_trip_across_nodes(clients: list[OpenSearch]) -> None:
    index = f"clusterforge-verify-{uuid.uuid4().hex[:8]}"
    first, second = clients[0], clients[1]
    created = first.indices.create(
        index=index, body={"settings": {"number_of_shards": 3, "number_of_replicas": 1}}
    )
    assert created["acknowledged"] is True
    try:
        settings = first.indices.get_settings(index=index)[index]["settings"]["index"]
        assert settings["number_of_shards"] == "3"
        assert settings["number_of_replicas"] == "1"
        document = {
            "title": "clusterforge",
            "content": "a document written on one node and read on another",
            "tags": ["verify", "molecule"],
            "timestamp": "2026-11-22T10:00:00",
        }
        written = first.index(index=index, body=document, refresh="true")
        assert written["result"] == "created"
        hits = second.search(index=index, body={"query": {"match_all": {}}})["hits"]
        assert hits["total"]["value"] == 1
        assert hits["hits"][0]["_source"] == document
    finally:
        deleted = second.indices.delete(index=index)
    assert deleted["acknowledged"] is True
    assert not first.indices.exists(index=index)
