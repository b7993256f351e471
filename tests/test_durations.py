"""The toolkit's one duration grammar (clusterforge.durations): the schema, the alert rules
and the snapshot schedule read a duration the same way (issue 51: they disagreed on 0d
and 500ms), and docs/variables.md lists its forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.durations import FORMS, duration_problem, duration_seconds, whole_seconds
from clusterforge.plan.cluster.model_checks import seconds as model_seconds
from clusterforge.plan.monitoring.alert_rules import _seconds as rule_seconds
from clusterforge.plan.snapshots.snapshot_schedule import duration_seconds as schedule_seconds
from clusterforge.schema import check_value, load_schema

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"500ms": 0.5, "0d": 0, "30s": 30, "10m": 600, "26h": 93600, "14d": 1209600}
BAD = ["banana", "-5m", "5", "1.5h", "5 m", "5M", "m", "", "10mm", "+3s"]


@pytest.mark.parametrize(("text", "seconds"), GOOD.items())
def test_every_reader_takes_the_same_forms(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds
    assert check_value(load_schema().variables["monitoring_alert_red_for"], text) is None
    assert rule_seconds(text) == int(seconds)
    assert schedule_seconds(text) == int(seconds)
    assert model_seconds(text) == max(1, int(seconds))


@pytest.mark.parametrize("text", BAD)
def test_every_reader_refuses_the_same_forms(text: str) -> None:
    assert duration_seconds(text) is None
    problem = check_value(load_schema().variables["monitoring_alert_red_for"], text)
    assert problem is not None and "is not a duration" in problem
    assert schedule_seconds(text) is None
    with pytest.raises(ValueError, match="not a duration"):
        whole_seconds(text)


def test_a_range_reads_as_a_range() -> None:
    problem = duration_problem("opensearch_snapshot_max_age", "500ms", minimum_seconds=1)
    assert problem is not None and "at least 1s" in problem
    keep_last = load_schema().variables["opensearch_snapshot_keep_last"]
    said = check_value(keep_last, 0)
    assert said is not None and "None" not in said and "1 or more" in said


def test_docs_variables_lists_the_forms() -> None:
    assert FORMS in (ROOT / "docs" / "variables.md").read_text().replace("\n", " ")
