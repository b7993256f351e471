"""The playbooks' shape (issue 33, items 4 and 5), read from the files, and one run.

- The plan names the run's groups once (playbooks/plan.yml,
  clusterforge.plan.cluster.removal.plan_groups); no play outside decommission.yml guards host by
  host whether a node is absent.
- A play on a group that may be missing names its hosts as a list, so a run prints no
  "Could not match supplied host pattern" warning: services.yml runs here against an
  inventory with none of the service groups, and its output holds no such warning (no
  host is contacted: the only host's address is on loopback and no play targets it).
- The day-2 playbooks plan, then act and verify through a role's tasks only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOKS = ROOT / "playbooks"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
# Groups a run may not have: the inventory's optional ones and those the plan fills.
MAYBE_EMPTY = {
    "dashboards",
    "postgresql",
    "user_directory",
    "order_service",
    "opensearch_removed",
    "opensearch_serving",
}


def plays(name: str) -> list[dict[str, Any]]:
    return [play for play in yaml.safe_load((PLAYBOOKS / name).read_text()) if "hosts" in play]


def test_no_play_outside_decommission_guards_absent_nodes() -> None:
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        if path.name == "decommission.yml":
            continue
        text = path.read_text()
        assert "__clusterforge_left_out" not in text, path.name
        assert "end_host" not in text, path.name
        assert "removal.nodes" not in text, path.name


def test_plays_on_groups_that_may_be_missing_name_their_hosts() -> None:
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        for play in plays(path.name):
            hosts = play["hosts"]
            named = set(str(hosts).split(":")) if "{{" not in str(hosts) else set()
            assert not named & MAYBE_EMPTY, f"{path.name}: {play['name']} targets {hosts}"


def test_the_engine_and_api_plays_of_site_target_the_plans_groups() -> None:
    targets = {play["name"]: play["hosts"] for play in plays("site.yml")}
    assert targets["Install, configure and start OpenSearch"] == "opensearch_present"
    serving = "{{ groups['opensearch_serving'] | default([]) }}"
    for name, hosts in targets.items():
        if name.startswith(
            ("Initialize security", "Snapshot", "The orders index", "The cluster's own", "Report")
        ):
            assert hosts == serving, name


@pytest.mark.parametrize(
    ("playbook", "role"),
    [
        ("snapshot.yml", "clusterforge.stack.opensearch_snapshots"),
        ("restore.yml", "clusterforge.stack.opensearch_snapshots"),
        ("decommission.yml", "clusterforge.stack.opensearch_decommission"),
    ],
)
def test_day2_playbooks_act_and_verify_through_a_role(playbook: str, role: str) -> None:
    document = yaml.safe_load((PLAYBOOKS / playbook).read_text())
    imports = [
        entry["ansible.builtin.import_playbook"] for entry in document if "hosts" not in entry
    ]
    if playbook != "decommission.yml":  # site.yml plans before it imports decommission.yml
        assert imports[0] == "plan.yml"
    for play in plays(playbook):
        for task in play["tasks"]:
            assert set(task) <= {"name", "ansible.builtin.include_role", "vars", "when"}, task
            assert task["ansible.builtin.include_role"]["name"] == role


def test_a_run_without_the_optional_groups_prints_no_host_pattern_warning(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {"opensearch": {"hosts": {"os-1": {"ansible_host": "127.0.0.91"}}}}
                }
            }
        )
    )
    (inventory / "group_vars" / "opensearch.yml").write_text(
        yaml.safe_dump({"opensearch_security_mode": "open"})
    )
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOKS / "services.yml")],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # The services' plan (services_plan.yml), postgresql, the two services and their TLS
    # proxy: each play skipped, none warned.
    assert output.count("skipping: no hosts matched") == 5, output
    assert "Could not match supplied host pattern" not in output, output
