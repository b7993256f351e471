"""build_plan only assembles: following the inventory through it enters plan.py a
handful of times, and no sub-plan runs twice in one call (issue 41).

The calls are counted with the interpreter's own profiling hook (``sys.setprofile``),
which sees every Python function entered, comprehensions included: nothing is patched.
The inventory has every part a sub-plan exists for: a tls cluster with a plugin, a
console, both services (the order service with delivery on) and a snapshot repository.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from clusterforge.plan.plan import build_plan
from test_orders_search_plan import LOOPBACK_PROXY, cluster_nodes

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clusterforge"
PLAN_MODULE = PACKAGE / "plan" / "plan.py"
# plan.py may be entered this often in one build_plan (issue 41: at most 5).
PLAN_MODULE_ENTRIES = 5
# The sub-plans: each decides one section (or one input of several) from the inventory.
SUB_PLANS = (
    "build_cluster",
    "validate_inventory",
    "plan_cluster_config",
    "plan_for_cluster",
    "plan_orders_search",
    "with_generated_password",
    "plan_services_section",
    "plan_services",
    "plan_snapshots",
    "ensure_cluster_pki",
    "plan_security_files",
    "render_cluster_security",
    "cluster_facts",
    "node_facts",
    "plan_consoles",
    "consoles_unfetched",
    "plan_rollout",
    "with_config_restarts",
    "plan_removal",
    "plan_groups",
)


def calls_in_package(run: Callable[[], Any]) -> Counter[tuple[str, str]]:
    """(file relative to src/clusterforge, function) -> how often it was entered."""
    counted: Counter[tuple[str, str]] = Counter()
    root = str(PACKAGE)

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            relative = str(Path(frame.f_code.co_filename).relative_to(PACKAGE))
            counted[(relative, frame.f_code.co_name)] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return counted


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Counter[tuple[str, str]]:
    inventory = tmp_path_factory.mktemp("inventory")
    nodes = cluster_nodes(inventory, opensearch_snapshot_repository="backups")
    services = {
        "order_service": [("apps-1", dict(LOOPBACK_PROXY))],
        "user_directory": [("apps-1", dict(LOOPBACK_PROXY)), ("apps-2", dict(LOOPBACK_PROXY))],
    }
    # A URL never fetched here (fetch=False); an unreachable name all the same.
    console = {
        "ansible_host": "127.0.0.80",
        "dashboards_archive_url": "https://example.invalid/dashboards.tar.gz",
        "dashboards_archive_sha512": "0" * 128,
    }
    consoles = [("console-1", console)]
    observed = {name: {"active": True, "formed": True, "version": "2.19.4"} for name, _ in nodes}
    return calls_in_package(
        lambda: build_plan(
            nodes,
            inventory_dir=inventory,
            consoles_vars=consoles,
            observed=observed,
            fetch=False,
            services_vars=services,
        )
    )


def test_build_plan_enters_plan_py_at_most_five_times(counted: Counter[tuple[str, str]]) -> None:
    entries = {name: count for (file, name), count in counted.items() if file == "plan/plan.py"}
    assert sum(entries.values()) <= PLAN_MODULE_ENTRIES, entries


def test_no_sub_plan_runs_twice_in_one_build_plan(counted: Counter[tuple[str, str]]) -> None:
    by_name: Counter[str] = Counter()
    for (_, name), count in counted.items():
        by_name[name] += count
    assert {name: by_name[name] for name in SUB_PLANS if by_name[name] > 1} == {}
    # Each of them ran: a sub-plan the inventory does not reach proves nothing here.
    unreached = {"plan_consoles"}  # fetch=False plans the consoles without their archive
    assert [name for name in SUB_PLANS if name not in unreached and not by_name[name]] == []


def test_each_service_host_is_planned_once(counted: Counter[tuple[str, str]]) -> None:
    planners = {name: count for (file, name), count in counted.items() if name.startswith("_plan_")}
    assert planners.get("_plan_user_directory") == 2  # apps-1 and apps-2
    assert planners.get("_plan_order_service") == 1
