"""A real Alertmanager (Debian's prometheus-alertmanager) on a free loopback port, for
tests: started with a given alertmanager.yml, gossip off, its storage in a temporary
directory; stopped when the context ends. Fails (never skips) when the binary is missing."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

BINARY = "prometheus-alertmanager"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_alertmanager(
    config: Path, workdir: Path, extra_args: tuple[str, ...] = ()
) -> Iterator[str]:
    """Yields Alertmanager's base URL once it reports ready."""
    binary = shutil.which(BINARY)
    if binary is None:
        pytest.fail(f"{BINARY} is missing: install Debian's prometheus-alertmanager; .ci/run does")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (workdir / "alertmanager.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code in (200, 401):
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(
                    f"Alertmanager did not start: {(workdir / 'alertmanager.log').read_text()}"
                )
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def post_alert(
    url: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> None:
    """Fire an alert into Alertmanager through its API, as Prometheus does."""
    answer = httpx.post(
        f"{url}/api/v2/alerts",
        json=[{"labels": labels, "annotations": annotations or {}}],
        auth=auth,
        timeout=5,
    )
    answer.raise_for_status()
