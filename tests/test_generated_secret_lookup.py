"""The collection's lookup that gives plays the one writer of generated secrets.

Through Ansible itself (the lookup is resolved by its fully qualified name from the
checkout, as roles/postgresql uses it) and as a plain module for its refusals.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleLookupError

from collection_plugins import load_plugin

REPO = Path(__file__).resolve().parents[1]
LOOKUP = "clusterforge.stack.clusterforge_generated_secret"


def _ansible_lookups(expressions: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Evaluate each expression on the control node with ansible, as a play would."""
    out = tmp_path / "result.json"
    playbook = tmp_path / "play.yml"
    values = ", ".join(f"'{name}': {expression}" for name, expression in expressions.items())
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.copy:\n"
        f'        content: "{{{{ {{{values}}} | to_json }}}}"\n'
        f"        dest: {out}\n"
        "        mode: '0600'\n"
        "      no_log: true\n"
    )
    subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(playbook),
        ],
        cwd=REPO,
        env={
            **os.environ,
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_STRATEGY": "linear",
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        },
        check=True,
        capture_output=True,
        timeout=120,
    )
    result: dict[str, str] = json.loads(out.read_text())
    return result


def test_a_play_generates_once_keeps_older_files_and_reads_back_the_same(
    tmp_path: Path,
) -> None:
    new = tmp_path / "inventory" / ".postgresql" / "order_service.password"
    # Inventories deployed before this lookup hold files ansible.builtin.password wrote:
    # the password and a line break. The servers know that password; it must stay.
    old = tmp_path / "inventory" / ".postgresql" / "user_directory.password"
    old.parent.mkdir(parents=True)
    old.write_text("Abc123fromTheOldPasswordLookup0\n")
    old.chmod(0o644)
    values = _ansible_lookups(
        {
            "new": f"lookup('{LOOKUP}', '{new}', alphabet='alphanumeric', length=32)",
            "again": f"lookup('{LOOKUP}', '{new}')",
            "old": f"lookup('{LOOKUP}', '{old}')",
        },
        tmp_path,
    )
    assert len(values["new"]) == 32 and values["new"].isalnum()
    assert values["again"] == values["new"]
    assert new.read_text() == values["new"] + "\n"
    assert values["old"] == "Abc123fromTheOldPasswordLookup0"
    for path in (new, old):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(new.parent.stat().st_mode) == 0o700


def test_bad_options_and_unusable_files_are_refused_naming_the_fix(tmp_path: Path) -> None:
    lookup = load_plugin("lookup", "clusterforge_generated_secret").LookupModule()
    path = tmp_path / "secret"
    with pytest.raises(AnsibleLookupError, match="alphabet is 'hex'"):
        lookup.run([str(path)], alphabet="hex")
    with pytest.raises(AnsibleLookupError, match="length is 8"):
        lookup.run([str(path)], length=8)
    with pytest.raises(AnsibleLookupError, match="unknown option"):
        lookup.run([str(path)], chars=["digits"])
    assert not path.exists()
    path.write_text("")
    with pytest.raises(AnsibleLookupError, match="then rerun"):
        lookup.run([str(path)], fix="then rerun")
    assert lookup.run([str(tmp_path / "url")], alphabet="url_safe", length=18)[0]
