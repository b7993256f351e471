"""Engine archives from the tarball and file sources: fetched once, checked, never half-kept.

The official tarball cannot be downloaded here, so these tests serve a stand-in archive
(a small tar.gz made by the test, named as one) through file:// URLs, which take the
same download and checksum path as https://.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clusterforge.errors import ArtifactError
from clusterforge.plan.cluster import artifacts
from clusterforge.plan.cluster.artifacts import fetch_engine
from clusterforge.plan.cluster.model import Distribution
from clusterforge.plan.cluster.plugins import lucene_version_of

VERSION = "2.19.4"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERFORGE_CACHE", str(tmp_path / "cache"))


def stand_in_tarball(directory: Path) -> Path:
    """A stand-in for opensearch-<v>-linux-x64.tar.gz: the layout, not the engine."""
    path = directory / f"opensearch-{VERSION}-linux-x64.tar.gz"
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in {
            f"opensearch-{VERSION}/bin/opensearch": b"#!/bin/sh\n",
            f"opensearch-{VERSION}/lib/lucene-core-9.12.3.jar": b"jar",
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return path


def sha512(path: Path) -> str:
    return hashlib.sha512(path.read_bytes()).hexdigest()


def test_a_tarball_url_is_fetched_once_and_checked_against_its_published_sha512(
    tmp_path: Path,
) -> None:
    archive = stand_in_tarball(tmp_path)
    Path(f"{archive}.sha512").write_text(f"{sha512(archive)}  {archive.name}\n")
    distribution = Distribution(source="tarball", version=VERSION, url=archive.as_uri())
    first = fetch_engine(distribution)
    assert first.fetched and first.path.read_bytes() == archive.read_bytes()
    second = fetch_engine(distribution)
    assert not second.fetched and second.path == first.path
    assert lucene_version_of(first.path) == "9.12.3"


def test_a_wrong_checksum_keeps_nothing(tmp_path: Path) -> None:
    archive = stand_in_tarball(tmp_path)
    distribution = Distribution(
        source="tarball", version=VERSION, url=archive.as_uri(), sha512="0" * 128
    )
    with pytest.raises(ArtifactError, match="sha512"):
        fetch_engine(distribution)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_published_checksum_names_the_variable(tmp_path: Path) -> None:
    archive = stand_in_tarball(tmp_path)
    distribution = Distribution(source="tarball", version=VERSION, url=archive.as_uri())
    with pytest.raises(ArtifactError, match="opensearch_distribution_sha512"):
        fetch_engine(distribution)


def test_a_local_file_is_copied_into_the_cache_and_checked(tmp_path: Path) -> None:
    archive = stand_in_tarball(tmp_path)
    fetched = fetch_engine(
        Distribution(source="file", version=VERSION, path=str(archive), sha512=sha512(archive))
    )
    assert fetched.path.name.endswith(".tar.gz")
    assert fetched.path.read_bytes() == archive.read_bytes()
    with pytest.raises(ArtifactError, match="not a file"):
        fetch_engine(Distribution(source="file", version="2.19.3", path=str(tmp_path / "none")))


def test_concurrent_fetches_of_one_archive_download_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two molecule scenarios run their plans at the same time and share the cache.
    archive = stand_in_tarball(tmp_path)
    distribution = Distribution(
        source="tarball", version=VERSION, url=archive.as_uri(), sha512=sha512(archive)
    )
    downloads: list[str] = []
    real_download = artifacts._download

    def slow_download(url: str, destination: Path) -> None:
        downloads.append(url)
        time.sleep(0.2)  # long enough for every other thread to reach the cache
        real_download(url, destination)

    monkeypatch.setattr(artifacts, "_download", slow_download)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: fetch_engine(distribution), range(4)))
    assert downloads == [archive.as_uri()]
    assert sorted(result.fetched for result in results) == [False, False, False, True]
    assert {result.path for result in results} == {results[0].path}
    assert results[0].path.read_bytes() == archive.read_bytes()
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [results[0].path.name]
