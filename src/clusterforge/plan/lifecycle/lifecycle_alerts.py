"""The index lifecycle's alerts (docs/lifecycle.md), read from the metrics its runner
writes on every cluster-manager-eligible node (clusterforge.host_runners.lifecycle, scraped by
the node exporter's textfile collector, job ``node``).

- **OpenSearchLifecycleRunsFailing**: a node's last run failed, or no run succeeded (or
  ran at all) for three timer periods; for 15 minutes.
- **OpenSearchLifecyclePatternOverCap**: a policy's series over its ``max_total_size``
  after the runs that should have brought it under; for 15 minutes.
- **OpenSearchLifecycleIndexPastDeleteAge**: a policy's oldest index past its
  ``delete_after`` and three periods more, still there; it fires too when the runs stop,
  since the age grows with the clock and not with the runs.

Without a policy no node writes these metrics, and the rules stay quiet.
tests/test_alerting.py runs each through ``promtool test rules``, firing and quiet.
"""

from __future__ import annotations

from typing import Any

from clusterforge.host_runners.lifecycle import LAST_RUN, LAST_RUN_SUCCESS, LAST_SUCCESS
from clusterforge.plan.lifecycle.lifecycle import PERIOD_SECONDS

# Three timer periods: one run may fail or fall between two managers.
GRACE_SECONDS = 3 * PERIOD_SECONDS
SIZE = "clusterforge_lifecycle_size_bytes"
CAP = "clusterforge_lifecycle_max_total_size_bytes"
OLDEST = "clusterforge_lifecycle_oldest_index_timestamp_seconds"
DELETE_AFTER = "clusterforge_lifecycle_delete_after_seconds"
RUNBOOK = (
    "Run `scripts/lifecycle --plan` (what the next run would do, and what it leaves alone "
    "and why), read the runs with `journalctl -u clusterforge-lifecycle` on the "
    "cluster-manager-eligible nodes, and see docs/lifecycle.md; a timer missing from a "
    "node comes back with `ansible-playbook playbooks/site.yml`."
)


def _rule(alert: str, expr: str, duration: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": duration,
        "labels": {"severity": "warning"},
        "annotations": {"summary": summary, "description": description, "runbook": RUNBOOK},
    }


def lifecycle_rules() -> list[dict[str, Any]]:
    """The three rules, in the shape of clusterforge.plan.monitoring.alert_rules' own."""
    node = '{job="node"}'
    return [
        _rule(
            "OpenSearchLifecycleRunsFailing",
            f"(min by (cluster) ({LAST_RUN_SUCCESS}{node}) == 0)"
            f" or (time() - max by (cluster) ({LAST_SUCCESS}{node}) > {GRACE_SECONDS})"
            f" or (time() - max by (cluster) ({LAST_RUN}{node}) > {GRACE_SECONDS})",
            "15m",
            "Index lifecycle runs of cluster {{ $labels.cluster }} are failing",
            "A lifecycle run failed on a node, or no run succeeded for "
            f"{GRACE_SECONDS // 60} minutes: rollover, retention and the size cap are not "
            "applied, and the data grows.",
        ),
        _rule(
            "OpenSearchLifecyclePatternOverCap",
            f"max by (cluster, policy) ({SIZE}{node})"
            f" > on (cluster, policy) max by (cluster, policy) ({CAP}{node})",
            "15m",
            "Lifecycle policy {{ $labels.policy }} is over its max_total_size",
            "The indices of policy {{ $labels.policy }} of cluster {{ $labels.cluster }} hold "
            "more than its max_total_size after the runs that delete the oldest: the write "
            "index alone is over it, or the deletions fail.",
        ),
        _rule(
            "OpenSearchLifecycleIndexPastDeleteAge",
            f"time() - min by (cluster, policy) ({OLDEST}{node})"
            f" > on (cluster, policy) (max by (cluster, policy) ({DELETE_AFTER}{node})"
            f" + {GRACE_SECONDS})",
            "5m",
            "An index of lifecycle policy {{ $labels.policy }} is past its delete age",
            "The oldest index of policy {{ $labels.policy }} of cluster {{ $labels.cluster }} "
            f"is older than its delete_after and {GRACE_SECONDS // 60} minutes more, and is "
            "still there: the runs stopped, fail, or leave the pattern alone (ISM, a red "
            "cluster).",
        ),
    ]
