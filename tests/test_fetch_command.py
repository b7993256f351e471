"""clusterforge fetch: the artifact cache filled for an inventory, no host touched.

The engine is a stand-in zip (``opensearch_distribution_source: file``) and the plugins
are local zips with real descriptors, so no network is needed; the cache is a temporary
directory (CLUSTERFORGE_CACHE)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from clusterforge.cli import main

VERSION = "2.19.4"


def plugin_zip(path: Path, name: str, opensearch_version: str = VERSION) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr(
            "plugin-descriptor.properties",
            f"name={name}\nversion={opensearch_version}.0\nopensearch.version={opensearch_version}\n",
        )
    return path


def engine_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr(f"opensearch-{VERSION}/lib/lucene-core-9.12.3.jar", b"stand-in")
    return path


def inventory(root: Path, group_vars: str) -> Path:
    directory = root / "inventory"
    (directory / "group_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text(
        "all:\n  children:\n    opensearch:\n      hosts:\n"
        "        os-1: {ansible_host: 10.0.0.1}\n        os-2: {ansible_host: 10.0.0.2}\n"
        "        os-3: {ansible_host: 10.0.0.3}\n"
    )
    (directory / "group_vars" / "opensearch.yml").write_text(group_vars)
    return directory


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CLUSTERFORGE_CACHE", str(directory))
    return directory


def stand_in_inventory(root: Path) -> Path:
    engine = engine_zip(root / "engine.zip")
    security = plugin_zip(root / "security.zip", "opensearch-security")
    analyzer = plugin_zip(root / "analyzer.zip", "analysis-stand-in")
    return inventory(
        root,
        f"opensearch_security_mode: open\n"
        f"opensearch_version: '{VERSION}'\n"
        "opensearch_distribution_source: file\n"
        f"opensearch_distribution_path: {engine}\n"
        f"opensearch_security_plugin_path: {security}\n"
        "opensearch_plugins:\n"
        f"  - {{name: analysis-stand-in, source: file, path: {analyzer}}}\n",
    )


def test_fetch_copies_the_engine_into_the_cache_then_finds_it_cached(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory_dir = stand_in_inventory(tmp_path)

    assert main(["fetch", "--inventory", str(inventory_dir)]) == 0
    first = capsys.readouterr().out.splitlines()
    cached_engine = cache / f"opensearch-{VERSION}-file.zip"
    assert cached_engine.read_bytes() == (tmp_path / "engine.zip").read_bytes()
    assert first == [
        f"{cached_engine}  fetched  (engine {VERSION})",
        f"{tmp_path / 'security.zip'}  local file  (plugin opensearch-security {VERSION}.0)",
        f"{tmp_path / 'analyzer.zip'}  local file  (plugin analysis-stand-in {VERSION}.0)",
    ]

    assert main(["fetch", "--inventory", str(inventory_dir)]) == 0
    second = capsys.readouterr().out.splitlines()
    assert second[0] == f"{cached_engine}  cached  (engine {VERSION})"
    assert sorted(path.name for path in cache.iterdir()) == [cached_engine.name]


@pytest.mark.parametrize(
    ("group_vars", "named"),
    [
        ("opensearch_version: '2.19'\n", "opensearch_version"),
        ("opensearch_distribution_source: file\n", "opensearch_distribution_path"),
        ("opensearch_distribution_source: nexus\n", "opensearch_distribution_source"),
        (
            "opensearch_distribution_source: file\n"
            "opensearch_distribution_path: /nonexistent/engine.zip\n",
            "opensearch_distribution_path",
        ),
    ],
)
def test_fetch_refuses_a_bad_inventory_naming_the_variable(
    tmp_path: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    group_vars: str,
    named: str,
) -> None:
    # Open, so that the one problem is the variable named (tls wants passwords too).
    bad = inventory(tmp_path, "opensearch_security_mode: open\n" + group_vars)
    assert main(["fetch", "--inventory", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if line.startswith("clusterforge: error")]
    assert errors, captured.err
    assert any(named in line for line in errors), errors
    assert not cache.exists() or not any(cache.iterdir())


def test_fetch_refuses_a_plugin_built_for_another_engine(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory_dir = stand_in_inventory(tmp_path)
    plugin_zip(tmp_path / "analyzer.zip", "analysis-stand-in", opensearch_version="2.19.3")

    assert main(["fetch", "--inventory", str(inventory_dir)]) == 1
    assert "built for OpenSearch 2.19.3, but the engine is 2.19.4" in capsys.readouterr().err


def test_fetch_names_the_group_without_hosts(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory_dir = stand_in_inventory(tmp_path)

    assert main(["fetch", "--inventory", str(inventory_dir), "--group", "search"]) == 1
    assert "the group 'search' has no hosts" in capsys.readouterr().err
