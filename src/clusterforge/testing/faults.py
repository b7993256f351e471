"""Faults injected into the lab for the resilience drills (issue 50): a test tool.

    python -m clusterforge.testing.faults --remove-rules   (what scripts/down also does)

- partition: iptables rules that drop the packets between one node and the other nodes,
  both ways. The lab's nodes share the host's network namespace, and a node's outgoing
  connections leave from 127.0.0.1 (the loopback route's source), not from its own
  address: a rule by source address would not isolate it. So each rule matches the
  sending socket's cgroup (``-m cgroup --path``, the container's cgroup v2 directory,
  under which every process of the container runs) and the destination address: the
  isolated node's container to the other nodes' addresses, and every other node's
  container to the isolated node's address. A connection either side opens is cut
  (its requests never arrive), and clients outside the nodes (the drill's writer, the
  exporters of the other nodes, Prometheus) still reach every node.
- freeze: SIGSTOP of the engine's JVM (the unit's main process), SIGCONT after the hold.
- crash: SIGKILL of every node's engine at once, then every engine started.
- full disk: the three disk watermarks set (transient) as absolute free-space values
  above the node's free space; the engine blocks writes as on a full disk. The host's
  disk is never filled: it is shared. The settings are reset afterwards.

Every rule carries the comment :data:`RULE_COMMENT`; :func:`remove_rules` deletes every
rule with it (the drill's cleanup, a signal trap, ``scripts/down``). A rule is only ever
written for the lab's own loopback addresses (127.0.0.11 to 127.0.0.19) or the tls
molecule scenario's nodes (127.0.0.31 to 127.0.0.33, where CI runs three drills):
anything else is refused before iptables runs.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RULE_COMMENT = "clusterforge"
# The only destinations a rule may name: the lab's node addresses (clusterforge.lab.topology:
# LOOPBACK_BASE, LOOPBACK_FIRST_OCTET, MAX_NODES), and the tls molecule scenario's three
# nodes (molecule/tls/molecule.yml's opensearch_network_host), where CI runs three drills.
LAB_NODE_ADDRESSES = frozenset(f"127.0.0.{octet}" for octet in range(11, 20))
MOLECULE_TLS_NODE_ADDRESSES = frozenset(f"127.0.0.{octet}" for octet in range(31, 34))
ALLOWED_NODE_ADDRESSES = LAB_NODE_ADDRESSES | MOLECULE_TLS_NODE_ADDRESSES
COMMAND_TIMEOUT = 60.0


class FaultError(Exception):
    """A fault could not be injected or removed; the message says which and why."""


@dataclass(frozen=True)
class LabNodeTarget:
    """One node as the faults see it: its name, loopback address and container."""

    name: str
    address: str
    container: str


def check_lab_address(address: str) -> str:
    """``address`` if it is one of the lab's node addresses; else a FaultError."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        raise FaultError(f"{address!r} is not an IP address; a fault names a lab node") from None
    if str(parsed) not in ALLOWED_NODE_ADDRESSES:
        raise FaultError(
            f"{address} is not one of the lab's node addresses (127.0.0.11 to 127.0.0.19) "
            "nor the tls molecule scenario's (127.0.0.31 to 127.0.0.33); no rule is written "
            "outside them"
        )
    return str(parsed)


def _run(command: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> str:
    try:
        done = subprocess.run(  # noqa: S603
            list(command), check=True, text=True, capture_output=True, timeout=timeout
        )
    except subprocess.CalledProcessError as error:
        raise FaultError(
            f"{shlex.join(command)} failed ({error.returncode}): {error.stderr.strip()}"
        ) from None
    except subprocess.TimeoutExpired:
        raise FaultError(f"{shlex.join(command)} did not finish within {timeout:.0f}s") from None
    return done.stdout


# --- partition ----------------------------------------------------------------------------


def container_cgroup(container: str) -> str:
    """The container's cgroup v2 directory (``/docker/<id>`` with docker's cgroupfs
    driver, ``/system.slice/docker-<id>.scope`` with systemd's): the one of its init
    process, less the ``init.scope`` the container's systemd moved itself into."""
    pid = _run(["docker", "inspect", "-f", "{{.State.Pid}}", container]).strip()
    if not pid.isdigit() or pid == "0":
        raise FaultError(f"container {container} is not running")
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hierarchy, _controllers, path = line.split(":", 2)
        if hierarchy == "0":
            return path.removesuffix("/init.scope") or "/"
    raise FaultError(f"container {container}'s process has no cgroup v2 path")


def partition_rules(
    isolated: LabNodeTarget, others: Sequence[LabNodeTarget], cgroups: dict[str, str]
) -> list[list[str]]:
    """The OUTPUT rules (iptables arguments after the chain) that cut ``isolated`` off
    from ``others``, both ways; ``cgroups`` maps containers to their cgroup paths."""
    check_lab_address(isolated.address)
    rules = []
    for other in others:
        check_lab_address(other.address)
        # The isolated node's packets to the other node, and the other node's to it.
        for sender, receiver in ((isolated, other), (other, isolated)):
            cgroup = cgroups[sender.container]
            if cgroup == "/":
                raise FaultError(
                    f"container {sender.container} runs in the root cgroup; its packets "
                    "cannot be told from the host's"
                )
            rules.append(
                [
                    "-d",
                    f"{receiver.address}/32",
                    "-m",
                    "cgroup",
                    "--path",
                    cgroup,
                    "-m",
                    "comment",
                    "--comment",
                    f"{RULE_COMMENT} partition {isolated.name}",
                    "-j",
                    "DROP",
                ]
            )
    return rules


@contextmanager
def partitioned(isolated: LabNodeTarget, others: Sequence[LabNodeTarget]) -> Iterator[None]:
    """``isolated`` cut off from ``others`` for the block; the rules removed after it,
    whatever happens in it."""
    cgroups = {node.container: container_cgroup(node.container) for node in [isolated, *others]}
    rules = partition_rules(isolated, others, cgroups)
    try:
        for rule in rules:
            _run(["iptables", "-w", "-I", "OUTPUT", *rule])
        yield
    finally:
        remove_rules()


def tagged_rules(saved: str) -> list[list[str]]:
    """The rules of an ``iptables-save`` text that carry :data:`RULE_COMMENT`, each as the
    ``-t table -D chain number`` arguments that delete it: by its number, so that a rule
    whose cgroup has gone with its container can still be deleted. Within a chain the
    highest number comes first, so each deletion leaves the next one's number as it was."""
    deletions: list[tuple[str, str, int]] = []
    table = "filter"
    positions: dict[tuple[str, str], int] = {}
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A "):
            words = shlex.split(line)
            chain = words[1]
            positions[(table, chain)] = positions.get((table, chain), 0) + 1
            if _comment(words).split(" ", 1)[0] == RULE_COMMENT:
                deletions.append((table, chain, positions[(table, chain)]))
    deletions.sort(key=lambda rule: (rule[0], rule[1], -rule[2]))
    return [["-t", table, "-D", chain, str(number)] for table, chain, number in deletions]


def _comment(words: list[str]) -> str:
    for index, word in enumerate(words[:-1]):
        if word == "--comment":
            return words[index + 1]
    return ""


def remove_rules() -> int:
    """Delete every rule tagged :data:`RULE_COMMENT`; how many there were."""
    try:
        saved = _run(["iptables-save"])
    except (FaultError, FileNotFoundError):
        return 0
    rules = tagged_rules(saved)
    for rule in rules:
        _run(["iptables", "-w", *rule])
    return len(rules)


def count_rules() -> int:
    """How many rules tagged :data:`RULE_COMMENT` the host has (0 after every drill)."""
    try:
        return len(tagged_rules(_run(["iptables-save"])))
    except (FaultError, FileNotFoundError):
        return 0


# --- freeze and crash -------------------------------------------------------------------


def engine_pid(container: str, service: str = "opensearch") -> str:
    """The engine's JVM: the unit's main process, as the container numbers it."""
    pid = _run(
        ["docker", "exec", container, "systemctl", "show", "-p", "MainPID", "--value", service]
    ).strip()
    if not pid.isdigit() or pid == "0":
        raise FaultError(f"{service} is not running in {container}")
    return pid


@contextmanager
def frozen(container: str, service: str = "opensearch") -> Iterator[None]:
    """The engine's JVM stopped (SIGSTOP) for the block, continued (SIGCONT) after it."""
    pid = engine_pid(container, service)
    _run(["docker", "exec", container, "kill", "-STOP", pid])
    try:
        yield
    finally:
        _run(["docker", "exec", container, "kill", "-CONT", pid])


def crash_all(containers: Sequence[str], service: str = "opensearch") -> None:
    """SIGKILL every engine at once (side by side, not one after the other)."""
    running = [
        subprocess.Popen(  # noqa: S603
            ["docker", "exec", container, "systemctl", "kill", "-s", "SIGKILL", service],  # noqa: S607
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for container in containers
    ]
    for container, process in zip(containers, running, strict=True):
        _stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT)
        if process.returncode != 0:
            raise FaultError(f"SIGKILL of {service} in {container} failed: {stderr.strip()}")


def cancel_restarts(containers: Sequence[str], service: str = "opensearch") -> None:
    """Cancel the unit's pending automatic restart of a killed engine (Restart=on-failure):
    ``systemctl stop`` of a unit whose processes are already dead stops nothing."""
    for container in containers:
        _run(["docker", "exec", container, "systemctl", "stop", service], timeout=120)


def start_all(containers: Sequence[str], service: str = "opensearch") -> None:
    for container in containers:
        _run(["docker", "exec", container, "systemctl", "start", service], timeout=300)


# --- full disk ----------------------------------------------------------------------------

WATERMARK_SETTINGS = tuple(
    f"cluster.routing.allocation.disk.watermark.{level}" for level in ("low", "high", "flood_stage")
)
INFO_INTERVAL_SETTING = "cluster.info.update.interval"


def full_disk_settings(free_bytes: int, *, margin_mb: int = 1024) -> dict[str, str]:
    """Transient settings under which a node with ``free_bytes`` free is past every
    watermark: each an absolute free-space value above what it has (low above high above
    flood stage, as the engine requires), and disk usage read every 10 s (the engine's shortest)."""
    free_mb = free_bytes // (1024 * 1024)
    flood = free_mb + margin_mb
    return {
        WATERMARK_SETTINGS[0]: f"{flood + 2 * margin_mb}mb",
        WATERMARK_SETTINGS[1]: f"{flood + margin_mb}mb",
        WATERMARK_SETTINGS[2]: f"{flood}mb",
        # The engine's floor for it.
        INFO_INTERVAL_SETTING: "10s",
    }


def reset_disk_settings() -> dict[str, None]:
    """The transient settings :func:`full_disk_settings` set, each reset."""
    return dict.fromkeys([*WATERMARK_SETTINGS, INFO_INTERVAL_SETTING])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge.testing.faults", description=__doc__)
    parser.add_argument(
        "--remove-rules",
        action="store_true",
        help=f"delete every iptables rule tagged {RULE_COMMENT!r}",
    )
    parser.add_argument("--count-rules", action="store_true", help="print how many are left")
    args = parser.parse_args(argv)
    if args.remove_rules:
        removed = remove_rules()
        print(f"removed {removed} {RULE_COMMENT} rule(s)")
    if args.count_rules:
        print(count_rules())
    return 0


if __name__ == "__main__":
    sys.exit(main())
