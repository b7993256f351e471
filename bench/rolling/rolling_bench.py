"""Rolling-restart benchmark: the playbook under client load, against the floor.

Measured in one run against the running lab (``inventories/lab/lab.json``), each part
under its own :class:`clusterforge.testing.loadcheck.ClusterLoad`:

1. rolling: ``ansible-playbook -i inventories/lab playbooks/rolling_restart.yml``
   (plan, then one node at a time: allocation to primaries and flush, restart, rejoin,
   allocation back, green), timed from start to the playbook's exit;
2. floor: the same three restarts done directly, one node at a time, the cluster manager
   last: ``docker exec <container> systemctl restart opensearch``, then wait until the
   node runs a new JVM, has rejoined and health is green again.

Both parts check that every node really restarted (its JVM start time changed). The
ratio is rolling / floor. Not a test: it measures and records into bench/RESULTS.md.

``--nodes N --zones Z`` measures something else, against a lab from ``scripts/up --nodes N
--zones Z``: the zone roll against the node-by-node roll of the same nodes, in alternating
rounds (``--rounds``, at least 3 of each), with their medians, batch counts and the load
average (zone_compare.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from benchlib import add_quiet_option, load_average, wait_until_quiet, write_section
from rolls import REPO, restarted, run_playbook, say, under_load
from zone_compare import HEADING as ZONE_HEADING
from zone_compare import MIN_ROUNDS, check_lab, clean, compare, roll_once
from zone_compare import record as record_zones

from clusterforge.lab.cluster import CONTAINER_PREFIX
from clusterforge.testing.loadcheck import LoadReport, LoadTarget

HEADING = "## rolling (bench/rolling)"
NODE_TIMEOUT_S = 300.0


@dataclass
class Part:
    name: str
    seconds: float
    report: LoadReport
    restarted: int
    note: str = ""
    per_node_s: dict[str, float] | None = None
    load: float = 0.0  # the 1-minute load average when the part started


class Cluster:
    """Questions the benchmark asks the lab, each to the first node that answers."""

    def __init__(self, target: LoadTarget) -> None:
        self.target = target
        self.client = target.http_client(timeout_s=15)

    def get(self, path: str) -> Any:
        errors = []
        for url in self.target.urls:
            try:
                response = self.client.get(url + path)
            except httpx.TransportError as error:
                errors.append(f"{url}: {type(error).__name__}")
                continue
            if response.status_code < 500:
                return response.json()
            errors.append(f"{url}: HTTP {response.status_code}")
        raise RuntimeError("no node answered " + path + ": " + "; ".join(errors))

    def jvm_start_times(self) -> dict[str, int]:
        nodes = self.get("/_nodes/jvm?filter_path=nodes.*.name,nodes.*.jvm.start_time_in_millis")
        return {
            node["name"]: node["jvm"]["start_time_in_millis"] for node in nodes["nodes"].values()
        }

    def cluster_manager(self) -> str:
        answer: list[dict[str, str]] = self.get("/_cat/cluster_manager?format=json")
        return answer[0]["node"]

    def green(self, node_count: int) -> bool:
        try:
            health = self.get(
                f"/_cluster/health?wait_for_status=green&wait_for_nodes={node_count}&timeout=5s"
            )
        except RuntimeError:
            return False
        return bool(health.get("status") == "green" and health.get("number_of_nodes") == node_count)

    def allocation_left_limited(self) -> str | None:
        """The persistent or transient allocation limit left behind, if any."""
        settings = self.get("/_cluster/settings?flat_settings=true")
        for scope in ("persistent", "transient"):
            value = settings.get(scope, {}).get("cluster.routing.allocation.enable")
            if value not in (None, "all"):
                return f"{scope} cluster.routing.allocation.enable={value}"
        return None

    def reset_allocation(self) -> None:
        body = {"persistent": {"cluster.routing.allocation.enable": None}}
        body["transient"] = dict(body["persistent"])
        self.client.put(f"{self.target.urls[0]}/_cluster/settings", json=body)

    def delete_index(self, index: str) -> None:
        for url in self.target.urls:
            try:
                self.client.delete(f"{url}/{index}")
                return
            except httpx.TransportError:
                continue


def wait_for(what: str, probe: Callable[[], bool], timeout_s: float = NODE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench/rolling: gave up waiting for {what} after {timeout_s:.0f}s")
        time.sleep(0.5)


def rolling_part(target: LoadTarget, cluster: Cluster, playbook: Path, nodes: int) -> Part:
    before = cluster.jvm_start_times()
    log = Path(tempfile.gettempdir()) / "clusterforge-bench-rolling-playbook.log"

    def disrupt() -> str:
        say(f"running {playbook.relative_to(REPO)} (output in {log})")
        exit_status = run_playbook(playbook, log)
        if exit_status != 0:
            say(f"the playbook failed ({exit_status}); its output is in {log}")
            return f"playbook exit {exit_status}"
        return ""

    seconds, report, note = under_load(target, "bench-rolling-playbook", disrupt)
    left = cluster.allocation_left_limited()
    if left:
        # A playbook that failed half-way may leave allocation limited; the lab must not.
        say(f"the playbook left {left}; resetting it")
        cluster.reset_allocation()
        note = "; ".join(filter(None, [note, f"left {left}, reset by the benchmark"]))
    wait_for("green after the playbook", lambda: cluster.green(nodes))
    restarted_nodes = restarted(before, cluster.jvm_start_times())
    return Part("rolling_restart.yml", seconds, report, restarted_nodes, note)


def floor_part(target: LoadTarget, cluster: Cluster, nodes: int) -> Part:
    before = cluster.jvm_start_times()
    manager = cluster.cluster_manager()
    order = [name for name in sorted(before) if name != manager] + [manager]

    def rejoined(name: str, old_start: int) -> Callable[[], bool]:
        def probe() -> bool:
            try:
                return cluster.jvm_start_times().get(name, old_start) != old_start
            except (RuntimeError, KeyError, TypeError):
                return False  # no node answered, or an answer without every field

        return probe

    per_node: dict[str, float] = {}

    def disrupt() -> str:
        for name in order:
            node_started = time.monotonic()
            subprocess.run(
                ["docker", "exec", CONTAINER_PREFIX + name, "systemctl", "restart", "opensearch"],
                check=True,
            )
            wait_for(f"{name} to rejoin with a new JVM", rejoined(name, before[name]))
            wait_for(f"green after restarting {name}", lambda: cluster.green(nodes))
            per_node[name] = time.monotonic() - node_started
            say(f"{name} restarted and green in {per_node[name]:.1f}s")
        return ""

    seconds, report, note = under_load(target, "bench-rolling-floor", disrupt)
    return Part(
        "floor: 3 x systemctl restart, wait for rejoin + green",
        seconds,
        report,
        restarted(before, cluster.jvm_start_times()),
        note,
        per_node,
    )


def health_text(report: LoadReport) -> str:
    return ", ".join(
        f"{status} {count}" for status, count in sorted(report.health_statuses.items())
    )


def record(
    parts: list[Part], load_before: str, load_after: str, skipped: str, quiet_load: float
) -> str:
    floor = next((part for part in parts if part.name.startswith("floor")), None)
    rows = [
        "| measure | seconds | ratio | nodes restarted | requests | failed | retried | "
        "red seen | health samples | lost writes | p50 / p99 / max ms | 1-min load at start |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|---:|",
    ]
    for part in parts:
        report = part.report
        ratio = f"{part.seconds / floor.seconds:.2f}x" if floor else "n/a"
        name = part.name + (f" ({part.note})" if part.note else "")
        rows.append(
            f"| {name} | {part.seconds:.1f} | {ratio} | {part.restarted} of 3 | "
            f"{report.requests} | {report.failed} | {report.retried} | "
            f"{'yes' if report.red_seen else 'no'} | {health_text(report)} | "
            f"{report.lost_writes} of {report.acknowledged_writes} | "
            f"{report.latency_p50_ms:.0f} / {report.latency_p99_ms:.0f} / "
            f"{report.latency_max_ms:.0f} | {part.load:.2f} |"
        )
    samples = [
        f"- {part.name}: {sample}" for part in parts for sample in part.report.failure_samples
    ]
    text = (
        f"Rerun: `bench/rolling/run` against the running lab (`scripts/up`, tls, loopback).\n"
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on a machine with "
        f"{os.cpu_count()} cores; load average (1, 5, 15 min) {load_before} before and "
        f"{load_after} after, as /proc/loadavg read them. Client load: "
        "`clusterforge.testing.loadcheck.ClusterLoad`, one request every "
        "50 ms plus its latency, writes and reads alternating round-robin over the three "
        "nodes (a failed attempt is retried on the next node; failed = failed on every "
        "node), health sampled every 0.5 s, every acknowledged write read back by id at "
        "the end. "
        + (
            f"Each part started once the 1-minute load average was below {quiet_load} "
            "(or after 5 minutes of waiting).\n\n"
            if quiet_load > 0
            else "The parts did not wait for the load to fall (`--quiet-load 0`).\n\n"
        )
        + "\n".join(rows)
        + "\n"
    )
    for part in parts:
        if part.per_node_s:
            steps = ", then ".join(f"{name} {s:.1f}" for name, s in part.per_node_s.items())
            text += f"\nFloor, seconds per node in restart order: {steps}.\n"
    if skipped:
        text += f"\n{skipped}\n"
    if samples:
        text += "\nFailure samples:\n\n" + "\n".join(samples) + "\n"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-json", type=Path, default=REPO / "inventories/lab/lab.json")
    parser.add_argument("--playbook", type=Path, default=REPO / "playbooks/rolling_restart.yml")
    parser.add_argument("--only", choices=("both", "rolling", "floor"), default="both")
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument(
        "--zones",
        type=int,
        default=0,
        help="compare the zone roll with the node roll of a lab in this many zones",
    )
    parser.add_argument("--nodes", type=int, default=0, help="with --zones: the lab's nodes")
    parser.add_argument(
        "--rounds",
        type=int,
        default=MIN_ROUNDS,
        help=f"with --zones: rounds of both rolls (at least {MIN_ROUNDS})",
    )
    add_quiet_option(parser, default=1.0)
    args = parser.parse_args()

    facts = json.loads(args.lab_json.read_text())
    target = LoadTarget.from_lab_json(args.lab_json)
    cluster = Cluster(target)
    nodes = len(facts["nodes"])
    if args.zones:
        return zone_main(args, facts, target, cluster)
    load_before = load_average()
    say(f"load average before: {load_before}")
    wait_for("the lab to be green before the run", lambda: cluster.green(nodes))

    parts: list[Part] = []
    skipped = ""
    playbook = args.playbook.resolve()
    try:
        if args.only in ("both", "rolling"):
            if playbook.exists():
                load = wait_until_quiet(args.quiet_load, what="the rolling part")
                parts.append(rolling_part(target, cluster, playbook, nodes))
                parts[-1].load = load
            else:
                skipped = f"The rolling part was not run: {playbook} does not exist yet."
                say(skipped)
        if args.only in ("both", "floor"):
            load = wait_until_quiet(args.quiet_load, what="the floor")
            parts.append(floor_part(target, cluster, nodes))
            parts[-1].load = load
    finally:
        wait_for("the lab to be green at the end", lambda: cluster.green(nodes))
        for index in ("bench-rolling-playbook", "bench-rolling-floor"):
            cluster.delete_index(index)
    load_after = load_average()

    for part in parts:
        print(f"{part.name}: {part.seconds:.1f}s, restarted {part.restarted}", file=sys.stderr)
        print(json.dumps(part.report.to_dict(), indent=2), file=sys.stderr)
    summary = record(parts, load_before, load_after, skipped, args.quiet_load)
    print(summary)
    if not args.no_record:
        write_section(HEADING, summary)
    return 0 if all(part.report.ok and part.restarted == nodes for part in parts) else 1


def zone_main(
    args: argparse.Namespace, facts: dict[str, Any], target: LoadTarget, cluster: Cluster
) -> int:
    """--nodes N --zones Z: the zone roll against the node roll, alternating rounds."""
    nodes = args.nodes or len(facts["nodes"])
    wrong = check_lab(facts, nodes, args.zones)
    if wrong:
        say(wrong)
        return 2
    load_before = load_average()
    say(f"load average before: {load_before}")
    wait_for("the lab to be green before the run", lambda: cluster.green(nodes))

    def settle() -> str:
        note = ""
        left = cluster.allocation_left_limited()
        if left:
            say(f"the playbook left {left}; resetting it")
            cluster.reset_allocation()
            note = f"left {left}, reset by the benchmark"
        wait_for("green after the roll", lambda: cluster.green(nodes))
        return note

    rolls = []
    try:
        roll_in_lab = functools.partial(
            roll_once,
            target,
            playbook=args.playbook.resolve(),
            jvm_start_times=cluster.jvm_start_times,
            settle=settle,
            quiet_load=args.quiet_load,
        )
        rolls = compare(roll_in_lab, nodes=nodes, rounds=args.rounds)
    finally:
        wait_for("the lab to be green at the end", lambda: cluster.green(nodes))
        for roll in rolls:
            cluster.delete_index(f"bench-rolling-{roll.mode}-{roll.round}")
    summary = record_zones(
        rolls, nodes=nodes, zones=args.zones, load_before=load_before, load_after=load_average()
    )
    print(summary)
    if not args.no_record:
        write_section(ZONE_HEADING, summary)
    complete = all(
        sum(roll.mode == mode for roll in rolls) >= MIN_ROUNDS for mode in ("node", "zone")
    )
    return 0 if complete and all(clean(roll, nodes) for roll in rolls) else 1


if __name__ == "__main__":
    sys.exit(main())
