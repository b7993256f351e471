"""Each service's README install-and-start block, run as written (issue 49, item 4).

In a fresh directory that holds a copy of the checkout's ``services`` (so the relative
paths of the README work) each block runs line by line in bash: the install
lines create a fresh virtualenv and install from the checkout (pip's cache makes it
quick), the line that starts the service runs in the background, and ``curl`` is retried
until the service answers. The only change made to the text is the port: a free one in
place of the README's, so a service already on 8081/8082 does not fail the test.

About 40 s a service with a warm pip cache (measured 38 s and 46 s); marked slow.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_SECONDS = 240


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _sh_blocks(readme: str) -> list[str]:
    return [
        "\n".join(line.strip() for line in block.splitlines())
        for block in re.findall(r"```sh\n(.*?)```", readme, flags=re.DOTALL)
    ]


def _commands(block: str) -> list[str]:
    """The block's commands, a backslash-continued line joined to the next."""
    return [command for command in block.replace("\\\n", " ").splitlines() if command.strip()]


def _run_block(block: str, directory: Path, port_written: int, port: int) -> None:
    commands = _commands(block.replace(str(port_written), str(port)))
    services: list[subprocess.Popen[bytes]] = []
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CLUSTERFORGE_", "ORDERS_", "EVENT_", "VIRTUAL_ENV"))
    }
    try:
        for command in commands:
            if "bin/clusterforge-" in command and "pip install" not in command:
                services.append(
                    subprocess.Popen(
                        ["bash", "-c", command],
                        cwd=directory,
                        env=environment,
                        start_new_session=True,
                    )
                )
                continue
            if command.startswith("curl "):
                deadline = time.monotonic() + 60
                while True:
                    answer = subprocess.run(
                        ["bash", "-c", f"{command} --fail --silent --show-error"],
                        cwd=directory,
                        env=environment,
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if answer.returncode == 0:
                        break
                    for service in services:
                        assert service.poll() is None, f"the service stopped: {command}"
                    assert time.monotonic() < deadline, answer.stderr
                    time.sleep(0.3)
                continue
            answer = subprocess.run(
                ["bash", "-c", command],
                cwd=directory,
                env=environment,
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
                check=False,
            )
            output = answer.stdout[-2000:] + answer.stderr[-4000:]
            assert answer.returncode == 0, f"{command}\n{output}"
    finally:
        for service in services:
            if service.poll() is None:
                os.killpg(service.pid, signal.SIGTERM)
                service.wait(timeout=30)


@pytest.fixture
def beside_the_checkout(tmp_path: Path) -> Path:
    # A copy, not a link: pip builds a local project in place, and its build/ and
    # *.egg-info directories must not land in the checkout (a wheelhouse built from it
    # later could pick up build/'s stale files).
    shutil.copytree(
        ROOT / "services",
        tmp_path / "services",
        ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"
        ),
    )
    return tmp_path


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("python3.11") is None, reason="the README names python3.11")
def test_the_order_services_readme_installs_and_starts(beside_the_checkout: Path) -> None:
    readme = (ROOT / "services" / "orders" / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Install and run it on its own") :]
    block = _sh_blocks(section)[0]
    assert "pip install" in block and "clusterforge-orders" in block and "curl" in block
    started = time.monotonic()
    _run_block(block, beside_the_checkout, 8082, _free_port())
    print(f"orders README block: {time.monotonic() - started:.0f} s")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("python3.11") is None, reason="the README names python3.11")
def test_the_user_directorys_readme_installs_and_starts(beside_the_checkout: Path) -> None:
    readme = (ROOT / "services" / "userdir" / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## One distribution, two installs") : readme.index("## Tests")]
    client_only, server = _sh_blocks(section)[:2]
    assert "UserDirectoryClient" in client_only
    assert "[server]" in server and "curl" in server
    started = time.monotonic()
    _run_block(client_only + "\n" + server, beside_the_checkout, 8081, _free_port())
    print(f"userdir README blocks: {time.monotonic() - started:.0f} s")
