"""Rerun benchmark: the idempotent ``playbooks/site.yml`` on the running lab, against
``ansible -m ping`` on the same hosts, side by side in one run (issue 14, item 1).

Each round runs, one after the other: ``ansible all -m ping`` with the checkout's
strategy (ansible.cfg: Mitogen), the same with ``ANSIBLE_STRATEGY=linear``, and
``ansible-playbook -i inventories/lab playbooks/site.yml``, whose recap must say
changed=0 on every host (otherwise it was no idempotent rerun, and the benchmark says so
and exits 1). The ratios are medians over the rounds: rerun / ping for each strategy.

Needs the lab from ``scripts/up`` (any mode; the issue's figure is the tls lab with its
apps host). Not a test: it measures and records into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass

from benchlib import (
    REPO,
    add_quiet_option,
    load_average,
    timed_ping,
    wait_until_quiet,
    write_section,
)

from clusterforge.lab.cluster import Lab

LAB_DIR = REPO / "inventories" / "lab"
HEADING = "## rerun (bench/rerun)"


def say(message: str) -> None:
    print(f"bench/rerun: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Round:
    ping: float
    ping_linear: float
    rerun: float
    changed: int
    load: float  # the 1-minute load average when the round started


def measure_round(lab: Lab, quiet_load: float, number: int) -> Round:
    load = wait_until_quiet(quiet_load, what=f"round {number}")
    ping = timed_ping(LAB_DIR, "all")
    ping_linear = timed_ping(LAB_DIR, "all", "linear")
    started = time.monotonic()
    changed = lab.run_playbook(echo=False)
    return Round(ping, ping_linear, time.monotonic() - started, changed, load)


def record(
    rounds: list[Round], facts: dict[str, object], loads: tuple[str, str], quiet_load: float
) -> str:
    ping = statistics.median(item.ping for item in rounds)
    linear = statistics.median(item.ping_linear for item in rounds)
    rerun = statistics.median(item.rerun for item in rounds)
    nodes = facts.get("nodes")
    hosts = (len(nodes) if isinstance(nodes, list) else 0) + (1 if facts.get("services") else 0)
    lines = [
        "| round | ping s (checkout's strategy) | ping s (linear) | rerun s | changed "
        "| 1-min load at its start |",
        "|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {number} | {item.ping:.2f} | {item.ping_linear:.2f} | {item.rerun:.2f} "
            f"| {item.changed} | {item.load:.2f} |"
            for number, item in enumerate(rounds, start=1)
        ),
        f"| median | {ping:.2f} | {linear:.2f} | {rerun:.2f} | | |",
    ]
    return (
        f"Run `bench/rerun/run --rounds {len(rounds)}` against the lab from `scripts/up` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {facts.get('mode')} mode, "
        f"{hosts} hosts (the nodes and the apps host); a machine with 2 cores; load average "
        f"(1, 5, 15 min) {loads[0]} before and {loads[1]} after, as /proc/loadavg read "
        "them). Each round: `ansible all -m ping` with the checkout's strategy, the same "
        "with `linear`, then `playbooks/site.yml`, whose recap must say changed=0. "
        + (
            f"Each round started once the 1-minute load average was below {quiet_load} "
            "(or after 5 minutes of waiting).\n\n"
            if quiet_load > 0
            else "The rounds did not wait for the load to fall (`--quiet-load 0`).\n\n"
        )
        + "\n".join(lines)
        + f"\n\nRerun / ping, medians: **{rerun / ping:.1f}x** against the checkout's "
        f"strategy, **{rerun / linear:.1f}x** against `linear`.\n"
    )


def main() -> int:
    if "--monitoring-ab" in sys.argv[1:]:
        # The rerun with the lab's monitoring against the rerun without it (issue 42).
        import monitoring_ab

        return monitoring_ab.main(sys.argv[1:])
    if "--profile" in sys.argv[1:]:
        # Where the rerun's time goes, task by task, Mitogen and linear (issue 54).
        import rerun_profile

        return rerun_profile.main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="rounds to run (default 5)")
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    add_quiet_option(parser, default=1.0)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give at least 1")
    lab_json = LAB_DIR / "lab.json"
    if not lab_json.exists():
        raise SystemExit(f"{lab_json} does not exist: start the lab with scripts/up first")
    facts = json.loads(lab_json.read_text())
    lab = Lab(repo=REPO, lab_dir=LAB_DIR)
    load_before = load_average()
    say(f"load average before: {load_before}")
    # The first run after a change may still have work to do; it is not measured.
    say("a first site.yml run, not measured, so the measured ones start from the same state")
    lab.run_playbook(echo=False)
    rounds = []
    for number in range(1, args.rounds + 1):
        rounds.append(measure_round(lab, args.quiet_load, number))
        item = rounds[-1]
        say(
            f"round {number}: ping {item.ping:.2f} s, linear {item.ping_linear:.2f} s, "
            f"rerun {item.rerun:.2f} s (changed={item.changed})"
        )
    summary = record(rounds, facts, (load_before, load_average()), args.quiet_load)
    print(summary)
    if not args.no_record:
        write_section(HEADING, summary, before="## rolling (bench/rolling)")
    changed = [item.changed for item in rounds if item.changed]
    if changed:
        say(f"{len(changed)} rerun(s) changed something: not idempotent, so no ratio holds")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
