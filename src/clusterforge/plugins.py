"""Engine plugins: reading a plugin zip's descriptor and checking it fits the engine.

A plugin must match the engine exactly: its ``plugin-descriptor.properties`` names
``opensearch.version`` (an exact version) or carries a ``dependencies`` range. A node
with a plugin of another version refuses to start, so the check runs on the control node
before any host is touched.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from clusterforge.errors import ArtifactError

DESCRIPTOR = "plugin-descriptor.properties"
SECURITY_PLUGIN_COORDINATES = "org.opensearch.plugin:opensearch-security"


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
    properties = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        properties[key.strip()] = value.strip()
    return PluginDescriptor(
        name=properties.get("name", archive.stem),
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
