"""The lab's containers on this machine and the files they need: the ssh key, each
node's sshd config, the lab's secrets, starting and removing containers, and ssh's
known_hosts (a removed container's key leaves it).

Two network modes (docs/design.md, "The open-file limit"):

- ``bridge``: every node on the lab's own docker network, sshd on port 22 of its address.
- ``loopback``: the containers share the host's network namespace; every node owns one
  loopback address (127.0.0.11, .12, ...) and its sshd listens on port 2222 there, since
  the host's sshd holds port 22. Chosen where the open-file hard limit is below 65535,
  because OpenSearch enforces its bootstrap checks (65535 open files) as soon as its
  transport binds a non-loopback address.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from clusterforge.errors import LabError
from clusterforge.lab.image import CURRENT_IMAGE
from clusterforge.lab.process import run, say, wait_until
from clusterforge.lab.topology import (
    APPS_HOST,
    APPS_LOOPBACK_OCTET,
    CONTAINER_PREFIX,
    LOOPBACK_BASE,
    LOOPBACK_FIRST_OCTET,
    LOOPBACK_SSH_PORT,
    NETWORK_NAME,
    NODE_COUNT,
    LabNode,
)
from clusterforge.pki.generated_secrets import read_or_generate, url_safe
from clusterforge.pki.pki import CA_CERT_FILE, CA_RETIRED_DIR, retire_node_certificates
from clusterforge.schema import load_schema

# Every secret of the lab lives in one 0600 file of its own; the inventory reads them
# with lookups, so no secret is written twice or passed on a command line.
SECURITY_SECRETS = ("admin", "kibanaserver", "logstash", "kibana")
USER_DIRECTORY_TOKEN = "user_directory_token"  # noqa: S105 (a file name, not a token)
ORDER_SERVICE_TOKEN = "order_service_auth_token"  # noqa: S105 (a file name, not a token)
LAB_SECRETS = ("ca_passphrase", *SECURITY_SECRETS, USER_DIRECTORY_TOKEN, ORDER_SERVICE_TOKEN)
# 18 random bytes (24 characters): what the lab has always generated, so a lab made
# before keeps its values and a new one gets the same kind.
LAB_SECRET_BYTES = 18

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


def _container_state(name: str) -> dict[str, Any] | None:
    result = run(["docker", "inspect", name], check=False)
    if result.returncode != 0:
        return None
    state: dict[str, Any] = json.loads(result.stdout)[0]
    return state


def _container_network_mode(state: dict[str, Any]) -> str:
    return "loopback" if state["HostConfig"]["NetworkMode"] == "host" else "bridge"


class LabContainers:
    """The lab's containers and their files; the files live in ``lab_dir``
    (inventories/lab): key, secrets, PKI, each node's sshd config."""

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
        plan (which would retire them too: clusterforge.plan.cluster.cluster_pki)."""
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
