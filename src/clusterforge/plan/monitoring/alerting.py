"""Alerting from the inventory: the model, its checks, and Alertmanager's configuration.

Pure: :func:`build_alerting` turns the monitoring host's variables (``monitoring_alert_*``,
``monitoring_alertmanager_*``, ``monitoring_rules_files``) and the engine's disk watermarks
into an :class:`~clusterforge.plan.monitoring.alerting_model.Alerting`, or raises
:class:`~clusterforge.errors.InventoryError` naming every problem. From it:

- :func:`~clusterforge.plan.monitoring.alert_rules.alert_rules` gives the rules file's text
  (thresholds from the inventory, the number of nodes from the plan); it lives in
  :mod:`clusterforge.plan.monitoring.alert_rules` and is importable from here too;
- :func:`alertmanager_config` gives alertmanager.yml, which holds no secret: a receiver's
  bearer token or SMTP password is read by Alertmanager from a file
  (``credentials_file``, ``auth_password_file``), whose paths and contents
  :func:`alertmanager_secret_files` gives;
- ``Alerting.rules_files`` holds the user's own rules files, read and checked.

The plan imports the names below from this module;
:mod:`clusterforge.plan.monitoring.alerting_model` holds the records,
:mod:`clusterforge.plan.monitoring.alert_rules` the rules, and neither imports this module, so there
is no import circle.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from clusterforge.addresses import is_loopback_host
from clusterforge.durations import describe
from clusterforge.errors import InventoryError
from clusterforge.plan.monitoring.alert_rules import (
    RULES_FILE_NAME,
    RULES_GROUP,
    alert_rules,
    disk_watermarks,
    managed_yaml,
)
from clusterforge.plan.monitoring.alerting_model import Alerting, Receiver, Watermark
from clusterforge.schema import check_value, load_schema

__all__ = [
    "ALERTMANAGER_SECRETS_DIR",
    "NULL_RECEIVER",
    "RULES_FILE_NAME",
    "Alerting",
    "Receiver",
    "Watermark",
    "alert_rules",
    "alertmanager_config",
    "alertmanager_secret_files",
    "build_alerting",
]

# Debian's prometheus-alertmanager runs as the user prometheus and reads /etc/prometheus.
ALERTMANAGER_SECRETS_DIR = "/etc/prometheus/alertmanager-secrets"
# The receiver every alert reaches when no receiver's route takes it: it sends nothing.
NULL_RECEIVER = "clusterforge-none"

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
SNAPSHOT_MAX_AGE = "monitoring_alert_snapshot_max_age"

_RECEIVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SMARTHOST = re.compile(r"^[A-Za-z0-9.:\[\]-]+:\d{1,5}$")
_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"[^"]*"\s*$')
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


# ---------------------------------------------------------------- the model, checked


def build_alerting(
    variables: Mapping[str, Any],
    *,
    engine_settings: Sequence[Mapping[str, Any]] = (),
    cert_renew_within_days: int | None = None,
    rules_base_dir: Path | None = None,
    snapshot_schedule_allows: int | None = 0,
) -> Alerting:
    """The monitoring host's alerting, checked all at once.

    ``variables``: the monitoring host's variables (unset ones take the schema's default).
    ``engine_settings``: the engine's settings the watermarks may be set in, weakest first
    (``opensearch_extra_settings``, then ``opensearch_cluster_settings``; nested or dotted).
    ``cert_renew_within_days``: ``opensearch_cert_renew_within_days``; an expiry alert
    that fires before rotate_certs.yml would renew is refused.
    ``rules_base_dir``: where relative ``monitoring_rules_files`` paths start (the
    inventory's directory). ``snapshot_schedule_allows``: how old the newest scheduled
    snapshot may be by the declared schedule, in seconds, as ``scripts/status`` judges it
    (clusterforge.plan.snapshots.snapshot_schedule.declared_schedule); 0 when the schedule's period
    cannot be read here, None without a schedule. monitoring_alert_snapshot_max_age, when
    given, is the alert's age. Otherwise the schedule's allowance is, so the alert and
    status agree; with a period not read here, the variable's default; and with no
    schedule there is no age to watch and no snapshot age alert (a lab with a repository
    and no schedule fired it 13 minutes after it came up, and one whose schedule was
    removed kept its old age, issue 51)."""
    problems: list[str] = []
    values = _variable_values(variables, problems)
    low, high = disk_watermarks(engine_settings, problems)
    receivers = (
        _receivers(values[RECEIVERS], problems) if isinstance(values[RECEIVERS], list) else ()
    )
    rules_files = (
        _rules_files(values[RULES_FILES_VARIABLE], rules_base_dir, problems)
        if isinstance(values[RULES_FILES_VARIABLE], list)
        else {}
    )
    expiry_days = values["monitoring_alert_cert_expiry_days"]
    _check_expiry(expiry_days, cert_renew_within_days, problems)
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
        snapshot_max_age=_snapshot_max_age(variables, values, snapshot_schedule_allows),
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


def _snapshot_max_age(
    variables: Mapping[str, Any], values: Mapping[str, Any], schedule_allows: int | None
) -> str | None:
    """The snapshot age alert's threshold (see build_alerting), or None for no alert."""
    if variables.get(SNAPSHOT_MAX_AGE) is not None:
        return str(values[SNAPSHOT_MAX_AGE])
    if schedule_allows is None:
        return None
    return describe(schedule_allows) if schedule_allows > 0 else str(values[SNAPSHOT_MAX_AGE])


def _variable_values(variables: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """Each variable this module reads, or its schema default, checked against the schema;
    a ``monitoring_alert*`` name the schema lacks is a problem too."""
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
    return values


def _check_expiry(
    expiry_days: Any, cert_renew_within_days: int | None, problems: list[str]
) -> None:
    if (
        cert_renew_within_days is not None
        and isinstance(expiry_days, int)
        and expiry_days > cert_renew_within_days
    ):
        problems.append(
            f"monitoring_alert_cert_expiry_days {expiry_days} exceeds "
            f"opensearch_cert_renew_within_days {cert_renew_within_days}: the alert would "
            "fire for certificates playbooks/rotate_certs.yml does not renew yet; set "
            f"monitoring_alert_cert_expiry_days to {cert_renew_within_days} or less, or "
            f"raise opensearch_cert_renew_within_days to {expiry_days}"
        )


def _unknown(name: str, known: Mapping[str, Any]) -> str:
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    if matches:
        return f"{name} is not a variable; did you mean {matches[0]}?"
    return f"{name} is not a variable; remove it (docs/monitoring.md lists the alerting variables)"


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
        receiver = _receiver(index, entry, seen, problems)
        if receiver is not None:
            receivers.append(receiver)
    return tuple(receivers)


def _receiver(index: int, entry: Any, seen: set[str], problems: list[str]) -> Receiver | None:
    """One entry of the receivers' list, or None when it is too broken to read on."""
    where = f"{RECEIVERS}[{index}]"
    if not isinstance(entry, Mapping):
        problems.append(f"{where} must be a mapping with name and webhook or email")
        return None
    name = entry.get("name")
    if not isinstance(name, str) or not _RECEIVER_NAME.match(name):
        problems.append(
            f"{where}: name {name!r} must be 1-64 letters, digits, '_' or '-', e.g. ops-pager"
        )
        return None
    where = f"{RECEIVERS} {name!r}"
    if name in seen or name == NULL_RECEIVER:
        problems.append(f"{where}: the name is used twice (or reserved); give each its own")
    seen.add(name)
    _unknown_keys(where, entry, _RECEIVER_KEYS, problems)
    kinds = [kind for kind in ("webhook", "email") if kind in entry]
    if len(kinds) != 1:
        problems.append(f"{where}: give exactly one of webhook or email (two receivers for both)")
        return None
    kind = kinds[0]
    body = entry[kind]
    if not isinstance(body, Mapping):
        problems.append(f"{where}: {kind} must be a mapping")
        return None
    _check_body_keys(where, kind, body, problems)
    common = _common(where, name, kind, entry, body, problems)
    if kind == "webhook":
        return _webhook(where, body, common, problems)
    return _email(where, body, common, problems)


def _check_body_keys(where: str, kind: str, body: Mapping[str, Any], problems: list[str]) -> None:
    """No secret written inline, and no key the kind does not know."""
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


def _common(
    where: str,
    name: str,
    kind: str,
    entry: Mapping[str, Any],
    body: Mapping[str, Any],
    problems: list[str],
) -> dict[str, Any]:
    """The fields every kind of receiver has."""
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
    return {
        "name": name,
        "kind": kind,
        "send_resolved": send_resolved,
        "matchers": tuple(matchers),
        "ca_file": _text(f"{where}: {kind}", body, "ca_file", problems),
    }


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
    return managed_yaml(document)
