"""The resilience drills' own logic (clusterforge.testing.resilience, issue 50): the
--faults flag, the alerts read from a receiver log, and the table. The drills themselves
run on the lab (scripts/drill --faults all, docs/resilience.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.testing.resilience import (
    FAULTS,
    DrillLab,
    DrillResult,
    alert_summary,
    alerts_settled,
    parse_faults,
    table,
)


def test_all_is_the_seven_drills_with_the_scale_in_last() -> None:
    assert parse_faults("all") == list(FAULTS)
    assert len(FAULTS) == 7
    assert FAULTS[-1] == "kill-scale-in"


def test_a_list_is_run_in_the_drills_order_once_each() -> None:
    assert parse_faults("full-disk,partition-manager,full-disk") == [
        "partition-manager",
        "full-disk",
    ]


@pytest.mark.parametrize("text", ["", "partition", "all,crash-all"])
def test_an_unknown_fault_is_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="--faults takes 'all' or some of"):
        parse_faults(text)


def _log(path: Path, entries: list[tuple[str, str, str]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for at, name, status in entries:
            alert = {"labels": {"alertname": name}, "status": status}
            handle.write(json.dumps({"received_at": at, "notification": {"alerts": [alert]}}))
            handle.write("\n")


def test_alerts_settle_once_the_expected_fired_and_everything_resolved(tmp_path: Path) -> None:
    log = tmp_path / "receiver.jsonl"
    _log(log, [("2026-01-01T00:00:00+00:00", "Old", "firing")])
    offset = log.stat().st_size
    lab = DrillLab(facts={"monitoring": {"receiver_log": str(log)}}, repo=tmp_path)
    settled = alerts_settled(lab, offset, ["OpenSearchNodesMissing"])
    assert not settled()
    _log(log, [("2026-01-01T00:01:00+00:00", "OpenSearchNodesMissing", "firing")])
    assert not settled()
    _log(log, [("2026-01-01T00:01:30+00:00", "OpenSearchClusterYellow", "firing")])
    _log(log, [("2026-01-01T00:02:00+00:00", "OpenSearchNodesMissing", "resolved")])
    assert settled(), "an alert the drill does not expect is reported, not waited for"
    _log(log, [("2026-01-01T00:03:00+00:00", "OpenSearchClusterYellow", "resolved")])
    assert settled()
    started = 1767225600.0  # 2026-01-01T00:00:00Z
    assert alert_summary(lab, offset, started) == [
        "OpenSearchNodesMissing fired +60s, resolved +120s",
        "OpenSearchClusterYellow fired +90s, resolved +180s",
    ]


def test_the_table_has_a_row_per_drill_and_says_why_one_failed() -> None:
    passed = DrillResult(fault="crash-all", lost=0, copies_differ=0, alerts_ok=True)
    failed = DrillResult(fault="full-disk", lost=2, copies_differ=0, alerts_ok=True)
    failed.notes.append("finding: lost acknowledged ids [7, 9]")
    rows = table([passed, failed]).splitlines()
    assert len(rows) == 4
    assert rows[2].startswith("| crash-all |") and rows[2].endswith("| pass |")
    assert "FAIL: finding: lost acknowledged ids [7, 9]" in rows[3]
