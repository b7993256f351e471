"""The alert rules file, from an :class:`~clusterforge.plan.monitoring.alerting_model.Alerting`.

:func:`alert_rules` gives the rules file's text: thresholds from the inventory (built and
checked by :func:`clusterforge.plan.monitoring.alerting.build_alerting`), the number of nodes from
the plan, the disk alerts at the engine's watermarks (:func:`disk_watermarks` reads them
from the engine's settings, else takes the engine's defaults). Each alert is built by a
small function of its own, in the order the file lists them.

The metric names are those of the exporters the monitoring host scrapes (jobs
``opensearch``, ``node``, ``tls_expiry``, ``user_directory``, ``order_service``,
``prometheus``, ``alertmanager``); tests/test_alerting.py runs every rule through
``promtool test rules`` with a firing and a quiet case.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from clusterforge.durations import whole_seconds
from clusterforge.plan.cluster.render import MANAGED_HEADER
from clusterforge.plan.lifecycle.lifecycle_alerts import lifecycle_rules
from clusterforge.plan.monitoring.alerting_model import Alerting, Watermark

__all__ = [
    "ENGINE_WATERMARKS",
    "RULES_FILE_NAME",
    "RULES_GROUP",
    "WATERMARK_HIGH",
    "WATERMARK_LOW",
    "alert_names",
    "alert_rules",
    "disk_watermarks",
    "managed_yaml",
    "parse_watermark",
]

RULES_FILE_NAME = "clusterforge-alerts.yml"
RULES_GROUP = "clusterforge"

WATERMARK_LOW = "cluster.routing.allocation.disk.watermark.low"
WATERMARK_HIGH = "cluster.routing.allocation.disk.watermark.high"
# The engine's own defaults (OpenSearch 2.19, DiskThresholdSettings).
ENGINE_WATERMARKS = {WATERMARK_LOW: "85%", WATERMARK_HIGH: "90%"}

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|pb)$", re.IGNORECASE)
_SIZE_FACTORS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4, "pb": 1024**5}


# ---------------------------------------------------------------- the watermarks


def _flat(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def parse_watermark(setting: str, value: Any) -> Watermark:
    """``85%``, ``0.85`` (used) or ``10gb`` (free) as the engine reads them; ValueError
    for anything else."""
    text = str(value).strip()
    if text.endswith("%"):
        percent = float(text[:-1])
        if not 0 <= percent <= 100:
            raise ValueError(text)
        return Watermark(setting=setting, text=text, percent=percent)
    size = _SIZE.match(text)
    if size:
        amount = float(size.group(1)) * _SIZE_FACTORS[size.group(2).lower()]
        return Watermark(setting=setting, text=text, free_bytes=int(amount))
    ratio = float(text)
    if not 0 <= ratio <= 1:
        raise ValueError(text)
    return Watermark(setting=setting, text=text, percent=round(ratio * 100, 6))


def disk_watermarks(
    engine_settings: Sequence[Mapping[str, Any]], problems: list[str]
) -> tuple[Watermark, Watermark]:
    """The low and high watermarks the engine runs with: the last of ``engine_settings``
    (weakest first; nested or dotted) that sets each, else the engine's default. Each
    problem is appended to ``problems`` (and the default taken in its place)."""
    found: dict[str, Any] = dict(ENGINE_WATERMARKS)
    for settings in engine_settings:
        flat = _flat(settings)
        for setting in (WATERMARK_LOW, WATERMARK_HIGH):
            if flat.get(setting) is not None:
                found[setting] = flat[setting]
    marks: dict[str, Watermark] = {}
    for setting, value in found.items():
        try:
            marks[setting] = parse_watermark(setting, value)
        except ValueError:
            problems.append(
                f"{setting} {value!r} is not a watermark the disk alerts can read; write a "
                "percentage of the disk used (85%), a ratio (0.85) or the free space to keep "
                "(10gb)"
            )
            marks[setting] = parse_watermark(setting, ENGINE_WATERMARKS[setting])
    low, high = marks[WATERMARK_LOW], marks[WATERMARK_HIGH]
    if low.percent is not None and high.percent is not None and low.percent > high.percent:
        problems.append(
            f"{WATERMARK_LOW} {low.text} is above {WATERMARK_HIGH} {high.text}; the low "
            "watermark must be the lower one"
        )
    return low, high


# ---------------------------------------------------------------- the file


def alert_rules(alerting: Alerting, expected_nodes: int) -> str:
    """The rules file (YAML text) for a cluster of ``expected_nodes`` nodes (the plan's
    count of the nodes present)."""
    if expected_nodes < 1:
        raise ValueError("expected_nodes must be at least 1")
    a = alerting
    rules = [
        _cluster_red(a),
        _cluster_yellow(a),
        _nodes_missing(a, expected_nodes),
        _health_unreadable(a),
        _target_down(a),
        _tls_probe_failed(a),
        _disk_rule(a.disk_low, "low", a.disk_for),
        _disk_rule(a.disk_high, "high", a.disk_for),
        _indices_read_only(a),
        _heap_high(a),
        _certificate_expiring(a),
        *([_snapshot_too_old(a.snapshot_max_age)] if a.snapshot_max_age else []),
        _outbox_backlog(a),
        _service_5xx(a),
        # The index lifecycle's (docs/lifecycle.md); quiet without its metrics.
        *lifecycle_rules(),
    ]
    return managed_yaml({"groups": [{"name": RULES_GROUP, "rules": rules}]})


def managed_yaml(document: Any) -> str:
    """A file clusterforge manages, from its data: the managed header, then the YAML."""
    body = yaml.safe_dump(
        document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )
    return f"{MANAGED_HEADER}\n{body}"


def alert_names(rules_text: str) -> list[str]:
    """The alert names a rules file defines, in order."""
    document = yaml.safe_load(rules_text)
    return [
        rule["alert"] for group in document["groups"] for rule in group["rules"] if "alert" in rule
    ]


def _rule(
    alert: str,
    expr: str,
    *,
    duration: str,
    severity: str,
    summary: str,
    description: str,
    runbook: str,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert, "expr": expr}
    if duration not in ("0s", "0m"):
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "runbook": runbook}
    return rule


def _seconds(duration: str) -> int:
    return whole_seconds(duration)


def _number(value: float) -> str:
    return f"{value:g}"


# ---------------------------------------------------------------- the alerts, in order


def _health_color(color: str) -> str:
    return (
        "max by (cluster) "
        f'(elasticsearch_cluster_health_status{{job="opensearch",color="{color}"}}) == 1'
    )


def _cluster_red(a: Alerting) -> dict[str, Any]:
    return _rule(
        "OpenSearchClusterRed",
        _health_color("red"),
        duration=a.red_for,
        severity="critical",
        summary="Cluster {{ $labels.cluster }} is red",
        description=(
            "Cluster {{ $labels.cluster }} has reported red health for "
            f"{a.red_for}: at least one primary shard is unassigned, so some data can "
            "be neither searched nor written."
        ),
        runbook=(
            "Run `scripts/status` to see the missing nodes and red indices; bring the "
            "nodes back with `ansible-playbook playbooks/site.yml`; if a primary is lost, "
            "restore its index with `ansible-playbook playbooks/restore.yml`."
        ),
    )


def _cluster_yellow(a: Alerting) -> dict[str, Any]:
    return _rule(
        "OpenSearchClusterYellow",
        _health_color("yellow"),
        duration=a.yellow_for,
        severity="warning",
        summary="Cluster {{ $labels.cluster }} has been yellow for " + a.yellow_for,
        description=(
            "Cluster {{ $labels.cluster }} has reported yellow health for "
            f"{a.yellow_for} (monitoring_alert_yellow_for): some replica shards are "
            "unassigned, so one more lost node may lose data."
        ),
        runbook=(
            "Run `scripts/status` to see which nodes are missing; start them with "
            "`ansible-playbook playbooks/site.yml`."
        ),
    )


def _nodes_missing(a: Alerting, expected_nodes: int) -> dict[str, Any]:
    return _rule(
        "OpenSearchNodesMissing",
        "max by (cluster) "
        '(elasticsearch_cluster_health_number_of_nodes{job="opensearch"}) < '
        f"{expected_nodes}",
        duration=a.nodes_for,
        severity="critical",
        summary=f"Cluster {{{{ $labels.cluster }}}} has fewer than {expected_nodes} nodes",
        description=(
            f"The inventory declares {expected_nodes} nodes, but cluster "
            f"{{{{ $labels.cluster }}}} has counted fewer for {a.nodes_for}."
        ),
        runbook=(
            "Run `scripts/status` to see which node is missing; start it with "
            "`ansible-playbook playbooks/site.yml` (or `playbooks/decommission.yml` if "
            "it is gone for good)."
        ),
    )


def _health_unreadable(a: Alerting) -> dict[str, Any]:
    return _rule(
        "OpenSearchHealthUnreadable",
        'elasticsearch_cluster_health_up{job="opensearch"} == 0',
        duration=a.target_down_for,
        severity="critical",
        summary="The exporter at {{ $labels.instance }} cannot read the cluster's health",
        description=(
            "The elasticsearch exporter at {{ $labels.instance }} has not read the "
            f"cluster's health for {a.target_down_for}: its node is down or refuses the "
            "monitoring user."
        ),
        runbook=(
            "Run `scripts/status`; start the node with `ansible-playbook "
            "playbooks/site.yml`, which also restores the monitoring user."
        ),
    )


def _target_down(a: Alerting) -> dict[str, Any]:
    return _rule(
        "TargetDown",
        "up == 0",
        duration=a.target_down_for,
        severity="critical",
        summary="{{ $labels.job }} target {{ $labels.instance }} is down",
        description=(
            "Prometheus has not scraped {{ $labels.instance }} (job {{ $labels.job }}) "
            f"for {a.target_down_for}: the exporter or the service is down, or refuses "
            "the scrape."
        ),
        runbook=(
            "Run `scripts/status`; restart what stopped with `ansible-playbook playbooks/site.yml`."
        ),
    )


def _tls_probe_failed(a: Alerting) -> dict[str, Any]:
    return _rule(
        "TLSEndpointProbeFailed",
        'probe_success{job="tls_expiry"} == 0',
        duration=a.target_down_for,
        severity="critical",
        summary="TLS endpoint {{ $labels.instance }} fails its probe",
        description=(
            "The blackbox probe of {{ $labels.instance }} has failed for "
            f"{a.target_down_for}: the endpoint is down, or its certificate does not "
            "verify against the cluster's CA."
        ),
        runbook=(
            "Run `scripts/status`; restart the endpoint with `ansible-playbook "
            "playbooks/site.yml`; a certificate that does not verify is replaced by "
            "`ansible-playbook playbooks/rotate_certs.yml`."
        ),
    )


def _disk_rule(mark: Watermark, level: str, duration: str) -> dict[str, Any]:
    alert = f"OpenSearchDisk{level.capitalize()}Watermark"
    severity = "warning" if level == "low" else "critical"
    consequence = (
        "the engine allocates no new shards to the node"
        if level == "low"
        else "the engine moves shards off the node"
    )
    if mark.percent is not None:
        expr = (
            "max without (instance) (100 * (1 - "
            'elasticsearch_filesystem_data_available_bytes{job="opensearch"} / '
            'elasticsearch_filesystem_data_size_bytes{job="opensearch"})) > '
            f"{_number(mark.percent)}"
        )
        passed = f"more than {mark.text} of its data disk used"
    else:
        expr = (
            "min without (instance) "
            '(elasticsearch_filesystem_data_available_bytes{job="opensearch"}) < '
            f"{mark.free_bytes}"
        )
        passed = f"less than {mark.text} free on its data disk"
    return _rule(
        alert,
        expr,
        duration=duration,
        severity=severity,
        summary=f"Node {{{{ $labels.name }}}} is above the disk {level} watermark",
        description=(
            f"Node {{{{ $labels.name }}}} has had {passed} ({mark.setting}) for {duration}, "
            f"at {{{{ $labels.path }}}}; {consequence}."
        ),
        runbook=(
            "Free space or add capacity: delete indices you no longer need, or add a node "
            "to the opensearch group and run `ansible-playbook playbooks/site.yml`; "
            "`scripts/status` shows each node's disk."
        ),
    )


def _heap_high(a: Alerting) -> dict[str, Any]:
    return _rule(
        "OpenSearchHeapHigh",
        "max without (instance) (100 * "
        'elasticsearch_jvm_memory_used_bytes{job="opensearch",area="heap"} / '
        'elasticsearch_jvm_memory_max_bytes{job="opensearch",area="heap"}) > '
        f"{a.heap_percent}",
        duration=a.heap_for,
        severity="warning",
        summary="Node {{ $labels.name }} uses more than " + f"{a.heap_percent}% of its heap",
        description=(
            f"Node {{{{ $labels.name }}}} has used more than {a.heap_percent}% of its "
            f"heap (monitoring_alert_heap_percent) for {a.heap_for}; it is close to "
            "circuit breakers and long garbage collections."
        ),
        runbook=(
            "Raise opensearch_heap_size (at most half the host's memory, 31g at most) "
            "and run `ansible-playbook playbooks/site.yml`, which restarts the nodes one "
            "at a time; or add nodes."
        ),
    )


def _certificate_expiring(a: Alerting) -> dict[str, Any]:
    return _rule(
        "CertificateExpiringSoon",
        '(probe_ssl_earliest_cert_expiry{job="tls_expiry"} - time()) < '
        f"{a.cert_expiry_days * 86400}",
        duration="1m",
        severity="warning",
        summary="The certificate of {{ $labels.instance }} expires within "
        + f"{a.cert_expiry_days} days",
        description=(
            "A certificate served at {{ $labels.instance }} expires in less than "
            f"{a.cert_expiry_days} days (monitoring_alert_cert_expiry_days)."
        ),
        runbook=(
            "Renew it: `ansible-playbook playbooks/rotate_certs.yml` (no restart; the "
            "nodes reload their certificates)."
        ),
    )


def _snapshot_too_old(max_age: str) -> dict[str, Any]:
    return _rule(
        "OpenSearchSnapshotTooOld",
        "time() - max by (repository) ("
        'elasticsearch_snapshot_stats_latest_snapshot_timestamp_seconds{job="opensearch"} '
        'or clusterforge_snapshot_last_success_timestamp_seconds{job="node"}) > '
        f"{_seconds(max_age)}",
        duration="5m",
        severity="warning",
        summary="No successful snapshot in {{ $labels.repository }} for " + max_age,
        description=(
            "Repository {{ $labels.repository }} holds no successful snapshot newer than "
            f"{max_age} (monitoring_alert_snapshot_max_age)."
        ),
        runbook=(
            "Take one now with `ansible-playbook playbooks/snapshot.yml`, then check the "
            "snapshot policy or timer (docs/snapshots.md)."
        ),
    )


def _indices_read_only(a: Alerting) -> dict[str, Any]:
    # The engine's own verdict, whatever set the watermarks: the flood stage has put
    # index.blocks.read_only_allow_delete on indices (the exporter's --es.indices_settings).
    # The disk alerts above compare with the inventory's watermarks; this one also sees
    # watermarks changed through the API, and the block the engine keeps until it lifts.
    return _rule(
        "OpenSearchIndicesReadOnly",
        "max without (instance) "
        '(elasticsearch_indices_settings_stats_read_only_indices{job="opensearch"}) > 0',
        duration=a.disk_for,
        severity="critical",
        summary="Indices are read-only: a node is past the flood-stage disk watermark",
        description=(
            "Indices carry index.blocks.read_only_allow_delete: a node holding "
            "their shards passed the flood-stage disk watermark, and every write to them "
            f"is refused (for {a.disk_for}, monitoring_alert_disk_for)."
        ),
        runbook=(
            "Run `scripts/status` (it names the node over the flood stage); free disk space "
            "or add nodes (`ansible-playbook playbooks/site.yml`); the engine lifts the "
            "block by itself once the node is below the high watermark."
        ),
    )


def _outbox_backlog(a: Alerting) -> dict[str, Any]:
    return _rule(
        "OrderOutboxBacklog",
        "max without (instance) "
        '(orders_outbox_oldest_undelivered_age_seconds{job="order_service"}) > '
        f"{a.outbox_age_minutes * 60}",
        duration="1m",
        severity="warning",
        summary="Orders wait more than " + f"{a.outbox_age_minutes} minutes for delivery",
        description=(
            "The order service's oldest undelivered order is older than "
            f"{a.outbox_age_minutes} minutes (monitoring_alert_outbox_age_minutes): it "
            "cannot deliver into the cluster."
        ),
        runbook=(
            "Run `scripts/status` (is the cluster reachable and green?); fix the cluster "
            "or the order service with `ansible-playbook playbooks/site.yml`; the outbox "
            "then delivers by itself."
        ),
    )


def _service_5xx(a: Alerting) -> dict[str, Any]:
    requests = '{__name__=~"userdir_http_requests_total|orders_http_requests_total"'
    return _rule(
        "ServiceAnswers5xx",
        f'100 * sum by (job) (rate({requests},status=~"5.."}}[5m])) / '
        f"sum by (job) (rate({requests}}}[5m])) > {a.error_percent}",
        duration=a.error_for,
        severity="critical",
        summary="{{ $labels.job }} answers more than " + f"{a.error_percent}% with 5xx",
        description=(
            f"More than {a.error_percent}% of {{{{ $labels.job }}}}'s answers over 5 "
            f"minutes have been server errors (5xx) for {a.error_for} "
            "(monitoring_alert_5xx_percent)."
        ),
        runbook=(
            "Read the service's journal (`journalctl -u` its unit on its host) and "
            "`scripts/status`; redeploy with `ansible-playbook playbooks/services.yml`."
        ),
    )
