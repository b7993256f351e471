"""Running commands for the lab, with progress lines on long waits."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from clusterforge.errors import LabError


def say(message: str) -> None:
    """Print one progress line for the operator."""
    print(f"clusterforge: {message}", file=sys.stderr, flush=True)


def run(
    command: Sequence[str],
    *,
    check: bool = True,
    capture: bool = True,
    input_bytes: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a command without a shell; raise LabError naming the command when it fails."""
    result = subprocess.run(  # noqa: S603 - argv lists only, never a shell
        list(command),
        check=False,
        capture_output=capture,
        input=input_bytes,
    )
    if check and result.returncode != 0:
        stderr = (result.stderr or b"").decode(errors="replace").strip()[-2000:]
        raise LabError(f"`{' '.join(command[:4])} ...` failed ({result.returncode}): {stderr}")
    return result


def wait_until(
    what: str,
    probe: Callable[[], bool],
    *,
    timeout_s: float,
    interval_s: float = 1.0,
    progress_every_s: float = 10.0,
    last_error: Callable[[], str] | None = None,
) -> None:
    """Poll ``probe`` until it is true, printing a progress line every so often.

    ``last_error`` says why the last probe failed (the giving-up message quotes it)."""
    started = time.monotonic()
    last_report = started
    while not probe():
        now = time.monotonic()
        if now - started > timeout_s:
            why = last_error() if last_error else ""
            raise LabError(
                f"gave up waiting for {what} after {timeout_s:.0f}s"
                + (f"; the last attempt said: {why}" if why else "")
            )
        if now - last_report >= progress_every_s:
            say(f"still waiting for {what} ({now - started:.0f}s)")
            last_report = now
        time.sleep(interval_s)
