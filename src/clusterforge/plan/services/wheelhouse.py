"""A service's wheelhouse: the service's wheel and its runtime dependencies, built once.

Each service is a project of its own under ``services/`` (``services/userdir``,
``services/orders``), and each gets its own wheelhouse. Service hosts install from it
with ``pip install --no-index --find-links``, so they never need a package index. It is
built on the control node with ``pip wheel`` (the project's runtime dependencies plus the
extras asked for, e.g. the user directory's ``server``) into the artifact cache, under
``wheelhouse/<distribution>/<key>``. The key hashes everything the wheels are made from:
the service's ``pyproject.toml``, the files under its ``src/``, the extras, and the
interpreter's minor version and machine (wheels with C extensions fit only those).
Nothing outside the service's folder and its local requirements is in the key, so an
edit to the toolkit (``src/clusterforge``) never reinstalls or restarts a service. A key
already in the cache is reused without running pip.

A service's *local requirements* are projects of the checkout it depends on by an exact
pin and that no package index has: the kit both services share (``services/kit``). Each
is staged and named to ``pip wheel`` beside the service, so pip takes it from there for
the pin and builds it as a wheel of its own into the same wheelhouse (hosts install it
from there with ``--find-links``); its ``pyproject.toml`` and ``src/`` are in the key.

The project is copied into a scratch directory before it is built, so the build writes
no ``build/`` or ``*.egg-info`` into the checkout. ``README.md`` is copied too (the
project metadata names it) but is not part of the key: a documentation edit must not
reinstall and restart the service.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterforge.errors import ClusterforgeError
from clusterforge.plan.cluster.artifacts import cache_dir, file_digest

MANIFEST_NAME = "clusterforge-wheelhouse.json"
# 3: the manifest names the wheels of the local requirements (``local_wheels``).
MANIFEST_FORMAT = 3
PIP_WHEEL_TIMEOUT_S = 900
# Every source edit makes a new key; older wheelhouses of the same service beyond these
# are deleted. Hosts keep their own copy, so none of them needs an old one from the cache.
WHEELHOUSES_KEPT = 3
_IGNORED_PARTS = frozenset({"__pycache__"})
_IGNORED_SUFFIXES = frozenset({".pyc", ".pyo"})

PipRunner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


class WheelhouseError(ClusterforgeError):
    """The wheelhouse could not be built or read."""


@dataclass(frozen=True, kw_only=True)
class Wheelhouse:
    """A complete wheelhouse in the cache.

    ``digest`` hashes every wheel's name and sha256: hosts record it to tell whether
    their installation is the one this wheelhouse holds.
    """

    path: Path
    key: str
    digest: str
    distribution: str
    extras: tuple[str, ...]
    project_wheel: str
    project_version: str
    python_version: str
    machine: str
    wheels: tuple[str, ...]
    built: bool  # False when the cache already held it
    # The wheels of the local requirements (the kit): like the project's own, their
    # version stays the same across source edits, so hosts reinstall them by name.
    local_wheels: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """What hosts pass to pip: the project wheel, with its extras when there are any."""
        if not self.extras:
            return self.project_wheel
        return f"{self.project_wheel}[{','.join(self.extras)}]"


def interpreter_tag(python: str | None = None) -> tuple[str, str]:
    """``("3.11", "x86_64")`` for ``python`` (default: this interpreter)."""
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return f"{sys.version_info.major}.{sys.version_info.minor}", platform.machine()
    answer = subprocess.run(  # noqa: S603 (a fixed script, run by the interpreter asked for)
        [
            python,
            "-c",
            "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine())",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if answer.returncode != 0:
        raise WheelhouseError(f"{python} does not run: {answer.stderr.strip()[-500:]}")
    version, machine = answer.stdout.split()
    return version, machine


def _project_sources(project_root: Path) -> Iterator[Path]:
    for path in sorted((project_root / "src").rglob("*")):
        relative = path.relative_to(project_root)
        if not path.is_file() or _IGNORED_PARTS.intersection(relative.parts):
            continue
        if path.suffix in _IGNORED_SUFFIXES or path.name.endswith(".egg-info"):
            continue
        if any(part.endswith(".egg-info") for part in relative.parts):
            continue
        yield path


def distribution_name(project_root: Path) -> str:
    """The project's ``[project] name`` from its ``pyproject.toml``, as wheels spell it."""
    _check_project(project_root)
    try:
        metadata = tomllib.loads((project_root / "pyproject.toml").read_text(encoding="utf-8"))
        name = metadata["project"]["name"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as error:
        raise WheelhouseError(
            f"{project_root}/pyproject.toml names no [project] name ({error}); a service "
            "project must declare one"
        ) from error
    if not isinstance(name, str) or not name:
        raise WheelhouseError(f"{project_root}/pyproject.toml: [project] name must be a string")
    return re.sub(r"[-_.]+", "_", name).lower()


def _check_project(project_root: Path) -> None:
    if not (project_root / "pyproject.toml").is_file():
        raise WheelhouseError(
            f"{project_root} has no pyproject.toml; pass a service's project folder "
            "(services/userdir or services/orders in the checkout) as project_root"
        )
    if not (project_root / "src").is_dir():
        raise WheelhouseError(
            f"{project_root}/src is missing; pass a service's project folder "
            "(services/userdir or services/orders in the checkout) as project_root"
        )


def wheelhouse_key(
    project_root: Path,
    *,
    extras: Sequence[str] = (),
    python: str | None = None,
    local_requirements: Sequence[Path] = (),
) -> str:
    """A hash of what the wheelhouse is built from (see the module docstring)."""
    _check_project(project_root)
    for requirement in local_requirements:
        _check_project(requirement)
    version, machine = interpreter_tag(python)
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        # Lengths first, so no two different inputs can concatenate to the same bytes.
        encoded = label.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        digest.update(len(data).to_bytes(8, "big") + data)

    add("format", str(MANIFEST_FORMAT).encode())
    add("interpreter", f"{version} {machine}".encode())
    add("extras", ",".join(sorted(extras)).encode())
    add("pyproject.toml", (project_root / "pyproject.toml").read_bytes())
    for path in _project_sources(project_root):
        add(path.relative_to(project_root).as_posix(), path.read_bytes())
    for requirement in local_requirements:
        # Labelled by the project's distribution name, so moving it changes nothing.
        name = distribution_name(requirement)
        add(f"{name}:pyproject.toml", (requirement / "pyproject.toml").read_bytes())
        for path in _project_sources(requirement):
            add(f"{name}:{path.relative_to(requirement).as_posix()}", path.read_bytes())
    return digest.hexdigest()[:24]


def wheelhouse_root(distribution: str | None = None) -> Path:
    """Where wheelhouses live: ``wheelhouse/`` in the artifact cache, one folder a service."""
    root = cache_dir() / "wheelhouse"
    return root if distribution is None else root / distribution


def _run_pip(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (pip, with arguments built here)
        list(command), capture_output=True, text=True, check=False, timeout=PIP_WHEEL_TIMEOUT_S
    )


def _stage_project(project_root: Path, staging: Path) -> None:
    staging.mkdir()
    shutil.copy2(project_root / "pyproject.toml", staging / "pyproject.toml")
    readme = project_root / "README.md"
    if readme.is_file():
        shutil.copy2(readme, staging / "README.md")
    for path in _project_sources(project_root):
        target = staging / path.relative_to(project_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _write_manifest(
    wheels_dir: Path,
    *,
    key: str,
    distribution: str,
    extras: Sequence[str],
    version: str,
    machine: str,
    project_root: Path,
    local_distributions: Sequence[str] = (),
) -> dict[str, object]:
    wheel_hashes = {
        path.name: file_digest(path, "sha256") for path in sorted(wheels_dir.glob("*.whl"), key=str)
    }
    project_wheels = [name for name in wheel_hashes if name.startswith(f"{distribution}-")]
    if len(project_wheels) != 1:
        raise WheelhouseError(
            f"pip wheel of {project_root} left {len(project_wheels)} {distribution} wheels "
            f"(expected one): {sorted(wheel_hashes)}"
        )
    local_wheels = []
    for local in local_distributions:
        found = [name for name in wheel_hashes if name.startswith(f"{local}-")]
        if len(found) != 1:
            raise WheelhouseError(
                f"pip wheel of {project_root} left {len(found)} {local} wheels (expected "
                f"one, from the local requirement): {sorted(wheel_hashes)}"
            )
        local_wheels.extend(found)
    listing = "".join(f"{name} {sha}\n" for name, sha in wheel_hashes.items())
    manifest: dict[str, object] = {
        "format": MANIFEST_FORMAT,
        "key": key,
        "distribution": distribution,
        "extras": sorted(extras),
        "digest": hashlib.sha256(listing.encode()).hexdigest(),
        "project_wheel": project_wheels[0],
        "project_version": project_wheels[0].split("-")[1],
        "python_version": version,
        "machine": machine,
        "wheels": wheel_hashes,
        "local_wheels": local_wheels,
    }
    (wheels_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_wheelhouse(path: Path, *, built: bool = False) -> Wheelhouse:
    """The wheelhouse at ``path``, from its manifest (written last, so it marks completeness)."""
    try:
        manifest = json.loads((path / MANIFEST_NAME).read_text())
    except (OSError, ValueError) as error:
        raise WheelhouseError(f"{path} is not a complete wheelhouse: {error}") from error
    if manifest.get("format") != MANIFEST_FORMAT:
        raise WheelhouseError(f"{path} is a wheelhouse of another format; delete it")
    return Wheelhouse(
        path=path,
        key=str(manifest["key"]),
        digest=str(manifest["digest"]),
        distribution=str(manifest["distribution"]),
        extras=tuple(str(extra) for extra in manifest["extras"]),
        project_wheel=str(manifest["project_wheel"]),
        project_version=str(manifest["project_version"]),
        python_version=str(manifest["python_version"]),
        machine=str(manifest["machine"]),
        wheels=tuple(sorted(manifest["wheels"])),
        built=built,
        local_wheels=tuple(str(name) for name in manifest["local_wheels"]),
    )


def build_wheelhouse(
    project_root: Path,
    *,
    extras: Sequence[str] = (),
    python: str | None = None,
    extra_pip_arguments: Sequence[str] = (),
    run_pip: PipRunner = _run_pip,
    local_requirements: Sequence[Path] = (),
) -> Wheelhouse:
    """Return the wheelhouse for ``project_root``, building it first when its key is new.

    ``project_root`` is a service's project folder (``services/userdir``); ``extras`` are
    its optional-dependency groups the hosts need (``("server",)``);
    ``local_requirements`` are the checkout's projects it depends on (``services/kit``),
    built into the same wheelhouse. ``python`` is the
    interpreter whose pip builds the wheels (default: this one); the hosts' python3 must
    have the same minor version. ``extra_pip_arguments`` go to
    ``pip wheel`` as they are. A failed build leaves nothing behind in the cache.
    """
    project_root = project_root.resolve()
    python = python or sys.executable
    extras = tuple(sorted(extras))
    distribution = distribution_name(project_root)
    local_requirements = tuple(path.resolve() for path in local_requirements)
    key = wheelhouse_key(
        project_root, extras=extras, python=python, local_requirements=local_requirements
    )
    target = wheelhouse_root(distribution) / key
    if (target / MANIFEST_NAME).is_file():
        return read_wheelhouse(target)
    version, machine = interpreter_tag(python)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Scratch space beside the target, so the finished wheelhouse arrives by one rename.
    scratch = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=target.parent))
    try:
        source = scratch / "source"
        wheels_dir = scratch / "wheels"
        _stage_project(project_root, source)
        staged_requirements = []
        for position, requirement in enumerate(local_requirements):
            staged = scratch / f"requirement-{position}"
            _stage_project(requirement, staged)
            staged_requirements.append(str(staged))
        command = [
            python,
            "-m",
            "pip",
            "wheel",
            "--disable-pip-version-check",
            "--no-input",
            "--wheel-dir",
            str(wheels_dir),
            *extra_pip_arguments,
            # Named first: pip then takes them for the service's pins on them.
            *staged_requirements,
            f"{source}[{','.join(extras)}]" if extras else str(source),
        ]
        answer = run_pip(command)
        if answer.returncode != 0:
            tail = "\n".join((answer.stderr or answer.stdout or "").strip().splitlines()[-15:])
            raise WheelhouseError(
                f"pip wheel of {project_root} failed (exit {answer.returncode}); the control "
                f"node's pip must reach its configured package index:\n{tail}"
            )
        _write_manifest(
            wheels_dir,
            key=key,
            distribution=distribution,
            extras=extras,
            version=version,
            machine=machine,
            project_root=project_root,
            local_distributions=[distribution_name(path) for path in local_requirements],
        )
        if target.exists():
            shutil.rmtree(target)  # an incomplete leftover: it has no manifest
        try:
            wheels_dir.rename(target)
        except OSError:
            # Another run finished the same key first; its wheelhouse is as good as ours.
            if not (target / MANIFEST_NAME).is_file():
                raise
            return read_wheelhouse(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    prune_wheelhouses(distribution, keep=WHEELHOUSES_KEPT)
    return read_wheelhouse(target, built=True)


def prune_wheelhouses(distribution: str, *, keep: int) -> list[Path]:
    """Delete all but the ``keep`` newest complete wheelhouses of one service.

    Returns what was deleted. Another service's wheelhouses are never touched, so a
    busy service cannot push a quiet one's current wheelhouse out of the cache.
    """
    root = wheelhouse_root(distribution)
    complete = [
        path
        for path in root.iterdir()
        if not path.name.startswith(".") and (path / MANIFEST_NAME).is_file()
    ]
    complete.sort(key=lambda path: (path / MANIFEST_NAME).stat().st_mtime, reverse=True)
    deleted = complete[keep:]
    for path in deleted:
        shutil.rmtree(path, ignore_errors=True)
    return deleted
