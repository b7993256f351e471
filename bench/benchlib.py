"""What the benchmarks share: the machine's load, `ansible -m ping`, RESULTS.md sections.

Imported by the bench scripts; their ``run`` wrappers put bench/ on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
