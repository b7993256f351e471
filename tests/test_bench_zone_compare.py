"""bench/rolling --nodes N --zones Z without a lab: the rounds alternate, the batches are
counted from the playbook's output, the wrong lab is named, and the record carries the
medians, the batch counts, the load and the zones / nodes caveat."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path[:0] = [str(BENCH), str(BENCH / "rolling")]

import zone_compare  # noqa: E402 - bench/ is no package; its path goes first


def report(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "ok": True,
        "requests": 500,
        "failed": 0,
        "red_seen": False,
        "lost_writes": 0,
        "acknowledged_writes": 250,
        "latency_p50_ms": 15.0,
        "latency_p99_ms": 200.0,
        "latency_max_ms": 600.0,
    }
    values.update(overrides)
    return SimpleNamespace(**values)


def roll(mode: str, round_index: int, seconds: float, batches: int) -> zone_compare.Roll:
    return zone_compare.Roll(
        mode=mode,
        round=round_index,
        seconds=seconds,
        batches=batches,
        restarted=6,
        report=report(),
        load_start=0.8,
        load_end=2.5,
    )


def test_rounds_alternate_which_roll_goes_first() -> None:
    orders = [zone_compare.order_of_round(index) for index in range(4)]
    assert orders == [("node", "zone"), ("zone", "node"), ("node", "zone"), ("zone", "node")]


def test_batches_are_counted_from_the_serial_plays_headers() -> None:
    output = "\n".join(
        [
            "PLAY [Order the nodes for the rolling restart, the cluster manager last] ***",
            *["PLAY [Restart nodes batch by batch (opensearch_rolling_batch zone)] ***"] * 3,
        ]
    )
    assert zone_compare.count_batches(output, "zone") == 3
    assert zone_compare.count_batches(output, "node") == 0
    node_output = "PLAY [Restart nodes one at a time] ****\n" * 6
    assert zone_compare.count_batches(node_output, "node") == 6


def test_a_lab_of_another_shape_is_named_with_the_command_to_make_it() -> None:
    three = {"nodes": [{"zone": None}] * 3}
    assert "scripts/up --nodes 6 --zones 3" in str(zone_compare.check_lab(three, 6, 3))
    six = {"nodes": [{"zone": f"zone-{'abc'[i % 3]}"} for i in range(6)]}
    assert zone_compare.check_lab(six, 6, 3) is None


def test_the_record_gives_medians_batches_load_and_the_caveat() -> None:
    rolls = [
        roll("node", 1, 120.0, 6),
        roll("zone", 1, 80.0, 3),
        roll("zone", 2, 90.0, 3),
        roll("node", 2, 130.0, 6),
        roll("node", 3, 125.0, 6),
        roll("zone", 3, 85.0, 3),
    ]
    text = zone_compare.record(rolls, nodes=6, zones=3, load_before="0.5", load_after="2.0")
    assert "- node: median 125.0 s over 3 rounds, 6 batches" in text
    assert "- zone: median 85.0 s over 3 rounds, 3 batches" in text
    assert "- zone / node: 0.68 of the time for 0.50 of the batches" in text
    assert "zones / nodes" in text and "same 2 cores" in text
    assert text.count("| 6 of 6 |") == 6
    assert all(zone_compare.clean(each, 6) for each in rolls)
    assert not zone_compare.clean(rolls[0], 5)  # a node that did not restart
