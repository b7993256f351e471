"""Engine plugins: reading a plugin zip's descriptor and checking it fits the engine.

A plugin must match the engine exactly: its ``plugin-descriptor.properties`` names
``opensearch.version`` (an exact version) or carries a ``dependencies`` range. A node
with a plugin of another version refuses to start, so the check runs on the control node
before any host is touched.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.errors import ArtifactError
from clusterforge.plan.cluster.artifacts import (
    FetchedArtifact,
    cache_dir,
    cache_lock,
    fetch_engine,
    fetch_maven_artifact,
    fetch_url,
)
from clusterforge.plan.cluster.model import SECURITY_PLUGIN_NAME, Cluster, PluginSpec

DESCRIPTOR = "plugin-descriptor.properties"


@dataclass(frozen=True)
class PluginDescriptor:
    name: str
    version: str
    opensearch_version: str | None
    dependencies: str | None

    def admits(self, engine_version: str) -> bool:
        if self.opensearch_version is not None:
            return self.opensearch_version == engine_version
        if self.dependencies:
            return _range_admits(self.dependencies, engine_version)
        return False

    def required(self) -> str:
        return self.opensearch_version or self.dependencies or "(nothing)"


def read_descriptor(archive: Path) -> PluginDescriptor:
    """The descriptor of a plugin zip (at its root, or in one top-level folder)."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            names = [name for name in bundle.namelist() if name.endswith(DESCRIPTOR)]
            candidates = [name for name in names if name.count("/") <= 1]
            if not candidates:
                raise ArtifactError(
                    f"{archive} has no {DESCRIPTOR}; it is not an OpenSearch plugin"
                )
            text = bundle.read(sorted(candidates, key=len)[0]).decode("utf-8")
    except zipfile.BadZipFile as error:
        raise ArtifactError(f"{archive} is not a zip file ({error})") from error
    return parse_descriptor(text, default_name=archive.stem)


def parse_descriptor(text: str, *, default_name: str = "") -> PluginDescriptor:
    """A descriptor from the text of plugin-descriptor.properties."""
    properties = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        properties[key.strip()] = value.strip()
    return PluginDescriptor(
        name=properties.get("name", default_name),
        version=properties.get("version", ""),
        opensearch_version=properties.get("opensearch.version") or None,
        dependencies=properties.get("dependencies") or None,
    )


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _range_admits(dependencies: str, engine_version: str) -> bool:
    """``{ opensearch: "~2.19.0" }`` style ranges: ~ (same minor), ^ (same major), =, plain."""
    match = re.search(r"opensearch\s*:\s*\"?\s*([~^=]?)\s*([\d.]+)", dependencies)
    if not match:
        return False
    operator, wanted = match.group(1), _version_tuple(match.group(2))
    engine = _version_tuple(engine_version)
    if operator == "~":
        return engine[:2] == wanted[:2] and engine >= wanted
    if operator == "^":
        return engine[:1] == wanted[:1] and engine >= wanted
    return engine == wanted


def check_plugin(archive: Path, engine_version: str) -> PluginDescriptor:
    """Raise ArtifactError naming the plugin and both versions unless it fits the engine."""
    descriptor = read_descriptor(archive)
    if not descriptor.admits(engine_version):
        raise ArtifactError(
            f"plugin {descriptor.name} {descriptor.version} is built for OpenSearch "
            f"{descriptor.required()}, but the engine is {engine_version}; use the plugin "
            f"built for {engine_version} (or change opensearch_version). No host was changed."
        )
    return descriptor


def lucene_version_of(engine_archive: Path) -> str:
    """The Lucene version an engine archive ships (its lib/lucene-core-<version>.jar)."""
    pattern = re.compile(r"/lib/lucene-core-([\d.]+)\.jar$")
    if zipfile.is_zipfile(engine_archive):
        with zipfile.ZipFile(engine_archive) as bundle:
            names = bundle.namelist()
    else:
        with tarfile.open(engine_archive) as bundle:
            names = bundle.getnames()
    for name in names:
        match = pattern.search(name)
        if match:
            return match.group(1)
    raise ArtifactError(
        f"{engine_archive} has no lib/lucene-core-*.jar; is it an OpenSearch archive?"
    )


def _source_digest(project: Path) -> str:
    """A digest of a plugin project's sources: a changed source builds a new zip."""
    digest = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(project)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build_plugin(project: Path, *, engine_version: str, lucene_version: str) -> FetchedArtifact:
    """Build a plugin of this project with Maven for the engine in use, once per source."""
    if not (project / "pom.xml").is_file():
        raise ArtifactError(
            f"{project} has no pom.xml; point the plugin's path at its Maven project"
        )
    target = cache_dir() / f"plugin-{project.name}-{engine_version}-{_source_digest(project)}.zip"
    with cache_lock():
        if target.exists():
            return FetchedArtifact(target, fetched=False)
        if shutil.which("mvn") is None:
            raise ArtifactError(
                f"building {project.name} needs Maven (mvn); install it on the control node"
            )
        # Built in a scratch copy: Maven writes target/ where the pom is, and the checkout's
        # target/ may be in use by another build (the Java tests, a second play).
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=f".build-{project.name}-") as work:
            staged = Path(work) / project.name
            staged.mkdir()
            shutil.copy2(project / "pom.xml", staged / "pom.xml")
            shutil.copytree(project / "src", staged / "src")
            built = _run_maven_package(staged, engine_version, lucene_version)
            partial = target.with_suffix(".partial")
            shutil.copyfile(built, partial)
            partial.replace(target)
    return FetchedArtifact(target, fetched=True)


def _run_maven_package(project: Path, engine_version: str, lucene_version: str) -> Path:
    """``mvn package`` of the plugin at ``project`` for one engine version: the zip."""
    command = [
        "mvn",
        "--batch-mode",
        "--quiet",
        "-Dstyle.color=never",
        "-DskipTests",
        f"-Dopensearch.version={engine_version}",
        f"-Dlucene.version={lucene_version}",
        "-f",
        str(project / "pom.xml"),
        "package",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    built = sorted((project / "target").glob(f"*-{engine_version}.zip"))
    if result.returncode != 0 or len(built) != 1:
        output = (result.stdout + result.stderr).strip()[-1500:]
        raise ArtifactError(
            f"building {project.name} for OpenSearch {engine_version} failed:\n{output}"
        )
    return built[0]


def fetch_plugin(
    spec: PluginSpec, *, engine_version: str, engine_archive: Path, project_root: Path
) -> tuple[FetchedArtifact, PluginDescriptor]:
    """Fetch or build one plugin into the cache and check it fits the engine."""
    if spec.source == "build":
        project = Path(spec.path or "")
        project = project if project.is_absolute() else project_root / project
        fetched = build_plugin(
            project, engine_version=engine_version, lucene_version=lucene_version_of(engine_archive)
        )
    elif spec.source == "maven":
        group_artifact = spec.coordinates or ""
        packaging = "zip"
        fetched = fetch_maven_artifact(group_artifact, spec.version or engine_version, packaging)
    elif spec.source == "url":
        fetched = fetch_url(
            spec.url or "",
            spec.sha512,
            cache_dir() / f"plugin-{spec.name}-{engine_version}-url.zip",
        )
    else:
        source = Path(spec.path or "")
        if not source.is_file():
            raise ArtifactError(f"plugin {spec.name}: {source} is not a file on the control node")
        fetched = FetchedArtifact(source, fetched=False)
    descriptor = check_plugin(fetched.path, engine_version)
    if descriptor.name != spec.name:
        raise ArtifactError(
            f"the zip for plugin {spec.name!r} holds plugin {descriptor.name!r}; fix its name "
            "in opensearch_plugins or point it at the right zip"
        )
    return fetched, descriptor


# The security plugin comes with the engine's version (the plan lists it with the other
# plugins when the distribution lacks it); unlisted-plugin removal never touches it.
PROTECTED_PLUGINS = frozenset({SECURITY_PLUGIN_NAME})


def plan_plugin_changes(
    wanted: list[dict[str, Any]], installed: dict[str, str], *, remove_unlisted: bool = False
) -> dict[str, list[Any]]:
    """What one node must do: ``install`` (wanted entries) and ``remove`` (names).

    ``wanted`` holds the fetched entries (name, state, version, path); ``installed`` maps
    the node's installed plugin names to their versions. A plugin whose name and version
    already match is left alone; one of another version is removed, then installed.
    """
    present = [entry for entry in wanted if entry["state"] == "present"]
    listed = {entry["name"] for entry in wanted}
    install = [entry for entry in present if installed.get(entry["name"]) != entry["version"]]
    remove = [entry["name"] for entry in install if entry["name"] in installed]
    remove += [
        entry["name"]
        for entry in wanted
        if entry["state"] == "absent" and entry["name"] in installed
    ]
    if remove_unlisted:
        remove += sorted(
            name for name in installed if name not in listed and name not in PROTECTED_PLUGINS
        )
    return {"install": install, "remove": remove}


SECURITY_PLUGIN_COORDINATES = "org.opensearch.plugin:opensearch-security"


def fetch_security_plugin(
    engine_version: str, local_path: str | None
) -> tuple[FetchedArtifact, PluginDescriptor]:
    """The security plugin zip for the engine (Maven's ``<version>.0``, or a local zip),
    checked against the engine version before any host is touched."""
    if local_path:
        source = Path(local_path)
        if not source.is_file():
            raise ArtifactError(
                f"opensearch_security_plugin_path {local_path!r} is not a file on the control node"
            )
        fetched = FetchedArtifact(source, fetched=False)
    else:
        fetched = fetch_maven_artifact(SECURITY_PLUGIN_COORDINATES, f"{engine_version}.0", "zip")
    return fetched, check_plugin(fetched.path, engine_version)


# Told of each archive as it lands in the cache: what it is, and the artifact.
ArtifactReport = Callable[[str, FetchedArtifact], None]


def fetch_artifacts(
    cluster: Cluster, project_root: Path, *, report: ArtifactReport | None = None
) -> dict[str, Any]:
    """The engine, the security plugin and every plugin, in the control node's cache, each
    plugin's descriptor checked against the engine version.

    ``report`` is told of each archive once it is in the cache (``clusterforge fetch``
    prints a line for each, and the lab a progress line)."""

    def reported(what: str, artifact: FetchedArtifact) -> FetchedArtifact:
        if report is not None:
            report(what, artifact)
        return artifact

    engine = reported(f"engine {cluster.version}", fetch_engine(cluster.distribution))
    security_plugin = None
    plugins: list[dict[str, Any]] = []
    if not cluster.distribution.bundles_security_plugin:
        security_plugin, security_descriptor = fetch_security_plugin(
            cluster.version, cluster.security.plugin_path
        )
        reported(
            f"plugin {security_descriptor.name} {security_descriptor.version}", security_plugin
        )
        # Listed with the other plugins so the plugins role installs them all with one
        # opensearch-plugin run (one JVM start; 1.8 s against 2.7 s for the security
        # plugin and one other on a lab node). The security role installs it only if
        # nothing did (a play without the plugins role).
        plugins.append(
            _present_plugin(security_descriptor.name, security_descriptor.version, security_plugin)
        )
    fetched_any = engine.fetched or bool(security_plugin and security_plugin.fetched)
    for spec in cluster.plugins:
        if spec.state == "absent":
            plugins.append({"name": spec.name, "state": "absent"})
            continue
        artifact, descriptor = fetch_plugin(
            spec,
            engine_version=cluster.version,
            engine_archive=engine.path,
            project_root=project_root,
        )
        reported(f"plugin {spec.name} {descriptor.version}", artifact)
        fetched_any = fetched_any or artifact.fetched
        plugins.append(_present_plugin(spec.name, descriptor.version, artifact))
    return {
        "engine": str(engine.path),
        "security_plugin": str(security_plugin.path) if security_plugin else None,
        "plugins": plugins,
        "fetched": fetched_any,
    }


def _present_plugin(name: str, version: str, artifact: FetchedArtifact) -> dict[str, Any]:
    return {
        "name": name,
        "state": "present",
        "path": str(artifact.path),
        "version": version,
        # Its name on the hosts, under the plugins role's archive directory.
        "archive_name": f"{name}-{version}.zip",
    }
