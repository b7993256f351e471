"""Version-matched plugins on every node, and the Chinese analyzer answering on each."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conftest import client_for
from opensearchpy import OpenSearch

SENTENCE = "我们是中国人民的好朋友"
WORDS = ["我们", "是", "中国", "人民", "的", "好", "朋友"]


def test_every_node_lists_each_plugin_at_the_engine_version(
    cluster: dict[str, Any], clients: list[OpenSearch]
) -> None:
    table = clients[0].cat.plugins(v=True)
    rows = [line.split() for line in table.splitlines()[1:] if line.strip()]
    by_node: dict[str, dict[str, str]] = {}
    for node, component, version in rows:
        by_node.setdefault(node, {})[component] = version
    assert set(by_node) == {node["name"] for node in cluster["nodes"]}
    expected = list(cluster.get("plugins") or [])
    if cluster["mode"] != "open":
        expected.append("opensearch-security")
    for plugins in by_node.values():
        for name in expected:
            assert name in plugins, f"{name} missing: {plugins}"
            assert plugins[name].startswith(cluster["version"]), plugins


def test_smartcn_segments_the_sentence_on_every_node(cluster: dict[str, Any]) -> None:
    if "analysis-smartcn" not in (cluster.get("plugins") or []):
        pytest.skip("this cluster has no analysis-smartcn")
    for node in cluster["nodes"]:
        client = client_for(cluster, node["url"])
        tokens = client.indices.analyze(body={"analyzer": "smartcn", "text": SENTENCE})
        assert [token["token"] for token in tokens["tokens"]] == WORDS, node["name"]


def test_an_index_using_smartcn_finds_a_document_by_a_word(
    cluster: dict[str, Any], clients: list[OpenSearch]
) -> None:
    if "analysis-smartcn" not in (cluster.get("plugins") or []):
        pytest.skip("this cluster has no analysis-smartcn")
    index = f"clusterforge-smartcn-{uuid.uuid4().hex[:8]}"
    clients[0].indices.create(
        index=index,
        body={
            "settings": {"number_of_shards": 1, "number_of_replicas": 1},
            "mappings": {"properties": {"content": {"type": "text", "analyzer": "smartcn"}}},
        },
    )
    try:
        clients[0].index(index=index, body={"content": SENTENCE}, refresh="true")
        clients[0].index(index=index, body={"content": "今天天气很好"}, refresh="true")
        for client in clients:
            hits = client.search(index=index, body={"query": {"match": {"content": "朋友"}}})
            assert hits["hits"]["total"]["value"] == 1
            assert hits["hits"]["hits"][0]["_source"]["content"] == SENTENCE
    finally:
        clients[0].indices.delete(index=index)
