"""The snapshot and lifecycle timers on a rerun (issue 54): their clusterforge_files task
reads the timer's state with its files, and "Start the timer" runs only when the timer's
files changed or it does not run or is not enabled, so a rerun asks systemd nothing more.
The tasks' conditions are evaluated as Ansible evaluates them, with the placement's
result given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_templating import trusted

ROOT = Path(__file__).resolve().parents[1]
RUNNING = {"ActiveState": "active", "UnitFileState": "enabled"}


def _snapshot_tasks() -> list[dict[str, Any]]:
    install = yaml.safe_load((ROOT / "roles/opensearch_snapshots/tasks/schedule.yml").read_text())[
        0
    ]
    return list(install["block"])


def _lifecycle_tasks() -> list[dict[str, Any]]:
    tasks = yaml.safe_load((ROOT / "roles/opensearch_lifecycle/tasks/install.yml").read_text())
    return [tasks[0], *[task for task in tasks if task["name"] == "Start the timer"]]


ROLES = {
    "snapshots": (
        _snapshot_tasks,
        "__opensearch_snapshots_placed",
        {
            "__opensearch_snapshots_schedule": {
                "unit": "clusterforge-snapshot",
                "unit_dir": "/etc/systemd/system",
            }
        },
        "clusterforge-snapshot.timer",
    ),
    "lifecycle": (
        _lifecycle_tasks,
        "__opensearch_lifecycle_placed",
        {
            "_opensearch_lifecycle_plan": {
                "unit": "clusterforge-lifecycle",
                "unit_dir": "/etc/systemd/system",
            }
        },
        "clusterforge-lifecycle.timer",
    ),
}


def _start(role: str, changed_paths: list[str], state: dict[str, str]) -> dict[str, Any] | None:
    """The start task's arguments when it runs, None when it is skipped."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    tasks, register, plan, timer = ROLES[role]
    place, start = tasks()
    assert place["clusterforge.stack.clusterforge_files"]["units"] == [
        f"{{{{ {next(iter(plan))}.unit }}}}.timer"
    ]
    assert start["name"] == "Start the timer"
    placed = {"changed_paths": changed_paths, "unit_states": {timer: state}}
    variables = {**plan, register: placed, **trusted(start["vars"])}
    templar = Templar(loader=DataLoader(), variables=variables)
    if not templar.evaluate_conditional(trusted(start["when"])):
        return None
    arguments: dict[str, Any] = templar.template(trusted(start["ansible.builtin.systemd_service"]))
    return arguments


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_rerun_with_the_timer_running_and_enabled_skips_the_start(role: str) -> None:
    assert _start(role, [], RUNNING) is None
    # enabled-runtime counts as enabled, as systemctl is-enabled says.
    assert _start(role, [], {**RUNNING, "UnitFileState": "enabled-runtime"}) is None
    # A changed file that is not a unit leaves the timer alone, as before.
    assert _start(role, ["/etc/clusterforge/x/config.json"], RUNNING) is None


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_timer_stopped_or_disabled_is_started_and_enabled(role: str) -> None:
    timer = ROLES[role][3]
    for state in ({**RUNNING, "ActiveState": "inactive"}, {**RUNNING, "UnitFileState": "disabled"}):
        assert _start(role, [], state) == {
            "name": timer,
            "state": "started",
            "enabled": True,
            "daemon_reload": False,
        }


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_changed_unit_file_restarts_the_timer_after_a_daemon_reload(role: str) -> None:
    timer = ROLES[role][3]
    assert _start(role, [f"/etc/systemd/system/{timer}"], RUNNING) == {
        "name": timer,
        "state": "restarted",
        "enabled": True,
        "daemon_reload": True,
    }
