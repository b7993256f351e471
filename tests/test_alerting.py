"""The alert rules and alertmanager.yml, checked by the real tools.

``promtool check rules`` and ``promtool test rules`` (a firing and a quiet case for every
alert, generated from the same thresholds the rules were rendered with, defaults and custom
ones) and ``amtool check-config``. The tools come from Debian's ``prometheus`` and
``prometheus-alertmanager`` packages (.ci/run installs them); these tests FAIL, never skip,
when they are missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.plan.monitoring.alert_rules import alert_names, parse_watermark
from clusterforge.plan.monitoring.alerting import (
    NULL_RECEIVER,
    RULES_FILE_NAME,
    Alerting,
    alert_rules,
    alertmanager_config,
    alertmanager_secret_files,
    build_alerting,
)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} is missing: install Debian's prometheus (promtool) and "
            "prometheus-alertmanager (amtool) packages; .ci/run does"
        )
    return found


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool(args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


# ---------------------------------------------------------------- promtool test rules cases


def seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)(s|m|h|d)", duration)
    assert match, duration
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


@dataclass
class Case:
    """One alert's firing and quiet inputs; ``labels`` are the firing alert's labels
    besides alertname and severity."""

    alert: str
    firing: list[tuple[str, str]]
    quiet: list[tuple[str, str]]
    labels: dict[str, str]
    duration: str = "0s"
    extra_quiet: list[tuple[list[tuple[str, str]], int]] = field(default_factory=list)


def series(metric: str, /, **labels: str) -> str:
    inner = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return f"{metric}{{{inner}}}"


def constant(value: float, samples: int) -> str:
    number = str(int(value)) if float(value).is_integer() else repr(float(value))
    return f"{number}+0x{samples}"


NODE = {"cluster": "search", "name": "node-1", "path": "/var/lib/opensearch/nodes/0"}


def cases(a: Alerting, nodes: int, samples: int, now: int) -> list[Case]:
    """Every alert's cases, for thresholds ``a`` and ``nodes`` expected nodes."""
    exporters = ("n1:9114", "n2:9114")

    def per_exporter(metric: str, value: float, /, **labels: str) -> list[tuple[str, str]]:
        return [
            (series(metric, job="opensearch", instance=i, **labels), constant(value, samples))
            for i in exporters
        ]

    def health(color: str, on: bool) -> list[tuple[str, str]]:
        found = per_exporter(
            "elasticsearch_cluster_health_status", 1 if on else 0, cluster="search", color=color
        )
        found += per_exporter(
            "elasticsearch_cluster_health_status", 0 if on else 1, cluster="search", color="green"
        )
        return found

    def disk(used_percent: float | None = None, free: int | None = None) -> list[tuple[str, str]]:
        size = 10**12
        available = free if free is not None else size * (100 - (used_percent or 0)) / 100
        return per_exporter(
            "elasticsearch_filesystem_data_size_bytes", size, **NODE
        ) + per_exporter("elasticsearch_filesystem_data_available_bytes", available, **NODE)

    def disk_case(level: str) -> Case:
        mark = a.disk_low if level == "low" else a.disk_high
        other = a.disk_high if level == "low" else a.disk_low
        if mark.percent is not None:
            firing = disk(used_percent=min(mark.percent + 1, 100))
            quiet = disk(used_percent=max(mark.percent - 1, 0))
        else:
            assert mark.free_bytes is not None
            firing = disk(free=mark.free_bytes - 2**20)
            quiet = disk(free=mark.free_bytes + 2**20)
        # The quiet case of the high mark sits above the low one when both are percentages.
        if level == "high" and other.percent is not None and mark.percent is not None:
            quiet = disk(used_percent=(mark.percent + other.percent) / 2)
        return Case(
            f"OpenSearchDisk{level.capitalize()}Watermark",
            firing,
            quiet,
            {"job": "opensearch", **NODE},
            a.disk_for,
        )

    def heap(percent: float) -> list[tuple[str, str]]:
        labels = {"cluster": "search", "name": "node-1", "area": "heap"}
        return per_exporter("elasticsearch_jvm_memory_max_bytes", 10**9, **labels) + per_exporter(
            "elasticsearch_jvm_memory_used_bytes", 10**7 * percent, **labels
        )

    def cert(days: float) -> list[tuple[str, str]]:
        # promtool's clock starts at 0; ``now`` is the evaluation time on it.
        expiry = now + days * 86400
        return [
            (
                series(
                    "probe_ssl_earliest_cert_expiry", job="tls_expiry", instance="https://n1:9200"
                ),
                constant(expiry, samples),
            )
        ]

    def snapshot(exporter_age: int, textfile_age: int | None = None) -> list[tuple[str, str]]:
        # promtool's clock starts at 0; ``now`` is the evaluation time on it.
        found = per_exporter(
            "elasticsearch_snapshot_stats_latest_snapshot_timestamp_seconds",
            now - exporter_age,
            repository="backups",
        )
        if textfile_age is not None:
            found.append(
                (
                    series(
                        "clusterforge_snapshot_last_success_timestamp_seconds",
                        job="node",
                        instance="n1:9100",
                        repository="backups",
                    ),
                    constant(now - textfile_age, samples),
                )
            )
        return found

    def outbox(age: float) -> list[tuple[str, str]]:
        return [
            (
                series(
                    "orders_outbox_oldest_undelivered_age_seconds",
                    job="order_service",
                    instance="apps:8443",
                ),
                constant(age, samples),
            )
        ]

    def requests(errors_per_minute: int) -> list[tuple[str, str]]:
        found = []
        for name, job, errors in (
            ("orders_http_requests_total", "order_service", errors_per_minute),
            ("userdir_http_requests_total", "user_directory", 0),
        ):
            for status, count in (("200", 100 - errors), ("503", errors)):
                found.append(
                    (
                        series(name, job=job, instance="apps:8443", method="GET", status=status),
                        f"0+{count}x{samples}",
                    )
                )
        return found

    def lifecycle(
        *, run_ok: int = 1, run_age: int = 60, success_age: int = 60, **gauges: float
    ) -> list[tuple[str, str]]:
        # What a lifecycle runner's textfile holds (clusterforge.host_runners.lifecycle); ages
        # on promtool's clock, whose ``now`` is the evaluation time.
        labels = {"job": "node", "instance": "n1:9100", "cluster": "search"}
        found = [
            (
                series("clusterforge_lifecycle_last_run_success", **labels),
                constant(run_ok, samples),
            ),
            (
                series("clusterforge_lifecycle_last_run_timestamp_seconds", **labels),
                constant(now - run_age, samples),
            ),
            (
                series("clusterforge_lifecycle_last_success_timestamp_seconds", **labels),
                constant(now - success_age, samples),
            ),
        ]
        found += [
            (
                series(f"clusterforge_lifecycle_{name}", **labels, policy="events"),
                constant(v, samples),
            )
            for name, v in gauges.items()
        ]
        return found

    grace = 3 * 300
    delete_after = 300
    max_age = seconds(a.snapshot_max_age)
    error_fire = min(a.error_percent + 5, 100)
    error_quiet = max(a.error_percent - 3, 0)
    return [
        Case(
            "OpenSearchClusterRed",
            health("red", True),
            health("red", False),
            {"cluster": "search"},
            a.red_for,
        ),
        Case(
            "OpenSearchClusterYellow",
            health("yellow", True),
            health("yellow", False),
            {"cluster": "search"},
            a.yellow_for,
            # Yellow, but for less than the threshold: quiet.
            extra_quiet=[(health("yellow", True), seconds(a.yellow_for) - 60)],
        ),
        Case(
            "OpenSearchNodesMissing",
            per_exporter(
                "elasticsearch_cluster_health_number_of_nodes", nodes - 1, cluster="search"
            ),
            per_exporter("elasticsearch_cluster_health_number_of_nodes", nodes, cluster="search"),
            {"cluster": "search"},
            a.nodes_for,
        ),
        Case(
            "OpenSearchHealthUnreadable",
            [
                (
                    series("elasticsearch_cluster_health_up", job="opensearch", instance="n1:9114"),
                    constant(0, samples),
                )
            ],
            [
                (
                    series("elasticsearch_cluster_health_up", job="opensearch", instance="n1:9114"),
                    constant(1, samples),
                )
            ],
            {"job": "opensearch", "instance": "n1:9114"},
            a.target_down_for,
        ),
        Case(
            "OpenSearchIndicesReadOnly",
            [
                (
                    series(
                        "elasticsearch_indices_settings_stats_read_only_indices",
                        job="opensearch",
                        instance="n1:9114",
                    ),
                    constant(2, samples),
                )
            ],
            [
                (
                    series(
                        "elasticsearch_indices_settings_stats_read_only_indices",
                        job="opensearch",
                        instance="n1:9114",
                    ),
                    constant(0, samples),
                )
            ],
            {"job": "opensearch"},
            a.disk_for,
        ),
        Case(
            "TargetDown",
            [(series("up", job="node", instance="n1:9100"), constant(0, samples))],
            [(series("up", job="node", instance="n1:9100"), constant(1, samples))],
            {"job": "node", "instance": "n1:9100"},
            a.target_down_for,
        ),
        Case(
            "TLSEndpointProbeFailed",
            [
                (
                    series("probe_success", job="tls_expiry", instance="https://n1:9300"),
                    constant(0, samples),
                )
            ],
            [
                (
                    series("probe_success", job="tls_expiry", instance="https://n1:9300"),
                    constant(1, samples),
                )
            ],
            {"job": "tls_expiry", "instance": "https://n1:9300"},
            a.target_down_for,
        ),
        disk_case("low"),
        disk_case("high"),
        Case(
            "OpenSearchHeapHigh",
            heap(min(a.heap_percent + 1, 100)),
            heap(a.heap_percent - 1),
            {"job": "opensearch", "cluster": "search", "name": "node-1", "area": "heap"},
            a.heap_for,
        ),
        Case(
            "CertificateExpiringSoon",
            cert(a.cert_expiry_days - 1),
            cert(a.cert_expiry_days + 1),
            {"job": "tls_expiry", "instance": "https://n1:9200"},
            "1m",
        ),
        Case(
            "OpenSearchSnapshotTooOld",
            snapshot(max_age + 3600),
            # The exporter's snapshot is too old, but the snapshot timer's textfile says a
            # newer one succeeded.
            snapshot(max_age + 3600, textfile_age=max_age - 3600),
            {"repository": "backups"},
            "5m",
            extra_quiet=[(snapshot(max_age - 3600), now)],
        ),
        Case(
            "OrderOutboxBacklog",
            outbox(a.outbox_age_minutes * 60 + 60),
            outbox(a.outbox_age_minutes * 60 - 60),
            {"job": "order_service"},
            "1m",
        ),
        Case(
            "ServiceAnswers5xx",
            requests(error_fire),
            requests(error_quiet),
            {"job": "order_service"},
            a.error_for,
        ),
        Case(
            "OpenSearchLifecycleRunsFailing",
            lifecycle(run_ok=0),
            lifecycle(),
            {"cluster": "search"},
            "15m",
            # Runs that stopped succeeding, or stopped: the same alert.
            extra_quiet=[(lifecycle(success_age=grace - 120), now)],
        ),
        Case(
            "OpenSearchLifecyclePatternOverCap",
            lifecycle(size_bytes=200, max_total_size_bytes=100),
            lifecycle(size_bytes=50, max_total_size_bytes=100),
            {"cluster": "search", "policy": "events"},
            "15m",
        ),
        Case(
            "OpenSearchLifecycleIndexPastDeleteAge",
            lifecycle(
                oldest_index_timestamp_seconds=now - delete_after - grace - 900,
                delete_after_seconds=delete_after,
            ),
            lifecycle(
                oldest_index_timestamp_seconds=now - delete_after,
                delete_after_seconds=delete_after,
            ),
            {"cluster": "search", "policy": "events"},
            "5m",
        ),
    ]


def expand(text: str, labels: Mapping[str, str]) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)


def unit_tests(rules_text: str, a: Alerting, nodes: int) -> tuple[dict[str, Any], set[str]]:
    rules = {rule["alert"]: rule for rule in yaml.safe_load(rules_text)["groups"][0]["rules"]}
    longest = max(seconds(rule.get("for", "0s")) for rule in rules.values())
    eval_seconds = longest + 600
    samples = eval_seconds // 60 + 5
    tests = []
    covered = set()
    for case in cases(a, nodes, samples, eval_seconds):
        rule = rules[case.alert]
        assert rule.get("for", "0s") == case.duration or case.duration == "0s", case.alert
        covered.add(case.alert)
        expected = {
            "exp_labels": {**case.labels, **rule["labels"]},
            "exp_annotations": {
                key: expand(value, case.labels) for key, value in rule["annotations"].items()
            },
        }
        for inputs, alerts, at in (
            (case.firing, [expected], eval_seconds),
            (case.quiet, [], eval_seconds),
            *((inputs, [], max(at, 0)) for inputs, at in case.extra_quiet),
        ):
            tests.append(
                {
                    "name": f"{case.alert} {'fires' if alerts else 'stays quiet'} at {at}s",
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in inputs],
                    "alert_rule_test": [
                        {"eval_time": f"{at}s", "alertname": case.alert, "exp_alerts": alerts}
                    ],
                }
            )
    return {"rule_files": [RULES_FILE_NAME], "evaluation_interval": "1m", "tests": tests}, covered


CUSTOM = {
    "monitoring_alert_red_for": "5m",
    "monitoring_alert_yellow_for": "30m",
    "monitoring_alert_nodes_for": "3m",
    "monitoring_alert_target_down_for": "30s",
    "monitoring_alert_disk_for": "10m",
    "monitoring_alert_heap_percent": 75,
    "monitoring_alert_heap_for": "2m",
    "monitoring_alert_cert_expiry_days": 14,
    "monitoring_alert_snapshot_max_age": "2h",
    "monitoring_alert_outbox_age_minutes": 5,
    "monitoring_alert_5xx_percent": 20,
    "monitoring_alert_5xx_for": "1m",
}
SETUPS: dict[str, tuple[dict[str, Any], list[dict[str, Any]], int]] = {
    "defaults": ({}, [], 3),
    "custom": (
        CUSTOM,
        [{"cluster.routing.allocation.disk.watermark": {"low": "70%", "high": "0.8"}}],
        5,
    ),
    "free-space watermarks": (
        {},
        [
            {"cluster.routing.allocation.disk.watermark.low": "80%"},
            {
                "cluster": {
                    "routing": {
                        "allocation": {"disk": {"watermark": {"low": "50gb", "high": "20gb"}}}
                    }
                }
            },
        ],
        1,
    ),
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_every_rule_fires_and_stays_quiet_under_promtool(setup: str, tmp_path: Path) -> None:
    variables, engine_settings, nodes = SETUPS[setup]
    alerting = build_alerting(variables, engine_settings=engine_settings)
    text = alert_rules(alerting, nodes)
    (tmp_path / RULES_FILE_NAME).write_text(text)
    checked = run("promtool", "check", "rules", str(tmp_path / RULES_FILE_NAME))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests, covered = unit_tests(text, alerting, nodes)
    assert covered == set(alert_names(text)), "every alert needs its firing and quiet case"
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = run("promtool", "test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_rules_catches_a_wrong_expectation(tmp_path: Path) -> None:
    """The generated tests can fail: a quiet case expected to fire is reported."""
    alerting = build_alerting({})
    text = alert_rules(alerting, 3)
    (tmp_path / RULES_FILE_NAME).write_text(text)
    tests, _ = unit_tests(text, alerting, 3)
    quiet = next(
        t for t in tests["tests"] if t["name"].startswith("OpenSearchNodesMissing stays quiet")
    )
    firing = next(t for t in tests["tests"] if t["name"].startswith("OpenSearchNodesMissing fires"))
    quiet["alert_rule_test"][0]["exp_alerts"] = firing["alert_rule_test"][0]["exp_alerts"]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = run("promtool", "test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "OpenSearchNodesMissing" in result.stdout + result.stderr


def test_the_rules_carry_the_inventory_thresholds_and_the_planned_node_count() -> None:
    custom = alert_rules(build_alerting(CUSTOM, engine_settings=SETUPS["custom"][1]), 5)
    rules = {r["alert"]: r for r in yaml.safe_load(custom)["groups"][0]["rules"]}
    assert rules["OpenSearchNodesMissing"]["expr"].endswith("< 5")
    assert rules["OpenSearchClusterYellow"]["for"] == "30m"
    assert rules["OpenSearchHeapHigh"]["expr"].endswith("> 75")
    assert rules["CertificateExpiringSoon"]["expr"].endswith(f"< {14 * 86400}")
    assert rules["OpenSearchDiskLowWatermark"]["expr"].endswith("> 70")
    assert rules["OpenSearchDiskHighWatermark"]["expr"].endswith("> 80")
    assert rules["OrderOutboxBacklog"]["expr"].endswith("> 300")
    for rule in rules.values():
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}
        assert "playbooks/" in rule["annotations"]["runbook"]
    assert "rotate_certs.yml" in rules["CertificateExpiringSoon"]["annotations"]["runbook"]


def test_the_default_watermarks_are_the_engines() -> None:
    alerting = build_alerting({})
    assert (alerting.disk_low.percent, alerting.disk_high.percent) == (85, 90)
    assert parse_watermark("x", "0.875").percent == 87.5
    assert parse_watermark("x", "10gb").free_bytes == 10 * 1024**3


# ---------------------------------------------------------------- refusals


def problems_of(variables: Mapping[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InventoryError) as raised:
        build_alerting(variables, **kwargs)
    return str(raised.value)


WEBHOOK = {
    "name": "ops",
    "webhook": {"url": "https://hooks.example.com/a", "bearer_token_var": "vault_ops_token"},
}
EMAIL = {
    "name": "mail",
    "email": {
        "to": "ops@example.com",
        "from": "alertmanager@example.com",
        "smarthost": "smtp.example.com:587",
        "auth_username": "alertmanager",
        "auth_password_var": "vault_smtp_password",
    },
    "matchers": ['severity="critical"'],
}


@pytest.mark.parametrize(
    ("variables", "kwargs", "expected"),
    [
        (
            {"monitoring_alert_heap_percent": 20},
            {},
            "monitoring_alert_heap_percent 20 is outside 50-99",
        ),
        (
            {"monitoring_alert_yellow_for": "soon"},
            {},
            "monitoring_alert_yellow_for 'soon' is not a duration",
        ),
        ({"monitoring_alert_yelow_for": "5m"}, {}, "did you mean monitoring_alert_yellow_for"),
        (
            {"monitoring_alert_cert_expiry_days": 60},
            {"cert_renew_within_days": 30},
            "monitoring_alert_cert_expiry_days 60 exceeds opensearch_cert_renew_within_days 30",
        ),
        (
            {},
            {"engine_settings": [{"cluster.routing.allocation.disk.watermark.low": "lots"}]},
            "cluster.routing.allocation.disk.watermark.low 'lots' is not a watermark",
        ),
        (
            {},
            {"engine_settings": [{"cluster.routing.allocation.disk.watermark.low": "95%"}]},
            "watermark.low 95% is above cluster.routing.allocation.disk.watermark.high 90%",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {"name": "ops", "webhook": {"url": "https://h/a", "bearer_token": "s3cret"}}
                ]
            },
            {},
            "webhook.bearer_token would put a secret in the inventory in clear",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {
                        "name": "ops",
                        "webhook": {"url": "https://h/a", "bearer_token_var": "s3cret value"},
                    }
                ]
            },
            {},
            "bearer_token_var names the variable that holds the secret",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {
                        "name": "ops",
                        "webhook": {"url": "http://hooks.example.com/a", "bearer_token_var": "v"},
                    }
                ]
            },
            {},
            "is plain http to another host",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {"name": "ops", "webhook": {"url": "https://u:p@h/a"}}
                ]
            },
            {},
            "webhook.url carries credentials",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {"name": "m", "email": {"to": "a@b", "auth_password_var": "v"}}
                ]
            },
            {},
            "email.smarthost is required",
        ),
        (
            {"monitoring_alertmanager_receivers": [WEBHOOK, {**WEBHOOK}]},
            {},
            "'ops': the name is used twice",
        ),
        (
            {
                "monitoring_alertmanager_receivers": [
                    {"name": "x", "webhook": {"url": "https://h/"}, "email": {}}
                ]
            },
            {},
            "give exactly one of webhook or email",
        ),
        (
            {"monitoring_alertmanager_receivers": [{**WEBHOOK, "matchers": ["severity=critical"]}]},
            {},
            "matchers must be a list of label matchers",
        ),
    ],
)
def test_a_bad_alerting_setting_is_refused_naming_the_fix(
    variables: dict[str, Any], kwargs: dict[str, Any], expected: str
) -> None:
    assert expected in problems_of(variables, **kwargs)


def test_every_problem_is_reported_at_once() -> None:
    message = problems_of(
        {
            "monitoring_alert_heap_percent": 20,
            "monitoring_alertmanager_receivers": [{"name": "ops", "webhook": {"url": "ftp://h"}}],
        }
    )
    assert "2 problem(s)" in message


def test_a_receiver_secret_must_be_set() -> None:
    alerting = build_alerting({"monitoring_alertmanager_receivers": [WEBHOOK]})
    with pytest.raises(InventoryError, match="vault_ops_token, which is not set"):
        alertmanager_config(alerting, {})
    with pytest.raises(InventoryError, match="vault_ops_token, which is not set"):
        alertmanager_secret_files(alerting, {"vault_ops_token": ""})


# ---------------------------------------------------------------- user's rules files


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


OWN_RULES = "groups:\n  - name: mine\n    rules:\n      - alert: Mine\n        expr: vector(1)\n"


def test_own_rules_files_are_read_relative_to_the_inventory(tmp_path: Path) -> None:
    write(tmp_path / "mine.rules.yml", OWN_RULES)
    alerting = build_alerting(
        {"monitoring_rules_files": ["mine.rules.yml"]}, rules_base_dir=tmp_path
    )
    assert alerting.rules_files == {"mine.rules.yml": OWN_RULES}
    checked = run("promtool", "check", "rules", str(tmp_path / "mine.rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("groups: [", "is not YAML"),
        ("rules: []\n", "a rules file holds `groups:`"),
        (
            "groups:\n  - name: clusterforge\n    rules: []\n",
            "group 'clusterforge' is also in clusterforge-alerts.yml",
        ),
        (
            "groups:\n  - name: g\n    rules:\n      - alert: A\n",
            "needs an expr and exactly one of alert or record",
        ),
    ],
)
def test_a_bad_own_rules_file_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "bad.yml", text)
    assert expected in problems_of({"monitoring_rules_files": [str(path)]})


def test_a_missing_or_clashing_own_rules_file_is_refused(tmp_path: Path) -> None:
    message = problems_of({"monitoring_rules_files": [str(tmp_path / "absent.yml")]})
    assert "cannot be read" in message
    write(tmp_path / RULES_FILE_NAME, OWN_RULES)
    message = problems_of({"monitoring_rules_files": [str(tmp_path / RULES_FILE_NAME)]})
    assert "another rules file has the name" in message


# ---------------------------------------------------------------- alertmanager.yml


SECRETS = {"vault_ops_token": "tok-3f9a8c", "vault_smtp_password": "pw-77d2e1"}


def write_alertmanager(tmp_path: Path, alerting: Alerting, secrets: Mapping[str, str]) -> Path:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    for path, content in alertmanager_secret_files(
        alerting, secrets, secrets_dir=str(secrets_dir)
    ).items():
        Path(path).write_text(content)
    config = tmp_path / "alertmanager.yml"
    config.write_text(alertmanager_config(alerting, secrets, secrets_dir=str(secrets_dir)))
    return config


@pytest.mark.parametrize(
    "receivers",
    [
        [],
        [WEBHOOK],
        [WEBHOOK, EMAIL],
        [
            {
                "name": "lab",
                "webhook": {"url": "http://127.0.0.1:9099/", "bearer_token_var": "vault_ops_token"},
            }
        ],
    ],
    ids=["no receivers", "webhook", "webhook and email", "loopback webhook"],
)
def test_amtool_accepts_the_rendered_config(
    tmp_path: Path, receivers: list[dict[str, Any]]
) -> None:
    alerting = build_alerting({"monitoring_alertmanager_receivers": receivers})
    config = write_alertmanager(tmp_path, alerting, SECRETS)
    result = run("amtool", "check-config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(receivers) + 1} receivers" in result.stdout
    text = config.read_text()
    for secret in SECRETS.values():
        assert secret not in text


def test_amtool_rejects_a_config_it_does_not_know(tmp_path: Path) -> None:
    """amtool checks strictly, so the acceptance above means something."""
    alerting = build_alerting({"monitoring_alertmanager_receivers": [EMAIL]})
    config = write_alertmanager(tmp_path, alerting, SECRETS)
    config.write_text(config.read_text().replace("auth_password_file", "auth_password_fyle"))
    assert run("amtool", "check-config", str(config)).returncode != 0


def test_routes_send_every_alert_to_each_matching_receiver(tmp_path: Path) -> None:
    alerting = build_alerting({"monitoring_alertmanager_receivers": [WEBHOOK, EMAIL]})
    config = write_alertmanager(tmp_path, alerting, SECRETS)

    def receivers_for(*labels: str) -> str:
        result = run("amtool", "config", "routes", "test", "--config.file", str(config), *labels)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert receivers_for("alertname=OpenSearchClusterRed", "severity=critical") == "ops,mail"
    assert receivers_for("alertname=OpenSearchHeapHigh", "severity=warning") == "ops"
    empty = build_alerting({})
    assert yaml.safe_load(alertmanager_config(empty, {}))["route"]["receiver"] == NULL_RECEIVER


def test_the_secret_files_hold_the_secrets_and_the_config_names_them(tmp_path: Path) -> None:
    alerting = build_alerting({"monitoring_alertmanager_receivers": [WEBHOOK, EMAIL]})
    files = alertmanager_secret_files(alerting, SECRETS, secrets_dir="/etc/am")
    assert files == {"/etc/am/ops.token": "tok-3f9a8c", "/etc/am/mail.smtp-password": "pw-77d2e1"}
    document = yaml.safe_load(alertmanager_config(alerting, SECRETS, secrets_dir="/etc/am"))
    ops, mail = document["receivers"][1:]
    assert (
        ops["webhook_configs"][0]["http_config"]["authorization"]["credentials_file"]
        == "/etc/am/ops.token"
    )
    assert mail["email_configs"][0]["auth_password_file"] == "/etc/am/mail.smtp-password"
    assert alerting.secret_variables == ("vault_ops_token", "vault_smtp_password")


def test_every_runbook_names_commands_that_exist() -> None:
    root = Path(__file__).resolve().parents[1]
    rules = yaml.safe_load(alert_rules(build_alerting({}), 3))["groups"][0]["rules"]
    for rule in rules:
        runbook = rule["annotations"]["runbook"]
        named = re.findall(r"(playbooks/[\w-]+\.yml|scripts/\w+|docs/[\w-]+\.md)", runbook)
        assert named, f"{rule['alert']}'s runbook names no clusterforge command"
        for path in named:
            assert (root / path).is_file(), (
                f"{rule['alert']}'s runbook names {path}, which is missing"
            )
