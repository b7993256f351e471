"""The snapshot part of the plan: the repository and the policy, refused before any host
changes when the inventory asks for what the cluster cannot do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.plan import build_plan, with_restore, with_restore_snapshot
from clusterforge.plan.snapshots.snapshots import (
    DIGEST_PREFIX,
    SM_PLUGINS,
    plan_restore,
    plan_restore_snapshot,
    plan_snapshots,
)

REPO = Path(__file__).resolve().parents[1]

POLICY = {"name": "nightly", "cron": "0 2 * * *", "max_age": "14d", "max_count": 30}
SM_PLUGIN_ENTRIES = [
    {"name": name, "source": "maven", "coordinates": f"org.opensearch.plugin:{name}"}
    for name in SM_PLUGINS
]


def nodes(**overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    base = {"opensearch_security_mode": "open", **overrides}
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **base}) for i in (1, 2, 3)]


def planned(**overrides: Any) -> dict[str, Any]:
    inventory = nodes(**overrides)
    return plan_snapshots(build_cluster(inventory), inventory[0][1])


def problems_of(**overrides: Any) -> list[str]:
    inventory = nodes(**overrides)
    with pytest.raises(InventoryError) as raised:
        plan_snapshots(build_cluster(inventory), inventory[0][1])
    return raised.value.problems


def test_no_repository_when_unset() -> None:
    assert planned() == {
        "repository": None,
        "location": "/var/backups/opensearch",
        "policy": None,
        "schedule": None,
    }
    # An empty policy mapping is no policy.
    assert planned(opensearch_snapshot_policy={})["policy"] is None


def test_the_repository_lives_at_path_repo() -> None:
    assert planned(
        opensearch_snapshot_repository="backups", opensearch_repo_path="/srv/shared/snapshots"
    ) == {
        "repository": "backups",
        "location": "/srv/shared/snapshots",
        "policy": None,
        "schedule": None,
    }


def test_the_whole_plan_carries_the_repository() -> None:
    plan = build_plan(nodes(opensearch_snapshot_repository="backups"), fetch=False)
    assert plan["snapshots"]["repository"] == "backups"


@pytest.mark.parametrize("name", ["Backups", "_backups", "back ups", "a/b", ""])
def test_a_malformed_repository_name_is_refused_by_the_schema(name: str) -> None:
    with pytest.raises(InventoryError) as raised:
        build_cluster(nodes(opensearch_snapshot_repository=name))
    assert any("opensearch_snapshot_repository" in problem for problem in raised.value.problems)


def test_the_policy_is_refused_on_the_minimal_engine_naming_what_is_missing() -> None:
    [problem] = problems_of(
        opensearch_snapshot_repository="backups", opensearch_snapshot_policy=POLICY
    )
    assert problem.startswith("opensearch_snapshot_policy needs the snapshot-management API")
    assert "index-management" in problem
    assert "'maven'" in problem
    assert all(name in problem for name in SM_PLUGINS)
    assert "tarball" in problem


def test_the_whole_plan_refuses_the_policy_before_anything_is_fetched() -> None:
    with pytest.raises(InventoryError, match="opensearch_snapshot_policy needs"):
        build_plan(
            nodes(opensearch_snapshot_repository="b", opensearch_snapshot_policy=POLICY),
            fetch=True,  # would fetch the engine if the refusal came later
        )


def test_the_policy_is_planned_when_index_management_is_installed() -> None:
    policy = planned(
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_policy=POLICY,
        opensearch_plugins=SM_PLUGIN_ENTRIES,
    )["policy"]
    assert policy["name"] == "nightly"
    body = policy["body"]
    schedule = {"cron": {"expression": "0 2 * * *", "timezone": "UTC"}}
    assert body["creation"] == {"schedule": schedule}
    assert body["snapshot_config"] == {"repository": "backups", "indices": "*"}
    assert body["deletion"] == {
        "schedule": schedule,
        "condition": {"min_count": 1, "max_age": "14d", "max_count": 30},
    }
    assert body["enabled"] is True
    assert body["description"].startswith(DIGEST_PREFIX)
    assert policy["description"] == body["description"]


def test_the_policy_digest_follows_its_content() -> None:
    def description(**policy: Any) -> str:
        return str(
            planned(
                opensearch_snapshot_repository="backups",
                opensearch_snapshot_policy=policy,
                opensearch_plugins=SM_PLUGIN_ENTRIES,
            )["policy"]["description"]
        )

    assert description(cron="0 2 * * *") == description(cron=" 0  2 * * * ")
    assert description(cron="0 2 * * *") != description(cron="0 3 * * *")


def test_the_official_tarball_has_the_sm_api() -> None:
    policy = planned(
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_policy={"cron": "30 1 * * *"},
        opensearch_distribution_source="tarball",
    )["policy"]
    assert policy["name"] == "clusterforge"
    assert "deletion" not in policy["body"]


def test_a_policy_without_a_repository_is_refused() -> None:
    problems = problems_of(
        opensearch_snapshot_policy={"cron": "0 2 * * *"}, opensearch_plugins=SM_PLUGIN_ENTRIES
    )
    assert problems == [
        "opensearch_snapshot_policy is set but opensearch_snapshot_repository is not: the "
        "policy snapshots into that repository; set opensearch_snapshot_repository, e.g. backups"
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            {"cron": "every night"},
            "opensearch_snapshot_policy.cron 'every night' is not a five-field",
        ),
        ({"name": "n"}, "opensearch_snapshot_policy.cron None is not a five-field"),
        ({"cron": "0 2 * * *", "name": "Nightly"}, "opensearch_snapshot_policy.name 'Nightly'"),
        ({"cron": "0 2 * * *", "max_age": "2 weeks"}, "max_age '2 weeks' is not a duration"),
        ({"cron": "0 2 * * *", "max_count": 0}, "max_count 0 is not a whole number"),
        ({"cron": "0 2 * * *", "max_count": True}, "max_count True is not a whole number"),
        ({"cron": "0 2 * * *", "max_count": 2, "min_count": 5}, "min_count 5 exceeds max_count 2"),
        ({"cron": "0 2 * * *", "enabled": "yes"}, "enabled 'yes' is not a boolean"),
        ({"cron": "0 2 * * *", "timezone": "UTC+1 hour"}, "timezone 'UTC+1 hour'"),
        ({"cron": "0 2 * * *", "indices": ""}, "indices '' must be an index pattern"),
        ({"cron": "0 2 * * *", "retention": 3}, "unknown key(s) retention"),
    ],
)
def test_a_bad_policy_names_the_field_and_the_fix(policy: dict[str, Any], expected: str) -> None:
    problems = problems_of(
        opensearch_snapshot_repository="backups",
        opensearch_snapshot_policy=policy,
        opensearch_plugins=SM_PLUGIN_ENTRIES,
    )
    assert any(expected in problem for problem in problems), problems


def test_a_policy_that_is_not_a_mapping_is_refused_by_the_schema() -> None:
    with pytest.raises(InventoryError) as raised:
        build_cluster(nodes(opensearch_snapshot_policy="0 2 * * *"))
    assert any("opensearch_snapshot_policy must be a mapping" in p for p in raised.value.problems)


def test_every_policy_problem_comes_back_together() -> None:
    problems = problems_of(opensearch_snapshot_policy={"cron": "x", "max_count": -1})
    assert len(problems) == 4  # no repository, no SM API, the cron, the count


HELD = ["orders", ".opendistro_security", "users"]


@pytest.mark.parametrize(
    ("requested", "indices"),
    [
        ("", ["orders", "users"]),  # every index but the security plugin's own
        (None, ["orders", "users"]),
        ("users", ["users"]),
        ("users,orders", ["users", "orders"]),
        (["orders"], ["orders"]),
        (".opendistro_security", [".opendistro_security"]),  # asked for by name: restored
    ],
)
def test_the_plan_chooses_the_indices_a_restore_touches(requested: Any, indices: list[str]) -> None:
    assert plan_restore("nightly-1", HELD, requested) == {"indices": indices}


def test_an_index_the_snapshot_lacks_is_refused_naming_those_it_holds() -> None:
    with pytest.raises(InventoryError) as raised:
        plan_restore("nightly-1", HELD, "users,missing, orders")
    assert raised.value.problems == [
        "Snapshot nightly-1 holds no index missing,  orders; it holds "
        ".opendistro_security, orders, users."
    ]


def test_with_restore_keeps_the_plan_and_adds_the_decision() -> None:
    plan = build_plan(nodes(opensearch_snapshot_repository="backups"), fetch=False)
    decided = with_restore({**plan, "changed": False}, "nightly-1", HELD, "")
    assert decided["snapshots"] == {
        **plan["snapshots"],
        "restore": {"indices": ["orders", "users"]},
    }
    assert {key: value for key, value in decided.items() if key != "snapshots"} == {
        key: value for key, value in plan.items() if key != "snapshots"
    }


def restore_selected(
    tmp_path: Path, plan: dict[str, Any], requested: Any
) -> subprocess.CompletedProcess[str]:
    """roles/opensearch_snapshots' restore_select.yml run by ansible-playbook on localhost
    (no connection): the plan action, asked with the snapshot's indices as the cluster
    would report them."""
    variables = {
        "__clusterforge_plan": plan,
        "__opensearch_snapshots_snapshot": {"json": {"snapshots": [{"indices": HELD}]}},
        "opensearch_snapshots_name": "nightly-1",
        "opensearch_snapshots_restore_indices": requested,
    }
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    (tmp_path / "play.yml").write_text(
        textwrap.dedent(
            """\
            - hosts: localhost
              gather_facts: false
              vars_files: [vars.json]
              tasks:
                - ansible.builtin.include_role:
                    name: clusterforge.stack.opensearch_snapshots
                    tasks_from: restore_select
                - ansible.builtin.copy:
                    dest: "{{ playbook_dir }}/selected.json"
                    content: "{{ __opensearch_snapshots_restored_indices | to_json }}"
            """
        )
    )
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            *("-i", "localhost,", "-c", "local"),
            *("-e", f"ansible_python_interpreter={sys.executable}"),
            str(tmp_path / "play.yml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_role_restores_what_the_plan_chose_and_stops_on_an_unknown_index(
    tmp_path: Path,
) -> None:
    plan = build_plan(nodes(opensearch_snapshot_repository="backups"), fetch=False)
    chosen = restore_selected(tmp_path, plan, "")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    assert json.loads((tmp_path / "selected.json").read_text()) == ["orders", "users"]
    (tmp_path / "selected.json").unlink()
    refused = restore_selected(tmp_path, plan, ["users", "missing"])
    assert refused.returncode != 0
    assert "Snapshot nightly-1 holds no index missing; it holds" in refused.stdout
    assert not (tmp_path / "selected.json").exists()


def _listed(name: str, state: str, ended: int) -> dict[str, Any]:
    """One entry of GET _snapshot/<repository>/_all, as the engine answers (the fields read)."""
    return {"snapshot": name, "state": state, "end_time_in_millis": ended, "indices": HELD}


def test_latest_is_the_newest_successful_snapshot_by_its_end_time() -> None:
    # Listed by start time, as the engine lists them: the one that ended last is not the
    # last listed, and a failed or partial one never counts, however new.
    listed = [
        _listed("nightly-1", "SUCCESS", 1_000),
        _listed("long-one", "SUCCESS", 9_000),
        _listed("nightly-2", "SUCCESS", 5_000),
        _listed("broken", "PARTIAL", 12_000),
        _listed("failed", "FAILED", 13_000),
        {"snapshot": "running", "state": "IN_PROGRESS", "indices": HELD},
    ]
    assert plan_restore_snapshot("latest", listed) == {"snapshot": "long-one"}
    # Two that ended together: the one listed last (as the role's sort did).
    tied = [_listed("a", "SUCCESS", 7_000), _listed("b", "SUCCESS", 7_000)]
    assert plan_restore_snapshot("latest", tied) == {"snapshot": "b"}


def test_a_named_snapshot_is_taken_as_given_without_a_list() -> None:
    assert plan_restore_snapshot("before-upgrade", []) == {"snapshot": "before-upgrade"}
    # Only the exact word is special: a snapshot may be named like it otherwise.
    assert plan_restore_snapshot("latest-1", []) == {"snapshot": "latest-1"}


def test_latest_without_a_successful_snapshot_is_refused_naming_what_the_repository_holds() -> None:
    with pytest.raises(InventoryError) as refused:
        plan_restore_snapshot("latest", [_listed("broken", "PARTIAL", 3_000)], repository="backups")
    message = refused.value.problems[0]
    assert "repository backups holds no successful snapshot" in message
    assert "broken (PARTIAL)" in message
    with pytest.raises(InventoryError, match="it holds: no snapshot"):
        plan_restore_snapshot("latest", [], repository="backups")


def test_the_plan_keeps_the_chosen_snapshot_beside_the_indices() -> None:
    plan = build_plan(nodes(opensearch_snapshot_repository="backups"), fetch=False)
    listed = [_listed("nightly-1", "SUCCESS", 1_000), _listed("nightly-2", "SUCCESS", 2_000)]
    chosen = with_restore_snapshot({**plan, "changed": False}, "latest", listed)
    assert chosen["snapshots"] == {**plan["snapshots"], "restore": {"snapshot": "nightly-2"}}
    assert "changed" not in chosen
    decided = with_restore(chosen, "nightly-2", HELD, "users")
    assert decided["snapshots"]["restore"] == {"snapshot": "nightly-2", "indices": ["users"]}
    with pytest.raises(InventoryError, match="repository backups holds no successful"):
        with_restore_snapshot(plan, "latest", [])
