"""The engine's standard modules on a real cluster: loaded on every node, and working."""

from __future__ import annotations

import uuid
from typing import Any

from opensearchpy import OpenSearch

MODULES = {
    "lang-painless",
    "analysis-common",
    "mapper-extras",
    "reindex",
    "ingest-common",
    "parent-join",
    "percolator",
    "transport-netty4",
}


def test_every_node_lists_the_standard_modules(
    cluster: dict[str, Any], clients: list[OpenSearch]
) -> None:
    nodes = clients[0].nodes.info(metric="plugins")["nodes"]
    assert len(nodes) == len(cluster["nodes"])
    for node in nodes.values():
        loaded = {module["name"] for module in node["modules"]}
        assert loaded >= MODULES, (node["name"], MODULES - loaded)


def test_a_painless_script_field_reads_a_scaled_float(clients: list[OpenSearch]) -> None:
    index = f"clusterforge-modules-{uuid.uuid4().hex[:8]}"
    clients[0].indices.create(
        index=index,
        body={
            "settings": {"number_of_shards": 1, "number_of_replicas": 1},
            "mappings": {"properties": {"amount": {"type": "scaled_float", "scaling_factor": 100}}},
        },
    )
    try:
        clients[0].index(index=index, body={"amount": 12.345}, refresh="true")
        for client in clients:
            hits = client.search(
                index=index,
                body={
                    "script_fields": {
                        "doubled": {
                            "script": {"lang": "painless", "source": "doc['amount'].value * 2"}
                        }
                    }
                },
            )["hits"]["hits"]
            # 12.345 is stored in cents (1235), so the script reads 12.35.
            assert hits[0]["fields"]["doubled"] == [24.7]
    finally:
        clients[0].indices.delete(index=index)


def test_an_ingest_pipeline_with_grok_and_a_script_transforms_a_document(
    clients: list[OpenSearch],
) -> None:
    name = f"clusterforge-modules-{uuid.uuid4().hex[:8]}"
    clients[0].ingest.put_pipeline(
        id=name,
        body={
            "processors": [
                {"grok": {"field": "line", "patterns": ["%{WORD:word} %{NUMBER:count:int}"]}},
                {"uppercase": {"field": "word"}},
                {"script": {"lang": "painless", "source": "ctx.twice = ctx.count * 2"}},
            ]
        },
    )
    try:
        clients[0].index(
            index=name, id="1", body={"line": "apples 21"}, pipeline=name, refresh="true"
        )
        source = clients[0].get(index=name, id="1")["_source"]
        assert (source["word"], source["count"], source["twice"]) == ("APPLES", 21, 42)
    finally:
        clients[0].indices.delete(index=name, ignore_unavailable=True)
        clients[0].ingest.delete_pipeline(id=name)
