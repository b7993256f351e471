"""Bringing the lab up and down: node containers, the lab inventory, the playbook run.

Two network modes (docs/design.md, "The open-file limit"):

- ``bridge``: every node on the lab's own docker network, sshd on port 22 of its address.
- ``loopback``: the containers share the host's network namespace; every node owns one
  loopback address (127.0.0.11, .12, ...) and its sshd listens on port 2222 there, since
  the host's sshd holds port 22. Chosen where the open-file hard limit is below 65535,
  because OpenSearch enforces its bootstrap checks (65535 open files) as soon as its
  transport binds a non-loopback address.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusterforge.client import ClusterClient
from clusterforge.errors import LabError
from clusterforge.lab import monitoring as lab_monitoring
from clusterforge.lab.directory_container import LabDirectory, remove_directory
from clusterforge.lab.engine import ensure_docker_engine, ensure_max_map_count
from clusterforge.lab.image import CURRENT_IMAGE, ensure_lab_image
from clusterforge.lab.process import run, say, wait_until
from clusterforge.pki.generated_secrets import read_or_generate, url_safe
from clusterforge.pki.pki import CA_CERT_FILE, CA_RETIRED_DIR, retire_node_certificates
from clusterforge.plan.console import console_defaults
from clusterforge.plan.rollout import CLUSTER_MANAGER_ROLES, scale_in_steps
from clusterforge.schema import load_schema

CONTAINER_PREFIX = "clusterforge-lab-"
NETWORK_NAME = "clusterforge-lab"
NODE_COUNT = 3  # the default of scripts/up --nodes
MIN_NODES = 1
MAX_NODES = 9  # loopback addresses 127.0.0.11 .. 127.0.0.19 (the apps container has .21)
MAX_ZONES = 3  # scripts/up --zones
# Zones go round-robin over the nodes: opensearch-1 in zone-a, -2 in zone-b, -3 in zone-c,
# -4 in zone-a again, ...
ZONE_NAMES = ("zone-a", "zone-b", "zone-c")
# scripts/up --managers M: the first M nodes are dedicated cluster managers (with zones,
# one per zone), the others hold data. First, so that growing the lab adds data nodes and
# shrinking it removes data nodes: a node that held shards cannot become a dedicated
# manager, nor the reverse without a new container.
MANAGER_ROLES = ("cluster_manager",)
DATA_ROLES = ("data", "ingest")
LOOPBACK_BASE = "127.0.0."
LOOPBACK_FIRST_OCTET = 11
LOOPBACK_SSH_PORT = 2222
REQUIRED_NOFILE = 65535
# The lab's nodes cannot raise the open-file limit above the machine's hard limit, and
# systemd refuses to start a unit that asks for more than it may have.
CLUSTER_NAME = "clusterforge-lab"
HEAP = "512m"
# From MANY_NODES nodes on: six to nine JVMs share this machine's 2 cores and 24 GiB with
# the apps container and the controller; a smaller heap starts and collects faster there.
# (Growing across the line changes jvm.options: every node restarts once, rolling.)
MANY_NODES = 6
HEAP_MANY = "384m"
# Debian's python3, which the lab image installs (clusterforge.lab.image).
LAB_PYTHON = "/usr/bin/python3"
ADMIN_USER = "admin"
# The Chinese analyzer, built from this project's source for the engine in use.
LAB_PLUGINS = (
    {"name": "analysis-smartcn", "source": "build", "path": "engine-plugins/analysis-smartcn"},
)
# Every secret of the lab lives in one 0600 file of its own; the inventory reads them
# with lookups, so no secret is written twice or passed on a command line.
SECURITY_SECRETS = ("admin", "kibanaserver", "logstash", "kibana")
USER_DIRECTORY_TOKEN = "user_directory_token"  # noqa: S105 (a file name, not a token)
ORDER_SERVICE_TOKEN = "order_service_auth_token"  # noqa: S105 (a file name, not a token)
LAB_SECRETS = ("ca_passphrase", *SECURITY_SECRETS, USER_DIRECTORY_TOKEN, ORDER_SERVICE_TOKEN)
# 18 random bytes (24 characters): what the lab has always generated, so a lab made
# before keeps its values and a new one gets the same kind.
LAB_SECRET_BYTES = 18
SNAPSHOT_REPOSITORY = "clusterforge-lab"
# The apps container runs both services (services.yml) against the lab's cluster, on an
# address of its own so that its ports never meet a node's.
APPS_HOST = "apps-1"
APPS_LOOPBACK_OCTET = 21
USER_DIRECTORY_PORT = 8081
ORDERS_PORT = 8082

# systemd as PID 1 needs exactly these (docs/design.md); --privileged fails on this platform.
SYSTEMD_RUN_FLAGS = (
    "--cap-add",
    "SYS_ADMIN",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
    "--cgroupns=host",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
    "--stop-signal",
    "SIGRTMIN+3",
)


@dataclass(frozen=True)
class LabNode:
    inventory_name: str
    address: str
    ssh_port: int

    @property
    def container(self) -> str:
        return f"{CONTAINER_PREFIX}{self.inventory_name}"


@dataclass(frozen=True)
class Placement:
    """Where a lab node stands: its zone (None: the lab has no zones) and its
    opensearch_node_roles (None: the inventory leaves the default, every role)."""

    zone: str | None = None
    roles: tuple[str, ...] | None = None


def lab_placements(count: int, *, zones: int = 0, managers: int = 0) -> list[Placement]:
    """Each of ``count`` nodes' zone and roles, in node order, for ``--zones`` and
    ``--managers``: zones round-robin, the first ``managers`` nodes dedicated cluster
    managers (one per zone while there are as many zones), the rest data and ingest.
    Without either flag every node keeps the default roles and no zone: the lab as it
    was. Refused here, before a container starts, what the plan would refuse later."""
    problems = []
    if not 0 <= zones <= MAX_ZONES:
        problems.append(f"--zones takes 1 to {MAX_ZONES}, not {zones}")
    elif zones > count:
        problems.append(f"--zones {zones} needs at least {zones} nodes (--nodes {count})")
    if managers < 0 or (managers and managers >= count):
        problems.append(
            f"--managers {managers} leaves no data node among {count}: "
            f"give --nodes more than {managers}"
        )
    elif managers == 2:
        problems.append(
            "--managers 2 is refused: two cluster managers survive the loss of neither; use 1 or 3"
        )
    elif zones >= 3 and 0 < managers < zones:
        problems.append(
            f"--managers {managers} with --zones {zones}: the managers must be spread over "
            f"the zones so the others still elect one while a zone is down; use --managers "
            f"{zones}"
        )
    if problems:
        raise LabError("; ".join(problems))
    placements = []
    for index in range(count):
        zone = ZONE_NAMES[index % zones] if zones else None
        roles: tuple[str, ...] | None = None
        if managers:
            roles = MANAGER_ROLES if index < managers else DATA_ROLES
        placements.append(Placement(zone=zone, roles=roles))
    return placements


def shrink_steps(existing: int, count: int, *, zones: int = 0, managers: int = 0) -> list[int]:
    """The node counts ``scripts/up --nodes COUNT`` runs the playbook at, one run each:
    ``[COUNT]`` unless the lab shrinks by so many cluster-manager-eligible nodes that one
    run would lose the quorum (the plan refuses that); it then steps down
    (clusterforge.plan.rollout.scale_in_steps: 6 -> 4 -> 3), each run draining the nodes
    past its count, the last ones first."""
    if count >= existing:
        return [count]
    eligible = [
        placement.roles is None or bool(set(placement.roles) & CLUSTER_MANAGER_ROLES)
        for placement in lab_placements(existing, zones=min(zones, existing), managers=managers)
    ]
    return scale_in_steps(eligible, count)


def check_managers_unchanged(lab_json: Path, managers: int) -> None:
    """A running lab keeps its number of dedicated managers: a node that held shards does
    not start as a dedicated manager, nor does a manager's node become a data node without
    its cluster state. ``lab.json`` (absent before the first run) says what the lab has;
    one written before --managers existed had none."""
    if not lab_json.is_file():
        return
    try:
        before = int(json.loads(lab_json.read_text()).get("managers") or 0)
    except (ValueError, AttributeError, TypeError):
        return  # unreadable: the lab is being rebuilt, nothing to keep
    if before != managers:
        raise LabError(
            f"the lab runs with --managers {before}, not {managers}: nodes cannot change "
            "between dedicated cluster manager and data node in place; scripts/down first, "
            f"or run scripts/up with --managers {before}"
        )


def lab_heap(count: int) -> str:
    """The lab's heap for ``count`` nodes (opensearch_heap_size is one for the cluster)."""
    return HEAP_MANY if count >= MANY_NODES else HEAP


def choose_network(requested: str | None) -> tuple[str, str]:
    """Return (mode, reason)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    if requested:
        return requested, f"--network {requested} was given (open-file hard limit {hard_text})"
    if hard != resource.RLIM_INFINITY and hard < REQUIRED_NOFILE:
        return "loopback", (
            f"the open-file hard limit is {hard_text}, below the {REQUIRED_NOFILE} OpenSearch's "
            "bootstrap checks need off loopback; nodes use 127.0.0.x addresses in the host network"
        )
    return "bridge", f"the open-file hard limit is {hard_text}; nodes get their own docker network"


def _container_state(name: str) -> dict[str, Any] | None:
    result = run(["docker", "inspect", name], check=False)
    if result.returncode != 0:
        return None
    state: dict[str, Any] = json.loads(result.stdout)[0]
    return state


def _container_network_mode(state: dict[str, Any]) -> str:
    return "loopback" if state["HostConfig"]["NetworkMode"] == "host" else "bridge"


class Lab:
    """The lab's files live in ``lab_dir`` (inventories/lab): key, inventory, lab.json."""

    def __init__(self, *, repo: Path, lab_dir: Path) -> None:
        self.repo = repo
        self.lab_dir = lab_dir
        self.ssh_dir = lab_dir / ".ssh"
        self.key = self.ssh_dir / "id_ed25519"
        self.secrets_dir = lab_dir / ".secrets"
        # Hidden: Ansible reads every other file of an inventory directory as inventory.
        self.pki_dir = lab_dir / ".pki"
        self._ssh_errors: dict[str, str] = {}

    def secret_file(self, name: str) -> Path:
        return self.secrets_dir / name

    def _ensure_secrets(self) -> None:
        for name in LAB_SECRETS:
            # The value is not needed here: the inventory reads each file with a lookup.
            read_or_generate(self.secret_file(name), generate=url_safe(LAB_SECRET_BYTES))

    # -- containers -------------------------------------------------------------------

    def _ensure_ssh_key(self) -> None:
        self.ssh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # As generated_secrets does for the other secrets' directories: mkdir leaves an
        # existing directory's mode as it was.
        self.ssh_dir.chmod(0o700)
        if not self.key.exists():
            run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "clusterforge-lab",
                    "-f",
                    str(self.key),
                ]
            )
        self.key.chmod(0o600)

    def _sshd_config(self, node: LabNode) -> Path:
        # Hidden, so that Ansible does not read it as part of the inventory directory.
        path = self.lab_dir / ".state" / node.inventory_name / "sshd.conf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# Written by scripts/up for the lab node "
            f"{node.inventory_name}\nListenAddress {node.address}\nPort {node.ssh_port}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUseDNS no\n"
        )
        return path

    def _run_container(
        self, node: LabNode, network: str, nodes: list[LabNode], *, snapshots_mount: bool = True
    ) -> None:
        hosts = [f"--add-host={peer.inventory_name}:{peer.address}" for peer in nodes]
        if network == "loopback":
            placement = ["--network", "host"]
        else:
            placement = ["--network", NETWORK_NAME, "--hostname", node.inventory_name]
            hosts = []
        sshd_config = self._sshd_config(node)
        mounts: list[str] = []
        if snapshots_mount:
            # One host directory at path.repo in every node: the snapshot repository's
            # shared directory (docs/snapshots.md). It outlives scripts/down, as the CA does.
            # Hidden, so that Ansible does not read it as part of the inventory directory.
            snapshots = self.lab_dir / ".snapshots"
            snapshots.mkdir(parents=True, exist_ok=True)
            repo_path = load_schema().variables["opensearch_repo_path"].default
            mounts = ["-v", f"{snapshots}:{repo_path}:rw"]
        run(
            [
                "docker",
                "run",
                "-d",
                "--name",
                node.container,
                "--label",
                "clusterforge.lab=1",
                "--label",
                f"clusterforge.lab.dir={self.lab_dir}",
                *placement,
                *hosts,
                *SYSTEMD_RUN_FLAGS,
                "-v",
                f"{sshd_config}:/etc/ssh/sshd_config.d/clusterforge-lab.conf:ro",
                "-v",
                f"{self.key}.pub:/root/.ssh/authorized_keys:ro",
                *mounts,
                CURRENT_IMAGE,
                "/sbin/init",
            ]
        )

    def _bridge_address(self, node: LabNode) -> str:
        state = _container_state(node.container)
        if state is None:
            raise LabError(f"container {node.container} vanished")
        address: str = state["NetworkSettings"]["Networks"][NETWORK_NAME]["IPAddress"]
        return address

    def _planned_nodes(self, network: str, count: int = NODE_COUNT) -> list[LabNode]:
        if network == "loopback":
            return [
                LabNode(
                    f"opensearch-{index + 1}",
                    f"{LOOPBACK_BASE}{LOOPBACK_FIRST_OCTET + index}",
                    LOOPBACK_SSH_PORT,
                )
                for index in range(count)
            ]
        # In bridge mode docker assigns the address; sshd listens on all of the container's.
        return [LabNode(f"opensearch-{index + 1}", "0.0.0.0", 22) for index in range(count)]  # noqa: S104

    def _planned_apps(self, network: str) -> LabNode:
        if network == "loopback":
            return LabNode(APPS_HOST, f"{LOOPBACK_BASE}{APPS_LOOPBACK_OCTET}", LOOPBACK_SSH_PORT)
        return LabNode(APPS_HOST, "0.0.0.0", 22)  # noqa: S104

    def existing_node_count(self) -> int:
        """How many node containers this checkout's lab has (the highest opensearch-K)."""
        listed = run(
            [
                "docker",
                "ps",
                "-a",
                "--filter",
                "label=clusterforge.lab=1",
                "--filter",
                f"label=clusterforge.lab.dir={self.lab_dir}",
                "--format",
                "{{.Names}}",
            ],
            check=False,
        )
        numbers = [
            int(match.group(1))
            for name in listed.stdout.decode().split()
            if (match := re.fullmatch(rf"{re.escape(CONTAINER_PREFIX)}opensearch-(\d+)", name))
        ]
        return max(numbers, default=0)

    def remove_containers(self, nodes: list[LabNode]) -> None:
        for node in nodes:
            say(f"removing container {node.container} (drained and stopped by the playbook)")
            run(["docker", "rm", "-f", node.container])
            self._forget_host_key(node)
            state_dir = self.lab_dir / ".state" / node.inventory_name
            (state_dir / "sshd.conf").unlink(missing_ok=True)
            if state_dir.is_dir():
                state_dir.rmdir()

    def retire_certificates(self, kept: list[LabNode]) -> None:
        """After a shrink: the removed nodes' keys leave the lab's PKI now, not at the next
        plan (which would retire them too: clusterforge.plan.cluster_pki)."""
        if not (self.pki_dir / CA_CERT_FILE).is_file():
            return  # an open lab has no PKI
        retired = retire_node_certificates(
            self.pki_dir, keep={node.inventory_name for node in kept}
        )
        if retired:
            say(
                f"retired the key and certificate of {', '.join(retired)} "
                f"({self.pki_dir / CA_RETIRED_DIR})"
            )

    def ensure_containers(
        self, network: str, image_tag: str, count: int = NODE_COUNT, *, apps: bool = True
    ) -> tuple[list[LabNode], LabNode | None]:
        """Start what is missing; return the nodes and the apps container (if wanted)."""
        # Before any container: each mounts the public key, and a bind mount of a missing
        # file makes docker create a directory in its place (sshd then refuses the key).
        self._ensure_ssh_key()
        nodes = self._planned_nodes(network, count)
        apps_node = self._planned_apps(network) if apps else None
        if (
            network == "bridge"
            and run(["docker", "network", "inspect", NETWORK_NAME], check=False).returncode != 0
        ):
            run(["docker", "network", "create", "--label", "clusterforge.lab=1", NETWORK_NAME])
        image_id = json.loads(run(["docker", "image", "inspect", image_tag]).stdout)[0]["Id"]
        for node in [*nodes, *([apps_node] if apps_node else [])]:
            state = _container_state(node.container)
            if state is not None and (
                _container_network_mode(state) != network
                or state["Image"] != image_id
                or state["Config"]["Labels"].get("clusterforge.lab.dir") != str(self.lab_dir)
            ):
                say(f"{node.container} belongs to another network, image or checkout; recreating")
                run(["docker", "rm", "-f", node.container])
                state = None
                (self.ssh_dir / "known_hosts").unlink(missing_ok=True)
            if state is None:
                say(f"starting container {node.container}")
                self._run_container(node, network, nodes, snapshots_mount=node is not apps_node)
            elif not state["State"]["Running"]:
                say(f"starting stopped container {node.container}")
                run(["docker", "start", node.container])
        if network == "bridge":
            nodes = [LabNode(n.inventory_name, self._bridge_address(n), 22) for n in nodes]
            if apps_node:
                apps_node = LabNode(APPS_HOST, self._bridge_address(apps_node), 22)
        for node in [*nodes, *([apps_node] if apps_node else [])]:
            wait_until(
                f"sshd on {node.inventory_name} ({node.address}:{node.ssh_port})",
                functools.partial(self._ssh_works, node),
                timeout_s=120,
                last_error=functools.partial(self.last_ssh_error, node),
            )
        return nodes, apps_node

    def remove_apps(self) -> None:
        """``--no-apps`` on a lab that had them: the services' container goes."""
        apps = LabNode(APPS_HOST, "", 0)
        state = _container_state(apps.container)
        if state is not None:
            say(f"removing container {apps.container} (--no-apps)")
            run(["docker", "rm", "-f", apps.container])
            self._forget_host_key(self._planned_apps(_container_network_mode(state)))

    def _ssh_options(self) -> list[str]:
        return [
            "-i",
            str(self.key),
            "-o",
            f"UserKnownHostsFile={self.ssh_dir / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=3",
        ]

    def _ssh_works(self, node: LabNode) -> bool:
        command = [
            "ssh",
            *self._ssh_options(),
            "-p",
            str(node.ssh_port),
            f"root@{node.address}",
            "true",
        ]
        answer = run(command, check=False)
        # ssh's own last line says why ("REMOTE HOST IDENTIFICATION HAS CHANGED", refused).
        lines = [line for line in answer.stderr.decode(errors="replace").splitlines() if line]
        self._ssh_errors[node.address] = lines[-1] if lines else ""
        return answer.returncode == 0

    def last_ssh_error(self, node: LabNode) -> str:
        return self._ssh_errors.get(node.address, "")

    def _forget_host_key(self, node: LabNode) -> None:
        """A removed container's key leaves the lab's known_hosts: a new container at the
        same address has a new key, which ssh would refuse as a changed identity."""
        known_hosts = self.ssh_dir / "known_hosts"
        if not known_hosts.is_file() or node.address in ("", "0.0.0.0"):  # noqa: S104
            return
        entry = node.address if node.ssh_port == 22 else f"[{node.address}]:{node.ssh_port}"
        run(["ssh-keygen", "-R", entry, "-f", str(known_hosts)], check=False)
        known_hosts.with_name("known_hosts.old").unlink(missing_ok=True)

    # -- inventory and playbook -------------------------------------------------------

    def write_inventory(
        self,
        nodes: list[LabNode],
        *,
        network: str,
        mode: str,
        dashboards_archive: Path | None = None,
        absent: tuple[str, ...] = (),
        apps: LabNode | None = None,
        zones: int = 0,
        managers: int = 0,
        monitoring: bool = False,
        directory: LabDirectory | None = None,
    ) -> None:
        hosts: dict[str, dict[str, Any]] = {
            node.inventory_name: {"ansible_host": node.address, "ansible_port": node.ssh_port}
            for node in nodes
        }
        # Placed over every node, the ones about to leave too: a node keeps its zone and
        # roles until it is gone.
        for name, placement in zip(
            hosts, lab_placements(len(nodes), zones=zones, managers=managers), strict=True
        ):
            if placement.zone is not None:
                hosts[name]["opensearch_zone"] = placement.zone
            if placement.roles is not None:
                hosts[name]["opensearch_node_roles"] = list(placement.roles)
        for name in absent:
            # Scale in: the playbook drains, stops and disables these nodes.
            hosts[name]["opensearch_node_state"] = "absent"
        present = [name for name in hosts if name not in absent]
        if len(present) == 2 and not managers:
            # Two cluster-manager-eligible nodes survive the loss of neither, and the plan
            # refuses them (docs/zones.md): the second one holds data only.
            hosts[present[1]]["opensearch_node_roles"] = ["data", "ingest"]
        children: dict[str, Any] = {"opensearch": {"hosts": hosts}}
        if dashboards_archive:
            # The console runs beside the first node, on its address.
            children["dashboards"] = {"hosts": {nodes[0].inventory_name: {}}}
        if apps:
            apps_host = {
                apps.inventory_name: {"ansible_host": apps.address, "ansible_port": apps.ssh_port}
            }
            children["user_directory"] = {"hosts": apps_host}
            children["order_service"] = {"hosts": {apps.inventory_name: {}}}
            if monitoring:
                # Prometheus, Alertmanager and the exporters beside the services.
                children["monitoring"] = {"hosts": {apps.inventory_name: {}}}
        inventory = {
            "all": {
                "vars": {
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.key),
                    "ansible_ssh_common_args": " ".join(self._ssh_options()[2:]),
                    # The lab image's Python. Named, so no run spends a round trip per
                    # host finding it: 3.3 s of a 36.6 s tls rerun under Mitogen
                    # (bench/RESULTS.md, session 9).
                    "ansible_python_interpreter": LAB_PYTHON,
                },
                "children": children,
            }
        }
        group_vars: dict[str, Any] = {
            "opensearch_cluster_name": CLUSTER_NAME,
            "opensearch_security_mode": mode,
            "opensearch_heap_size": lab_heap(len(nodes) - len(absent)),
            "opensearch_distribution_source": "maven",
            "opensearch_plugins": [dict(plugin) for plugin in LAB_PLUGINS],
            # Registered on the directory every node mounts at path.repo, so that
            # playbooks/snapshot.yml and restore.yml work on the lab as they are.
            "opensearch_snapshot_repository": SNAPSHOT_REPOSITORY,
        }
        self._ensure_secrets()

        def lookup(name: str) -> str:
            path = self.secret_file(name)
            return "{{ lookup('ansible.builtin.file', '" + str(path) + "') }}"

        if mode != "open":
            group_vars["opensearch_pki_dir"] = str(self.pki_dir)
            group_vars["opensearch_ca_passphrase"] = lookup("ca_passphrase")
            group_vars["opensearch_security_passwords"] = {
                user: lookup(user) for user in SECURITY_SECRETS
            }
            if directory is not None:
                # scripts/up --ldap (docs/ldap.md): the directory container and a role per group.
                group_vars.update(directory.inventory_vars(lookup))
        comment = ""
        if network == "loopback":
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            group_vars["opensearch_limit_nofile"] = hard
            comment = (
                "# loopback network: this machine's open-file hard limit cannot be raised, so\n"
                "# the unit asks for no more than it; OpenSearch on loopback skips the check.\n"
            )
        (self.lab_dir / "group_vars").mkdir(parents=True, exist_ok=True)
        header = "# Written by scripts/up; rewritten on every run.\n"
        (self.lab_dir / "hosts.yml").write_text(header + yaml.safe_dump(inventory, sort_keys=False))
        (self.lab_dir / "group_vars" / "opensearch.yml").write_text(
            header + comment + yaml.safe_dump(group_vars, sort_keys=False)
        )
        # The applications bind loopback behind the TLS proxy (roles/tls_proxy), which
        # listens on the apps container's own address. In the loopback network that
        # address is a loopback one too, and the only one the container may take.
        app_bind = (apps.address if network == "loopback" else "127.0.0.1") if apps else ""
        proxy_vars = {"tls_proxy_listen_address": apps.address if apps else ""}
        if mode == "open":
            # No cluster PKI in open mode: the proxy's certificate still needs the CA.
            proxy_vars["opensearch_ca_passphrase"] = lookup("ca_passphrase")
        service_vars = {
            "user_directory": {
                **proxy_vars,
                "user_directory_host": app_bind,
                "user_directory_port": USER_DIRECTORY_PORT,
                # The lab's user directory takes writes, so it asks for a token even on
                # loopback; lab.json names the 0600 file (user_directory_token_file).
                "user_directory_auth_tokens": [lookup(USER_DIRECTORY_TOKEN)],
            },
            "order_service": {
                **proxy_vars,
                "order_service_host": app_bind,
                "order_service_port": ORDERS_PORT,
                # As the user directory's: lab.json names the 0600 file (orders_token_file).
                "order_service_auth_tokens": [lookup(ORDER_SERVICE_TOKEN)],
            },
        }
        for group, variables in service_vars.items():
            path = self.lab_dir / "group_vars" / f"{group}.yml"
            if apps:
                path.write_text(header + yaml.safe_dump(variables, sort_keys=False))
            else:
                path.unlink(missing_ok=True)
        monitoring_vars = self.lab_dir / "group_vars" / "monitoring.yml"
        if apps and monitoring:
            monitoring_vars.write_text(
                header
                + yaml.safe_dump(
                    lab_monitoring.group_vars(apps.address, self.lab_dir), sort_keys=False
                )
            )
        else:
            monitoring_vars.unlink(missing_ok=True)
        console_vars = self.lab_dir / "group_vars" / "dashboards.yml"
        if dashboards_archive:
            console_vars.write_text(
                header
                + yaml.safe_dump({"dashboards_archive_path": str(dashboards_archive.resolve())})
            )
        else:
            console_vars.unlink(missing_ok=True)

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
            **_service_facts(
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
        ensure_docker_engine()
        ensure_max_map_count()
        return ensure_lab_image()

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
        image_tag = self.prepare()
        existing = self.existing_node_count()
        # Shrinking keeps the extra nodes running until the playbook has drained them.
        nodes, apps_node = self.ensure_containers(
            chosen, image_tag, max(existing, node_count), apps=apps
        )
        if not apps:
            self.remove_apps()
        if monitoring:
            lab_monitoring.ensure_receiver(self.lab_dir)
        else:
            lab_monitoring.stop_receiver(self.lab_dir)
            if (self.lab_dir / "group_vars" / "monitoring.yml").exists():
                say("stopping the monitoring's units (--no-monitoring on a lab that had it)")
                lab_monitoring.stop_units(
                    [node.container for node in [*nodes, *([apps_node] if apps_node else [])]]
                )
        directory = None
        if ldap:
            self._ensure_secrets()
            directory = LabDirectory(
                lab_dir=self.lab_dir, secret_file=self.secret_file, pki_dir=self.pki_dir
            )
            directory.ensure(
                base_image=CURRENT_IMAGE,
                network=chosen,
                cluster_name=CLUSTER_NAME,
                passphrase=self.secret_file("ca_passphrase").read_text().strip().encode(),
            )
        else:
            remove_directory()
        if node_count > existing > 0:
            say(f"growing the lab from {existing} to {node_count} node(s)")
        changed = 0
        for count in shrink_steps(len(nodes), node_count, zones=zones, managers=managers):
            extra = nodes[count:]
            if extra:
                say(
                    f"shrinking the lab from {len(nodes)} to {count} node(s): "
                    f"{', '.join(node.inventory_name for node in extra)} marked absent"
                )
            self.write_inventory(
                nodes,
                network=chosen,
                mode=mode,
                dashboards_archive=dashboards_archive,
                absent=tuple(node.inventory_name for node in extra),
                apps=apps_node,
                zones=zones,
                managers=managers,
                monitoring=monitoring,
                directory=directory,
            )
            changed += self.run_playbook()
            if extra:
                self.remove_containers(extra)
                nodes = nodes[:count]
                self.retire_certificates(nodes)
                self.write_inventory(
                    nodes,
                    network=chosen,
                    mode=mode,
                    dashboards_archive=dashboards_archive,
                    apps=apps_node,
                    zones=zones,
                    managers=managers,
                    monitoring=monitoring,
                    directory=directory,
                )
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
        (self.lab_dir / "lab.json").write_text(json.dumps(facts, indent=2) + "\n")
        _print_summary(facts, elapsed=time.monotonic() - started, lab_dir=self.lab_dir)
        return facts

    def down(self) -> None:
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


def node_facts(
    nodes: list[LabNode],
    urls: list[str],
    cat_nodes: list[dict[str, Any]],
    placements: list[Placement],
) -> list[dict[str, Any]]:
    """lab.json's ``nodes``: what ``_cat/nodes`` reports of each (its name, ``roles`` as the
    engine abbreviates them, the elected ``cluster_manager``), and where the inventory put
    it: ``zone`` (null without --zones) and ``node_roles``, the roles it was given."""
    by_ip = {entry["ip"]: entry for entry in cat_nodes}
    default_roles = list(load_schema().variables["opensearch_node_roles"].default)
    facts = []
    for node, url, placement in zip(nodes, urls, placements, strict=True):
        seen = by_ip.get(node.address, {})
        facts.append(
            {
                "name": seen.get("name", node.inventory_name),
                "url": url,
                "address": node.address,
                "roles": seen.get("node.role", ""),
                "cluster_manager": seen.get("cluster_manager") == "*",
                "zone": placement.zone,
                "node_roles": list(placement.roles)
                if placement.roles is not None
                else default_roles,
            }
        )
    return facts


def _service_facts(
    apps: LabNode | None,
    *,
    ca_cert: Path,
    user_directory_token_file: Path,
    orders_token_file: Path,
) -> dict[str, Any]:
    """lab.json's ``services`` (base URLs, HTTPS through the TLS proxy), the CA bundle
    that verifies them (``services_ca_cert``), and the 0600 files of their bearer tokens
    (``user_directory_token_file``, ``orders_token_file``)."""
    if apps is None:
        return {"services": {}}
    return {
        "services": {
            "user_directory": f"https://{apps.address}:{USER_DIRECTORY_PORT}",
            "orders": f"https://{apps.address}:{ORDERS_PORT}",
        },
        "services_ca_cert": str(ca_cert),
        "user_directory_token_file": str(user_directory_token_file),
        "orders_token_file": str(orders_token_file),
    }


def curl_example(facts: dict[str, Any]) -> str:
    """How to reach the cluster, without ever printing the password or passing it in argv.

    ``curl -u user:password`` would put the password in the process list of anyone who
    copies the line, so curl reads its credentials as a config file on stdin (``-K -``),
    fed by a here-string the shell expands itself: neither curl's nor cat's argv holds it.
    """
    url = f"'{facts['nodes'][0]['url']}/_cat/nodes?v'"
    if facts["mode"] == "open":
        return f"curl {url}"
    ca = f"--cacert {facts['ca_cert']} " if facts.get("ca_cert") else ""
    credentials = f'user = \\"{facts["admin_user"]}:$(cat {facts["admin_password_file"]})\\"'
    return f'curl {ca}-K - {url} <<< "{credentials}"'


def _print_summary(facts: dict[str, Any], *, elapsed: float, lab_dir: Path) -> None:
    lines = [
        "",
        f"cluster  {facts['cluster_name']}  (OpenSearch {facts['version']}, mode {facts['mode']}, "
        f"network {facts['network']})",
        f"health   {facts['health']}",
    ]
    for node in facts["nodes"]:
        manager = "  (cluster manager)" if node["cluster_manager"] else ""
        zone = f"  {node['zone']}" if node.get("zone") else ""
        lines.append(
            f"node     {node['name']:<14} {node['url']:<28} roles {node['roles']}{zone}{manager}"
        )
    if facts.get("console"):
        sign_in = "" if facts["mode"] == "open" else "; sign in as admin"
        lines.append(f"console  {facts['console']}  (Dashboards{sign_in})")
    services = facts.get("services") or {}
    if "user_directory" in services:
        lines.append(
            f"service  user directory  {services['user_directory']}/mock-api/users  "
            f"(bearer token in {facts['user_directory_token_file']})"
        )
    if "orders" in services:
        lines.append(
            f"service  orders          {services['orders']}/orders  "
            f"(bearer token in {facts['orders_token_file']})"
        )
    if services and facts.get("services_ca_cert"):
        lines.append(f"services verify with --cacert {facts['services_ca_cert']}")
    monitoring = facts.get("monitoring")
    if monitoring:
        lines += [
            f"monitor  prometheus    {monitoring['prometheus']}",
            f"monitor  alertmanager  {monitoring['alertmanager']}  (user {monitoring['user']}, "
            f"password in {monitoring['password_file']}; --cacert {monitoring['ca_cert']})",
            f"monitor  alerts received by the lab's webhook: {monitoring['receiver_log']}",
        ]
    lines += [
        f"changed  {facts['changed']} task(s) in this run; took {elapsed:.0f}s",
        f"try      {curl_example(facts)}",
        f"facts    {lab_dir / 'lab.json'}",
        "teardown scripts/down",
    ]
    print("\n".join(lines))
