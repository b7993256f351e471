"""Plugin descriptors: a plugin for another engine version is refused with both versions."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from clusterforge.errors import ArtifactError
from clusterforge.plan.cluster.plugins import check_plugin, read_descriptor


def plugin_zip(tmp_path: Path, descriptor: str, *, nested: bool = False) -> Path:
    path = tmp_path / "plugin.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        name = "plugin/plugin-descriptor.properties" if nested else "plugin-descriptor.properties"
        bundle.writestr(name, descriptor)
    return path


def test_an_exact_version_must_match(tmp_path: Path) -> None:
    archive = plugin_zip(
        tmp_path, "name=analysis-smartcn\nversion=2.19.3\nopensearch.version=2.19.3\n"
    )
    assert read_descriptor(archive).opensearch_version == "2.19.3"
    with pytest.raises(ArtifactError) as caught:
        check_plugin(archive, "2.19.4")
    message = str(caught.value)
    assert "analysis-smartcn" in message and "2.19.3" in message and "2.19.4" in message
    assert check_plugin(archive, "2.19.3").name == "analysis-smartcn"


@pytest.mark.parametrize(
    ("dependencies", "engine", "admitted"),
    [
        ('{ opensearch: "~2.19.0" }', "2.19.4", True),
        ('{ opensearch: "~2.19.0" }', "2.20.0", False),
        ('{ opensearch: "^2.17.0" }', "2.19.4", True),
        ('{ opensearch: "^2.17.0" }', "3.0.0", False),
        ('{ opensearch: "2.19.4" }', "2.19.4", True),
        ('{ opensearch: "2.19.4" }', "2.19.3", False),
    ],
)
def test_dependency_ranges(tmp_path: Path, dependencies: str, engine: str, admitted: bool) -> None:
    archive = plugin_zip(
        tmp_path, f"name=x\nversion=1.0\ndependencies={dependencies}\n", nested=True
    )
    assert read_descriptor(archive).admits(engine) is admitted


def test_a_zip_without_a_descriptor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr("README", "nothing")
    with pytest.raises(ArtifactError, match="not an OpenSearch plugin"):
        read_descriptor(path)


def test_the_maven_security_plugin_fits_its_engine() -> None:
    from cached_artifacts import ENGINE_VERSION, security_plugin_zip

    descriptor = check_plugin(security_plugin_zip(), ENGINE_VERSION)
    assert descriptor.name == "opensearch-security"
    with pytest.raises(ArtifactError, match=r"2\.19\.3"):
        check_plugin(security_plugin_zip(), "2.19.3")


def entry(name: str, version: str, state: str = "present") -> dict[str, str]:
    return {"name": name, "version": version, "state": state, "path": f"/cache/{name}.zip"}


def test_matching_plugins_are_left_alone() -> None:
    from clusterforge.plan.cluster.plugins import plan_plugin_changes

    changes = plan_plugin_changes(
        [entry("analysis-smartcn", "2.19.4")], {"analysis-smartcn": "2.19.4"}
    )
    assert changes == {"install": [], "remove": []}


def test_missing_other_version_and_absent_plugins() -> None:
    from clusterforge.plan.cluster.plugins import plan_plugin_changes

    wanted = [entry("a", "2.19.4"), entry("b", "2.19.4"), {"name": "c", "state": "absent"}]
    installed = {"b": "2.19.3", "c": "1.0", "opensearch-security": "2.19.4.0", "d": "1"}
    changes = plan_plugin_changes(wanted, installed)
    assert [item["name"] for item in changes["install"]] == ["a", "b"]
    assert changes["remove"] == ["b", "c"]
    unlisted = plan_plugin_changes(wanted, installed, remove_unlisted=True)
    assert unlisted["remove"] == ["b", "c", "d"]
