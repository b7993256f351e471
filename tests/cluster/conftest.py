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


def admin_password(cluster: dict[str, Any]) -> str:
    return Path(cluster["admin_password_file"]).read_text().strip()


def client_for(
    cluster: dict[str, Any], url: str, *, auth: tuple[str, str] | bool | None = True
) -> OpenSearch:
    """A client for one node: the CA verified with hostname checks in tls mode, the admin
    user in secured modes (``auth=False`` for none, or a (user, password) pair)."""
    options: dict[str, Any] = {"hosts": [url], "timeout": 30}
    if cluster["mode"] == "tls":
        options.update(use_ssl=True, verify_certs=True, ca_certs=cluster["ca_cert"])
    if cluster["mode"] != "open" and auth is not False:
        options["http_auth"] = (
            auth if isinstance(auth, tuple) else (cluster["admin_user"], admin_password(cluster))
        )
    return OpenSearch(**options)


@pytest.fixture(scope="session")
def clients(cluster: dict[str, Any]) -> list[OpenSearch]:
    return [client_for(cluster, node["url"]) for node in cluster["nodes"]]
