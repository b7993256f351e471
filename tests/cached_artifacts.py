"""Engine and security-plugin archives for tests, fetched through the library's own cache.

Fetching goes through ``mvn`` exactly as the playbook does, so a fresh CI machine runs
the Java cross-checks for real; without Maven or its repository they skip and say why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.errors import ArtifactError
from clusterforge.plan.cluster.artifacts import fetch_engine, fetch_maven_artifact
from clusterforge.plan.cluster.model import Distribution
from clusterforge.plan.cluster.plugins import SECURITY_PLUGIN_COORDINATES

ENGINE_VERSION = "2.19.4"


def security_plugin_zip() -> Path:
    try:
        return fetch_maven_artifact(SECURITY_PLUGIN_COORDINATES, f"{ENGINE_VERSION}.0", "zip").path
    except ArtifactError as error:
        pytest.skip(f"the security plugin zip is not available: {error}")


def engine_zip() -> Path:
    try:
        return fetch_engine(Distribution(source="maven", version=ENGINE_VERSION)).path
    except ArtifactError as error:
        pytest.skip(f"the engine zip is not available: {error}")
