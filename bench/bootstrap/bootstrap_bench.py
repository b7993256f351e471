"""Bootstrap benchmark: what the playbook costs over the floor of doing it by hand.

Measured in one run, with the image and the artifacts already cached, for each node
count given with ``--nodes`` (default 3; ``--nodes 1,3,5`` records the growth curve),
``--repeat`` times each (then the best cold run is also held against the best floor:
on 2 shared cores one floor moved from 11.0 to 16.5 s within an hour):

1. cold: fresh containers, then playbooks/site.yml until the cluster is green;
2. rerun: the idempotent second run of site.yml, against `ansible -m ping` on the same
   hosts (the least any Ansible run over SSH can cost);
3. floor: fresh containers again, and the same nodes started by hand from
   pre-rendered files (docker cp + docker exec, no Ansible), until green.

The lab's apps container is left out: the floor starts engine nodes only, so the
playbook's side must too. The run takes the lab down at the end (it needs fresh
containers for every measure).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchlib import (
    add_quiet_option,
    load_average,
    timed_ping,
    wait_until_quiet,
    write_section,
)

from clusterforge.inventory.variables import load_inventory_nodes
from clusterforge.lab.cluster import Lab, LabNode, choose_network
from clusterforge.plan.cluster.artifacts import fetch_engine
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.plugins import fetch_plugin, fetch_security_plugin
from clusterforge.plan.cluster.render import render_node_files

REPO = Path(__file__).resolve().parents[2]
LAB_DIR = REPO / "inventories" / "lab"


def sh(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command[:5])} failed: {result.stderr[-800:]}")
    return result.stdout


def wait_green(url: str, nodes: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(  # noqa: S310 - loopback lab URL
                f"{url}/_cluster/health?wait_for_status=green&wait_for_nodes={nodes}&timeout=5s",
                timeout=10,
            ) as response:
                if json.loads(response.read())["status"] == "green":
                    return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"{url} did not turn green in {timeout_s}s")


def fresh_lab(lab: Lab, network: str, count: int) -> list[LabNode]:
    lab.down()
    image = lab.prepare()
    nodes, _ = lab.ensure_containers(network, image, count, apps=False)
    lab.write_inventory(nodes, network=network, mode="open")
    return nodes


def timed_playbook(lab: Lab) -> tuple[float, int]:
    started = time.monotonic()
    changed = lab.run_playbook()
    return time.monotonic() - started, changed


def start_by_hand(nodes: list[LabNode]) -> float:
    """The floor: unpack, drop in pre-rendered files, start; no Ansible involved."""
    cluster = build_cluster(load_inventory_nodes(LAB_DIR, "opensearch"))
    archive = fetch_engine(cluster.distribution).path
    # The same plugins the playbook installs, from the same cache: the floor does the
    # same work, just without Ansible.
    plugin_zips = [fetch_security_plugin(cluster.version, None)[0].path]
    plugin_zips += [
        fetch_plugin(
            spec, engine_version=cluster.version, engine_archive=archive, project_root=REPO
        )[0].path
        for spec in cluster.plugins
        if spec.state == "present"
    ]
    started = time.monotonic()

    def one(node: LabNode) -> None:
        container = node.container
        model_node = cluster.node(node.inventory_name)
        files = render_node_files(cluster, model_node)
        sh("docker", "cp", str(archive), f"{container}:/tmp/engine.zip")
        script = f"""set -e
groupadd --system {cluster.service_user}
useradd --system --gid {cluster.service_user} --shell /usr/sbin/nologin {cluster.service_user}
mkdir -p {cluster.install_root} {cluster.config_dir}/jvm.options.d
unzip -q /tmp/engine.zip -d {cluster.install_root}
ln -sfn {cluster.install_dir} {cluster.home}
install -d -o {cluster.service_user} -g {cluster.service_user} {cluster.data_path} \
  {cluster.log_path} {cluster.repo_path} {cluster.install_dir}/logs
cp {cluster.install_dir}/config/jvm.options {cluster.install_dir}/config/log4j2.properties \
  {cluster.config_dir}/
chgrp -R {cluster.service_user} {cluster.config_dir}; chmod 0770 {cluster.config_dir}
"""
        sh("docker", "exec", container, "bash", "-c", script)
        for index, plugin in enumerate(plugin_zips):
            sh("docker", "cp", str(plugin), f"{container}:/tmp/plugin-{index}.zip")
            sh(
                "docker",
                "exec",
                "-e",
                f"OPENSEARCH_JAVA_HOME={cluster.java_home}",
                "-e",
                f"OPENSEARCH_PATH_CONF={cluster.config_dir}",
                container,
                "bash",
                f"{cluster.install_dir}/bin/opensearch-plugin",
                "install",
                "--batch",
                f"file:///tmp/plugin-{index}.zip",
            )
        targets = {
            "opensearch.first-start.yml": f"{cluster.config_dir}/opensearch.yml",
            "heap.options": f"{cluster.config_dir}/jvm.options.d/heap.options",
            "opensearch.service": "/etc/systemd/system/opensearch.service",
        }
        for name, target in targets.items():
            subprocess.run(
                ["docker", "exec", "-i", container, "bash", "-c", f"cat > {target}"],
                input=files[name],
                text=True,
                check=True,
            )
        sh("docker", "exec", container, "systemctl", "daemon-reload")
        sh("docker", "exec", container, "systemctl", "start", "opensearch")

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(one, nodes))
    wait_green(cluster.http_url(cluster.nodes[0]), len(nodes))
    return time.monotonic() - started


@dataclass(frozen=True)
class Measured:
    """One node count's four measures, in seconds, and the two runs' changed totals."""

    nodes: int
    cold: float
    floor: float
    rerun: float
    ping: float
    ping_linear: float
    changed_cold: int
    changed_rerun: int
    # The 1-minute load average when the cold run and the floor started.
    load_cold: float
    load_floor: float


def measure(lab: Lab, network: str, count: int, quiet_load: float) -> Measured:
    say = functools.partial(print, file=sys.stderr)
    say(f"bench: {count} node(s): cold bootstrap")
    fresh_lab(lab, network, count)
    load_cold = wait_until_quiet(quiet_load, what=f"the cold bootstrap of {count} node(s)")
    cold, changed_cold = timed_playbook(lab)
    say(f"bench: {count} node(s): cold {cold:.1f} s; idempotent rerun")
    rerun, changed_rerun = timed_playbook(lab)
    # Mitogen (ansible.cfg's strategy) pays a start-up of its own, so a ping with it costs
    # more than a plain one: both are recorded, and the rerun is held against the faster.
    ping = min(timed_ping(LAB_DIR, "opensearch") for _ in range(3))
    ping_linear = min(timed_ping(LAB_DIR, "opensearch", "linear") for _ in range(3))
    say(
        f"bench: {count} node(s): rerun {rerun:.1f} s, ping {ping:.1f} s "
        f"(linear {ping_linear:.1f} s); the floor"
    )
    nodes = fresh_lab(lab, network, count)
    load_floor = wait_until_quiet(quiet_load, what=f"the floor of {count} node(s)")
    floor = start_by_hand(nodes)
    say(f"bench: {count} node(s): floor {floor:.1f} s")
    return Measured(
        count,
        cold,
        floor,
        rerun,
        ping,
        ping_linear,
        changed_cold,
        changed_rerun,
        load_cold,
        load_floor,
    )


def record(
    rows: list[Measured], network: str, load_before: str, load_after: str, quiet_load: float
) -> str:
    lines = [
        "| nodes | cold bootstrap s | floor s | cold / floor | rerun s (changed) "
        "| ping s (default strategy / linear) | rerun / faster ping "
        "| 1-min load at the cold start / the floor's start |",
        "|---:|---:|---:|---:|---|---|---:|---|",
    ]
    lines += [
        f"| {row.nodes} | {row.cold:.1f} | {row.floor:.1f} | {row.cold / row.floor:.2f}x "
        f"| {row.rerun:.1f} (changed={row.changed_rerun}) | {row.ping:.1f} / {row.ping_linear:.1f} "
        f"| {row.rerun / min(row.ping, row.ping_linear):.1f}x "
        f"| {row.load_cold:.2f} / {row.load_floor:.2f} |"
        for row in rows
    ]
    best_lines: list[str] = []
    counts = list(dict.fromkeys(row.nodes for row in rows))
    if len(rows) > len(counts):
        # Noise only ever adds time, to the playbook and to the floor alike: the best of
        # each is the least disturbed measure of both.
        best_lines = [
            "",
            "Best of each node count's tries (each column's minimum, taken on its own):",
            "",
            "| nodes | tries | best cold s | best floor s | best cold / best floor "
            "| best rerun s | best ping s (default / linear) |",
            "|---:|---:|---:|---:|---:|---:|---|",
        ]
        for count in counts:
            tries = [row for row in rows if row.nodes == count]
            cold = min(row.cold for row in tries)
            floor = min(row.floor for row in tries)
            best_lines.append(
                f"| {count} | {len(tries)} | {cold:.1f} | {floor:.1f} | {cold / floor:.2f}x "
                f"| {min(row.rerun for row in tries):.1f} "
                f"| {min(row.ping for row in tries):.1f} / "
                f"{min(row.ping_linear for row in tries):.1f} |"
            )
    waited = (
        f"Each cold run and each floor started once the 1-minute load average was below "
        f"{quiet_load} (or after 5 minutes of waiting).\n\n"
        if quiet_load > 0
        else "The parts did not wait for the load to fall (`--quiet-load 0`).\n\n"
    )
    return (
        f"Run `bench/bootstrap/run --nodes {','.join(str(count) for count in counts)}"
        f"{f' --repeat {len(rows) // len(counts)}' if len(rows) > len(counts) else ''}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores; "
        f"network {network}; security mode open; image and artifacts cached; load average "
        f"(1, 5, 15 min) {load_before} before and {load_after} after, as /proc/loadavg "
        "read them).\n\n"
        "cold bootstrap: site.yml on fresh containers to green. floor: the same nodes by "
        "hand from pre-rendered files to green (no Ansible). rerun: the idempotent second "
        "site.yml. ping: `ansible -m ping` on the same hosts, the best of 3, with the "
        "checkout's strategy (Mitogen unless ANSIBLE_STRATEGY says otherwise) and with "
        "`linear`.\n\n" + waited + "\n".join(lines + best_lines) + "\n"
    )


def parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or any(count < 1 or count > 9 for count in counts):
        raise argparse.ArgumentTypeError(
            f"--nodes {text!r}: give node counts from 1 to 9, comma-separated (e.g. 1,3,5)"
        )
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument(
        "--nodes",
        type=parse_counts,
        default=[3],
        help="node counts to measure, comma-separated (default 3; 1,3,5 for the curve)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each node count this many times and compare the best cold run with "
        "the best floor as well (default 1)",
    )
    add_quiet_option(parser, default=1.0)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give at least 1")
    network, _ = choose_network(None)
    lab = Lab(repo=REPO, lab_dir=LAB_DIR)
    load_before = load_average()
    print(f"bench: load average before: {load_before}", file=sys.stderr)
    rows = [
        measure(lab, network, count, args.quiet_load)
        for count in args.nodes
        for _ in range(args.repeat)
    ]
    lab.down()
    load_after = load_average()

    summary = record(rows, network, load_before, load_after, args.quiet_load)
    print(summary)
    if not args.no_record:
        write_section("## bootstrap (bench/bootstrap)", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
