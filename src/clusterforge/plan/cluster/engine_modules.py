"""The engine's standard modules, assembled into the Maven engine archive.

The engine Maven serves (the integ-test zip) carries one module, transport-netty4, while
the official tarball real hosts run carries about twenty: painless, the common analyzers
and ingest processors, reindex, ``scaled_float`` and more. Without them the lab and CI
would test a poorer engine than users run. Maven serves each module's jar at the engine's
version, but not the module directory the distribution builds from it (its descriptor and
security policy), so this module assembles that directory:

- ``mvn dependency:copy-dependencies --strict-checksums`` resolves each module's jar and its
  dependencies (checksum-verified, through the user's Maven settings and mirrors), one
  project per module so a dependency two modules share is copied into both;
- jars the engine's ``lib/`` already has are left out (the engine refuses to start when a
  class is on two class paths);
- ``plugin-descriptor.properties`` names the engine's exact version, as the engine
  requires, and a module whose jar extends painless (it registers a
  ``PainlessExtension``) names ``lang-painless`` in ``extended.plugins``;
- ``plugin-security.policy`` grants what the module needs under the engine's security
  manager, and no more.

The result is the engine archive plus ``modules/<name>/``, cached beside it under a name
that carries a digest of this recipe, so a changed recipe assembles a new archive and an
unchanged one is reused. A module Maven cannot serve stops the assembly, naming it: a
transient failure must not leave a poorer engine in the cache under the complete one's name.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from clusterforge.errors import ArtifactError

MODULE_GROUP = "org.opensearch.plugin"
PAINLESS_EXTENSION_SERVICE = "META-INF/services/org.opensearch.painless.spi.PainlessExtension"
# Every entry the assembled archive adds carries this time, so the same inputs give the
# same bytes (and the same checksum) on every control node.
FIXED_ZIP_TIME = (2024, 1, 1, 0, 0, 0)
JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


@dataclass(frozen=True)
class EngineModule:
    """One module of the distribution: its directory name, the Maven artifact of its jar,
    the plugin class the engine loads, and the permissions its policy grants."""

    name: str
    artifact: str
    classname: str
    description: str
    permissions: tuple[str, ...] = ()


# The modules the official distribution carries that Maven serves at the engine's version
# and whose features users reach for first. index-management and the other plugins the
# official bundle adds are not modules and are not served.
STANDARD_MODULES = (
    EngineModule(
        "lang-painless",
        "lang-painless",
        "org.opensearch.painless.PainlessPlugin",
        "The painless scripting language",
        # Each script compiles into a class of its own loader.
        (
            'java.lang.RuntimePermission "createClassLoader"',
            'java.lang.RuntimePermission "getClassLoader"',
        ),
    ),
    EngineModule(
        "analysis-common",
        "analysis-common",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "The common analyzers, tokenizers and token filters",
    ),
    EngineModule(
        "mapper-extras",
        "mapper-extras-client",
        "org.opensearch.index.mapper.MapperExtrasPlugin",
        "Field types beyond the core ones: scaled_float, token_count, rank_feature",
    ),
    EngineModule(
        "reindex",
        "reindex-client",
        "org.opensearch.index.reindex.ReindexPlugin",
        "The reindex, update-by-query and delete-by-query APIs",
        # Reindex from a remote cluster (still gated by reindex.remote.allowlist).
        ('java.net.SocketPermission "*", "connect"',),
    ),
    EngineModule(
        "ingest-common",
        "ingest-common",
        "org.opensearch.ingest.common.IngestCommonPlugin",
        "The common ingest processors",
    ),
    EngineModule(
        "parent-join",
        "parent-join-client",
        "org.opensearch.join.ParentJoinPlugin",
        "The join field type and its queries",
    ),
    EngineModule(
        "percolator",
        "percolator-client",
        "org.opensearch.percolator.PercolatorPlugin",
        "The percolator field type and query",
    ),
    EngineModule(
        "lang-mustache",
        "lang-mustache-client",
        "org.opensearch.script.mustache.MustachePlugin",
        "Mustache templates for search templates",
        # The mustache compiler reads templates' objects by reflection.
        ('java.lang.reflect.ReflectPermission "suppressAccessChecks"',),
    ),
)


@dataclass(frozen=True)
class AssembledEngine:
    path: Path
    modules: tuple[str, ...]  # the modules added to the base archive


def recipe_digest(version: str, modules: tuple[EngineModule, ...] = STANDARD_MODULES) -> str:
    """A digest of everything that decides the assembled archive's contents but the base
    archive itself (whose name already carries the version)."""
    recipe = {
        "version": version,
        "modules": [asdict(module) for module in modules],
        "format": 1,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def assembled_archive_name(
    version: str, modules: tuple[EngineModule, ...] = STANDARD_MODULES
) -> str:
    return f"opensearch-{version}-with-modules-{recipe_digest(version, modules)[:12]}.zip"


def jar_artifact(name: str) -> str | None:
    """``jackson-core`` for ``jackson-core-2.18.2.jar``; None for a name without a version."""
    match = JAR_NAME.match(name)
    return match.group("artifact") if match else None


def descriptor(module: EngineModule, *, version: str, extended: tuple[str, ...]) -> str:
    lines = [
        "# Written by clusterforge when it assembled this module from Maven.",
        f"description={module.description}",
        f"version={version}",
        f"name={module.name}",
        f"classname={module.classname}",
        "java.version=17",
        f"opensearch.version={version}",
        f"extended.plugins={','.join(extended)}",
        "has.native.controller=false",
    ]
    return "\n".join(lines) + "\n"


def security_policy(module: EngineModule) -> str | None:
    if not module.permissions:
        return None
    granted = "".join(f"  permission {permission};\n" for permission in module.permissions)
    return f"grant {{\n{granted}}};\n"


def _module_pom(module: EngineModule, version: str) -> str:
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        "<modelVersion>4.0.0</modelVersion>"
        f"<groupId>clusterforge.engine-modules</groupId><artifactId>{escape(module.name)}</artifactId>"
        "<version>1</version><packaging>pom</packaging>"
        "<dependencies><dependency>"
        f"<groupId>{MODULE_GROUP}</groupId><artifactId>{escape(module.artifact)}</artifactId>"
        f"<version>{escape(version)}</version>"
        "</dependency></dependencies></project>"
    )


def _aggregator_pom(modules: tuple[EngineModule, ...]) -> str:
    listed = "".join(f"<module>{escape(module.name)}</module>" for module in modules)
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        "<modelVersion>4.0.0</modelVersion>"
        "<groupId>clusterforge.engine-modules</groupId><artifactId>all</artifactId>"
        f"<version>1</version><packaging>pom</packaging><modules>{listed}</modules></project>"
    )


def resolve_module_jars(
    modules: tuple[EngineModule, ...], version: str, workdir: Path
) -> dict[str, list[Path]]:
    """Each module's jar and runtime dependencies, checksum-verified, by module name."""
    if shutil.which("mvn") is None:
        raise ArtifactError(
            "mvn is not installed; install Maven (Debian: apt-get install maven) to assemble "
            "the engine's modules, or choose opensearch_distribution_source: tarball or file"
        )
    (workdir / "pom.xml").write_text(_aggregator_pom(modules))
    for module in modules:
        (workdir / module.name).mkdir()
        (workdir / module.name / "pom.xml").write_text(_module_pom(module, version))
    command = [
        "mvn",
        "--batch-mode",
        "--quiet",
        "--strict-checksums",
        "--fail-at-end",
        "-f",
        str(workdir / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        "-DoutputDirectory=${project.basedir}/jars",
    ]
    # --fail-at-end: every module is tried, so the error below names all that failed.
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    resolved: dict[str, list[Path]] = {}
    for module in modules:
        jars = sorted((workdir / module.name / "jars").glob("*.jar"))
        if any(jar_artifact(jar.name) == module.artifact for jar in jars):
            resolved[module.name] = jars
    missing = [f"{MODULE_GROUP}:{m.artifact}:{version}" for m in modules if m.name not in resolved]
    if missing:
        output = (result.stdout + result.stderr).strip()[-1500:]
        raise ArtifactError(
            f"mvn could not resolve the engine modules {', '.join(missing)}; check that Maven "
            "can reach its repository or your mirror, or choose "
            f"opensearch_distribution_source: tarball or file:\n{output}"
        )
    return resolved


def _engine_entries(base: zipfile.ZipFile) -> tuple[str, set[str], set[str]]:
    """The archive's top directory, the artifacts its lib/ holds, and the modules it has."""
    names = base.namelist()
    top = names[0].split("/", 1)[0]
    lib_artifacts = {
        artifact
        for name in names
        if name.startswith(f"{top}/lib/") and name.endswith(".jar")
        for artifact in [jar_artifact(name.rsplit("/", 1)[1])]
        if artifact
    }
    present_modules = {
        name.split("/")[2]
        for name in names
        if name.startswith(f"{top}/modules/") and name.count("/") >= 3
    }
    return top, lib_artifacts, present_modules


def _extends_painless(jar: Path) -> bool:
    with zipfile.ZipFile(jar) as archive:
        return PAINLESS_EXTENSION_SERVICE in archive.namelist()


def _add_file(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
    info.external_attr = 0o100644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def assemble_engine(
    base_archive: Path,
    version: str,
    target: Path,
    *,
    modules: tuple[EngineModule, ...] = STANDARD_MODULES,
) -> AssembledEngine:
    """Write ``target``: ``base_archive`` with every module of ``modules`` it lacks. Atomic:
    a failure leaves no ``target`` behind."""
    with zipfile.ZipFile(base_archive) as base:
        top, lib_artifacts, present = _engine_entries(base)
    wanted = tuple(module for module in modules if module.name not in present)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".modules-") as scratch:
        workdir = Path(scratch)
        resolved = resolve_module_jars(wanted, version, workdir) if wanted else {}
        partial = workdir / target.name
        painless_jars = {
            artifact
            for jar in resolved.get("lang-painless", [])
            for artifact in [jar_artifact(jar.name)]
            if artifact
        }
        with (
            zipfile.ZipFile(base_archive) as base,
            zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out,
        ):
            for info in base.infolist():
                out.writestr(info, base.read(info))
            for module in wanted:
                jars = resolved[module.name]
                own_jar = next(jar for jar in jars if jar_artifact(jar.name) == module.artifact)
                extended = ("lang-painless",) if _extends_painless(own_jar) else ()
                shared = lib_artifacts | (painless_jars if extended else set())
                directory = f"{top}/modules/{module.name}"
                for jar in jars:
                    if jar is own_jar or jar_artifact(jar.name) not in shared:
                        _add_file(out, f"{directory}/{jar.name}", jar.read_bytes())
                _add_file(
                    out,
                    f"{directory}/plugin-descriptor.properties",
                    descriptor(module, version=version, extended=extended).encode(),
                )
                policy = security_policy(module)
                if policy is not None:
                    _add_file(out, f"{directory}/plugin-security.policy", policy.encode())
        partial.replace(target)
    return AssembledEngine(target, tuple(module.name for module in wanted))
