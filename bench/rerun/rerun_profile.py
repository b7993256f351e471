"""Where a rerun's time goes (issue 54, item 1): the idempotent ``playbooks/site.yml`` on
the running lab, timed task by task with Ansible's own profiling callback
(``ansible.posix.profile_tasks``), with the checkout's strategy (Mitogen) and with
``linear``, in alternating rounds, beside ``ansible all -m ping`` with each.

Each round runs the two strategies in turn (the first round Mitogen first, the next
``linear`` first, and so on), each as a ping and then the rerun, whose recap must say
changed=0 on every host. The callback prints, at each task's start, how long the one
before took; this script gives each such figure to its task and to the play around it,
and reports medians over the rounds: the plays, the slowest tasks, the task count, the
rerun and its ratio to the ping. Needs the lab from ``scripts/up``. Not a test: it
measures and records into bench/RESULTS.md, one section per node count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field

from benchlib import (
    REPO,
    add_quiet_option,
    load_average,
    timed_ping,
    wait_until_quiet,
    write_section,
)

LAB_DIR = REPO / "inventories" / "lab"
CHECKOUT = "checkout"  # ansible.cfg's strategy: Mitogen's linear
LINEAR = "linear"
# "Sunday 29 November 2026  01:40:00 +0000 (0:00:00.123)       0:00:05.000 ****": the
# task before took the figure in brackets.
BANNER = re.compile(r"\((\d+):(\d\d):(\d\d)\.(\d{3})\)\s+\d+:\d\d:\d\d\.\d{3} \*")
HEADER = re.compile(r"^(PLAY|TASK|RUNNING HANDLER) \[(.*)\] \*+$")
RECAP = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)")


def say(message: str) -> None:
    print(f"bench/rerun --profile: {message}", file=sys.stderr, flush=True)


@dataclass
class Profile:
    """One rerun: its wall time, changed count and seconds per (play, task)."""

    seconds: float
    changed: int
    tasks: list[tuple[str, str, float]] = field(default_factory=list)

    def by_play(self) -> dict[str, float]:
        plays: dict[str, float] = defaultdict(float)
        for play, _task, seconds in self.tasks:
            plays[play] += seconds
        return dict(plays)


def seconds_of(match: re.Match[str]) -> float:
    hours, minutes, seconds, millis = (int(part) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def parse(output: str) -> tuple[list[tuple[str, str, float]], int]:
    """The (play, task, seconds) of every task the callback timed, and the recap's changed
    total."""
    tasks: list[tuple[str, str, float]] = []
    play = task = ""
    current: tuple[str, str] | None = None
    changed = 0
    for line in output.splitlines():
        header = HEADER.match(line)
        if header:
            kind, name = header.groups()
            if kind == "PLAY":
                play = name
            else:
                task = name
            continue
        banner = BANNER.search(line)
        if banner:
            if current is not None:
                tasks.append((*current, seconds_of(banner)))
            # The banner follows the header of the task that starts now (the default
            # callback prints first; the run sets the banners to show at once).
            current = (play, task) if task else None
            continue
        recap = RECAP.match(line)
        if recap:
            changed += int(recap.group(2))
    return tasks, changed


def profiled_rerun(strategy: str) -> Profile:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
        "PROFILE_TASKS_SORT_ORDER": "none",
        "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all",
        # Every task header printed when its task starts, so each banner follows its own.
        "ANSIBLE_DISPLAY_SKIPPED_HOSTS": "true",
        "ANSIBLE_DISPLAY_OK_HOSTS": "true",
    }
    if strategy == LINEAR:
        env["ANSIBLE_STRATEGY"] = LINEAR
    command = [
        str(REPO / ".venv/bin/ansible-playbook"),
        "-i",
        str(LAB_DIR),
        str(REPO / "playbooks/site.yml"),
    ]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=REPO)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"site.yml failed ({strategy}):\n{result.stdout[-3000:]}{result.stderr}")
    tasks, changed = parse(result.stdout)
    return Profile(seconds, changed, tasks)


@dataclass
class Round:
    load: float
    ping: dict[str, float]
    rerun: dict[str, Profile]


def measure(rounds: int, quiet_load: float) -> list[Round]:
    measured = []
    for number in range(1, rounds + 1):
        order = [CHECKOUT, LINEAR] if number % 2 else [LINEAR, CHECKOUT]
        load = wait_until_quiet(quiet_load, what=f"round {number}")
        ping: dict[str, float] = {}
        rerun: dict[str, Profile] = {}
        for strategy in order:
            ping[strategy] = timed_ping(LAB_DIR, "all", None if strategy == CHECKOUT else LINEAR)
            rerun[strategy] = profiled_rerun(strategy)
        measured.append(Round(load, ping, rerun))
        say(
            f"round {number} (load {load:.2f}): "
            + ", ".join(
                f"{strategy}: ping {ping[strategy]:.2f} s, rerun {rerun[strategy].seconds:.2f} s "
                f"(changed={rerun[strategy].changed}, {len(rerun[strategy].tasks)} tasks)"
                for strategy in (CHECKOUT, LINEAR)
            )
        )
    return measured


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def slowest_tasks(measured: list[Round], strategy: str) -> list[tuple[str, str, float]]:
    """The 15 tasks with the highest median seconds over the rounds (a task that runs
    twice in a play, as a handler may, counts once with its total)."""
    per_task: dict[tuple[str, str], list[float]] = defaultdict(list)
    for item in measured:
        seen: dict[tuple[str, str], float] = defaultdict(float)
        for play, task, seconds in item.rerun[strategy].tasks:
            seen[(play, task)] += seconds
        for key, seconds in seen.items():
            per_task[key].append(seconds)
    ranked = sorted(per_task.items(), key=lambda entry: -median(entry[1]))[:15]
    return [(play, task, median(values)) for (play, task), values in ranked]


def report(measured: list[Round], nodes: int, hosts: int, loads: tuple[str, str]) -> str:
    strategies = (CHECKOUT, LINEAR)
    ping = {s: median([r.ping[s] for r in measured]) for s in strategies}
    rerun = {s: median([r.rerun[s].seconds for r in measured]) for s in strategies}
    # Each rerun's seconds per play, summed once.
    by_play = {s: [r.rerun[s].by_play() for r in measured] for s in strategies}
    plays: list[str] = []
    for seconds_by_play in by_play[CHECKOUT]:
        for play in seconds_by_play:
            if play not in plays:
                plays.append(play)
    play_rows = []
    for play in plays:
        cells = []
        for strategy in strategies:
            per_round = [seconds.get(play, 0.0) for seconds in by_play[strategy]]
            cells.append(f"{median(per_round):.2f}")
        tasks = median(
            [float(sum(1 for p, _t, _s in r.rerun[CHECKOUT].tasks if p == play)) for r in measured]
        )
        play_rows.append(f"| {play} | {tasks:.0f} | {cells[0]} | {cells[1]} |")
    top = {strategy: slowest_tasks(measured, strategy) for strategy in strategies}
    task_count = median([float(len(r.rerun[CHECKOUT].tasks)) for r in measured])
    lines = [
        f"`bench/rerun/run --profile --rounds {len(measured)}` on the lab of {nodes} nodes "
        f"({hosts} hosts with the apps host), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"a machine with 2 cores; load average (1, 5, 15 min) {loads[0]} before, {loads[1]} "
        "after; 1-minute load at each round's start: "
        + ", ".join(f"{item.load:.2f}" for item in measured)
        + ". Each round runs ping and the rerun with the checkout's strategy (Mitogen) and "
        "with `linear`, the first round Mitogen first, the next `linear` first. Every rerun "
        "said changed=0.",
        "",
        "| | ping s | rerun s | rerun / ping |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {ping[s]:.2f} | {rerun[s]:.2f} | **{rerun[s] / ping[s]:.1f}x** |"
            for name, s in (("Mitogen (the checkout's)", CHECKOUT), ("`linear`", LINEAR))
        ),
        # The figure: the Mitogen rerun against Ansible's own (linear) ping.
        f"| Mitogen rerun / `linear` ping | | | **{rerun[CHECKOUT] / ping[LINEAR]:.1f}x** |",
        "",
        f"Tasks timed per rerun (median): {task_count:.0f}. Per play, median seconds:",
        "",
        "| play | tasks | Mitogen s | `linear` s |",
        "|---|---:|---:|---:|",
        *play_rows,
        "",
    ]
    for name, strategy in (("Mitogen", CHECKOUT), ("`linear`", LINEAR)):
        lines += [
            "",
            f"The 15 slowest tasks with {name} (median seconds; a play's first task includes "
            "the play's start):",
            "",
            "| play | task | s |",
            "|---|---|---:|",
            *(f"| {play} | {task} | {seconds:.2f} |" for play, task, seconds in top[strategy]),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", action="store_true", help="this benchmark")
    parser.add_argument("--rounds", type=int, default=5, help="rounds to run (default 5)")
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    add_quiet_option(parser, default=2.0)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give at least 1")
    lab_json = LAB_DIR / "lab.json"
    if not lab_json.exists():
        raise SystemExit(f"{lab_json} does not exist: start the lab with scripts/up first")
    facts = json.loads(lab_json.read_text())
    nodes = len(facts.get("nodes") or [])
    hosts = nodes + (1 if facts.get("services") else 0)
    before = load_average()
    say("a first site.yml run, not measured, so the measured ones start from the same state")
    profiled_rerun(CHECKOUT)
    measured = measure(args.rounds, args.quiet_load)
    summary = report(measured, nodes, hosts, (before, load_average()))
    print(summary)
    changed = [r.rerun[s].changed for r in measured for s in (CHECKOUT, LINEAR)]
    if any(changed):
        say(f"a rerun changed something ({changed}): not idempotent, so nothing is recorded")
        return 1
    if not args.no_record:
        write_section(
            f"## rerun profile, {nodes} nodes (bench/rerun --profile)",
            summary,
            before="## rolling (bench/rolling)",
        )
    return 0
