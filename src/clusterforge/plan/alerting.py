"""Alert rules and Alertmanager's configuration, from the inventory (docs/monitoring.md).

Pure: :func:`build_alerting` turns the monitoring host's variables (``monitoring_alert_*``,
``monitoring_alertmanager_*``, ``monitoring_rules_files``) and the engine's disk watermarks
into an :class:`Alerting`, or raises :class:`~clusterforge.errors.InventoryError` naming
every problem. From it:

- :func:`alert_rules` gives the rules file's text (thresholds from the inventory, the
  number of nodes from the plan);
- :func:`alertmanager_config` gives alertmanager.yml, which holds no secret: a receiver's
  bearer token or SMTP password is read by Alertmanager from a file
  (``credentials_file``, ``auth_password_file``), whose paths and contents
  :func:`alertmanager_secret_files` gives;
- :attr:`Alerting.rules_files` holds the user's own rules files, read and checked.

The metric names are those of the exporters the monitoring host scrapes (jobs
``opensearch``, ``node``, ``tls_expiry``, ``user_directory``, ``order_service``,
``prometheus``, ``alertmanager``); tests/test_alerting.py runs every rule through
``promtool test rules`` with a firing and a quiet case.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from clusterforge.addresses import is_loopback_host
from clusterforge.errors import InventoryError
from clusterforge.plan.render import MANAGED_HEADER
from clusterforge.schema import check_value, load_schema

RULES_FILE_NAME = "clusterforge-alerts.yml"
RULES_GROUP = "clusterforge"
# Debian's prometheus-alertmanager runs as the user prometheus and reads /etc/prometheus.
ALERTMANAGER_SECRETS_DIR = "/etc/prometheus/alertmanager-secrets"
# The receiver every alert reaches when no receiver's route takes it: it sends nothing.
NULL_RECEIVER = "clusterforge-none"

WATERMARK_LOW = "cluster.routing.allocation.disk.watermark.low"
WATERMARK_HIGH = "cluster.routing.allocation.disk.watermark.high"
# The engine's own defaults (OpenSearch 2.19, DiskThresholdSettings).
ENGINE_WATERMARKS = {WATERMARK_LOW: "85%", WATERMARK_HIGH: "90%"}

# The variables this module reads (declared in src/clusterforge/schema.yml).
THRESHOLD_VARIABLES = (
    "monitoring_alert_red_for",
    "monitoring_alert_yellow_for",
    "monitoring_alert_nodes_for",
    "monitoring_alert_target_down_for",
    "monitoring_alert_disk_for",
    "monitoring_alert_heap_percent",
    "monitoring_alert_heap_for",
    "monitoring_alert_cert_expiry_days",
    "monitoring_alert_snapshot_max_age",
    "monitoring_alert_outbox_age_minutes",
    "monitoring_alert_5xx_percent",
    "monitoring_alert_5xx_for",
)
ALERTMANAGER_VARIABLES = (
    "monitoring_alertmanager_receivers",
    "monitoring_alertmanager_group_wait",
    "monitoring_alertmanager_group_interval",
    "monitoring_alertmanager_repeat_interval",
)
RULES_FILES_VARIABLE = "monitoring_rules_files"
VARIABLES = (*THRESHOLD_VARIABLES, *ALERTMANAGER_VARIABLES, RULES_FILES_VARIABLE)
RECEIVERS = "monitoring_alertmanager_receivers"

_RECEIVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SMARTHOST = re.compile(r"^[A-Za-z0-9.:\[\]-]+:\d{1,5}$")
_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"[^"]*"\s*$')
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|pb)$", re.IGNORECASE)
_SIZE_FACTORS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4, "pb": 1024**5}
_RECEIVER_KEYS = ("name", "webhook", "email", "matchers", "send_resolved")
_WEBHOOK_KEYS = ("url", "bearer_token_var", "ca_file")
_EMAIL_KEYS = (
    "to",
    "from",
    "smarthost",
    "auth_username",
    "auth_password_var",
    "require_tls",
    "ca_file",
)
_INLINE_SECRETS = {
    "webhook": {"bearer_token": "bearer_token_var", "credentials": "bearer_token_var"},
    "email": {"auth_password": "auth_password_var", "password": "auth_password_var"},
}


@dataclass(frozen=True, kw_only=True)
class Watermark:
    """One disk watermark: ``percent`` of the disk used, or ``free_bytes`` left (the engine
    reads a byte size as the free space a node must keep)."""

    setting: str
    text: str
    percent: float | None = None
    free_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Receiver:
    """One Alertmanager receiver; secrets named by variable, never held here."""

    name: str
    kind: str  # webhook | email
    send_resolved: bool
    matchers: tuple[str, ...] = ()
    url: str | None = None
    bearer_token_var: str | None = None
    to: str | None = None
    sender: str | None = None
    smarthost: str | None = None
    auth_username: str | None = None
    auth_password_var: str | None = None
    require_tls: bool = True
    ca_file: str | None = None

    @property
    def secret_variables(self) -> tuple[str, ...]:
        return tuple(v for v in (self.bearer_token_var, self.auth_password_var) if v)


@dataclass(frozen=True, kw_only=True)
class Alerting:
    """The thresholds, receivers and extra rules files of one monitoring host."""

    red_for: str
    yellow_for: str
    nodes_for: str
    target_down_for: str
    disk_for: str
    heap_percent: int
    heap_for: str
    cert_expiry_days: int
    snapshot_max_age: str
    outbox_age_minutes: int
    error_percent: int
    error_for: str
    disk_low: Watermark
    disk_high: Watermark
    group_wait: str
    group_interval: str
    repeat_interval: str
    receivers: tuple[Receiver, ...] = ()
    # The user's own rules files: file name on the monitoring host -> text.
    rules_files: Mapping[str, str] = field(default_factory=dict)

    @property
    def secret_variables(self) -> tuple[str, ...]:
        """The variables (vaulted) whose values the receivers' secret files hold."""
        return tuple(v for receiver in self.receivers for v in receiver.secret_variables)


# ---------------------------------------------------------------- the model


def build_alerting(
    variables: Mapping[str, Any],
    *,
    engine_settings: Sequence[Mapping[str, Any]] = (),
    cert_renew_within_days: int | None = None,
    rules_base_dir: Path | None = None,
) -> Alerting:
    """The monitoring host's alerting, checked all at once.

    ``variables``: the monitoring host's variables (unset ones take the schema's default).
    ``engine_settings``: the engine's settings the watermarks may be set in, weakest first
    (``opensearch_extra_settings``, then ``opensearch_cluster_settings``; nested or dotted).
    ``cert_renew_within_days``: ``opensearch_cert_renew_within_days``; an expiry alert
    that fires before rotate-certs.yml would renew is refused.
    ``rules_base_dir``: where relative ``monitoring_rules_files`` paths start (the
    inventory's directory)."""
    problems: list[str] = []
    schema = load_schema()
    values: dict[str, Any] = {}
    for name in VARIABLES:
        var = schema.variables[name]
        value = variables.get(name, var.default)
        problem = check_value(var, value)
        if problem:
            problems.append(problem)
        values[name] = value
    for key in variables:
        text = str(key)
        if text.startswith(("monitoring_alert_", "monitoring_alertmanager_")) and (
            text not in schema.variables
        ):
            problems.append(_unknown(text, schema.variables))
    low, high = _watermarks(engine_settings, problems)
    receivers = (
        _receivers(values[RECEIVERS], problems) if isinstance(values[RECEIVERS], list) else ()
    )
    rules_files = (
        _rules_files(values[RULES_FILES_VARIABLE], rules_base_dir, problems)
        if isinstance(values[RULES_FILES_VARIABLE], list)
        else {}
    )
    expiry_days = values["monitoring_alert_cert_expiry_days"]
    if (
        cert_renew_within_days is not None
        and isinstance(expiry_days, int)
        and expiry_days > cert_renew_within_days
    ):
        problems.append(
            f"monitoring_alert_cert_expiry_days {expiry_days} exceeds "
            f"opensearch_cert_renew_within_days {cert_renew_within_days}: the alert would "
            "fire for certificates playbooks/rotate-certs.yml does not renew yet; set "
            f"monitoring_alert_cert_expiry_days to {cert_renew_within_days} or less, or "
            f"raise opensearch_cert_renew_within_days to {expiry_days}"
        )
    if problems:
        raise InventoryError(problems)
    return Alerting(
        red_for=values["monitoring_alert_red_for"],
        yellow_for=values["monitoring_alert_yellow_for"],
        nodes_for=values["monitoring_alert_nodes_for"],
        target_down_for=values["monitoring_alert_target_down_for"],
        disk_for=values["monitoring_alert_disk_for"],
        heap_percent=int(values["monitoring_alert_heap_percent"]),
        heap_for=values["monitoring_alert_heap_for"],
        cert_expiry_days=int(expiry_days),
        snapshot_max_age=values["monitoring_alert_snapshot_max_age"],
        outbox_age_minutes=int(values["monitoring_alert_outbox_age_minutes"]),
        error_percent=int(values["monitoring_alert_5xx_percent"]),
        error_for=values["monitoring_alert_5xx_for"],
        disk_low=low,
        disk_high=high,
        group_wait=values["monitoring_alertmanager_group_wait"],
        group_interval=values["monitoring_alertmanager_group_interval"],
        repeat_interval=values["monitoring_alertmanager_repeat_interval"],
        receivers=receivers,
        rules_files=rules_files,
    )


def _unknown(name: str, known: Mapping[str, Any]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    if matches:
        return f"{name} is not a variable; did you mean {matches[0]}?"
    return f"{name} is not a variable; remove it (docs/monitoring.md lists the alerting variables)"


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


def _watermarks(
    engine_settings: Sequence[Mapping[str, Any]], problems: list[str]
) -> tuple[Watermark, Watermark]:
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


def _text(where: str, entry: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key} must be non-empty text, not {value!r}")
        return None
    return value


def _secret_var(where: str, entry: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    name = _text(where, entry, key, problems)
    if name is not None and not _VARIABLE_NAME.match(name):
        problems.append(
            f"{where}: {key} names the variable that holds the secret (e.g. "
            f"vault_monitoring_webhook_token), not the secret itself; {key} is not a "
            "variable name"
        )
        return None
    return name


def _unknown_keys(
    where: str, entry: Mapping[str, Any], keys: Sequence[str], problems: list[str]
) -> None:
    for key in entry:
        if key not in keys:
            problems.append(f"{where}: unknown key {key!r}; known keys: {', '.join(keys)}")


def _receivers(raw: list[Any], problems: list[str]) -> tuple[Receiver, ...]:
    receivers: list[Receiver] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"{RECEIVERS}[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where} must be a mapping with name and webhook or email")
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not _RECEIVER_NAME.match(name):
            problems.append(
                f"{where}: name {name!r} must be 1-64 letters, digits, '_' or '-', e.g. ops-pager"
            )
            continue
        where = f"{RECEIVERS} {name!r}"
        if name in seen or name == NULL_RECEIVER:
            problems.append(f"{where}: the name is used twice (or reserved); give each its own")
        seen.add(name)
        _unknown_keys(where, entry, _RECEIVER_KEYS, problems)
        kinds = [kind for kind in ("webhook", "email") if kind in entry]
        if len(kinds) != 1:
            problems.append(
                f"{where}: give exactly one of webhook or email (two receivers for both)"
            )
            continue
        kind = kinds[0]
        body = entry[kind]
        if not isinstance(body, Mapping):
            problems.append(f"{where}: {kind} must be a mapping")
            continue
        for inline, by_name in _INLINE_SECRETS[kind].items():
            if inline in body:
                problems.append(
                    f"{where}: {kind}.{inline} would put a secret in the inventory in clear "
                    f"and in alertmanager.yml; put it in a vaulted variable and name that "
                    f"variable in {kind}.{by_name}"
                )
        known = _WEBHOOK_KEYS if kind == "webhook" else _EMAIL_KEYS
        _unknown_keys(
            f"{where}: {kind}",
            {k: v for k, v in body.items() if k not in _INLINE_SECRETS[kind]},
            known,
            problems,
        )
        matchers = entry.get("matchers", [])
        if not isinstance(matchers, list) or not all(
            isinstance(m, str) and _MATCHER.match(m) for m in matchers
        ):
            problems.append(
                f'{where}: matchers must be a list of label matchers such as severity="critical"'
            )
            matchers = []
        send_resolved = entry.get("send_resolved", True)
        if not isinstance(send_resolved, bool):
            problems.append(f"{where}: send_resolved must be true or false")
            send_resolved = True
        common: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "send_resolved": send_resolved,
            "matchers": tuple(matchers),
            "ca_file": _text(f"{where}: {kind}", body, "ca_file", problems),
        }
        if kind == "webhook":
            receivers.append(_webhook(where, body, common, problems))
        else:
            receivers.append(_email(where, body, common, problems))
    return tuple(receivers)


def _webhook(
    where: str, body: Mapping[str, Any], common: dict[str, Any], problems: list[str]
) -> Receiver:
    url = _text(where, body, "url", problems)
    token_var = _secret_var(f"{where}: webhook", body, "bearer_token_var", problems)
    if url is None:
        problems.append(f"{where}: webhook.url is required, e.g. https://hooks.example.com/alerts")
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"{where}: webhook.url {url!r} must be an http(s):// URL")
        elif parts.username or parts.password:
            problems.append(
                f"{where}: webhook.url carries credentials; remove them and name a vaulted "
                "token in webhook.bearer_token_var"
            )
        elif parts.scheme == "http" and token_var and not is_loopback_host(parts.hostname):
            problems.append(
                f"{where}: webhook.url {url!r} is plain http to another host, so its bearer "
                "token would cross the network in clear; use https://"
            )
    return Receiver(url=url, bearer_token_var=token_var, **common)


def _email(
    where: str, body: Mapping[str, Any], common: dict[str, Any], problems: list[str]
) -> Receiver:
    values = {
        key: _text(f"{where}: email", body, key, problems)
        for key in ("to", "from", "smarthost", "auth_username")
    }
    for key, example in (
        ("to", "ops@example.com"),
        ("from", "alertmanager@example.com"),
        ("smarthost", "smtp.example.com:587"),
    ):
        if values[key] is None:
            problems.append(f"{where}: email.{key} is required, e.g. {example}")
    smarthost = values["smarthost"]
    if smarthost is not None and not _SMARTHOST.match(smarthost):
        problems.append(
            f"{where}: email.smarthost {smarthost!r} must be host:port, e.g. smtp.example.com:587"
        )
    password_var = _secret_var(f"{where}: email", body, "auth_password_var", problems)
    if password_var and values["auth_username"] is None:
        problems.append(f"{where}: email.auth_password_var needs email.auth_username")
    require_tls = body.get("require_tls", True)
    if not isinstance(require_tls, bool):
        problems.append(f"{where}: email.require_tls must be true or false")
        require_tls = True
    if password_var and not require_tls:
        problems.append(
            f"{where}: email.require_tls false would send the SMTP password in clear; keep it true"
        )
    return Receiver(
        to=values["to"],
        sender=values["from"],
        smarthost=smarthost,
        auth_username=values["auth_username"],
        auth_password_var=password_var,
        require_tls=require_tls,
        **common,
    )


def _rules_files(raw: list[Any], base_dir: Path | None, problems: list[str]) -> dict[str, str]:
    files: dict[str, str] = {}
    groups_seen: dict[str, str] = {RULES_GROUP: RULES_FILE_NAME}
    for item in raw:
        where = f"{RULES_FILES_VARIABLE} {item!r}"
        if not isinstance(item, str) or not item:
            problems.append(f"{where}: each entry is the path of a rules file on the control node")
            continue
        path = Path(item)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        name = path.name
        if name in files or name == RULES_FILE_NAME:
            problems.append(
                f"{where}: another rules file has the name {name!r} on the monitoring host; "
                "rename one"
            )
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            problems.append(f"{where}: cannot be read ({error.strerror}); fix the path")
            continue
        before = len(problems)
        _check_rules_text(where, text, groups_seen, name, problems)
        if len(problems) == before:
            files[name] = text
    return files


def _check_rules_text(
    where: str, text: str, groups_seen: dict[str, str], name: str, problems: list[str]
) -> None:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problems.append(f"{where}: is not YAML ({error}); `promtool check rules` shows where")
        return
    groups = document.get("groups") if isinstance(document, Mapping) else None
    if not isinstance(groups, list) or not groups:
        problems.append(f"{where}: a rules file holds `groups:`, a list of rule groups")
        return
    for index, group in enumerate(groups):
        if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
            problems.append(f"{where}: groups[{index}] needs a name and rules")
            continue
        group_name = group["name"]
        if group_name in groups_seen:
            problems.append(
                f"{where}: group {group_name!r} is also in {groups_seen[group_name]}; "
                "Prometheus needs group names unique per file, and clusterforge keeps them "
                "unique overall: rename it"
            )
        groups_seen[group_name] = name
        rules = group.get("rules")
        if not isinstance(rules, list):
            problems.append(f"{where}: group {group_name!r} needs a list of rules")
            continue
        for number, rule in enumerate(rules):
            ok = (
                isinstance(rule, Mapping)
                and isinstance(rule.get("expr"), str | int | float)
                and (("alert" in rule) != ("record" in rule))
            )
            if not ok:
                problems.append(
                    f"{where}: group {group_name!r} rule {number} needs an expr and exactly "
                    "one of alert or record"
                )


# ---------------------------------------------------------------- the rules


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
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", duration)
    if not match:
        raise ValueError(duration)
    factor = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return int(int(match.group(1)) * factor)


def _number(value: float) -> str:
    return f"{value:g}"


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


def _health_color(color: str) -> str:
    return (
        "max by (cluster) "
        f'(elasticsearch_cluster_health_status{{job="opensearch",color="{color}"}}) == 1'
    )


def alert_rules(alerting: Alerting, expected_nodes: int) -> str:
    """The rules file (YAML text) for a cluster of ``expected_nodes`` nodes (the plan's
    count of the nodes present)."""
    if expected_nodes < 1:
        raise ValueError("expected_nodes must be at least 1")
    a = alerting
    outbox_seconds = a.outbox_age_minutes * 60
    snapshot_seconds = _seconds(a.snapshot_max_age)
    requests = '{__name__=~"userdir_http_requests_total|orders_http_requests_total"'
    rules = [
        _rule(
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
        ),
        _rule(
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
        ),
        _rule(
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
        ),
        _rule(
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
        ),
        _rule(
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
                "Run `scripts/status`; restart what stopped with `ansible-playbook "
                "playbooks/site.yml`."
            ),
        ),
        _rule(
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
                "`ansible-playbook playbooks/rotate-certs.yml`."
            ),
        ),
        _disk_rule(a.disk_low, "low", a.disk_for),
        _disk_rule(a.disk_high, "high", a.disk_for),
        _rule(
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
        ),
        _rule(
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
                "Renew it: `ansible-playbook playbooks/rotate-certs.yml` (no restart; the "
                "nodes reload their certificates)."
            ),
        ),
        _rule(
            "OpenSearchSnapshotTooOld",
            "time() - max by (repository) ("
            'elasticsearch_snapshot_stats_latest_snapshot_timestamp_seconds{job="opensearch"} '
            'or clusterforge_snapshot_last_success_timestamp_seconds{job="node"}) > '
            f"{snapshot_seconds}",
            duration="5m",
            severity="warning",
            summary="No successful snapshot in {{ $labels.repository }} for " + a.snapshot_max_age,
            description=(
                "Repository {{ $labels.repository }} holds no successful snapshot newer than "
                f"{a.snapshot_max_age} (monitoring_alert_snapshot_max_age)."
            ),
            runbook=(
                "Take one now with `ansible-playbook playbooks/snapshot.yml`, then check the "
                "snapshot policy or timer (docs/snapshots.md)."
            ),
        ),
        _rule(
            "OrderOutboxBacklog",
            "max without (instance) "
            '(orders_outbox_oldest_undelivered_age_seconds{job="order_service"}) > '
            f"{outbox_seconds}",
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
        ),
        _rule(
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
        ),
    ]
    document = {"groups": [{"name": RULES_GROUP, "rules": rules}]}
    return f"{MANAGED_HEADER}\n{_dump(document)}"


def _dump(document: Any) -> str:
    return yaml.safe_dump(
        document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )


def alert_names(rules_text: str) -> list[str]:
    """The alert names a rules file defines, in order."""
    document = yaml.safe_load(rules_text)
    return [
        rule["alert"] for group in document["groups"] for rule in group["rules"] if "alert" in rule
    ]


# ---------------------------------------------------------------- Alertmanager


def _secret_path(receiver: Receiver, what: str, secrets_dir: str) -> str:
    return str(PurePosixPath(secrets_dir) / f"{receiver.name}.{what}")


def _check_secrets(alerting: Alerting, secrets: Mapping[str, Any]) -> None:
    problems = []
    for receiver in alerting.receivers:
        for variable in receiver.secret_variables:
            value = secrets.get(variable)
            if not isinstance(value, str) or not value:
                problems.append(
                    f"{RECEIVERS} {receiver.name!r} names {variable}, which is not set (or "
                    f"empty); define {variable} in a vault file of the monitoring host"
                )
    if problems:
        raise InventoryError(problems)


def alertmanager_secret_files(
    alerting: Alerting, secrets: Mapping[str, Any], *, secrets_dir: str = ALERTMANAGER_SECRETS_DIR
) -> dict[str, str]:
    """Path on the monitoring host -> content of each secret file alertmanager.yml names
    (place them 0600, owned by Alertmanager's user; never log them)."""
    _check_secrets(alerting, secrets)
    files: dict[str, str] = {}
    for receiver in alerting.receivers:
        if receiver.bearer_token_var:
            files[_secret_path(receiver, "token", secrets_dir)] = str(
                secrets[receiver.bearer_token_var]
            )
        if receiver.auth_password_var:
            files[_secret_path(receiver, "smtp-password", secrets_dir)] = str(
                secrets[receiver.auth_password_var]
            )
    return files


def _receiver_config(receiver: Receiver, secrets_dir: str) -> dict[str, Any]:
    if receiver.kind == "webhook":
        webhook: dict[str, Any] = {"url": receiver.url, "send_resolved": receiver.send_resolved}
        http_config: dict[str, Any] = {}
        if receiver.bearer_token_var:
            http_config["authorization"] = {
                "type": "Bearer",
                "credentials_file": _secret_path(receiver, "token", secrets_dir),
            }
        if receiver.ca_file:
            http_config["tls_config"] = {"ca_file": receiver.ca_file}
        if http_config:
            webhook["http_config"] = http_config
        return {"name": receiver.name, "webhook_configs": [webhook]}
    email: dict[str, Any] = {
        "to": receiver.to,
        "from": receiver.sender,
        "smarthost": receiver.smarthost,
        "require_tls": receiver.require_tls,
        "send_resolved": receiver.send_resolved,
    }
    if receiver.auth_username:
        email["auth_username"] = receiver.auth_username
    if receiver.auth_password_var:
        email["auth_password_file"] = _secret_path(receiver, "smtp-password", secrets_dir)
    if receiver.ca_file:
        email["tls_config"] = {"ca_file": receiver.ca_file}
    return {"name": receiver.name, "email_configs": [email]}


def alertmanager_config(
    alerting: Alerting, secrets: Mapping[str, Any], *, secrets_dir: str = ALERTMANAGER_SECRETS_DIR
) -> str:
    """alertmanager.yml: every alert goes to each receiver whose matchers it matches (all
    of them when a receiver has none); no secret in it. ``secrets`` maps the receivers'
    secret variables to their values, checked here (raises InventoryError when one is
    missing) but written only by :func:`alertmanager_secret_files`."""
    _check_secrets(alerting, secrets)
    routes = []
    for receiver in alerting.receivers:
        route: dict[str, Any] = {"receiver": receiver.name}
        if receiver.matchers:
            route["matchers"] = list(receiver.matchers)
        route["continue"] = True
        routes.append(route)
    root: dict[str, Any] = {
        "receiver": NULL_RECEIVER,
        "group_by": ["alertname", "cluster", "job"],
        "group_wait": alerting.group_wait,
        "group_interval": alerting.group_interval,
        "repeat_interval": alerting.repeat_interval,
    }
    if routes:
        root["routes"] = routes
    document = {
        "route": root,
        "receivers": [
            {"name": NULL_RECEIVER},
            *(_receiver_config(r, secrets_dir) for r in alerting.receivers),
        ],
    }
    return f"{MANAGED_HEADER}\n{_dump(document)}"
