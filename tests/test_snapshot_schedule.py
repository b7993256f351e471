"""Scheduled snapshots, the plan's side (clusterforge.plan.snapshots.snapshot_schedule): the
OnCalendar check on the control node, the retention variables, the refusals, the snapshot
user, and what each node gets (units confined below 5.0, its own URL first)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.plan import build_plan
from clusterforge.plan.snapshots.snapshot_schedule import (
    SNAPSHOT_ROLE,
    SNAPSHOT_USER,
    CalendarError,
    allowed_age_seconds,
    check_calendar,
    parse_calendar_output,
    period_of,
)
from clusterforge.plan.snapshots.snapshots import plan_snapshots

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="needs systemd-analyze")
PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}


def nodes(tmp_path: Path | None = None, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    base: dict[str, Any] = {
        "opensearch_security_mode": "tls",
        "opensearch_security_passwords": PASSWORDS,
    }
    if tmp_path is not None:
        base.update(
            opensearch_pki_dir=str(tmp_path / "pki"),
            opensearch_ca_passphrase="unit-test-passphrase",
        )
    base.update(overrides)
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **base}) for i in (1, 2, 3)]


def scheduled(**overrides: Any) -> dict[str, Any]:
    settings = {
        "opensearch_snapshot_repository": "backups",
        "opensearch_snapshot_schedule": "*:*:00",
        **overrides,
    }
    inventory = nodes(**settings)
    planned = plan_snapshots(build_cluster(inventory), inventory[0][1])
    assert planned["schedule"] is not None
    return planned["schedule"]


def problems_of(**overrides: Any) -> list[str]:
    inventory = nodes(**overrides)
    with pytest.raises(InventoryError) as raised:
        plan_snapshots(build_cluster(inventory), inventory[0][1])
    return raised.value.problems


SAMPLE = """  Original form: *:0/15
Normalized form: *-*-* *:00/15:00
    Next elapse: Fri 2026-11-27 03:15:00 UTC
       From now: 9min left
       Iter. #2: Fri 2026-11-27 03:30:00 UTC
       From now: 24min left
       Iter. #3: Fri 2026-11-27 03:45:00 UTC
"""


def test_systemd_analyze_output_gives_the_normal_form_and_the_elapses() -> None:
    normalized, elapses = parse_calendar_output(SAMPLE)
    assert normalized == "*-*-* *:00/15:00"
    assert elapses[0] == datetime(2026, 11, 27, 3, 15, tzinfo=UTC)
    assert period_of(elapses) == 900


def test_the_period_is_the_smallest_gap() -> None:
    times = [
        datetime(2026, 1, 1, hour, minute, tzinfo=UTC)
        for hour, minute in [(1, 0), (1, 45), (2, 0), (2, 45)]
    ]
    assert period_of(times) == 15 * 60
    with pytest.raises(CalendarError):
        period_of(times[:1])


@needs_systemd
@pytest.mark.parametrize(
    ("expression", "period"),
    [
        ("*:*:00", 60),
        ("minutely", 60),
        ("hourly", 3600),
        ("daily", 86400),
        ("*-*-* 02:00:00", 86400),
        ("*:0/15", 900),
        ("Mon,Thu *-*-* 01:00", 3 * 86400),
    ],
)
def test_systemd_checks_the_schedule_and_gives_its_period(expression: str, period: int) -> None:
    normalized, found = check_calendar(expression)
    assert found == period
    assert normalized


@needs_systemd
@pytest.mark.parametrize("expression", ["every day", "*:*:61", "25:00", "2019-01-01 00:00"])
def test_systemd_refuses_what_is_no_schedule(expression: str) -> None:
    with pytest.raises(CalendarError):
        check_calendar(expression)


def test_without_systemd_analyze_only_shorthands_pass() -> None:
    assert check_calendar("daily", analyze="") == ("daily", 86400)
    with pytest.raises(CalendarError, match="systemd-analyze is not on this control node"):
        check_calendar("*:*:00", analyze="")


@needs_systemd
def test_a_bad_schedule_is_refused_naming_the_variable() -> None:
    problems = problems_of(
        opensearch_snapshot_repository="backups", opensearch_snapshot_schedule="every day"
    )
    assert len(problems) == 1
    assert problems[0].startswith("opensearch_snapshot_schedule 'every day' is not")
    assert "e.g. daily" in problems[0]


@needs_systemd
def test_the_schedule_and_the_policy_are_refused_together() -> None:
    problems = problems_of(
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_schedule="daily",
        opensearch_snapshot_policy={"cron": "0 2 * * *"},
        opensearch_distribution_source="tarball",
    )
    assert any("opensearch_snapshot_policy are both set" in problem for problem in problems)


def test_the_schedule_needs_a_repository_and_a_tls_cluster() -> None:
    problems = problems_of(opensearch_snapshot_schedule="daily")
    assert any("opensearch_snapshot_repository is not" in problem for problem in problems)
    problems = problems_of(
        opensearch_snapshot_schedule="daily",
        opensearch_snapshot_repository="backups",
        opensearch_security_mode="open",
    )
    assert any("needs a secured cluster" in problem for problem in problems)


def test_retention_without_a_schedule_is_refused() -> None:
    problems = problems_of(opensearch_snapshot_keep_last=3)
    assert problems == [
        "opensearch_snapshot_keep_last is set but opensearch_snapshot_schedule is not: it "
        "applies to scheduled snapshots only; set opensearch_snapshot_schedule (e.g. daily) "
        "or remove opensearch_snapshot_keep_last"
    ]


@needs_systemd
def test_retention_values_are_read_and_checked() -> None:
    # -e gives strings.
    schedule = scheduled(opensearch_snapshot_keep_last="3", opensearch_snapshot_max_age="2h")
    assert schedule["keep_last"] == 3
    assert schedule["max_age_seconds"] == 7200
    assert schedule["period_seconds"] == 60
    assert schedule["prefix"] == "opensearch-scheduled-" or schedule["prefix"].endswith(
        "-scheduled-"
    )
    with pytest.raises(InventoryError) as raised:
        scheduled(opensearch_snapshot_max_age="30s")
    assert "shorter than the schedule's period" in str(raised.value)


@needs_systemd
def test_the_timers_run_on_the_managers_or_the_named_nodes() -> None:
    assert scheduled()["hosts"] == ["os-1", "os-2", "os-3"]
    assert scheduled(opensearch_snapshot_schedule_nodes=["os-2"])["hosts"] == ["os-2"]
    with pytest.raises(InventoryError) as raised:
        scheduled(opensearch_snapshot_schedule_nodes=["os-9"])
    assert "opensearch_snapshot_schedule_nodes names os-9" in str(raised.value)


def test_the_allowed_age_is_two_periods_and_a_minute() -> None:
    assert allowed_age_seconds(60) == 180
    assert allowed_age_seconds(86400) == 2 * 86400 + 60


@needs_systemd
def test_the_plan_gives_each_node_its_files_and_the_user_its_role(tmp_path: Path) -> None:
    inventory = nodes(
        tmp_path,
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_schedule="*:*:00",
        opensearch_snapshot_keep_last=3,
    )
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    schedule = plan["snapshots"]["schedule"]
    password_file = Path(schedule["password_file"])
    assert password_file == tmp_path / ".opensearch" / f"{SNAPSHOT_USER}.password"
    assert password_file.stat().st_mode & 0o777 == 0o600
    password = password_file.read_text().strip()
    # The password is in the credentials entries alone, each marked secret (no diff, no
    # log); no other part of the section (configs, units, other files) holds it.
    secret_entries = [
        entry for entries in schedule["files"].values() for entry in entries if entry.get("secret")
    ]
    assert {entry["path"] for entry in secret_entries} == {schedule["credentials_file"]}
    assert len(secret_entries) == len(schedule["hosts"])
    public = {key: value for key, value in schedule.items() if key != "files"}
    public["files"] = {
        host: [entry for entry in entries if not entry.get("secret")]
        for host, entries in schedule["files"].items()
    }
    assert password not in json.dumps({**plan["snapshots"], "schedule": public})
    assert all(json.loads(entry["content"])["password"] == password for entry in secret_entries)
    config = schedule["configs"]["os-2"]
    assert config["node"] == "os-2"
    assert config["urls"][0] == "https://127.0.0.62:9200"
    assert sorted(config["urls"]) == [f"https://127.0.0.6{i}:9200" for i in (1, 2, 3)]
    assert config["keep_last"] == 3 and config["period_seconds"] == 60
    assert config["ca_file"].endswith("/ca.pem")
    assert "OnCalendar=*-*-* *:*:00" in schedule["timer_unit"]
    assert (
        f"ExecStart=/usr/bin/python3 -I {schedule['runner_path']} snapshots "
        f"{schedule['config_file']}\n" in schedule["service_unit"]
    )
    assert (
        schedule["runner_path"] == "/usr/local/lib/clusterforge/snapshots/host_runners/__main__.py"
    )
    assert password not in schedule["service_unit"]
    files = {entry["path"]: entry["content"] for entry in schedule["runner_files"]}
    assert (
        "def retention(" in files["/usr/local/lib/clusterforge/snapshots/host_runners/snapshots.py"]
    )
    assert schedule["retired_runner_paths"] == ["/usr/local/lib/clusterforge/snapshot_runner.py"]
    users = yaml.safe_load(plan["security"]["files"]["internal_users.yml"])
    assert SNAPSHOT_USER in users
    roles = yaml.safe_load(plan["security"]["files"]["roles.yml"])
    assert roles[SNAPSHOT_ROLE]["index_permissions"] == []
    assert "cluster:admin/snapshot/create" in roles[SNAPSHOT_ROLE]["cluster_permissions"]
    mapping = yaml.safe_load(plan["security"]["files"]["roles_mapping.yml"])
    assert mapping[SNAPSHOT_ROLE]["users"] == [SNAPSHOT_USER]
    # Planned again: the same password, the same files.
    again = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    assert password_file.read_text().strip() == password
    assert again["snapshots"]["schedule"] == schedule


@needs_systemd
def test_the_service_unit_scores_below_five(tmp_path: Path) -> None:
    inventory = nodes(
        tmp_path, opensearch_snapshot_repository="backups", opensearch_snapshot_schedule="daily"
    )
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    unit = tmp_path / "clusterforge-snapshot.service"
    unit.write_text(plan["snapshots"]["schedule"]["service_unit"])
    analysis = subprocess.run(
        [str(SYSTEMD_ANALYZE), "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", analysis.stdout)
    assert score, analysis.stdout + analysis.stderr
    assert float(score.group(1)) < 5.0, analysis.stdout


@needs_systemd
def test_a_user_of_the_inventory_may_not_take_the_snapshot_users_name() -> None:
    with pytest.raises(InventoryError) as raised:
        scheduled(
            opensearch_security_users=[{"name": SNAPSHOT_USER, "password": "Some-Password-3f9a"}]
        )
    assert "the name of the scheduled snapshots' own user" in str(raised.value)


ROLE_TASKS = Path(__file__).resolve().parents[1] / "roles/opensearch_snapshots/tasks/schedule.yml"


def test_the_plan_holds_each_nodes_file_entries_and_the_role_only_copies_them(
    tmp_path: Path,
) -> None:
    from ansible.plugins.filter.core import to_json, to_nice_json

    inventory = nodes(
        tmp_path,
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_schedule="daily",
        opensearch_snapshot_schedule_nodes=["os-1", "os-3"],
    )
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    schedule = plan["snapshots"]["schedule"]
    password = (tmp_path / ".opensearch" / f"{SNAPSHOT_USER}.password").read_text().strip()
    for mapping in ("directories", "files", "absent"):
        assert set(schedule[mapping]) == {"os-1", "os-3"}, mapping
    directories = {
        entry["path"]: (entry["owner"], entry["group"], entry["mode"])
        for entry in schedule["directories"]["os-3"]
    }
    assert directories == {
        "/usr/local/lib/clusterforge": ("root", "root", "0755"),
        "/usr/local/lib/clusterforge/snapshots": ("root", "root", "0755"),
        "/usr/local/lib/clusterforge/snapshots/host_runners": ("root", "root", "0755"),
        "/etc/clusterforge/snapshot-schedule": ("root", "root", "0700"),
        "/var/lib/prometheus/node-exporter": ("root", "root", "0755"),
    }
    files = {entry["path"]: entry for entry in schedule["files"]["os-3"]}
    runner = "/usr/local/lib/clusterforge/snapshots/host_runners"
    assert {path: (e["owner"], e["group"], e["mode"]) for path, e in files.items()} == {
        **{
            f"{runner}/{name}": ("root", "root", "0644")
            for name in ("__init__.py", "__main__.py", "common.py", "snapshots.py")
        },
        "/etc/clusterforge/snapshot-schedule/config.json": ("root", "root", "0600"),
        "/etc/clusterforge/snapshot-schedule/credentials.json": ("root", "root", "0600"),
        "/etc/systemd/system/clusterforge-snapshot.service": ("root", "root", "0644"),
        "/etc/systemd/system/clusterforge-snapshot.timer": ("root", "root", "0644"),
    }
    # The contents are what the role's filters made of the same values, byte for byte.
    config = files["/etc/clusterforge/snapshot-schedule/config.json"]
    assert config["content"] == to_nice_json(schedule["configs"]["os-3"])
    assert json.loads(config["content"])["node"] == "os-3"
    credentials = files["/etc/clusterforge/snapshot-schedule/credentials.json"]
    assert credentials["secret"] is True
    assert credentials["content"] == to_json({"username": SNAPSHOT_USER, "password": password})
    assert [path for path, entry in files.items() if entry.get("secret")] == [credentials["path"]]
    timer = files["/etc/systemd/system/clusterforge-snapshot.timer"]
    assert timer["content"] == schedule["timer_unit"]
    assert schedule["unit_dir"] == "/etc/systemd/system"
    assert schedule["absent"]["os-1"] == ["/usr/local/lib/clusterforge/snapshot_runner.py"]
    # The role passes the plan's entries and builds none: no entry literal in its task.
    (install, _remove) = yaml.safe_load(ROLE_TASKS.read_text())
    (place, _start) = install["block"]
    arguments = place["clusterforge.stack.clusterforge_files"]
    assert arguments == {
        "directories": "{{ __opensearch_snapshots_schedule.directories[inventory_hostname] }}",
        "files": "{{ __opensearch_snapshots_schedule.files[inventory_hostname] }}",
        "absent": "{{ __opensearch_snapshots_schedule.absent[inventory_hostname] }}",
        # The timer's state, read with its files (issue 54): tests/test_timer_start.py.
        "units": ["{{ __opensearch_snapshots_schedule.unit }}.timer"],
    }
    assert "'mode':" not in ROLE_TASKS.read_text()
    assert "generated_secret" not in ROLE_TASKS.read_text()


def test_the_plan_says_what_a_node_without_the_schedule_removes(tmp_path: Path) -> None:
    # Planned without a schedule too: a schedule removed leaves the timers until then.
    plan = build_plan(
        nodes(tmp_path, opensearch_snapshot_repository="backups"),
        inventory_dir=tmp_path,
        fetch=False,
    )
    assert plan["snapshots"]["schedule"] is None
    assert plan["timer_removal"]["snapshots"] == {
        "unit": "clusterforge-snapshot",
        "timer": "/etc/systemd/system/clusterforge-snapshot.timer",
        "paths": [
            "/etc/systemd/system/clusterforge-snapshot.timer",
            "/etc/systemd/system/clusterforge-snapshot.service",
            "/etc/clusterforge/snapshot-schedule",
            "/usr/local/lib/clusterforge/snapshots",
            "/usr/local/lib/clusterforge/snapshot_runner.py",
        ],
    }
    (_install, remove) = yaml.safe_load(ROLE_TASKS.read_text())
    assert remove["vars"] == {
        "__opensearch_snapshots_removal": "{{ __clusterforge_plan.timer_removal.snapshots }}"
    }
    assert remove["block"][-1]["loop"] == "{{ __opensearch_snapshots_removal.paths }}"
    # No second copy of a path among the role's variables.
    role_vars = (ROLE_TASKS.parents[1] / "vars/main.yml").read_text()
    assert "/etc/systemd/system" not in role_vars and "/etc/clusterforge" not in role_vars
