"""The index lifecycle, the plan's side (clusterforge.plan.lifecycle.lifecycle): the inventory check
of opensearch_lifecycle_policies before any host is contacted (every problem at once, each
naming its path and the fix), the numbers the runner gets, the lifecycle user's least
privilege, and what each eligible node gets (units confined below 5.0)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.lifecycle.lifecycle import (
    LIFECYCLE_ROLE,
    LIFECYCLE_USER,
    VARIABLE,
    check_policies,
    plan_lifecycle,
    size_bytes,
)
from clusterforge.plan.plan import build_plan
from clusterforge.plan.validation import validate_inventory

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="needs systemd-analyze")
PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}
# The issue's policy, as an inventory writes it, for an alias series and a data stream.
EVENTS: dict[str, Any] = {
    "name": "events",
    "index_pattern": "events-*",
    "alias": "events",
    "rollover": {"max_docs": 1000, "max_primary_size": "1mb"},
    "read_only_after": "2m",
    "force_merge_after": "2m",
    "max_segments": 1,
    "delete_after": "5m",
    "max_total_size": "50mb",
}
LOGS: dict[str, Any] = {
    "name": "logs",
    "data_stream": "logs-app",
    "rollover": {"max_docs": 1000, "max_age": "1h"},
    "replicas_after": "1m",
    "replicas": 0,
    "delete_after": "5m",
}


def nodes(tmp_path: Path | None = None, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    base: dict[str, Any] = {
        "opensearch_security_mode": "tls",
        "opensearch_security_passwords": PASSWORDS,
        "opensearch_distribution_source": "maven",
    }
    if tmp_path is not None:
        base.update(
            opensearch_pki_dir=str(tmp_path / "pki"),
            opensearch_ca_passphrase="unit-test-passphrase",
        )
    base.update(overrides)
    roles = ({}, {}, {}, {"opensearch_node_roles": ["data"]})
    return [
        (f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **base, **extra})
        for i, extra in zip((1, 2, 3, 4), roles, strict=True)
    ]


def problems_of(policies: Any) -> list[str]:
    with pytest.raises(InventoryError) as raised:
        check_policies(policies)
    return raised.value.problems


def test_the_issues_policies_become_the_runners_numbers() -> None:
    events, logs = check_policies([EVENTS, LOGS])
    assert events["kind"] == "alias" and events["alias"] == "events"
    assert events["rollover"] == {"max_docs": 1000, "max_primary_size_bytes": 1024**2}
    assert events["read_only_after_seconds"] == 120
    assert events["force_merge_after_seconds"] == 120 and events["max_segments"] == 1
    assert events["delete_after_seconds"] == 300
    assert events["max_total_size_bytes"] == 50 * 1024**2
    assert events["replicas_after_seconds"] is None and events["replicas"] is None
    assert logs["kind"] == "data_stream" and logs["index_pattern"] == ".ds-logs-app-*"
    assert logs["rollover"] == {"max_docs": 1000, "max_age_seconds": 3600}
    assert logs["replicas"] == 0 and logs["replicas_after_seconds"] == 60


def test_no_policy_plans_nothing() -> None:
    inventory = nodes()
    assert plan_lifecycle(build_cluster(inventory), inventory[0][1]) is None
    assert check_policies([]) == []


def test_every_problem_is_reported_at_once_naming_its_path_and_fix() -> None:
    problems = problems_of(
        [
            {
                "name": "bad",
                "index_pattern": "events-*",
                "rollover": {"max_docs": 0, "max_primary_size": "1 MB", "max_sise": "1d"},
                "delete_after": "5 minutes",
                "replicas": 1,
                "max_total_size": "lots",
                "shrink": True,
            },
            {"name": "Caps", "data_stream": "logs-*"},
            "not a mapping",
        ]
    )
    text = "\n".join(problems)
    for expected in (
        f"{VARIABLE}[0] (bad) has unknown keys shrink",
        f"{VARIABLE}[0] (bad).rollover has unknown keys max_sise",
        f"{VARIABLE}[0] (bad).rollover.max_docs 0 is not a whole number of 1 or more",
        f"{VARIABLE}[0] (bad).rollover.max_primary_size '1 MB' is not a size; write",
        f"{VARIABLE}[0] (bad).rollover needs alias",
        f"{VARIABLE}[0] (bad).delete_after '5 minutes' is not a duration; write",
        f"{VARIABLE}[0] (bad).replicas is set but replicas_after is not",
        f"{VARIABLE}[0] (bad).max_total_size 'lots' is not a size",
        f"{VARIABLE}[1].name 'Caps' is missing or malformed",
        f"{VARIABLE}[1].data_stream 'logs-*' is not a data stream name",
        f"{VARIABLE}[2] is not a mapping",
    ):
        assert expected in text, text
    assert len(problems) == 11, problems


def test_the_target_must_be_a_series_of_ones_own() -> None:
    text = "\n".join(
        problems_of(
            [
                {"name": "a", "delete_after": "1d"},
                {"name": "b", "data_stream": "x", "index_pattern": "x-*", "delete_after": "1d"},
                {"name": "c", "index_pattern": ".opendistro*", "delete_after": "1d"},
                {"name": "d", "index_pattern": "*", "delete_after": "1d"},
                {"name": "e", "index_pattern": "e-*"},
            ]
        )
    )
    assert "[0] (a) names no index: set data_stream" in text
    assert "[1] (b) names both data_stream and index_pattern/alias" in text
    assert "reaches the engine's and the plugins' own indices" in text
    assert "[3] (d).index_pattern '*' is not an index pattern" in text
    assert "[4] (e) does nothing: give it rollover" in text


def test_a_phase_is_an_age_and_comes_before_the_deletion() -> None:
    text = "\n".join(
        problems_of(
            [
                {
                    "name": "a",
                    "index_pattern": "a-*",
                    "replicas_after": {"age": "1d", "replicas": 0},
                    "read_only_after": "10d",
                    "delete_after": "7d",
                },
                {"name": "b", "index_pattern": "b-*", "max_segments": 1, "delete_after": "1s"},
                {"name": "c", "index_pattern": "c-*", "replicas_after": "1d"},
            ]
        )
    )
    assert "(a).replicas_after is an age since rollover, a duration (e.g. 7d) and put" in text
    assert "(a): read_only_after is not before delete_after" in text
    assert "(b).max_segments is set but force_merge_after is not" in text
    assert "(c).replicas_after is set but replicas is not" in text


def test_two_policies_on_one_index_are_refused() -> None:
    text = "\n".join(
        problems_of(
            [
                {"name": "a", "index_pattern": "logs-*", "delete_after": "1d"},
                {"name": "a", "index_pattern": "logs-app-*", "delete_after": "1d"},
                {"name": "c", "index_pattern": "metrics-*", "delete_after": "1d"},
            ]
        )
    )
    assert "two policies named 'a'" in text
    assert "(logs-*) and 'a' (logs-app-*) may both match one index" in text
    assert "metrics" not in text


def test_sizes_are_the_engines_units() -> None:
    assert size_bytes("1mb") == 1024**2
    assert size_bytes("50gb") == 50 * 1024**3
    assert size_bytes("1.5gb") is None and size_bytes("1 mb") is None


def test_the_check_runs_before_any_host_and_needs_tls() -> None:
    inventory = nodes(opensearch_security_mode="open", **{VARIABLE: [{"name": "x"}]})
    with pytest.raises(InventoryError) as raised:
        validate_inventory(inventory)
    text = "\n".join(raised.value.problems)
    assert f"{VARIABLE} needs a secured cluster" in text
    assert f"{VARIABLE}[0] (x) names no index" in text


def test_the_plan_gives_the_eligible_nodes_the_timer_and_the_user_least_privilege(
    tmp_path: Path,
) -> None:
    inventory = nodes(tmp_path, **{VARIABLE: [EVENTS, LOGS]})
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    lifecycle = plan["lifecycle"]
    # os-4 holds data only: not eligible, no timer.
    assert lifecycle["hosts"] == ["os-1", "os-2", "os-3"]
    assert set(lifecycle["configs"]) == {"os-1", "os-2", "os-3"}
    config = lifecycle["configs"]["os-2"]
    assert config["urls"][0].startswith("https://127.0.0.62:")
    assert config["node_name"] and config["cluster"]
    assert [policy["name"] for policy in config["policies"]] == ["events", "logs"]
    assert config["ism_installed"] is False
    password_file = tmp_path / ".opensearch" / f"{LIFECYCLE_USER}.password"
    password = password_file.read_text().strip()
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"
    # The password is in the credentials entries alone, each marked secret (no diff, no
    # log); no other part of the section (configs, units, other files) holds it.
    secret_entries = [
        entry for entries in lifecycle["files"].values() for entry in entries if entry.get("secret")
    ]
    assert {entry["path"] for entry in secret_entries} == {lifecycle["credentials_file"]}
    assert len(secret_entries) == len(lifecycle["hosts"])
    assert all(password in entry["content"] for entry in secret_entries)
    public = {key: value for key, value in lifecycle.items() if key != "files"}
    public["files"] = {
        host: [entry for entry in entries if not entry.get("secret")]
        for host, entries in lifecycle["files"].items()
    }
    assert password not in str(public)
    assert "OnCalendar=*:0/5" in lifecycle["timer_unit"]
    assert "RandomizedDelaySec=30" in lifecycle["timer_unit"]
    assert "User=clusterforge-lifecycle" in lifecycle["service_unit"]
    assert (
        "ExecStart=/usr/bin/python3 -I /usr/local/lib/clusterforge/lifecycle/host_runners/"
        "__main__.py lifecycle /etc/clusterforge/lifecycle/config.json" in lifecycle["service_unit"]
    )
    # The runner reads a public copy of the CA: the engine's certificate directory is
    # its group's only.
    assert config["ca_file"] == "/etc/clusterforge/lifecycle/ca.pem"
    assert lifecycle["ca_source"].endswith("/certs/live/ca.pem")
    assert config["credentials_file"] == "/etc/clusterforge/lifecycle/credentials.json"
    files = {entry["path"]: entry["content"] for entry in lifecycle["runner_files"]}
    assert "def decide(" in files["/usr/local/lib/clusterforge/lifecycle/host_runners/lifecycle.py"]
    assert lifecycle["retired_runner_paths"] == ["/usr/local/lib/clusterforge/lifecycle_runner.py"]
    users = yaml.safe_load(plan["security"]["files"]["internal_users.yml"])
    assert LIFECYCLE_USER in users
    role = yaml.safe_load(plan["security"]["files"]["roles.yml"])[LIFECYCLE_ROLE]
    assert role["cluster_permissions"] == ["cluster:monitor/health", "cluster:monitor/state"]
    (grant,) = role["index_permissions"]
    assert grant["index_patterns"] == [".ds-logs-app-*", "events", "events-*", "logs-app"]
    assert not [action for action in grant["allowed_actions"] if action.startswith("indices:data")]
    mapping = yaml.safe_load(plan["security"]["files"]["roles_mapping.yml"])
    assert mapping[LIFECYCLE_ROLE]["users"] == [LIFECYCLE_USER]
    again = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    assert again["lifecycle"] == lifecycle


def test_with_index_management_the_runner_asks_ism(tmp_path: Path) -> None:
    inventory = nodes(tmp_path, opensearch_distribution_source="tarball", **{VARIABLE: [EVENTS]})
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    assert plan["lifecycle"]["configs"]["os-1"]["ism_installed"] is True
    role = yaml.safe_load(plan["security"]["files"]["roles.yml"])[LIFECYCLE_ROLE]
    assert "cluster:admin/opendistro/ism/managedindex/explain" in role["cluster_permissions"]


def test_the_inventorys_user_may_not_take_the_lifecycle_users_name() -> None:
    inventory = nodes(
        opensearch_security_users=[{"name": LIFECYCLE_USER, "password": "Some-Password-3f9a"}],
        **{VARIABLE: [EVENTS]},
    )
    with pytest.raises(InventoryError) as raised:
        plan_lifecycle(build_cluster(inventory), inventory[0][1])
    assert "the lifecycle runner's own user" in str(raised.value)


@needs_systemd
def test_the_units_are_confined_below_five_and_verify(tmp_path: Path) -> None:
    inventory = nodes(tmp_path, **{VARIABLE: [EVENTS]})
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    unit = tmp_path / "clusterforge-lifecycle.service"
    unit.write_text(plan["lifecycle"]["service_unit"])
    (tmp_path / "clusterforge-lifecycle.timer").write_text(plan["lifecycle"]["timer_unit"])
    analysis = subprocess.run(
        [str(SYSTEMD_ANALYZE), "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", analysis.stdout)
    assert score, analysis.stdout + analysis.stderr
    assert float(score.group(1)) < 5.0, analysis.stdout
    verified = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", str(tmp_path / "clusterforge-lifecycle.timer"), str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr


def test_the_live_checks_policy_is_the_issues_and_passes_the_check() -> None:
    from clusterforge.testing.lifecycle_check import POLICIES

    events, stream = check_policies(POLICIES)
    for policy in (events, stream):
        assert policy["rollover"] == {"max_docs": 1000, "max_primary_size_bytes": 1024**2}
        assert policy["read_only_after_seconds"] == 120
        assert policy["force_merge_after_seconds"] == 120 and policy["max_segments"] == 1
        assert policy["delete_after_seconds"] == 300
        assert policy["max_total_size_bytes"] is not None
    assert events["kind"] == "alias" and stream["kind"] == "data_stream"


ROLE_DIR = Path(__file__).resolve().parents[1] / "roles/opensearch_lifecycle"


def test_the_plan_holds_each_nodes_file_entries_and_the_role_only_copies_them(
    tmp_path: Path,
) -> None:
    import json

    from ansible.plugins.filter.core import to_json, to_nice_json

    inventory = nodes(tmp_path, **{VARIABLE: [EVENTS]})
    plan = build_plan(inventory, inventory_dir=tmp_path, fetch=False)
    lifecycle = plan["lifecycle"]
    password = (tmp_path / ".opensearch" / f"{LIFECYCLE_USER}.password").read_text().strip()
    for mapping in ("directories", "files", "absent"):
        assert set(lifecycle[mapping]) == {"os-1", "os-2", "os-3"}, mapping
    user = "clusterforge-lifecycle"
    directories = {
        entry["path"]: (entry["owner"], entry["group"], entry["mode"])
        for entry in lifecycle["directories"]["os-2"]
    }
    assert directories == {
        "/usr/local/lib/clusterforge": ("root", "root", "0755"),
        "/usr/local/lib/clusterforge/lifecycle": ("root", "root", "0755"),
        "/usr/local/lib/clusterforge/lifecycle/host_runners": ("root", "root", "0755"),
        "/var/lib/prometheus/node-exporter": ("root", "root", "0755"),
        "/etc/clusterforge": ("root", "root", "0755"),
        "/etc/clusterforge/lifecycle": ("root", user, "0750"),
        "/var/lib/clusterforge-lifecycle": (user, user, "0755"),
    }
    files = {entry["path"]: entry for entry in lifecycle["files"]["os-2"]}
    runner = "/usr/local/lib/clusterforge/lifecycle/host_runners"
    assert {path: (e["owner"], e["group"], e["mode"]) for path, e in files.items()} == {
        **{
            f"{runner}/{name}": ("root", "root", "0644")
            for name in ("__init__.py", "__main__.py", "common.py", "lifecycle.py")
        },
        "/etc/clusterforge/lifecycle/config.json": ("root", user, "0640"),
        "/etc/clusterforge/lifecycle/credentials.json": (user, user, "0600"),
        "/etc/systemd/system/clusterforge-lifecycle.service": ("root", "root", "0644"),
        "/etc/systemd/system/clusterforge-lifecycle.timer": ("root", "root", "0644"),
    }
    # The contents are what the role's filters made of the same values, byte for byte.
    config = files["/etc/clusterforge/lifecycle/config.json"]
    assert config["content"] == to_nice_json(lifecycle["configs"]["os-2"])
    assert json.loads(config["content"])["node"] == "os-2"
    credentials = files["/etc/clusterforge/lifecycle/credentials.json"]
    assert credentials["secret"] is True
    assert credentials["content"] == to_json({"username": LIFECYCLE_USER, "password": password})
    assert [path for path, entry in files.items() if entry.get("secret")] == [credentials["path"]]
    service = files["/etc/systemd/system/clusterforge-lifecycle.service"]
    assert service["content"] == lifecycle["service_unit"]
    assert lifecycle["unit_dir"] == "/etc/systemd/system"
    assert lifecycle["absent"]["os-3"] == ["/usr/local/lib/clusterforge/lifecycle_runner.py"]
    # The role passes the plan's entries and builds none: no entry literal in its task, and
    # no second copy of the unit directory among its variables.
    tasks_text = (ROLE_DIR / "tasks/install.yml").read_text()
    place = yaml.safe_load(tasks_text)[0]
    arguments = place["clusterforge.stack.clusterforge_files"]
    assert {key: arguments[key] for key in ("directories", "files", "absent")} == {
        "directories": "{{ _opensearch_lifecycle_plan.directories[inventory_hostname] }}",
        "files": "{{ _opensearch_lifecycle_plan.files[inventory_hostname] }}",
        "absent": "{{ _opensearch_lifecycle_plan.absent[inventory_hostname] }}",
    }
    assert "'mode':" not in tasks_text
    assert "generated_secret" not in tasks_text
    role_vars = yaml.safe_load((ROLE_DIR / "vars/main.yml").read_text())
    assert not [name for name in role_vars if name.endswith("unit_dir")]


def test_the_plan_says_what_a_node_without_the_lifecycle_removes(tmp_path: Path) -> None:
    # Planned without policies too: the policies removed leave the timers until then.
    plan = build_plan(nodes(tmp_path), inventory_dir=tmp_path, fetch=False)
    assert plan["lifecycle"] is None
    assert plan["timer_removal"]["lifecycle"] == {
        "unit": "clusterforge-lifecycle",
        "timer": "/etc/systemd/system/clusterforge-lifecycle.timer",
        "paths": [
            "/etc/systemd/system/clusterforge-lifecycle.timer",
            "/etc/systemd/system/clusterforge-lifecycle.service",
            "/etc/clusterforge/lifecycle",
            "/usr/local/lib/clusterforge/lifecycle",
            "/usr/local/lib/clusterforge/lifecycle_runner.py",
            "/var/lib/prometheus/node-exporter/clusterforge_lifecycle.prom",
            "/var/lib/clusterforge-lifecycle",
        ],
    }
    role_vars = yaml.safe_load((ROLE_DIR / "vars/main.yml").read_text())
    assert role_vars["_opensearch_lifecycle_removal"] == (
        "{{ __clusterforge_plan.timer_removal.lifecycle }}"
    )
    remove_text = (ROLE_DIR / "tasks/remove.yml").read_text()
    assert "/etc/systemd/system" not in remove_text
    assert "_opensearch_lifecycle_removal.paths" in remove_text
