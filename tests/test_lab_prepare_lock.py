"""Two preparations of the lab host at once: the second waits for the first and reuses its
image (.ci/run starts one before the virtualenv exists; scripts/test's image step is the
second). The docker engine and debootstrap are stand-ins here: what is tested is the lock
and the order, with real processes holding it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterforge.lab import image

ROOT = Path(__file__).resolve().parents[1]

# A child process: takes the real lock at the path given, says so, holds it for a while.
HOLDER = """
import sys, time
from pathlib import Path
from clusterforge.lab import image
image.PREPARE_LOCK = Path(sys.argv[1])
with image._prepare_lock():
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_preparation_waits_for_the_first_and_reuses_its_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "prepare.lock"
    monkeypatch.setattr(image, "PREPARE_LOCK", lock)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), "1.5"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding"
    steps: list[tuple[str, float]] = []
    monkeypatch.setattr(image, "ensure_docker_engine", lambda: steps.append(("engine", 0)))
    monkeypatch.setattr(image, "ensure_max_map_count", lambda: steps.append(("sysctl", 0)))

    def lab_image() -> str:
        steps.append(("image", time.monotonic()))
        return "clusterforge-lab:stand-in"

    monkeypatch.setattr(image, "ensure_lab_image", lab_image)
    started = time.monotonic()
    assert image.prepare_lab_host() == "clusterforge-lab:stand-in"
    holder.wait(timeout=10)
    assert [name for name, _ in steps] == ["engine", "sysctl", "image"]
    # Nothing ran while the other preparation held the lock.
    assert steps[-1][1] - started >= 1.0
    assert "waiting for another preparation of the lab host" in capsys.readouterr().err


def test_the_image_module_runs_on_the_standard_library_alone() -> None:
    """.ci/run starts it with the system Python, before the virtualenv exists: it must not
    import anything but the standard library and the lab's own stdlib-only modules."""
    probe = (
        "import sys; import clusterforge.lab.image; "
        "third = sorted(name for name in sys.modules if name.split('.')[0] in "
        "{'yaml', 'httpx', 'jinja2', 'ansible', 'opensearchpy', 'cryptography'}); "
        "print(third)"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r}); {probe}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"
