"""What a node gets of the code that runs on the hosts (clusterforge.host_runners).

Each concern that runs a timer (the snapshot schedule, the index lifecycle) gets the
package in a directory of its own, ``<directory>/host_runners/``: the package's shared
files and its own runner module, as they are in this checkout. Its own directory, so the
role that removes one concern's timer removes its files without breaking the other's.
The unit runs ``python3 -I <directory>/host_runners/__main__.py <runner> <config.json>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import clusterforge.host_runners

PACKAGE_NAME = "host_runners"
# The package's files every runner needs: the package itself, its entry, the shared code.
SHARED_FILES = ("__init__.py", "__main__.py", "common.py")
RUNNER_NAMES = ("snapshots", "lifecycle")
# Where each runner's timer and its service go; a unit placed there changed reloads
# systemd (the roles compare the paths they placed with it).
UNIT_DIR = "/etc/systemd/system"
# Where each runner stood before it was a package (one file); a rerun removes it.
RETIRED_RUNNER_PATHS = {
    "snapshots": "/usr/local/lib/clusterforge/snapshot_runner.py",
    "lifecycle": "/usr/local/lib/clusterforge/lifecycle_runner.py",
}


def package_source_dir() -> Path:
    return Path(clusterforge.host_runners.__file__).resolve().parent


def entry_path(directory: str) -> str:
    """The file the unit's python3 runs."""
    return f"{directory}/{PACKAGE_NAME}/__main__.py"


def runner_files(runner: str, directory: str) -> list[dict[str, Any]]:
    """The package's files for ``runner`` (clusterforge_files entries; root's, 0644)."""
    if runner not in RUNNER_NAMES:
        raise ValueError(f"{runner}: not a host runner ({', '.join(RUNNER_NAMES)})")
    source = package_source_dir()
    return [
        {
            "path": f"{directory}/{PACKAGE_NAME}/{name}",
            "content": (source / name).read_text(),
            "owner": "root",
            "group": "root",
            "mode": "0644",
        }
        for name in (*SHARED_FILES, f"{runner}.py")
    ]


def unit_files(unit: str, *, service_unit: str, timer_unit: str) -> list[dict[str, Any]]:
    """The runner's service and timer (clusterforge_files entries; root's, 0644)."""
    return [
        {
            "path": f"{UNIT_DIR}/{unit}.{kind}",
            "owner": "root",
            "group": "root",
            "mode": "0644",
            "content": content,
        }
        for kind, content in (("service", service_unit), ("timer", timer_unit))
    ]


def credentials_json(username: str, password: str) -> str:
    """The runner's credentials file, as the runner reads it (one line of JSON)."""
    return json.dumps({"username": username, "password": password})


def config_json(config: Mapping[str, Any]) -> str:
    """A node's config.json: indented, keys sorted, as a person reads it on the node."""
    return json.dumps(config, indent=4, sort_keys=True, separators=(",", ": "))


def runner_directories(directory: str) -> list[dict[str, Any]]:
    """The directories the files go in, and their parent, root's and 0755 (the entry puts
    ``directory`` on ``sys.path``, so no one else may write there)."""
    return [
        {"path": path, "owner": "root", "group": "root", "mode": "0755"}
        for path in (directory.rsplit("/", 1)[0], directory, f"{directory}/{PACKAGE_NAME}")
    ]


def runner_placement(runner: str, directory: str) -> dict[str, Any]:
    """What a node gets of ``runner``: the unit's entry, the package's directories and
    files, and the paths an older version left (removed on a rerun)."""
    return {
        "runner_dir": directory,
        "runner_path": entry_path(directory),
        "runner_name": runner,
        "runner_directories": runner_directories(directory),
        "retired_runner_paths": [RETIRED_RUNNER_PATHS[runner]],
    }
