"""The engine's standard modules, assembled from Maven into the engine archive.

The assembly runs for real (``mvn`` through the library's own cache, as the playbook
does); the engine starting with them and answering a painless query is checked on real
clusters by tests/cluster/test_engine_modules_on_cluster.py.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from cached_artifacts import ENGINE_VERSION, engine_zip
from clusterforge.plan.cluster.engine_modules import (
    STANDARD_MODULES,
    EngineModule,
    assembled_archive_name,
    descriptor,
    jar_artifact,
    recipe_digest,
    security_policy,
)

REQUIRED = {
    "lang-painless",
    "analysis-common",
    "mapper-extras",
    "reindex",
    "ingest-common",
    "parent-join",
    "percolator",
}


def test_jar_names_give_their_artifact() -> None:
    assert jar_artifact("jackson-core-2.18.2.jar") == "jackson-core"
    assert jar_artifact("zstd-jni-1.5.5-5.jar") == "zstd-jni"
    assert jar_artifact("opensearch-scripting-painless-spi-2.19.4.jar") == (
        "opensearch-scripting-painless-spi"
    )
    assert jar_artifact("no-version.jar") is None


def test_the_descriptor_names_the_exact_engine_version_and_what_it_extends() -> None:
    module = EngineModule("analysis-common", "analysis-common", "a.B", "Analyzers")
    text = descriptor(module, version="2.19.4", extended=("lang-painless",))
    properties = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert properties["opensearch.version"] == "2.19.4"
    assert properties["version"] == "2.19.4"
    assert properties["classname"] == "a.B"
    assert properties["extended.plugins"] == "lang-painless"


def test_only_modules_that_need_permissions_get_a_policy() -> None:
    by_name = {module.name: module for module in STANDARD_MODULES}
    assert security_policy(by_name["mapper-extras"]) is None
    policy = security_policy(by_name["lang-painless"])
    assert policy is not None and 'RuntimePermission "createClassLoader"' in policy


def test_a_changed_recipe_gets_a_new_archive_name() -> None:
    changed = (*STANDARD_MODULES[:-1], EngineModule("x", "x", "x.X", "x"))
    assert recipe_digest(ENGINE_VERSION) == recipe_digest(ENGINE_VERSION)
    assert assembled_archive_name(ENGINE_VERSION) != assembled_archive_name(ENGINE_VERSION, changed)
    assert assembled_archive_name("2.19.3") != assembled_archive_name(ENGINE_VERSION)


@pytest.fixture(scope="module")
def assembled() -> Path:
    return engine_zip()


def test_the_maven_engine_carries_the_standard_modules(assembled: Path) -> None:
    with zipfile.ZipFile(assembled) as archive:
        names = archive.namelist()
        top = names[0].split("/", 1)[0]
        modules = {
            name.split("/")[2] for name in names if name.count("/") >= 3 and "/modules/" in name
        }
        assert modules >= REQUIRED
        assert "transport-netty4" in modules
        for module in modules:
            text = archive.read(f"{top}/modules/{module}/plugin-descriptor.properties").decode()
            assert f"opensearch.version={ENGINE_VERSION}" in text, module


def test_no_module_jar_duplicates_one_of_the_engine_lib(assembled: Path) -> None:
    # Two copies of a class on the class path stop the engine at start ("jar hell").
    with zipfile.ZipFile(assembled) as archive:
        names = archive.namelist()
    lib = {
        jar_artifact(name.rsplit("/", 1)[1])
        for name in names
        if "/lib/" in name and name.endswith(".jar")
    }
    for name in names:
        if "/modules/" in name and name.endswith(".jar") and "transport-netty4" not in name:
            assert jar_artifact(name.rsplit("/", 1)[1]) not in lib, name


def test_painless_extensions_name_lang_painless_and_do_not_carry_its_jars(
    assembled: Path,
) -> None:
    with zipfile.ZipFile(assembled) as archive:
        top = archive.namelist()[0].split("/", 1)[0]
        common = archive.read(f"{top}/modules/analysis-common/plugin-descriptor.properties")
        assert b"extended.plugins=lang-painless" in common
        analysis_jars = [
            name
            for name in archive.namelist()
            if name.startswith(f"{top}/modules/analysis-common/") and name.endswith(".jar")
        ]
    assert [Path(name).name for name in analysis_jars] == [f"analysis-common-{ENGINE_VERSION}.jar"]
