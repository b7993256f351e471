"""The README's "As a collection" commands (issue 41, item 7).

The first tests read the block and need nothing: the pip line brings distlib (without it
``ansible-galaxy collection build`` stops at galaxy.yml's ``manifest``) and installs the
services' packages (without them the plan cannot check a service host's settings), and
the lab's line names its hosts.yml (the directory would make Ansible try lab.json).

The last one runs the block itself, line by line as a user pastes it, in a fresh
virtualenv under a HOME of its own, against a running lab (``scripts/up``; set
``CLUSTERFORGE_CLUSTER_JSON=inventories/lab/lab.json``): it builds and installs the
collection, deploys the lab's nodes and services from outside the checkout, and reruns,
which must change nothing. Without a lab with services it skips. It costs what a user
pays: a virtualenv with Ansible (pip's cache is shared), a build, a converge and a rerun.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def collection_commands() -> list[str]:
    """The block's commands, without comments, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### As a collection") :]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert block, "the README's 'As a collection' section has no sh block"
    lines = []
    for line in block.group(1).splitlines():
        command = line.split(" # ", 1)[0].strip()
        if command and not command.startswith("#"):
            lines.append(command)
    return lines


def test_the_pip_line_brings_distlib_with_ansible() -> None:
    pip_lines = [line for line in collection_commands() if line.startswith("pip install ansible")]
    assert pip_lines, "no pip install of Ansible in the block"
    assert re.search(r"\bdistlib==\d", pip_lines[0]), pip_lines[0]


def test_the_services_packages_are_installed_with_the_library() -> None:
    commands = collection_commands()
    installs = [line for line in commands if line.startswith('pip install "$C"')]
    assert installs, "no pip install of the installed collection's source"
    for project in ("services/kit", "services/userdir", "services/orders"):
        assert f"$C/{project}" in installs[0], project
        assert (ROOT / project / "pyproject.toml").is_file(), project


def test_the_lab_is_read_through_its_hosts_file() -> None:
    lab = [line for line in collection_commands() if "inventories/lab" in line]
    assert lab and lab[-1].endswith(
        "-i <checkout>/inventories/lab/hosts.yml clusterforge.stack.site"
    )


def _lab() -> Path:
    path = os.environ.get("CLUSTERFORGE_CLUSTER_JSON")
    if not path:
        pytest.skip(
            "no lab: set CLUSTERFORGE_CLUSTER_JSON=inventories/lab/lab.json after scripts/up"
        )
    facts = json.loads(Path(path).read_text())
    lab_dir = Path(path).resolve().parent
    if not (lab_dir / "hosts.yml").is_file() or not facts.get("services"):
        pytest.skip(f"{path} is not a lab with services (scripts/up without --no-apps)")
    return lab_dir


def _recap_changed(output: str) -> int:
    recap = output[output.rindex("PLAY RECAP") :]
    return sum(int(found) for found in re.findall(r"\bchanged=(\d+)", recap))


def test_the_collection_commands_deploy_the_lab_from_outside_the_checkout(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    lab_dir = _lab()
    # A short HOME: ssh's control sockets live under ~/.ansible/cp, and a socket's path
    # may not be longer than 107 bytes (pytest's tmp_path often is).
    home = Path(tempfile.mkdtemp(prefix="cf-home-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    commands = [
        line.replace("<checkout>", str(ROOT))
        for line in collection_commands()
        # A vault-kept inventory of the user's own; the lab's line follows it.
        if "inventories/<yours>" not in line
    ]
    deploy = commands[-1]
    assert str(lab_dir / "hosts.yml") in deploy
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(HOME=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip's cache of the user running the test, so the virtualenv costs no second download.
    env["PIP_CACHE_DIR"] = str(Path(os.environ.get("HOME", "/root")) / ".cache" / "pip")
    # The block as pasted, the deploy timed, then the rerun (the block's last line again).
    script = "set -eu\n" + "\n".join(
        [
            f"cd {ROOT}",
            *commands[:-1],
            'echo "=== t_deploy $(date +%s)"',
            deploy,
            'echo "=== rerun $(date +%s)"',
            deploy,
            'echo "=== t_end $(date +%s)"',
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    output = done.stdout + done.stderr
    (tmp_path / "output.txt").write_text(output)
    assert done.returncode == 0, output[-6000:]
    first, rerun = output.split("=== rerun", 1)
    assert "PLAY RECAP" in first and "failed=0" in first
    # The services were deployed from the collection too.
    assert re.search(r"^apps-1 +: ok=[1-9].*failed=0", first, flags=re.MULTILINE), first[-4000:]
    assert _recap_changed(rerun) == 0, rerun[-4000:]
    assert "lab.json" not in output, [line for line in output.splitlines() if "lab.json" in line]
