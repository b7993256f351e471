"""Run one of the collection's modules as Ansible runs it: its arguments in a JSON file,
in a Python of its own, its answer the JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_module(
    module: Path,
    workdir: Path,
    args: dict[str, Any],
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """``module``'s answer to ``args`` (Ansible's internal ``_ansible_*`` keys included),
    the arguments file written in ``workdir``; ``env`` replaces the environment, and a run
    past ``timeout`` seconds fails the test instead of hanging it."""
    arguments = workdir / "args.json"
    arguments.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    done = subprocess.run(
        [sys.executable, str(module), str(arguments)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=timeout,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result
