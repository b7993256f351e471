"""What bench/rolling's two measurements (rolling_bench.py, zone_compare.py) share: their
message line, the playbook run against the lab, a disruption timed under the load client,
and the count of nodes that really restarted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from clusterforge.testing.loadcheck import ClusterLoad, LoadReport, LoadTarget

REPO = Path(__file__).resolve().parents[2]

Outcome = TypeVar("Outcome")


def say(message: str) -> None:
    print(f"bench/rolling: {message}", file=sys.stderr, flush=True)


def run_playbook(playbook: Path, log: Path, *extra_args: str) -> int:
    """``ansible-playbook -i inventories/lab`` with the checkout's ansible.cfg, its output
    written to ``log`` as it comes (to follow a long roll); its exit status."""
    with log.open("w") as stream:
        return subprocess.run(
            [
                str(REPO / ".venv/bin/ansible-playbook"),
                "-i",
                "inventories/lab",
                str(playbook),
                *extra_args,
            ],
            cwd=REPO,
            stdout=stream,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
            check=False,
        ).returncode


def under_load(
    target: LoadTarget, index: str, disrupt: Callable[[], Outcome]
) -> tuple[float, LoadReport, Outcome]:
    """The seconds ``disrupt`` took, the report of the load that ran meanwhile (writing to
    ``index``), and what ``disrupt`` returned."""
    with ClusterLoad(
        target, index=index, max_requests=10_000_000, max_seconds=3600, interval_s=0.05
    ) as load:
        started = time.monotonic()
        outcome = disrupt()
        seconds = time.monotonic() - started
    return seconds, load.report, outcome


def restarted(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """How many nodes of ``before`` (name: JVM start time) run a JVM started since."""
    return sum(1 for name, started in before.items() if after.get(name) != started)
