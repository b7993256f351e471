"""Engine and plugin archives, fetched once into the control node's cache.

Hosts never download anything: the roles copy archives from this cache. Three sources:

- ``maven``: resolved with ``mvn dependency:copy --strict-checksums``. Maven names its
  default repository itself and honours the user's settings.xml mirrors, so no repository
  address lives in this code. That archive carries one module, so the engine's standard
  modules are assembled into a copy of it (``clusterforge.plan.cluster.engine_modules``).
- ``tarball``: the official release tarball from a URL, checked against its sha512 (given
  in the inventory, or read from the ``.sha512`` file published beside it).
- ``file``: an archive already on the control node.

Several plays may fill the cache at once (two molecule scenarios in parallel, or an
operator's second terminal): every fetch or build holds the cache's lock while it looks
and writes, so the second one waits and then finds the first one's file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clusterforge.errors import ArtifactError
from clusterforge.plan.cluster.engine_modules import assemble_engine, assembled_archive_name
from clusterforge.plan.cluster.model import Distribution

ENGINE_MAVEN_COORDINATES = "org.opensearch.distribution.integ-test-zip:opensearch"
DOWNLOAD_TIMEOUT_S = 60


def cache_dir() -> Path:
    """The artifact cache: $CLUSTERFORGE_CACHE, else ~/.cache/clusterforge/artifacts."""
    configured = os.environ.get("CLUSTERFORGE_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache/clusterforge/artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return base


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` itself until the block ends.

    The directory is its own lock, so no lock file is left among what it holds."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


@contextmanager
def cache_lock() -> Iterator[None]:
    """Hold the cache's lock until the block ends.

    Taken before looking for a target, so a run that waited finds the file the other run
    wrote instead of fetching or building it a second time."""
    with directory_lock(cache_dir()):
        yield


@dataclass(frozen=True)
class FetchedArtifact:
    path: Path
    fetched: bool  # False when the cache already had it


def file_digest(path: Path, algorithm: str) -> str:
    """The hex digest of a file's bytes, read in blocks (archives are large)."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, algorithm).hexdigest()


def sha512_of(path: Path) -> str:
    return file_digest(path, "sha512")


def fetch_maven_artifact(coordinates: str, version: str, packaging: str) -> FetchedArtifact:
    """Fetch ``group:artifact`` at ``version`` with mvn into the cache, once."""
    group, artifact = coordinates.split(":")
    target = cache_dir() / f"{group}.{artifact}-{version}.{packaging}"
    with cache_lock():
        return _fetch_maven_artifact_locked(group, artifact, version, packaging, target)


def _fetch_maven_artifact_locked(
    group: str, artifact: str, version: str, packaging: str, target: Path
) -> FetchedArtifact:
    if target.exists():
        return FetchedArtifact(target, fetched=False)
    if shutil.which("mvn") is None:
        raise ArtifactError(
            "mvn is not installed; install Maven (Debian: apt-get install maven) or choose "
            "opensearch_distribution_source: tarball or file"
        )
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".mvn-") as workdir:
        command = [
            "mvn",
            "--batch-mode",
            "--quiet",
            "--strict-checksums",
            "dependency:copy",
            f"-Dartifact={group}:{artifact}:{version}:{packaging}",
            f"-DoutputDirectory={workdir}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        produced = list(Path(workdir).glob(f"*.{packaging}"))
        if result.returncode != 0 or len(produced) != 1:
            output = (result.stdout + result.stderr).strip()[-1500:]
            raise ArtifactError(
                f"mvn could not fetch {group}:{artifact}:{version}:{packaging}; check the "
                f"version exists and Maven can reach its repository or your mirror:\n{output}"
            )
        produced[0].replace(target)
    return FetchedArtifact(target, fetched=True)


def _download(url: str, destination: Path) -> None:
    if not url.startswith(("https://", "http://", "file://")):
        raise ArtifactError(
            f"{url!r} is not an http(s) or file URL; fix opensearch_distribution_url"
        )
    with (
        urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response,  # noqa: S310
        destination.open("wb") as stream,
    ):
        shutil.copyfileobj(response, stream, 1 << 20)


def _published_sha512(url: str) -> str:
    with tempfile.TemporaryDirectory() as workdir:
        checksum_file = Path(workdir) / "sha512"
        try:
            _download(f"{url}.sha512", checksum_file)
        except OSError as error:
            raise ArtifactError(
                f"no checksum at {url}.sha512 ({error}); set opensearch_distribution_sha512"
            ) from error
        return checksum_file.read_text().split()[0].strip().lower()


def _verify(path: Path, expected_sha512: str, origin: str) -> None:
    actual = sha512_of(path)
    if actual != expected_sha512.lower():
        raise ArtifactError(
            f"{origin} has sha512 {actual[:16]}..., expected {expected_sha512[:16]}...; "
            "the download is corrupt or the checksum is for another file"
        )


def fetch_url(url: str, sha512: str | None, target: Path) -> FetchedArtifact:
    """Download ``url`` into ``target`` once, verified against ``sha512`` (or the published
    ``<url>.sha512``); a failed or corrupt download leaves nothing behind."""
    with cache_lock():
        return _fetch_url_locked(url, sha512, target)


def _fetch_url_locked(url: str, sha512: str | None, target: Path) -> FetchedArtifact:
    if target.exists():
        return FetchedArtifact(target, fetched=False)
    expected = sha512 or _published_sha512(url)
    partial = target.with_suffix(target.suffix + ".partial")
    try:
        _download(url, partial)
        _verify(partial, expected, url)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise ArtifactError(f"could not download {url}: {error}") from error
    except ArtifactError:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return FetchedArtifact(target, fetched=True)


def fetch_engine(distribution: Distribution) -> FetchedArtifact:
    """Put the engine archive into the cache (once) and return its path."""
    if distribution.source == "maven":
        return _maven_engine_with_modules(distribution.version)
    target = cache_dir() / distribution.archive_name
    if distribution.source == "tarball":
        if not distribution.url:
            raise ArtifactError("opensearch_distribution_url is empty; set the tarball's URL")
        return fetch_url(distribution.url, distribution.sha512, target)
    with cache_lock():
        return _copy_engine_file_locked(distribution, target)


def _maven_engine_with_modules(version: str) -> FetchedArtifact:
    """The Maven engine archive with the distribution's standard modules, assembled once."""
    base = fetch_maven_artifact(ENGINE_MAVEN_COORDINATES, version, "zip")
    target = cache_dir() / assembled_archive_name(version)
    with cache_lock():
        if target.exists():
            return FetchedArtifact(target, fetched=base.fetched)
        assemble_engine(base.path, version, target)
    return FetchedArtifact(target, fetched=True)


def _copy_engine_file_locked(distribution: Distribution, target: Path) -> FetchedArtifact:
    if target.exists():
        return FetchedArtifact(target, fetched=False)
    partial = target.with_suffix(target.suffix + ".partial")
    if distribution.source == "file":
        source = Path(distribution.path or "")
        if not source.is_file():
            raise ArtifactError(
                f"opensearch_distribution_path {str(source)!r} is not a file on the control node"
            )
        shutil.copyfile(source, partial)
        if distribution.sha512:
            try:
                _verify(partial, distribution.sha512, str(source))
            except ArtifactError:
                partial.unlink(missing_ok=True)
                raise
    partial.replace(target)
    return FetchedArtifact(target, fetched=True)
