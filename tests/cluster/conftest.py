"""Client tests against a running cluster, described by a lab.json-shaped file.

They run inside molecule's verify step and against the lab (`CLUSTERFORGE_CLUSTER_JSON=
inventories/lab/lab.json pytest tests/cluster`). Without that variable they skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch


@pytest.fixture(scope="session")
def cluster() -> dict[str, Any]:
    path = os.environ.get("CLUSTERFORGE_CLUSTER_JSON")
    if not path:
        pytest.skip(
            "no cluster to talk to: set CLUSTERFORGE_CLUSTER_JSON to a lab.json "
            "(scripts/up writes inventories/lab/lab.json; molecule verify sets it)"
        )
    loaded: dict[str, Any] = json.loads(Path(path).read_text())
    return loaded


def client_for(cluster: dict[str, Any], url: str) -> OpenSearch:
    return OpenSearch(hosts=[url], timeout=30)


@pytest.fixture(scope="session")
def clients(cluster: dict[str, Any]) -> list[OpenSearch]:
    return [client_for(cluster, node["url"]) for node in cluster["nodes"]]
