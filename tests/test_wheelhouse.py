"""A service's wheelhouse: its key, its cache, and a build that is never half-kept.

The build tests run the real ``pip wheel`` offline (``--no-index --no-build-isolation``)
on a small service project of their own (``services/demo`` in a scratch checkout): a
``clusterforge_demo`` package with no dependencies whose
build backend is a stand-in (a few lines that zip the package into a wheel, named as
one), because this virtualenv's setuptools cannot build wheels without an index. The
failure tests use stand-in pip runners that fail the way pip does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from clusterforge.plan.services.wheelhouse import (
    MANIFEST_NAME,
    WheelhouseError,
    build_wheelhouse,
    distribution_name,
    prune_wheelhouses,
    wheelhouse_key,
    wheelhouse_root,
)

OFFLINE = ("--no-index", "--no-build-isolation")

STAND_IN_BACKEND = """
import base64, hashlib, pathlib, zipfile

NAME, VERSION = "clusterforge_demo", "0.1.0"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}/{path.name}": path.read_bytes()
        for path in sorted(pathlib.Path("src", NAME).glob("*.py"))
    }
    metadata = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
    files[f"{info}/METADATA"] = metadata.encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\\nGenerator: stand-in\\n"
        b"Root-Is-Purelib: true\\nTag: py3-none-any\\n"
    )
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory, wheel), "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERFORGE_CACHE", str(tmp_path / "cache"))


CHECKOUT = Path(__file__).resolve().parents[1]
DEMO = "clusterforge_demo"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "checkout" / "services" / "demo"
    package = root / "src" / DEMO
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        "[build-system]\n"
        "requires = []\n"
        'build-backend = "stand_in_backend"\n'
        f'backend-path = ["src/{DEMO}"]\n'
        "[project]\n"
        'name = "clusterforge-demo"\n'
        'version = "0.1.0"\n'
        "dependencies = []\n"
        "[project.optional-dependencies]\n"
        "server = []\n"
    )
    (package / "stand_in_backend.py").write_text(STAND_IN_BACKEND)
    (root / "README.md").write_text("a small stand-in of the project\n")
    (package / "__init__.py").write_text('ANSWER = "one"\n')
    return root


def test_the_key_is_stable_and_ignores_bytecode_and_the_readme(project: Path) -> None:
    first = wheelhouse_key(project)
    cache = project / "src" / DEMO / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-311.pyc").write_bytes(b"bytecode")
    (project / "README.md").write_text("edited documentation\n")
    assert wheelhouse_key(project) == first


@pytest.mark.parametrize(
    ("relative", "content"),
    [
        ("pyproject.toml", None),
        ("src/clusterforge_demo/__init__.py", 'ANSWER = "two"\n'),
        ("src/clusterforge_demo/migrations/versions/0002_new.py", "REVISION = 2\n"),
    ],
)
def test_the_key_changes_with_the_project_and_its_sources(
    project: Path, relative: str, content: str | None
) -> None:
    before = wheelhouse_key(project)
    path = project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        path.write_text(path.read_text() + "# a comment changes the key too\n")
    else:
        path.write_text(content)
    assert wheelhouse_key(project) != before


def test_a_folder_that_is_not_the_project_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WheelhouseError, match=r"has no pyproject\.toml; pass a service's project"):
        wheelhouse_key(tmp_path)


def test_builds_once_into_the_cache_and_reuses_it(project: Path) -> None:
    built = build_wheelhouse(project, extra_pip_arguments=OFFLINE)
    assert built.built
    assert built.path == wheelhouse_root(DEMO) / built.key
    assert built.distribution == DEMO
    assert built.project_wheel == "clusterforge_demo-0.1.0-py3-none-any.whl"
    assert built.requirement == built.project_wheel
    assert built.wheels == ("clusterforge_demo-0.1.0-py3-none-any.whl",)
    assert built.python_version == f"{sys.version_info.major}.{sys.version_info.minor}"
    manifest = json.loads((built.path / MANIFEST_NAME).read_text())
    assert manifest["digest"] == built.digest

    def pip_must_not_run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise AssertionError(f"pip ran again: {command}")

    again = build_wheelhouse(project, extra_pip_arguments=OFFLINE, run_pip=pip_must_not_run)
    assert not again.built
    assert (again.path, again.digest) == (built.path, built.digest)


def test_the_checkout_gets_no_build_leftovers(project: Path) -> None:
    before = sorted(str(path.relative_to(project)) for path in project.rglob("*"))
    build_wheelhouse(project, extra_pip_arguments=OFFLINE)
    after = sorted(str(path.relative_to(project)) for path in project.rglob("*"))
    assert after == before


def test_a_source_change_builds_a_new_wheelhouse_with_a_new_digest(project: Path) -> None:
    first = build_wheelhouse(project, extra_pip_arguments=OFFLINE)
    (project / "src" / DEMO / "__init__.py").write_text('ANSWER = "two"\n')
    second = build_wheelhouse(project, extra_pip_arguments=OFFLINE)
    assert second.built
    assert second.key != first.key
    assert second.digest != first.digest
    assert first.path.is_dir()  # the old one stays for hosts that still run it


def test_a_failed_build_says_why_and_leaves_nothing_in_the_cache(project: Path) -> None:
    def stand_in_pip_without_index(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            list(command),
            1,
            "",
            "ERROR: Could not find a version that satisfies the requirement PyYAML==6.0.3\n",
        )

    with pytest.raises(WheelhouseError) as raised:
        build_wheelhouse(project, run_pip=stand_in_pip_without_index)
    assert "pip wheel of" in str(raised.value)
    assert "must reach its configured package index" in str(raised.value)
    assert "PyYAML==6.0.3" in str(raised.value)
    assert list(wheelhouse_root(DEMO).iterdir()) == []


def test_a_wheelhouse_without_a_project_wheel_is_refused(project: Path) -> None:
    def stand_in_pip_that_builds_nothing(
        command: Sequence[str],
    ) -> subprocess.CompletedProcess[str]:
        Path(command[command.index("--wheel-dir") + 1]).mkdir()
        return subprocess.CompletedProcess(list(command), 0, "", "")

    with pytest.raises(WheelhouseError, match="left 0 clusterforge_demo wheels"):
        build_wheelhouse(project, run_pip=stand_in_pip_that_builds_nothing)
    assert list(wheelhouse_root(DEMO).iterdir()) == []


def test_only_the_newest_wheelhouses_are_kept(project: Path) -> None:
    module = project / "src" / DEMO / "__init__.py"
    paths = []
    for edition in range(4):
        module.write_text(f"EDITION = {edition}\n")
        paths.append(build_wheelhouse(project, extra_pip_arguments=OFFLINE).path)
    assert [path.is_dir() for path in paths] == [False, True, True, True]
    assert set(prune_wheelhouses(DEMO, keep=1)) == {paths[1], paths[2]}
    assert [path.is_dir() for path in paths] == [False, False, False, True]


def test_extras_are_built_and_named_for_the_hosts_and_change_the_key(project: Path) -> None:
    assert wheelhouse_key(project, extras=("server",)) != wheelhouse_key(project)
    built = build_wheelhouse(project, extras=("server",), extra_pip_arguments=OFFLINE)
    assert built.extras == ("server",)
    assert built.requirement == "clusterforge_demo-0.1.0-py3-none-any.whl[server]"
    assert build_wheelhouse(project, extra_pip_arguments=OFFLINE).key != built.key


def test_an_editable_installs_metadata_is_not_in_the_key(project: Path) -> None:
    before = wheelhouse_key(project)
    info = project / "src" / "clusterforge_demo.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Name: clusterforge-demo\n")
    assert wheelhouse_key(project) == before


def test_pruning_one_service_keeps_the_other_services_wheelhouses(project: Path) -> None:
    other = project.parent / "other"
    shutil.copytree(project, other)
    pyproject = other / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("clusterforge-demo", "clusterforge-other"))
    (other / "src" / DEMO / "stand_in_backend.py").write_text(
        STAND_IN_BACKEND.replace('"clusterforge_demo"', '"clusterforge_other"')
    )
    kept = build_wheelhouse(other, extra_pip_arguments=OFFLINE)
    module = project / "src" / DEMO / "__init__.py"
    for edition in range(4):
        module.write_text(f"EDITION = {edition}\n")
        build_wheelhouse(project, extra_pip_arguments=OFFLINE)
    assert kept.path == wheelhouse_root("clusterforge_other") / kept.key
    assert kept.path.is_dir()


@pytest.fixture
def checkout_copy(tmp_path: Path) -> Path:
    """The real services and toolkit sources, copied, so a test may edit them."""
    root = tmp_path / "real"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for relative in ("services/userdir", "services/orders", "src/clusterforge"):
        shutil.copytree(CHECKOUT / relative, root / relative, ignore=ignore)
    return root


@pytest.mark.parametrize(("service", "other"), [("userdir", "orders"), ("orders", "userdir")])
def test_an_edit_to_the_toolkit_or_the_other_service_keeps_a_services_key(
    checkout_copy: Path, service: str, other: str
) -> None:
    project = checkout_copy / "services" / service
    before = wheelhouse_key(project, extras=("server",))
    (checkout_copy / "src" / "clusterforge" / "pki.py").write_text("# edited\n", "utf-8")
    (checkout_copy / "services" / other / "pyproject.toml").write_text("# edited\n")
    (project / "README.md").write_text("edited documentation\n")
    assert wheelhouse_key(project, extras=("server",)) == before
    settings = next((project / "src").glob("clusterforge_*/settings.py"))
    settings.write_text(settings.read_text() + "# edited\n")
    assert wheelhouse_key(project, extras=("server",)) != before


@pytest.mark.parametrize(
    ("service", "distribution"),
    [("userdir", "clusterforge_userdir"), ("orders", "clusterforge_orders")],
)
def test_the_real_services_are_projects_of_their_own(service: str, distribution: str) -> None:
    assert distribution_name(CHECKOUT / "services" / service) == distribution


def _stand_in_project(root: Path, package: str, *, requires: str = "") -> Path:
    """A stand-in project like ``project``'s, named ``package``, declaring ``requires``."""
    (root / "src" / package).mkdir(parents=True)
    distribution = package.replace("_", "-")
    (root / "pyproject.toml").write_text(
        "[build-system]\n"
        "requires = []\n"
        'build-backend = "stand_in_backend"\n'
        f'backend-path = ["src/{package}"]\n'
        "[project]\n"
        f'name = "{distribution}"\n'
        'version = "0.1.0"\n'
        f"dependencies = [{json.dumps(requires) if requires else ''}]\n"
    )
    backend = STAND_IN_BACKEND.replace(f'"{DEMO}"', f'"{package}"')
    if requires:
        backend = backend.replace(
            "\\nVersion: {VERSION}\\n", "\\nVersion: {VERSION}\\nRequires-Dist: " + requires + "\\n"
        )
        assert "Requires-Dist" in backend
    (root / "src" / package / "stand_in_backend.py").write_text(backend)
    (root / "src" / package / "__init__.py").write_text('ANSWER = "one"\n')
    return root


def test_a_local_requirement_is_built_into_the_wheelhouse_and_in_its_key(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    kit = _stand_in_project(checkout / "services" / "kit", "clusterforge_demo_kit")
    service = _stand_in_project(
        checkout / "services" / "demo2",
        "clusterforge_demo2",
        requires="clusterforge-demo-kit==0.1.0",
    )
    # No index has the kit: without it named as a local requirement, pip finds nothing.
    with pytest.raises(WheelhouseError, match="pip wheel"):
        build_wheelhouse(service, extra_pip_arguments=OFFLINE)
    built = build_wheelhouse(service, extra_pip_arguments=OFFLINE, local_requirements=[kit])
    assert built.project_wheel == "clusterforge_demo2-0.1.0-py3-none-any.whl"
    assert "clusterforge_demo_kit-0.1.0-py3-none-any.whl" in built.wheels
    before = built.key
    assert wheelhouse_key(service, local_requirements=[kit]) == before
    assert wheelhouse_key(service) != before
    (kit / "src" / "clusterforge_demo_kit" / "__init__.py").write_text('ANSWER = "two"\n')
    assert wheelhouse_key(service, local_requirements=[kit]) != before


def test_both_real_services_name_the_kit_as_a_local_requirement() -> None:
    from clusterforge.schema import load_schema

    for service in load_schema().services.values():
        roots = service.local_requirement_roots(CHECKOUT)
        assert [distribution_name(root) for root in roots] == ["clusterforge_service_kit"]


def test_the_local_requirements_wheels_are_named_for_reinstalling(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    kit = _stand_in_project(checkout / "services" / "kit", "clusterforge_demo_kit")
    service = _stand_in_project(
        checkout / "services" / "demo3",
        "clusterforge_demo3",
        requires="clusterforge-demo-kit==0.1.0",
    )
    built = build_wheelhouse(service, extra_pip_arguments=OFFLINE, local_requirements=[kit])
    assert built.local_wheels == ("clusterforge_demo_kit-0.1.0-py3-none-any.whl",)

    def pip_must_not_run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise AssertionError(f"pip ran again: {command}")

    again = build_wheelhouse(
        service,
        extra_pip_arguments=OFFLINE,
        local_requirements=[kit],
        run_pip=pip_must_not_run,
    )
    assert again.local_wheels == built.local_wheels
