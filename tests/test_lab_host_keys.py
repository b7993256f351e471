"""The lab forgets the host key of a container it removes, and a wait for sshd that gives
up says why, in ssh's own words (issue 41, item 6). Real ssh-keygen and ssh, no docker:
the container's address is an unused loopback one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterforge.errors import LabError
from clusterforge.lab.cluster import Lab, LabNode
from clusterforge.lab.process import wait_until


def _lab(tmp_path: Path) -> Lab:
    lab_dir = tmp_path / "inventories" / "lab"
    lab_dir.mkdir(parents=True)
    return Lab(repo=tmp_path, lab_dir=lab_dir)


def test_a_removed_nodes_key_leaves_known_hosts_and_the_others_stay(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lab.ssh_dir.mkdir(parents=True, exist_ok=True)
    key = tmp_path / "hostkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = (tmp_path / "hostkey.pub").read_text().split()[:2]
    known_hosts = lab.ssh_dir / "known_hosts"
    known_hosts.write_text(
        f"[127.0.0.14]:2222 {' '.join(public)}\n[127.0.0.13]:2222 {' '.join(public)}\n"
    )
    lab._forget_host_key(LabNode("opensearch-4", "127.0.0.14", 2222))
    remaining = known_hosts.read_text()
    assert "127.0.0.14" not in remaining
    assert "[127.0.0.13]:2222" in remaining
    assert not known_hosts.with_name("known_hosts.old").exists()


def test_a_wait_for_sshd_that_gives_up_quotes_ssh(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lab.ssh_dir.mkdir(parents=True, exist_ok=True)
    lab.key.write_text("")  # ssh only warns about an unusable identity
    nowhere = LabNode("opensearch-9", "127.0.0.31", 2222)  # an unused loopback address
    with pytest.raises(LabError) as gave_up:
        wait_until(
            "sshd on opensearch-9",
            lambda: lab._ssh_works(nowhere),
            timeout_s=1,
            interval_s=0.2,
            last_error=lambda: lab.last_ssh_error(nowhere),
        )
    message = str(gave_up.value)
    assert "the last attempt said:" in message
    assert "Connection refused" in message or "port 2222" in message, message
