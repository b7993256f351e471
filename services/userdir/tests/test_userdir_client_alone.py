"""The client installs and works without the server's dependencies.

The base install of ``clusterforge-userdir`` declares httpx (and httpcore, which the
client's deadline uses directly), pydantic, PyYAML and the services' kit (whose base
install is the standard library only); FastAPI, SQLAlchemy and the rest come with the
``server`` extra. The fresh-virtualenv test
cannot reach a package index, so a stand-in for it is used: a folder holding only the
client's dependency closure (taken from this environment's installed distributions, by
their metadata), put on the new virtualenv's path with a ``.pth`` file.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

KIT = "clusterforge-service-kit"
CLIENT_REQUIREMENTS = {"httpx", "httpcore", "pydantic", "pyyaml", KIT}
SERVER_ONLY = {"fastapi", "sqlalchemy", "alembic", "uvicorn", "psycopg", "pydantic-settings"}
PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clusterforge_userdir"
# The kit from its source tree, like the package: both are editable installs here.
KIT_PACKAGE = Path(__file__).resolve().parents[2] / "kit" / "src" / "clusterforge_service_kit"


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _unconditional(distribution: str) -> list[str]:
    """What ``distribution`` needs here without any extra (markers evaluated)."""
    needed = []
    for text in metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            needed.append(_name(requirement.name))
    return needed


def test_the_base_install_requires_only_the_clients_dependencies() -> None:
    assert set(_unconditional("clusterforge-userdir")) == CLIENT_REQUIREMENTS
    assert _unconditional(KIT) == [], "the kit's base install is the standard library only"
    server = {
        _name(requirement)
        for requirement in metadata.requires("clusterforge-userdir") or []
        if 'extra == "server"' in requirement
    }
    assert server >= SERVER_ONLY


def _closure(roots: set[str]) -> set[str]:
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(_unconditional(name))
    return seen


def _top_level_entries(distribution: str) -> set[str]:
    entries = set()
    for file in metadata.distribution(distribution).files or []:
        first = file.parts[0]
        if first.endswith((".dist-info", ".data")) or first in {"..", "__pycache__"}:
            continue
        entries.add(first)
    return entries


@pytest.mark.slow
def test_the_client_imports_and_runs_in_a_fresh_virtualenv_without_the_server(
    tmp_path: Path,
) -> None:
    closure = _closure(CLIENT_REQUIREMENTS)
    assert not closure & SERVER_ONLY, closure
    site = tmp_path / "stand-in-index-site"
    site.mkdir()
    for distribution in closure - {KIT}:
        origin = Path(str(metadata.distribution(distribution).locate_file("")))
        for entry in _top_level_entries(distribution):
            (site / entry).symlink_to(origin / entry)
    (site / PACKAGE.name).symlink_to(PACKAGE)
    (site / KIT_PACKAGE.name).symlink_to(KIT_PACKAGE)
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "stand-in-index.pth").write_text(f"{site}\n")
    script = textwrap.dedent(
        """
        import sys
        import clusterforge_userdir
        from clusterforge_userdir import ClientConfig, UserDirectoryClient

        with UserDirectoryClient(config=ClientConfig(root_uri="http://127.0.0.1:9")):
            pass
        server = ("fastapi", "sqlalchemy", "uvicorn")
        loaded = sorted(name for name in server if name in sys.modules)
        print("loaded:", loaded)
        for name in ("fastapi", "sqlalchemy", "alembic", "uvicorn"):
            try:
                __import__(name)
            except ModuleNotFoundError:
                continue
            print("importable:", name)
        try:
            clusterforge_userdir.create_app
        except ImportError as error:
            print("create_app:", "server" in str(error))
        try:
            import clusterforge_userdir.cli
        except SystemExit as error:
            print("cli:", "pip install 'clusterforge-userdir[server]'" in str(error))
        """
    )
    answer = subprocess.run(
        [python, "-I", "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines() == ["loaded: []", "create_app: True", "cli: True"]
    assert sys.prefix != str(environment)
