"""Every playbook runs by its collection name, and the old dashed names still run, saying
they are deprecated (issue 52).

ansible-core takes a collection playbook's name (``clusterforge.stack.<name>``) only when
the name holds letters, digits and ``_``; five playbooks had dashes until 1.0.0. Their old
file names stay for one release as imports of the new ones with a deprecation line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOKS = ROOT / "playbooks"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
# The dashed names of 1.0.0's renames, kept until 1.1.0 (CHANGELOG.md).
DEPRECATED = {
    "check-inventory": "check_inventory",
    "place-certs": "place_certs",
    "rolling-restart": "rolling_restart",
    "rotate-ca": "rotate_ca",
    "rotate-certs": "rotate_certs",
}
# What ansible-core accepts as a collection playbook's name (its _get_collection_playbook_path
# splits on the dots and checks each part is an identifier).
RUNNABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_every_playbook_but_the_deprecated_shims_has_a_name_that_runs() -> None:
    names = {path.stem for path in PLAYBOOKS.glob("*.yml")}
    unrunnable = {name for name in names if not RUNNABLE_NAME.match(name)}
    assert unrunnable == set(DEPRECATED), unrunnable
    assert set(DEPRECATED.values()) <= names


def test_each_shim_says_it_is_deprecated_then_imports_its_new_name() -> None:
    for old, new in DEPRECATED.items():
        plays = yaml.safe_load((PLAYBOOKS / f"{old}.yml").read_text())
        assert len(plays) == 2, old
        say, run = plays
        message = say["tasks"][0]["ansible.builtin.debug"]["msg"]
        assert "DEPRECATED" in message and f"playbooks/{new}.yml" in message, old
        assert f"clusterforge.stack.{new}" in message, old
        assert run["ansible.builtin.import_playbook"] == f"{new}.yml", old


def test_a_shim_runs_the_deprecation_line_first_and_then_the_new_playbook() -> None:
    # --list-tasks walks the imports as a run does, without a connection.
    listed = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(ROOT / "inventories" / "example"),
            str(PLAYBOOKS / "rotate-certs.yml"),
            "--list-tasks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    shim = listed.stdout.index("Deprecated playbook name")
    own = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(ROOT / "inventories" / "example"),
            str(PLAYBOOKS / "rotate_certs.yml"),
            "--list-tasks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert own.returncode == 0, own.stdout + own.stderr

    # Every task of the new playbook follows the deprecation line, in the same order.
    def task_lines(listing: str) -> list[str]:
        return [
            line.strip()
            for line in listing.splitlines()
            if "TAGS:" in line and not line.strip().startswith("play #")
        ]

    tasks = task_lines(own.stdout)
    assert tasks
    assert task_lines(listed.stdout[shim:])[1:] == tasks


def test_the_docs_name_playbooks_that_run_by_collection_name() -> None:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for document in documents:
        text = document.read_text()
        for name in re.findall(r"clusterforge\.stack\.([\w-]+)", text):
            if (PLAYBOOKS / f"{name}.yml").exists() or "-" in name:
                assert RUNNABLE_NAME.match(name), f"{document.name}: clusterforge.stack.{name}"
        for name in re.findall(r"playbooks/([\w-]+)\.yml", text):
            assert name not in DEPRECATED, f"{document.name} names playbooks/{name}.yml"


def test_the_readme_examples_by_collection_name_pass_the_syntax_check() -> None:
    # The README's shorthand `.rolling_restart` stands for clusterforge.stack.rolling_restart.
    readme = (ROOT / "README.md").read_text()
    names = set(re.findall(r"clusterforge\.stack\.(\w+)", readme))
    names |= set(re.findall(r"`\.(\w+)`", readme))
    playbooks = sorted(name for name in names if (PLAYBOOKS / f"{name}.yml").exists())
    assert "site" in playbooks and "rolling_restart" in playbooks, playbooks
    for name in playbooks:
        checked = subprocess.run(
            [
                str(ANSIBLE_PLAYBOOK),
                "-i",
                str(ROOT / "inventories" / "example"),
                f"clusterforge.stack.{name}",
                "--syntax-check",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert checked.returncode == 0, f"clusterforge.stack.{name}: {checked.stderr}"
