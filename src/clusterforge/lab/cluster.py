"""Bringing the lab up and down: the playbook runs over the lab's containers and inventory.

The lab is split by concern: its shape (clusterforge.lab.topology), its containers and
their files (clusterforge.lab.containers), its inventory (clusterforge.lab.lab_inventory),
and what it reports (clusterforge.lab.summary). :class:`Lab` puts them together for
``scripts/up`` and ``scripts/down``; the names below stay importable from here.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from clusterforge.client import ClusterClient
from clusterforge.errors import LabError
from clusterforge.lab import monitoring as lab_monitoring
from clusterforge.lab.containers import (
    LAB_SECRET_BYTES,
    LAB_SECRETS,
    ORDER_SERVICE_TOKEN,
    SECURITY_SECRETS,
    SYSTEMD_RUN_FLAGS,
    USER_DIRECTORY_TOKEN,
)
from clusterforge.lab.directory_container import LabDirectory, remove_directory
from clusterforge.lab.image import CURRENT_IMAGE, prepare_lab_host
from clusterforge.lab.lab_inventory import (
    LAB_PLUGINS,
    LAB_PYTHON,
    ORDERS_PORT,
    SNAPSHOT_REPOSITORY,
    USER_DIRECTORY_PORT,
    LabInventory,
    lab_snapshot_vars,
)
from clusterforge.lab.process import run, say
from clusterforge.lab.summary import curl_example, node_facts, print_summary, service_facts
from clusterforge.lab.topology import (
    APPS_HOST,
    APPS_LOOPBACK_OCTET,
    CLUSTER_NAME,
    CONTAINER_PREFIX,
    DATA_ROLES,
    HEAP,
    HEAP_MANY,
    LOOPBACK_BASE,
    LOOPBACK_FIRST_OCTET,
    LOOPBACK_SSH_PORT,
    MANAGER_ROLES,
    MANY_NODES,
    MAX_NODES,
    MAX_ZONES,
    MIN_NODES,
    NETWORK_NAME,
    NODE_COUNT,
    REQUIRED_NOFILE,
    ZONE_NAMES,
    LabNode,
    Placement,
    check_managers_unchanged,
    choose_network,
    lab_heap,
    lab_placements,
    shrink_steps,
)
from clusterforge.plan.cluster.console import console_defaults
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.plugins import fetch_artifacts
from clusterforge.plan.snapshots.snapshot_schedule import declared_schedule
from clusterforge.testing.faults import RULE_COMMENT as FAULT_RULE_COMMENT
from clusterforge.testing.faults import remove_rules as remove_fault_rules

__all__ = [
    "ADMIN_USER",
    "APPS_HOST",
    "APPS_LOOPBACK_OCTET",
    "CLUSTER_NAME",
    "CONTAINER_PREFIX",
    "DATA_ROLES",
    "HEAP",
    "HEAP_MANY",
    "LAB_PLUGINS",
    "LAB_PYTHON",
    "LAB_SECRETS",
    "LAB_SECRET_BYTES",
    "LOOPBACK_BASE",
    "LOOPBACK_FIRST_OCTET",
    "LOOPBACK_SSH_PORT",
    "MANAGER_ROLES",
    "MANY_NODES",
    "MAX_NODES",
    "MAX_ZONES",
    "MIN_NODES",
    "NETWORK_NAME",
    "NODE_COUNT",
    "ORDERS_PORT",
    "ORDER_SERVICE_TOKEN",
    "REQUIRED_NOFILE",
    "SECURITY_SECRETS",
    "SNAPSHOT_REPOSITORY",
    "SYSTEMD_RUN_FLAGS",
    "USER_DIRECTORY_PORT",
    "USER_DIRECTORY_TOKEN",
    "ZONE_NAMES",
    "Lab",
    "LabNode",
    "Placement",
    "check_managers_unchanged",
    "choose_network",
    "curl_example",
    "lab_heap",
    "lab_placements",
    "node_facts",
    "shrink_steps",
]

ADMIN_USER = "admin"


class Lab(LabInventory):
    """The lab's files live in ``lab_dir`` (inventories/lab): key, inventory, lab.json."""

    def run_playbook(self, *, echo: bool = True) -> int:
        """Run site.yml against the lab; return the total of changed tasks from the recap.

        ``echo=False`` keeps the playbook's output to itself (bench/rerun times many runs).
        """
        command = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.lab_dir),
            str(self.repo / "playbooks" / "site.yml"),
        ]
        if echo:
            say("running playbooks/site.yml against the lab over SSH")
        process = subprocess.Popen(  # noqa: S603
            command,
            cwd=self.repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "ANSIBLE_CONFIG": str(self.repo / "ansible.cfg")},
        )
        assert process.stdout is not None  # noqa: S101 - narrows the type; PIPE always sets it
        changed = 0
        in_recap = False
        # Without echo, only the tail is kept, to show when the run fails.
        tail: collections.deque[str] = collections.deque(maxlen=60)
        for line in process.stdout:
            if echo:
                sys.stdout.write(line)
            else:
                tail.append(line)
            if line.startswith("PLAY RECAP"):
                in_recap = True
            match = re.search(r"\bchanged=(\d+)", line)
            if in_recap and match:
                changed += int(match.group(1))
        if process.wait() != 0:
            sys.stdout.write("".join(tail))
            raise LabError("playbooks/site.yml failed; its output is above")
        return changed

    # -- report -----------------------------------------------------------------------

    def client(self, mode: str) -> ClusterClient:
        """The cluster's HTTP client, with the CA and the admin's credentials by mode."""
        if mode == "open":
            return ClusterClient()
        password = self.secret_file(ADMIN_USER).read_text().strip()
        return ClusterClient(
            ca_cert=self.pki_dir / "ca.pem" if mode == "tls" else None,
            credentials=(ADMIN_USER, password),
        )

    def describe(
        self,
        nodes: list[LabNode],
        *,
        network: str,
        mode: str,
        console: bool = False,
        apps: LabNode | None = None,
        zones: int = 0,
        managers: int = 0,
        monitoring: bool = False,
    ) -> dict[str, Any]:
        scheme = "https" if mode == "tls" else "http"
        urls = [f"{scheme}://{node.address}:9200" for node in nodes]
        with self.client(mode) as client:
            info = client.get_json(f"{urls[0]}/")
            health = client.get_json(f"{urls[0]}/_cluster/health")
            cat_nodes = client.get_json(
                f"{urls[0]}/_cat/nodes?format=json&h=name,ip,node.role,cluster_manager"
            )
        secured: dict[str, Any] = {}
        if mode != "open":
            secured = {
                "ca_cert": str(self.pki_dir / "ca.pem") if mode == "tls" else None,
                "pki_dir": str(self.pki_dir),
                "admin_user": ADMIN_USER,
                "admin_password_file": str(self.secret_file(ADMIN_USER)),
            }
        return {
            "cluster_name": info["cluster_name"],
            "version": info["version"]["number"],
            "mode": mode,
            "network": network,
            "health": health["status"],
            "plugins": [plugin["name"] for plugin in LAB_PLUGINS],
            "nodes": node_facts(
                nodes,
                urls,
                cat_nodes,
                lab_placements(len(nodes), zones=zones, managers=managers),
            ),
            "zones": list(ZONE_NAMES[:zones]),
            "managers": managers,
            "console": f"http://{nodes[0].address}:{console_defaults()['dashboards_port']}"
            if console
            else None,
            **secured,
            **service_facts(
                apps,
                ca_cert=self.pki_dir / "ca-bundle.pem",
                user_directory_token_file=self.secret_file(USER_DIRECTORY_TOKEN),
                orders_token_file=self.secret_file(ORDER_SERVICE_TOKEN),
            ),
            "monitoring": lab_monitoring.facts(
                apps.address, self.lab_dir, self.pki_dir / "ca-bundle.pem"
            )
            if apps and monitoring
            else None,
        }

    def prepare(self) -> str:
        """A running docker engine, the kernel setting, and the lab image; returns its tag."""
        return prepare_lab_host()

    def up(
        self,
        *,
        network: str | None,
        mode: str,
        dashboards_archive: Path | None = None,
        node_count: int = NODE_COUNT,
        apps: bool = True,
        zones: int = 0,
        managers: int = 0,
        monitoring: bool = True,
        ldap: bool = False,
    ) -> dict[str, Any]:
        started = time.monotonic()
        if ldap and mode == "open":
            raise LabError("--ldap needs a secured mode (--mode tls or basic): open has no logins")
        if monitoring and (mode != "tls" or not apps):
            say("no monitoring: it needs --mode tls and the apps container")
            monitoring = False
        # Refused before any container starts.
        lab_placements(node_count, zones=zones, managers=managers)
        check_managers_unchanged(self.lab_dir / "lab.json", managers)
        chosen, reason = choose_network(network)
        say(f"network mode {chosen}: {reason}")
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            archives = pool.submit(self._fetch_archives, node_count)
            image_tag = self.prepare()
            archives.result()
        existing = self.existing_node_count()
        # Shrinking keeps the extra nodes running until the playbook has drained them.
        nodes, apps_node = self.ensure_containers(
            chosen, image_tag, max(existing, node_count), apps=apps
        )
        if not apps:
            self.remove_apps()
        self._ensure_monitoring(monitoring, [*nodes, *([apps_node] if apps_node else [])])
        directory = self._ensure_directory(ldap, network=chosen)
        if node_count > existing > 0:
            say(f"growing the lab from {existing} to {node_count} node(s)")
        inventory: dict[str, Any] = {
            "network": chosen,
            "mode": mode,
            "dashboards_archive": dashboards_archive,
            "apps": apps_node,
            "zones": zones,
            "managers": managers,
            "monitoring": monitoring,
            "directory": directory,
        }
        nodes, changed = self._converge(nodes, node_count, inventory)
        facts = self.describe(
            nodes,
            network=chosen,
            mode=mode,
            console=dashboards_archive is not None,
            apps=apps_node,
            zones=zones,
            managers=managers,
            monitoring=monitoring,
        )
        facts["changed"] = changed
        facts["ldap"] = directory.facts() if directory else None
        # scripts/status judges the snapshots' age by the schedule declared, none or this.
        facts["snapshot_schedule"] = declared_schedule(lab_snapshot_vars(mode))
        (self.lab_dir / "lab.json").write_text(json.dumps(facts, indent=2) + "\n")
        print_summary(facts, elapsed=time.monotonic() - started, lab_dir=self.lab_dir)
        return facts

    def _fetch_archives(self, node_count: int) -> None:
        """The archives the converge's plan fetches (the engine with its modules, the
        security plugin, the analyzer built with Maven: 40 s on a fresh machine), fetched
        while the image builds (issue 54, item 4). They follow from the version, the
        distribution and the plugins alone, which the lab's group variables give before any
        container exists; the security mode changes none of them, so the model is built
        as open, and no secret is read for it."""
        started = time.monotonic()
        group_vars = self._cluster_group_vars(node_count, mode="open", directory=None)
        # One node stands for them all; its address is never contacted.
        cluster = build_cluster([("opensearch-1", {**group_vars, "ansible_host": "127.0.0.1"})])
        fetched = fetch_artifacts(cluster, self.repo)
        state = "fetched" if fetched["fetched"] else "found in the cache"
        say(f"engine and plugin archives {state} ({time.monotonic() - started:.0f}s)")

    def _ensure_monitoring(self, monitoring: bool, containers: list[LabNode]) -> None:
        """The lab's alert receiver runs with the monitoring; without it, the receiver
        and (on a lab that had it) the monitoring's units stop."""
        if monitoring:
            lab_monitoring.ensure_receiver(self.lab_dir)
            return
        lab_monitoring.stop_receiver(self.lab_dir)
        if (self.lab_dir / "group_vars" / "monitoring.yml").exists():
            say("stopping the monitoring's units (--no-monitoring on a lab that had it)")
            lab_monitoring.stop_units([node.container for node in containers])

    def _ensure_directory(self, ldap: bool, *, network: str) -> LabDirectory | None:
        """scripts/up --ldap: the directory's container, else none."""
        if not ldap:
            remove_directory()
            return None
        self._ensure_secrets()
        directory = LabDirectory(
            lab_dir=self.lab_dir, secret_file=self.secret_file, pki_dir=self.pki_dir
        )
        directory.ensure(
            base_image=CURRENT_IMAGE,
            network=network,
            cluster_name=CLUSTER_NAME,
            passphrase=self.secret_file("ca_passphrase").read_text().strip().encode(),
        )
        return directory

    def _converge(
        self, nodes: list[LabNode], node_count: int, inventory: dict[str, Any]
    ) -> tuple[list[LabNode], int]:
        """One site.yml run per step of :func:`shrink_steps` (one run unless the lab
        shrinks by too many managers at once), each step's leaving nodes drained by the
        run, then removed; returns the nodes that stay and the changed tasks of every run."""
        changed = 0
        zones, managers = inventory["zones"], inventory["managers"]
        for count in shrink_steps(len(nodes), node_count, zones=zones, managers=managers):
            extra = nodes[count:]
            if extra:
                say(
                    f"shrinking the lab from {len(nodes)} to {count} node(s): "
                    f"{', '.join(node.inventory_name for node in extra)} marked absent"
                )
            self.write_inventory(
                nodes, absent=tuple(node.inventory_name for node in extra), **inventory
            )
            changed += self.run_playbook()
            if extra:
                self.remove_containers(extra)
                nodes = nodes[:count]
                self.retire_certificates(nodes)
                self.write_inventory(nodes, **inventory)
        return nodes, changed

    def down(self) -> None:
        # The resilience drills' rules (clusterforge.testing.faults) name the containers'
        # cgroups and the lab's addresses: none outlives the lab.
        removed = remove_fault_rules()
        if removed:
            say(f"removed {removed} fault rule(s) the drills left (comment {FAULT_RULE_COMMENT!r})")
        listed = run(["docker", "ps", "-aq", "--filter", "label=clusterforge.lab=1"], check=False)
        ids = listed.stdout.decode().split()
        if ids:
            say(f"removing {len(ids)} lab container(s)")
            run(["docker", "rm", "-f", *ids])
        if run(["docker", "network", "inspect", NETWORK_NAME], check=False).returncode == 0:
            run(["docker", "network", "rm", NETWORK_NAME])
        lab_monitoring.stop_receiver(self.lab_dir)
        for stale in ("lab.json", "hosts.yml"):
            (self.lab_dir / stale).unlink(missing_ok=True)
        (self.ssh_dir / "known_hosts").unlink(missing_ok=True)
        say("lab removed; the image and the artifact cache are kept")
