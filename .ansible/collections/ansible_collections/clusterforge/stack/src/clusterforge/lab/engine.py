"""Making sure a docker engine runs, and the kernel setting OpenSearch needs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from clusterforge.errors import LabError
from clusterforge.lab.process import run, say, wait_until

MAX_MAP_COUNT = 262144
DOCKERD_LOG = Path("/var/log/clusterforge-dockerd.log")


def docker_is_up() -> bool:
    return run(["docker", "info"], check=False).returncode == 0


def _is_root() -> bool:
    return os.geteuid() == 0


def apt_install(*packages: str) -> None:
    """Install Debian packages; refresh the package lists once if the first try fails."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-qq", *packages]
    if subprocess.run(command, env=env, capture_output=True, check=False).returncode == 0:  # noqa: S603
        return
    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, check=False)  # noqa: S607
    result = subprocess.run(command, env=env, capture_output=True, check=False)  # noqa: S603
    if result.returncode != 0:
        raise LabError(
            f"apt-get install {' '.join(packages)} failed: "
            f"{result.stderr.decode(errors='replace')[-1000:]}"
        )


def ensure_docker_engine() -> None:
    """Start a docker engine when `docker info` fails (Debian's docker.io, then dockerd)."""
    if docker_is_up():
        return
    if not _is_root():
        raise LabError(
            "no docker engine answers `docker info` and this is not root; start one, "
            "or run scripts/up as root so it can install Debian's docker.io"
        )
    if shutil.which("dockerd") is None:
        say("installing Debian's docker.io (no docker engine on this machine)")
        apt_install("docker.io")
    say(f"starting dockerd (log: {DOCKERD_LOG})")
    with DOCKERD_LOG.open("ab") as log:
        subprocess.Popen(
            ["dockerd"],  # noqa: S607
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    wait_until("the docker engine", docker_is_up, timeout_s=60)


def ensure_max_map_count() -> None:
    """Containers share the host kernel, so vm.max_map_count is set on the docker host."""
    current = int(Path("/proc/sys/vm/max_map_count").read_text().strip())
    if current >= MAX_MAP_COUNT:
        return
    if not _is_root():
        raise LabError(
            f"vm.max_map_count is {current}; OpenSearch needs {MAX_MAP_COUNT}: "
            f"run `sysctl -w vm.max_map_count={MAX_MAP_COUNT}` as root"
        )
    say(f"setting vm.max_map_count={MAX_MAP_COUNT} on the docker host (was {current})")
    run(["sysctl", "-w", f"vm.max_map_count={MAX_MAP_COUNT}"])
