"""bench/rolling --nodes N --zones Z: the zone roll against the node-by-node roll of the
same nodes, in one run, under the load client.

Alternating rounds (``--rounds``, at least 3 of each): round 1 runs the node roll then the
zone roll, round 2 the zone roll then the node roll, and so on, so that neither mode
always inherits the other's after-effects (a warm page cache, merges, a JVM still
compiling). Each part is ``ansible-playbook -i inventories/lab playbooks/rolling_restart.yml
-e opensearch_rolling_batch=<mode>`` under its own ``ClusterLoad``, timed from start to the
playbook's exit, and starts once the machine is quiet (``--quiet-load``). Recorded per
part: seconds, the batches the playbook ran (counted from its output: one play header
per serial step), nodes restarted (JVM start times), the load client's report, the
1-minute load average at the start and at the end. Then the medians of each mode and
their ratio, zone / node.

On separate hosts a batch costs about one node's restart, so the ratio tends to the
number of batches over the number of nodes (zones over nodes when every zone restarts in
one batch). On one 2-core machine the nodes of a batch start their JVMs on the same two
cores at once, so a batch costs more than one node's restart: the ratio measured here is
that machine's, not a claim about separate hosts.
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import one_minute_load, wait_until_quiet
from rolls import restarted, run_playbook, say, under_load

from clusterforge.testing.loadcheck import LoadReport, LoadTarget

HEADING = "## rolling by zone (bench/rolling --zones)"
MODES = ("node", "zone")
# The serial plays of playbooks/rolling.yml: each serial step prints its play's header.
BATCH_PLAYS = {
    "node": "Restart nodes one at a time",
    "zone": "Restart nodes batch by batch (opensearch_rolling_batch zone)",
}
MIN_ROUNDS = 3


@dataclass
class Roll:
    mode: str
    round: int
    seconds: float
    batches: int
    restarted: int
    report: LoadReport
    load_start: float
    load_end: float
    note: str = ""


def order_of_round(index: int) -> tuple[str, str]:
    """Round 0 rolls node then zone, round 1 zone then node, and so on."""
    return MODES if index % 2 == 0 else (MODES[1], MODES[0])


def count_batches(output: str, mode: str) -> int:
    """How many serial steps the playbook ran in ``mode``: its play's headers."""
    header = re.escape(f"PLAY [{BATCH_PLAYS[mode]}]")
    return len(re.findall(header, output))


def check_lab(facts: dict[str, Any], nodes: int, zones: int) -> str | None:
    """Why the running lab is not the one asked for, or None."""
    have_nodes = len(facts.get("nodes") or [])
    have_zones = len({node.get("zone") for node in facts.get("nodes") or [] if node.get("zone")})
    if have_nodes != nodes or have_zones != zones:
        return (
            f"the lab has {have_nodes} node(s) in {have_zones} zone(s), not {nodes} in {zones}: "
            f"scripts/up --nodes {nodes} --zones {zones} first"
        )
    return None


def summarize(rolls: list[Roll]) -> dict[str, dict[str, float]]:
    """Per mode: the median seconds, batches and load at start, and the rounds run."""
    out = {}
    for mode in MODES:
        mine = [roll for roll in rolls if roll.mode == mode]
        if mine:
            out[mode] = {
                "median_s": statistics.median(roll.seconds for roll in mine),
                "batches": statistics.median(roll.batches for roll in mine),
                "load_start": statistics.median(roll.load_start for roll in mine),
                "rounds": len(mine),
            }
    return out


def record(rolls: list[Roll], *, nodes: int, zones: int, load_before: str, load_after: str) -> str:
    rows = [
        "| round | mode | seconds | batches | nodes restarted | requests | failed | "
        "red seen | lost writes | p50 / p99 / max ms | 1-min load at start / end |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for roll in rolls:
        report = roll.report
        mode = roll.mode + (f" ({roll.note})" if roll.note else "")
        rows.append(
            f"| {roll.round} | {mode} | {roll.seconds:.1f} | {roll.batches} | "
            f"{roll.restarted} of {nodes} | {report.requests} | {report.failed} | "
            f"{'yes' if report.red_seen else 'no'} | "
            f"{report.lost_writes} of {report.acknowledged_writes} | "
            f"{report.latency_p50_ms:.0f} / {report.latency_p99_ms:.0f} / "
            f"{report.latency_max_ms:.0f} | {roll.load_start:.2f} / {roll.load_end:.2f} |"
        )
    summary = summarize(rolls)
    lines = [
        f"Rerun: `bench/rolling/run --nodes {nodes} --zones {zones}` against a lab from "
        f"`scripts/up --nodes {nodes} --zones {zones}`. Run "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on a machine with "
        f"{os.cpu_count()} cores; load average (1, 5, 15 min) {load_before} before and "
        f"{load_after} after. Each part: `playbooks/rolling_restart.yml -e "
        "opensearch_rolling_batch=<mode>` under `clusterforge.testing.loadcheck.ClusterLoad`, "
        "rounds alternating which mode goes first.",
        "",
        *rows,
        "",
    ]
    for mode, values in summary.items():
        lines.append(
            f"- {mode}: median {values['median_s']:.1f} s over {values['rounds']} rounds, "
            f"{values['batches']:g} batches, median 1-min load at start {values['load_start']:.2f}"
        )
    if "node" in summary and "zone" in summary:
        ratio = summary["zone"]["median_s"] / summary["node"]["median_s"]
        batches = summary["zone"]["batches"] / summary["node"]["batches"]
        lines.append(
            f"- zone / node: {ratio:.2f} of the time for {batches:.2f} of the batches. On "
            "separate hosts the ratio tends to the batches' ratio (zones / nodes); here the "
            "nodes of a batch start their JVMs on the same 2 cores at once."
        )
    return "\n".join(lines) + "\n"


def roll_once(
    target: LoadTarget,
    mode: str,
    round_index: int,
    *,
    playbook: Path,
    jvm_start_times: Callable[[], dict[str, int]],
    settle: Callable[[], str],
    quiet_load: float,
) -> Roll:
    """One roll of the lab in ``mode`` under load; ``settle`` waits until it is green again
    (and resets allocation a failed playbook left limited), returning a note."""
    load_start = wait_until_quiet(quiet_load, what=f"the {mode} roll of round {round_index}")
    before = jvm_start_times()
    log = Path(tempfile.gettempdir()) / f"clusterforge-bench-rolling-{mode}-{round_index}.log"
    say(f"round {round_index}: the {mode} roll (output in {log})")
    seconds, report, exit_status = under_load(
        target,
        f"bench-rolling-{mode}-{round_index}",
        lambda: run_playbook(playbook, log, "-e", f"opensearch_rolling_batch={mode}"),
    )
    notes = [f"playbook exit {exit_status}"] if exit_status else []
    notes.append(settle())
    return Roll(
        mode=mode,
        round=round_index,
        seconds=seconds,
        batches=count_batches(log.read_text(), mode),
        restarted=restarted(before, jvm_start_times()),
        report=report,
        load_start=load_start,
        load_end=one_minute_load(),
        note="; ".join(filter(None, notes)),
    )


def clean(roll: Roll, nodes: int) -> bool:
    return roll.report.ok and not roll.note and roll.restarted == nodes


def compare(roll_in: Callable[[str, int], Roll], *, nodes: int, rounds: int) -> list[Roll]:
    """``rounds`` alternating rounds of both rolls, each ``roll_in(mode, round)``
    (:func:`roll_once` with the lab's particulars); stops at the first roll that failed a
    request, lost a write, saw red or left a node unrestarted (a broken roll is not timed
    again)."""
    rolls = []
    for round_index in range(1, max(rounds, MIN_ROUNDS) + 1):
        for mode in order_of_round(round_index - 1):
            roll = roll_in(mode, round_index)
            rolls.append(roll)
            say(
                f"round {round_index}, {mode}: {roll.seconds:.1f} s, {roll.batches} batches, "
                f"{roll.restarted} restarted, {roll.report.failed} failed, "
                f"{roll.report.lost_writes} lost"
            )
            if not clean(roll, nodes):
                say(f"stopping: the {mode} roll of round {round_index} was not clean")
                return rolls
    return rolls
