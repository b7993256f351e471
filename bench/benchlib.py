"""What the benchmarks share: the machine's load, `ansible -m ping`, RESULTS.md sections.

Imported by the bench scripts; their ``run`` wrappers put bench/ on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_minute_load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def add_quiet_option(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--quiet-load",
        type=float,
        default=default,
        help=(
            "before each measured part, wait (at most 5 minutes) until the 1-minute load "
            f"average is below this (default {default}; 0 does not wait)"
        ),
    )


def wait_until_quiet(limit: float, *, what: str, timeout_s: float = 300.0) -> float:
    """Wait until the 1-minute load average is below ``limit``; return the last reading.

    A part that starts while the previous one's processes still load the machine is
    measured on a different machine: every part waits for the same calm first. After
    ``timeout_s`` it goes on and says so (the load is recorded either way).
    """
    load = one_minute_load()
    if limit <= 0 or load < limit:
        return load
    started = time.monotonic()
    said = started
    print(
        f"bench: waiting for the load average ({load:.2f}) to fall below {limit} before {what}",
        file=sys.stderr,
    )
    while load >= limit:
        if time.monotonic() - started > timeout_s:
            print(
                f"bench: the load average is still {load:.2f} after {timeout_s:.0f} s; "
                f"measuring {what} anyway",
                file=sys.stderr,
            )
            return load
        time.sleep(5)
        load = one_minute_load()
        if load >= limit and time.monotonic() - said >= 30:
            said = time.monotonic()
            print(f"bench: load average {load:.2f}, still waiting", file=sys.stderr)
    return load


def timed_ping(inventory: Path, pattern: str, strategy: str | None = None) -> float:
    """Seconds of `ansible -m ping` on ``pattern``; ``strategy`` overrides ansible.cfg's."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    if strategy:
        env["ANSIBLE_STRATEGY"] = strategy
    command = [str(REPO / ".venv/bin/ansible"), "-i", str(inventory), pattern]
    started = time.monotonic()
    result = subprocess.run(
        [*command, "-m", "ansible.builtin.ping"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise SystemExit(f"ansible -m ping failed: {result.stdout[-800:]}{result.stderr[-800:]}")
    return time.monotonic() - started


def write_section(heading: str, summary: str, *, before: str = "## userdir") -> None:
    """Replace ``heading``'s section of RESULTS.md with ``summary``; a new section goes
    in front of the heading ``before`` names (or at the end)."""
    text = RESULTS.read_text()
    start = text.find(heading + "\n")
    if start < 0:
        start = text.find("\n" + before)
        start = len(text) if start < 0 else start + 1
        end = start
    else:
        end = text.find("\n## ", start + len(heading))
        end = len(text) if end < 0 else end + 1
    RESULTS.write_text(text[:start] + heading + "\n\n" + summary.rstrip("\n") + "\n\n" + text[end:])
