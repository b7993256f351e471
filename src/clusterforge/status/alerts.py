"""The alerts Alertmanager holds firing, for ``scripts/status`` (docs/monitoring.md).

Asked only when the target has monitoring (lab.json's ``monitoring`` object): ``GET
/api/v2/alerts`` for the active alerts that are neither silenced nor inhibited. An
``https://`` URL is verified against the given CA; plain ``http://`` is accepted only on
loopback. With a password file, the request carries Basic auth (Prometheus' web config);
the password is read from the file, never from the command line, and kept out of reprs.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from clusterforge.addresses import is_loopback_host
from clusterforge.errors import ClusterforgeError

DEFAULT_WEB_USER = "clusterforge"


class AlertSourceError(ClusterforgeError):
    """The monitoring object of a lab.json cannot be used (exit code 2)."""


@dataclass(frozen=True, kw_only=True)
class AlertSource:
    url: str
    ca_cert: Path | None = None
    user: str = DEFAULT_WEB_USER
    password: str | None = field(default=None, repr=False)


def alert_source(monitoring: Any, where: str) -> AlertSource | None:
    """The Alertmanager a lab.json's ``monitoring`` object names, or None without one
    (no monitoring, or no ``alertmanager`` URL in it)."""
    if monitoring is None:
        return None
    if not isinstance(monitoring, Mapping):
        raise AlertSourceError(f"{where}: 'monitoring' must be an object with 'alertmanager'")
    url = monitoring.get("alertmanager")
    if not url:
        return None
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AlertSourceError(f"{where}: monitoring.alertmanager {url!r} is not an http(s) URL")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise AlertSourceError(
            f"{where}: monitoring.alertmanager {url!r} is plain http to another host; "
            "serve it over https (with monitoring.ca_cert) or on loopback"
        )
    ca_cert = Path(monitoring["ca_cert"]) if monitoring.get("ca_cert") else None
    password = None
    if monitoring.get("password_file"):
        password_file = Path(monitoring["password_file"])
        try:
            password = password_file.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise AlertSourceError(
                f"{where}: cannot read monitoring.password_file {password_file}: {error}"
            ) from error
    return AlertSource(
        url=str(url).rstrip("/"),
        ca_cert=ca_cert,
        user=str(monitoring.get("user") or DEFAULT_WEB_USER),
        password=password,
    )


def _verify(source: AlertSource) -> ssl.SSLContext | bool:
    if not source.url.startswith("https://"):
        return False
    context = ssl.create_default_context(
        cafile=str(source.ca_cert) if source.ca_cert is not None else None
    )
    return context


def firing_alerts(source: AlertSource, *, timeout: float) -> dict[str, Any]:
    """``{"url", "firing": [{name, severity, summary, labels, starts_at}], "error"}``;
    ``error`` says why the alerts could not be read (then ``firing`` is empty)."""
    result: dict[str, Any] = {"url": source.url, "firing": [], "error": None}
    auth = httpx.BasicAuth(source.user, source.password) if source.password is not None else None
    try:
        with httpx.Client(verify=_verify(source), auth=auth, timeout=timeout) as client:
            answer = client.get(
                f"{source.url}/api/v2/alerts",
                params={"active": "true", "silenced": "false", "inhibited": "false"},
            )
    except httpx.HTTPError as error:
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    if answer.status_code != 200:
        result["error"] = f"HTTP {answer.status_code}"
        return result
    try:
        alerts = answer.json()
    except json.JSONDecodeError:
        result["error"] = "the answer is not JSON"
        return result
    for alert in alerts if isinstance(alerts, list) else []:
        labels = alert.get("labels") or {}
        if (alert.get("status") or {}).get("state", "active") != "active":
            continue
        result["firing"].append(
            {
                "name": labels.get("alertname", "?"),
                "severity": labels.get("severity", "-"),
                "summary": (alert.get("annotations") or {}).get("summary", ""),
                "labels": labels,
                "starts_at": alert.get("startsAt"),
            }
        )
    result["firing"].sort(
        key=lambda item: (item["name"], json.dumps(item["labels"], sort_keys=True))
    )
    return result


def alert_problems(result: Mapping[str, Any]) -> list[str]:
    """One problem per firing alert, or one when Alertmanager could not be read."""
    if result["error"]:
        return [
            f"Alertmanager at {result['url']} could not be read ({result['error']}); "
            "firing alerts are unknown"
        ]
    return [
        f"alert {alert['name']} is firing ({alert['severity']})"
        + (f": {alert['summary']}" if alert["summary"] else "")
        for alert in result["firing"]
    ]


def render_alerts(result: Mapping[str, Any]) -> list[str]:
    """The table's lines for the alerts."""
    if result["error"]:
        return [f"alerts    unreadable at {result['url']}: {result['error']}"]
    if not result["firing"]:
        return [f"alerts    none firing ({result['url']})"]
    lines = [f"alerts    {len(result['firing'])} firing ({result['url']})"]
    lines += [
        f"  {alert['severity']:<8}  {alert['name']}  {alert['summary']}"
        for alert in result["firing"]
    ]
    return lines
