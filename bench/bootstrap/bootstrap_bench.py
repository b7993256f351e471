"""Bootstrap benchmark: what the playbook costs over the floor of doing it by hand.

Measured in one run, with the image and the artifacts already cached:

1. cold: fresh containers, then playbooks/site.yml until the cluster is green;
2. rerun: the idempotent second run of site.yml, against `ansible -m ping` on the same
   hosts (the least any Ansible run over SSH can cost);
3. floor: fresh containers again, and the same three nodes started by hand from
   pre-rendered files (docker cp + docker exec, no Ansible), until green.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clusterforge.artifacts import fetch_engine
from clusterforge.cli import load_inventory_nodes
from clusterforge.lab.cluster import Lab, LabNode, choose_network
from clusterforge.model import build_cluster
from clusterforge.plugins import fetch_plugin, fetch_security_plugin
from clusterforge.render import render_node_files

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


def fresh_lab(lab: Lab, network: str) -> list[LabNode]:
    lab.down()
    image = lab.prepare()
    nodes = lab.ensure_containers(network, image)
    lab.write_inventory(nodes, network=network, mode="open")
    return nodes


def timed_playbook(lab: Lab) -> tuple[float, int]:
    started = time.monotonic()
    changed = lab.run_playbook()
    return time.monotonic() - started, changed


def timed_ping() -> float:
    started = time.monotonic()
    ansible = str(REPO / ".venv/bin/ansible")
    sh(ansible, "-i", str(LAB_DIR), "opensearch", "-m", "ansible.builtin.ping")
    return time.monotonic() - started


def start_by_hand(nodes: list[LabNode]) -> float:
    """The floor: unpack, drop in pre-rendered files, start; no Ansible involved."""
    cluster = build_cluster(load_inventory_nodes(LAB_DIR, "opensearch"))
    archive = fetch_engine(cluster.distribution).path
    # The same plugins the playbook installs, from the same cache: the floor does the
    # same work, just without Ansible.
    plugin_zips = [fetch_security_plugin(cluster.version, None).path]
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


def record(results: dict[str, float], changed: dict[str, int], network: str) -> str:
    load = Path("/proc/loadavg").read_text().split()[:3]
    table = "\n".join(
        [
            "| measure | seconds | ratio |",
            "|---|---|---|",
            f"| cold bootstrap: site.yml on fresh containers to green | {results['cold']:.1f} "
            f"| {results['cold'] / results['floor']:.2f}x the floor |",
            "| floor: same nodes by hand from pre-rendered files to green "
            f"| {results['floor']:.1f} | 1.00x |",
            f"| idempotent rerun of site.yml (changed={changed['rerun']}) | {results['rerun']:.1f} "
            f"| {results['rerun'] / results['ping']:.1f}x ping |",
            f"| `ansible -m ping` on the same hosts | {results['ping']:.1f} | 1.0x |",
        ]
    )
    return (
        f"Run `bench/bootstrap/run` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"2 cores, 24 GiB; network {network}; load average before the run "
        f"{' '.join(load)}; image and artifacts cached).\n\n{table}\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()
    network, _ = choose_network(None)
    lab = Lab(repo=REPO, lab_dir=LAB_DIR)
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    print(f"bench: load average before: {' '.join(load_before)}", file=sys.stderr)
    results: dict[str, float] = {}
    changed: dict[str, int] = {}

    fresh_lab(lab, network)
    results["cold"], changed["cold"] = timed_playbook(lab)
    results["rerun"], changed["rerun"] = timed_playbook(lab)
    results["ping"] = min(timed_ping() for _ in range(3))
    nodes = fresh_lab(lab, network)
    results["floor"] = start_by_hand(nodes)
    lab.down()

    summary = record(results, changed, network)
    print(summary)
    if not args.no_record:
        path = REPO / "bench" / "RESULTS.md"
        text = path.read_text()
        start = text.index("## bootstrap (bench/bootstrap)")
        end = text.index("\n## ", start + 3)
        path.write_text(text[:start] + "## bootstrap (bench/bootstrap)\n\n" + summary + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
