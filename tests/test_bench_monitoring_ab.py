"""bench/rerun --monitoring-ab without a lab: the variants' arguments, the rounds' order,
the recap's changed count, the checkouts, and the record's medians and ratios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH / "rerun")]

import monitoring_ab  # noqa: E402 - bench/ is no package; its path goes first


def test_without_monitoring_skips_both_roles_tags_and_with_it_skips_nothing() -> None:
    assert monitoring_ab.variant_args("with") == []
    assert monitoring_ab.variant_args("skip") == ["--skip-tags", "monitoring,node_exporter"]
    assert monitoring_ab.variant_args("off") == ["--skip-tags", "monitoring,node_exporter"]
    with pytest.raises(ValueError, match="no variant"):
        monitoring_ab.variant_args("none")


def test_the_roles_tag_every_task_the_variants_skip() -> None:
    # What --skip-tags leaves out must be the roles' tasks: each task of their main.yml
    # carries the role's tag (the includes apply it to the included files).
    import yaml

    roles = Path(__file__).resolve().parents[1] / "roles"
    for role in ("monitoring", "node_exporter"):
        for task in yaml.safe_load((roles / role / "tasks" / "main.yml").read_text()):
            assert role in task.get("tags", []), (role, task["name"])
            if "ansible.builtin.include_tasks" in task:
                assert role in task["ansible.builtin.include_tasks"]["apply"]["tags"]


def test_every_monitoring_unit_is_stopped_for_the_off_runs() -> None:
    assert set(monitoring_ab.MONITORING_UNITS) == {
        "clusterforge-prometheus.service",
        "clusterforge-alertmanager.service",
        "clusterforge-blackbox-exporter.service",
        "clusterforge-cluster-exporter@*.service",
        "clusterforge-node-exporter.service",
    }


def test_rounds_alternate_and_the_off_runs_come_last_together() -> None:
    first = monitoring_ab.order_of_round(0, ["before", "branch"])
    second = monitoring_ab.order_of_round(1, ["before", "branch"])
    assert first == [
        ("before", "with"),
        ("before", "skip"),
        ("branch", "with"),
        ("branch", "skip"),
        ("before", "off"),
        ("branch", "off"),
    ]
    assert second == [
        ("branch", "skip"),
        ("branch", "with"),
        ("before", "skip"),
        ("before", "with"),
        ("branch", "off"),
        ("before", "off"),
    ]
    assert monitoring_ab.order_of_round(2, ["before", "branch"]) == first


def test_changed_is_summed_over_the_recap_only() -> None:
    output = "\n".join(
        [
            "TASK [x] changed=9 in a message",
            "PLAY RECAP ****",
            "apps-1 : ok=58 changed=0 unreachable=0",
            "opensearch-1 : ok=62 changed=2 unreachable=0",
            "opensearch-2 : ok=41 changed=1 unreachable=0",
        ]
    )
    assert monitoring_ab.changed_in_recap(output) == 3
    with pytest.raises(ValueError, match="no PLAY RECAP"):
        monitoring_ab.changed_in_recap("fatal: nothing ran")


def test_checkouts_need_a_site_yml_and_this_one_is_always_measured(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NAME=PATH"):
        monitoring_ab.parse_checkouts(["before"])
    with pytest.raises(ValueError, match=r"no playbooks/site\.yml"):
        monitoring_ab.parse_checkouts([f"before={tmp_path}"])
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("---\n")
    checkouts = monitoring_ab.parse_checkouts([f"before={tmp_path}"])
    assert checkouts == {"before": tmp_path.resolve(), "branch": monitoring_ab.REPO.resolve()}


def runs_of(name: str, rounds: list[tuple[float, float, float]]) -> list[monitoring_ab.Run]:
    return [
        monitoring_ab.Run(name, variant, number, seconds, 0, 2.5)
        for number, times in enumerate(rounds, start=1)
        for variant, seconds in zip(monitoring_ab.VARIANTS, times, strict=True)
    ]


def test_the_record_has_each_rounds_ratio_the_medians_and_whether_the_goal_is_met() -> None:
    runs = runs_of("before", [(25.0, 21.0, 19.0), (26.0, 22.0, 20.0), (24.0, 20.0, 18.0)])
    runs += runs_of("branch", [(22.0, 20.0, 19.0), (23.0, 21.0, 19.5), (21.0, 20.0, 18.0)])
    checkouts = {"before": Path("/x"), "branch": monitoring_ab.REPO.resolve()}
    text = monitoring_ab.summarize(
        runs,
        checkouts,
        commits={"before": "39c4526", "branch": "abc1234"},
        loads=("1.0 2.0 3.0", "2.0 2.0 3.0"),
        facts={"mode": "tls", "nodes": [{}, {}, {}]},
        started="2026-11-27 07:50 UTC",
    )
    assert "| median of 3 | before | 25.00 | 21.00 | 19.00 | 1.32x | 1.19x | |" in text
    assert "| median of 3 | branch | 22.00 | 20.00 | 19.00 | 1.16x | 1.10x | |" in text
    assert "**1.32x** (the medians' ratio; goal at most 1.25x: not met)" in text
    assert "**1.16x** (the medians' ratio; goal at most 1.25x: met)" in text
    # Round by round: branch 22/19, 23/19.5, 21/18 -> 1.158, 1.179, 1.167.
    assert "with / off 1.17x, the monitoring plays (with - skip) +2.00 s" in text
    assert "the running monitoring (skip - off) +1.50 s." in text
    assert "| 2 | branch | 23.00 | 21.00 | 19.50 | 1.18x | 1.10x | 2.50, 2.50, 2.50 |" in text
    assert "Every recap said changed=0." in text
    assert "--checkout before=..." in text
    changed = [monitoring_ab.Run("branch", "with", 1, 22.0, 1, 2.0), *runs[1:]]
    assert "no ratio holds" in monitoring_ab.summarize(
        changed,
        checkouts,
        commits={},
        loads=("", ""),
        facts={},
        started="",
    )


def test_a_run_cut_short_is_recorded_from_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    runs = runs_of("branch", [(22.0, 20.0, 19.0), (23.0, 21.0, 19.5)])
    saved = tmp_path / "runs.json"
    saved.write_text(json.dumps([run.__dict__ for run in runs]))
    assert monitoring_ab.main(["--monitoring-ab", "--from-json", str(saved), "--no-record"]) == 0
    assert "| median of 2 | branch | 22.50 | 20.50 | 19.25 | 1.17x | 1.10x | |" in (
        capsys.readouterr().out
    )
