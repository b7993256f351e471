"""The collection tarball ships the toolkit and the example inventory, never a secret.

Users keep their inventory inside the checkout (README: inventories/<yours>) and build
the collection from it; the toolkit writes keys, passwords and tokens beside each
inventory. These tests put every kind of generated file where the toolkit would, build
the tarball with ansible-galaxy as a user does, and read what it holds: names and
contents.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "inventories" / "example"
GALAXY = Path(sys.executable).parent / "ansible-galaxy"

# Every file the toolkit (or the lab) writes beside an inventory, relative to it.
GENERATED = (
    ".pki/ca-key.pem",
    ".pki/ca.pem",
    ".pki/search-1-key.pem",
    ".pki/admin-key.pem",
    ".pki/ca-rotation.json",
    ".pki/retired/opensearch-4-20261125T000000Z.pem",
    ".secrets/admin",
    ".secrets/ca_passphrase",
    ".secrets/user_directory_token",
    ".secrets/order_service_auth_token",
    # scripts/up --ldap: the bind password, the people's, the directory's key and tree.
    ".secrets/ldap_bind",
    ".secrets/ldap_alice",
    ".directory/tls/directory-key.pem",
    ".directory/tree.ldif",
    ".opensearch/orders-writer.password",
    ".postgresql/order_service.password",
    ".postgresql/user_directory.password",
    ".ssh/id_ed25519",
    ".ssh/known_hosts",
    ".snapshots/indices/Xy3/0/snap-1.dat",
    ".state/opensearch-1/sshd.conf",
    "lab.json",
    "group_vars/opensearch/extra.password",
)
EXAMPLE_SECRETS = (
    "EXAMPLE-ONLY-vault-password.txt",
    "group_vars/opensearch/vault.yml",
    "group_vars/user_directory/vault.yml",
)


def _plant(inventory: Path, marker: str) -> None:
    """Write every generated file under ``inventory``, each holding ``marker``."""
    for relative in GENERATED:
        path = inventory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        # lab.json stays JSON: a reader that finds it meanwhile gets a readable file.
        text = f'{{"planted": "{marker}"}}' if path.name == "lab.json" else marker
        path.write_text(f"{text} {relative}\n" if text == marker else text + "\n")


def _build(source: Path, out: Path) -> Path:
    completed = subprocess.run(
        [str(GALAXY), "collection", "build", "--output-path", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (tarball,) = out.glob("clusterforge-stack-*.tar.gz")
    return tarball


def _contents(tarball: Path) -> dict[str, bytes]:
    with tarfile.open(tarball) as archive:
        return {
            member.name: extracted.read()
            for member in archive.getmembers()
            if member.isfile() and (extracted := archive.extractfile(member)) is not None
        }


def _assert_nothing_generated(contents: dict[str, bytes], marker: str) -> None:
    for name, data in contents.items():
        parts = PurePosixPath(name).parts
        assert not any(part.startswith(".") for part in parts), name
        assert not name.endswith(".password"), name
        assert parts[-1] != "lab.json", name
        if parts[0] == "inventories":
            assert parts[1] == "example", name
        assert marker.encode() not in data, f"{name} holds a planted secret"
    shipped = set(contents)
    for relative in EXAMPLE_SECRETS:
        assert f"inventories/example/{relative}" not in shipped
    # The example itself ships: it is how a user starts an inventory.
    for relative in ("hosts.yml", "group_vars/opensearch/vars.yml", "host_vars/search-1.yml"):
        assert f"inventories/example/{relative}" in shipped
    # And so does what the collection needs to run and to install its library.
    for needed in (
        "pyproject.toml",
        "src/clusterforge/pki/generated_secrets.py",
        "plugins/lookup/clusterforge_generated_secret.py",
        "playbooks/site.yml",
        "roles/postgresql/tasks/databases.yml",
        "meta/runtime.yml",
        "LICENSE",
        "plugins/filter/clusterforge_file_entries.yml",
        # The API actions' shared base, imported by its collection name.
        "plugins/plugin_utils/api_action.py",
    ):
        assert needed in shipped, needed


@pytest.fixture
def scratch_inventories() -> Iterator[str]:
    """A copy of the example inside the checkout with every generated file beside it,
    and the lab's generated files unless a lab is there; all removed afterwards."""
    marker = f"planted-secret-{secrets.token_hex(8)}"
    scratch = REPO / "inventories" / f"zz-scratch-{secrets.token_hex(4)}"
    lab = REPO / "inventories" / "lab"
    made_lab = not lab.exists()
    try:
        shutil.copytree(EXAMPLE, scratch)
        _plant(scratch, marker)
        if made_lab:
            _plant(lab, marker)
            (lab / "hosts.yml").write_text(f"# {marker}\n")
        yield marker
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if made_lab:
            shutil.rmtree(lab, ignore_errors=True)


def test_the_checkouts_tarball_holds_no_inventory_but_the_example_and_no_secret(
    scratch_inventories: str, tmp_path: Path
) -> None:
    tarball = _build(REPO, tmp_path)
    _assert_nothing_generated(_contents(tarball), scratch_inventories)


def test_generated_files_in_the_example_and_deep_in_the_tree_stay_out(tmp_path: Path) -> None:
    # On a copy of the tracked files, so that the example in the checkout, which other
    # tests render, is never touched: generated files inside the example itself (a
    # scripts/render of it writes .pki there) and hidden directories deep in the trees
    # that ship.
    source = tmp_path / "checkout"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    marker = f"planted-secret-{secrets.token_hex(8)}"
    _plant(source / "inventories" / "example", marker)
    for deep in (
        "services/orders/.venv/lib/site.py",
        "roles/postgresql/tasks/.secrets/token",
        "engine-plugins/analysis-smartcn/src/main/java/org/clusterforge/.ssh/id_ed25519",
        "src/clusterforge/plan/templates/x.password",
        "id_ed25519",
        "notes.txt",
    ):
        path = source / deep
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{marker} {deep}\n")
    contents = _contents(_build(source, tmp_path / "out"))
    _assert_nothing_generated(contents, marker)
    # Top-level files no directive names stay out too (an allow-list, not a deny-list).
    assert "id_ed25519" not in contents and "notes.txt" not in contents


def _glob(pattern: str) -> re.Pattern[str]:
    """A manifest glob as distlib reads it: ``*`` and ``?`` never cross a ``/``."""
    parts = []
    for char in pattern:
        parts.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
    return re.compile("".join(parts) + r"\Z")


def _shipped_by_manifest(path: str, directives: list[str]) -> bool:
    """Whether galaxy.yml's directives take ``path`` (a file, relative to the root): named
    by an include, a recursive-include or a graft, and by no exclude or prune after it."""
    name = PurePosixPath(path).name
    parents = [str(parent) for parent in PurePosixPath(path).parents if str(parent) != "."]
    included = False
    for directive in directives:
        kind, *arguments = directive.split()
        if kind == "include":
            included |= any(_glob(pattern).match(path) for pattern in arguments)
        elif kind == "recursive-include":
            directory, *patterns = arguments
            included |= path.startswith(f"{directory}/") and any(
                _glob(pattern).match(name) for pattern in patterns
            )
        elif kind == "graft":
            included |= any(path.startswith(f"{directory}/") for directory in arguments)
        elif kind == "exclude":
            included &= not any(_glob(pattern).match(path) for pattern in arguments)
        elif kind == "recursive-exclude":
            directory, *patterns = arguments
            included &= not (
                path.startswith(f"{directory}/")
                and any(_glob(pattern).match(name) for pattern in patterns)
            )
        elif kind == "global-exclude":
            included &= not any(_glob(pattern.lstrip("/")).match(name) for pattern in arguments)
        elif kind == "prune":
            included &= not any(
                _glob(pattern).match(parent) for pattern in arguments for parent in parents
            )
        else:
            raise AssertionError(f"galaxy.yml: a directive this test does not read: {directive}")
    return included


def test_the_tarball_is_the_manifest_of_the_tracked_files_and_no_test_or_cache(
    tmp_path: Path,
) -> None:
    # A copy of what git tracks, with what test runs leave beside it: the tarball is then
    # exactly the tracked files galaxy.yml's manifest names.
    source = tmp_path / "checkout"
    tracked = [
        name
        for name in subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
        if name and (REPO / name).is_file()
    ]
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    caches = (
        "services/orders/tests/__pycache__/conftest.cpython-311.pyc",
        "services/userdir/tests/__pycache__/notes.txt",
        "services/kit/src/clusterforge_service_kit/__pycache__/tokens.txt",
        "src/clusterforge/plan/__pycache__/plan.txt",
        "roles/opensearch/__pycache__/stray.yml",
        "services/orders/.pytest_cache/v/cache/lastfailed",
        "services/orders/tests/test_new_one.py",
    )
    for cache in caches:
        (source / cache).parent.mkdir(parents=True, exist_ok=True)
        (source / cache).write_text("left by a test run\n")
    directives = yaml.safe_load((REPO / "galaxy.yml").read_text())["manifest"]["directives"]

    shipped = set(_contents(_build(source, tmp_path / "out"))) - {"MANIFEST.json", "FILES.json"}

    expected = {name for name in tracked if _shipped_by_manifest(name, directives)}
    assert shipped == expected, (
        f"in the tarball, not named by the manifest: {sorted(shipped - expected)}; "
        f"named, not in the tarball: {sorted(expected - shipped)}"
    )
    for name in shipped:
        parts = PurePosixPath(name).parts
        assert "__pycache__" not in parts, name
        assert parts[0] not in {"molecule", "bench", ".ci", "dist"}, name
        assert not (parts[0] == "services" and "tests" in parts), name
        assert parts[0] != "tests" or parts[1] == "sanity", name
    # What a user needs, and what ansible-test reads from the installed collection.
    for needed in (
        "meta/runtime.yml",
        "plugins/plugin_utils/library.py",
        "services/orders/src/clusterforge_orders/app.py",
        "scripts/up",
        "tests/sanity/ignore-2.17.txt",
        *(f"playbooks/{path.name}" for path in (REPO / "playbooks").glob("*.yml")),
    ):
        assert needed in shipped, needed
    for test_command in ("scripts/test", "scripts/sanity", "scripts/postgres-up"):
        assert test_command not in shipped
