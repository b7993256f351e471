"""The code that runs on the hosts (clusterforge.host_runners), as a host gets it: only the
files the plan ships for one runner (clusterforge.plan.cluster.host_runners), written to a fresh
directory, run by a separate ``python3 -I`` the way the units run it. No library is
installed on a host, so the package may import the standard library and itself only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterforge.plan.cluster.host_runners import RUNNER_NAMES, entry_path, runner_files
from clusterforge.plan.lifecycle.lifecycle import RUNNER_DIR as LIFECYCLE_DIR
from clusterforge.plan.snapshots.snapshot_schedule import RUNNER_DIR as SNAPSHOTS_DIR
from test_lifecycle_runner import FakeEngine, engine  # noqa: F401 - the fixture

# Imports every module of the package from the copy, then names each top-level module
# loaded that is neither the standard library's nor the package.
AUDIT = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    importlib.import_module(name)
foreign = sorted(
    {name.split(".")[0] for name in sys.modules}
    - set(sys.stdlib_module_names) - set(sys.builtin_module_names) - {"host_runners", "__main__"}
)
print(json.dumps(foreign))
"""


def _place(runner: str, directory: Path) -> Path:
    """The runner's planned files, written below ``directory``; the entry's path."""
    for entry in runner_files(runner, str(directory)):
        path = Path(entry["path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(entry["content"])
    return Path(entry_path(str(directory)))


def _run_entry(
    entry: Path, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The entry run as the units run it: this interpreter, isolated (-I)."""
    return subprocess.run(
        [sys.executable, "-I", str(entry), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=cwd,
    )


@pytest.mark.parametrize("runner", RUNNER_NAMES)
def test_a_runners_shipped_files_import_the_standard_library_and_themselves_only(
    runner: str, tmp_path: Path
) -> None:
    _place(runner, tmp_path)
    shipped = sorted(path.name for path in (tmp_path / "host_runners").iterdir())
    modules = [f"host_runners.{name.removesuffix('.py')}" for name in shipped]
    # -S as well: not even the interpreter's site-packages, so a stray import fails here.
    found = subprocess.run(
        [sys.executable, "-I", "-S", "-c", AUDIT, str(tmp_path), *modules],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []
    assert f"{runner}.py" in shipped and "common.py" in shipped


def test_the_plans_directories_are_the_runners_own() -> None:
    # Removing one concern's timer removes its directory, never the other's files.
    assert SNAPSHOTS_DIR != LIFECYCLE_DIR
    assert not SNAPSHOTS_DIR.startswith(LIFECYCLE_DIR + "/")
    assert not LIFECYCLE_DIR.startswith(SNAPSHOTS_DIR + "/")
    snapshot_paths = {entry["path"] for entry in runner_files("snapshots", SNAPSHOTS_DIR)}
    assert f"{SNAPSHOTS_DIR}/host_runners/lifecycle.py" not in snapshot_paths


def test_the_entry_refuses_an_unknown_runner(tmp_path: Path) -> None:
    entry = _place("snapshots", tmp_path)
    run = _run_entry(entry, "backups")
    assert run.returncode == 2
    assert "snapshots|lifecycle" in run.stderr


def test_the_lifecycle_runner_runs_from_its_shipped_files_as_the_unit_runs_it(
    engine: tuple[FakeEngine, dict[str, Any]],  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    """The real client over TLS to a real HTTPS server on loopback, basic auth, the state
    and metric written: a node that is not the elected manager records a standby run."""
    fake, config = engine
    entry = _place("lifecycle", tmp_path / "lib")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({**config, "node": "os-2", "node_name": "os-2"}))
    run = _run_entry(entry, "lifecycle", str(config_file), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("clusterforge-lifecycle node=os-2 role=standby state=OK ")
    assert any(path.startswith("/_cat/cluster_manager") for _, path, _ in fake.calls)
    metric = (Path(config["state_dir"]) / "clusterforge_lifecycle.prom").read_text()
    assert 'clusterforge_lifecycle_acting{cluster="lab"} 0' in metric


def test_the_snapshot_runner_runs_from_its_shipped_files_and_fails_closed(
    tmp_path: Path,
) -> None:
    """No credentials file: one ERROR line for the journal, exit 1, no traceback."""
    entry = _place("snapshots", tmp_path / "lib")
    config_file = tmp_path / "config.json"
    config_file.write_text(
        json.dumps({"credentials_file": str(tmp_path / "missing.json"), "node": "os-1"})
    )
    run = _run_entry(entry, "snapshots", str(config_file))
    assert run.returncode == 1
    assert run.stdout.startswith("clusterforge-snapshot state=ERROR ")
    assert "missing.json" in run.stdout
    assert run.stderr == ""
