"""The rules of ``scripts/status``: recorded answers in, a report with its problems out.

Pure functions, no network: the unit tests feed them recorded API answers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from clusterforge.status.snapshots import snapshot_status
from clusterforge.status.target import SECURITY_CONFIG_TYPES, Target

WATERMARK_KEYS = ("low", "high", "flood_stage")
_WATERMARK_PREFIX = "cluster.routing.allocation.disk."
_BYTE_UNITS = {
    "b": 1,
    "kb": 1024,
    "mb": 1024**2,
    "gb": 1024**3,
    "tb": 1024**4,
    "pb": 1024**5,
}


def effective_setting(settings: Mapping[str, Any], key: str) -> Any:
    """A flat setting as the cluster applies it: transient, then persistent, then default."""
    for scope in ("transient", "persistent", "defaults"):
        values = settings.get(scope) or {}
        if key in values:
            return values[key]
    return None


def parse_watermark(value: str) -> dict[str, Any]:
    """ "85%" or "0.85" -> used percent; "500mb" -> minimum free bytes (OpenSearch's forms)."""
    text = str(value).strip().lower()
    if text.endswith("%"):
        return {"used_percent": float(text[:-1])}
    try:
        ratio = float(text)
    except ValueError:
        pass
    else:
        return {"used_percent": ratio * 100}
    match = re.fullmatch(r"([0-9.]+)\s*([kmgtp]?b)", text)
    if not match:
        raise ValueError(f"unrecognised disk watermark {value!r}")
    return {"free_bytes": int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])}


def watermarks(settings: Mapping[str, Any]) -> dict[str, Any]:
    enabled = effective_setting(settings, _WATERMARK_PREFIX + "threshold_enabled")
    found: dict[str, Any] = {
        "threshold_enabled": str(enabled).lower() != "false",
    }
    for key in WATERMARK_KEYS:
        found[key] = effective_setting(settings, f"{_WATERMARK_PREFIX}watermark.{key}")
    return found


def _over(disk: Mapping[str, Any], watermark: str | None) -> bool:
    if watermark is None:
        return False
    limit = parse_watermark(watermark)
    if "used_percent" in limit:
        return bool(disk["used_percent"] >= limit["used_percent"])
    return bool(disk["available_bytes"] < limit["free_bytes"])


ALLOCATION_ENABLE = "cluster.routing.allocation.enable"
ALLOCATION_EXCLUDES = tuple(
    f"cluster.routing.allocation.exclude.{attribute}" for attribute in ("_name", "_ip", "_host")
)


def half_done(settings: Mapping[str, Any]) -> list[str]:
    """What a playbook stopped halfway (killed, its controller lost) left in the cluster's
    settings, each with how to finish it: allocation held by a rolling restart's turn, an
    exclusion set by a scale-in's drain. (A node it left stopped shows as missing.)"""
    problems = []
    enable = effective_setting(settings, ALLOCATION_ENABLE)
    if enable not in (None, "", "all"):
        problems.append(
            f"shard allocation is restricted ({ALLOCATION_ENABLE}: {enable}), as a rolling "
            "restart leaves it while a node is away: if no playbook is running, one was "
            "stopped halfway. Finish it: rerun it (ansible-playbook "
            "playbooks/rolling_restart.yml, or the upgrade.yml or site.yml run that "
            "stopped); each node's turn sets allocation back once the node has rejoined"
        )
    for key in ALLOCATION_EXCLUDES:
        excluded = effective_setting(settings, key)
        if excluded:
            problems.append(
                f"an allocation exclusion is set ({key}: {excluded}), as a scale-in sets it "
                "while it drains a node: if no playbook is running, one was stopped halfway. "
                "Finish it: rerun ansible-playbook playbooks/site.yml with the node still "
                "marked opensearch_node_state: absent (it drains, stops the node and clears "
                f'the exclusion); to keep the node, PUT _cluster/settings {{"persistent": '
                f'{{"{key}": null}}}}'
            )
    return problems


def security_digest(config: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """sha256 over the canonical JSON (sorted keys, no spaces) of every config type."""
    bodies = {kind: config[kind].get("body") for kind in SECURITY_CONFIG_TYPES if kind in config}
    canonical = json.dumps(bodies, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {
        "sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "types": {
            kind: hashlib.sha256(
                json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            ).hexdigest()
            for kind, body in bodies.items()
        },
    }


def _answer_error(answer: Mapping[str, Any] | None) -> str | None:
    if answer is None:
        return "not asked"
    if "error" in answer:
        return str(answer["error"])
    if answer.get("status") != 200:
        return f"HTTP {answer.get('status')}: {str(answer.get('body'))[:200]}"
    return None


def _security_uninitialized(recorded: Mapping[str, Any]) -> bool:
    return (recorded.get("security_health") or {}).get("status") == 503


def _node_rows(
    target: Target, recorded: Mapping[str, Any], marks: Mapping[str, Any], now: datetime
) -> tuple[list[dict[str, Any]], list[str]]:
    problems: list[str] = []
    # When no node answered, membership is unknown (None), not "missing".
    cluster_known = _answer_error(recorded.get("nodes_info")) is None
    info = (recorded.get("nodes_info") or {}).get("body") or {}
    stats = (recorded.get("nodes_stats") or {}).get("body") or {}
    info_by_name = {
        node["name"]: (node_id, node) for node_id, node in info.get("nodes", {}).items()
    }
    rows: list[dict[str, Any]] = []
    expected_names = [node.name for node in target.nodes]
    names = expected_names + sorted(set(info_by_name) - set(expected_names))
    urls = {node.name: node.url for node in target.nodes}
    for name in names:
        node_id, node_info = info_by_name.get(name, (None, None))
        root = recorded.get("nodes_root", {}).get(name) or {"error": "not asked"}
        root_error = _answer_error(root)
        row: dict[str, Any] = {
            "name": name,
            "url": urls.get(name),
            "in_inventory": name in urls,
            "in_cluster": node_info is not None if cluster_known else None,
            # Reachable: it answered HTTP, whatever the status (503 before security is loaded).
            "reachable": "error" not in root if name in urls else None,
            "http_status": root.get("status"),
            "address": None,
            "roles": [],
            "version": None,
            "uptime_seconds": None,
            "heap_used_percent": None,
            "disk": None,
            "plugins": [],
            "certificate": None,
        }
        if name in urls and "error" in root:
            problems.append(f"node {name} is unreachable at {urls[name]}: {root_error}")
        elif name in urls and root_error is not None and not _security_uninitialized(recorded):
            problems.append(f"node {name} answers GET / with {root_error}")
        if node_info is not None:
            node_stats = stats.get("nodes", {}).get(node_id, {})
            row.update(
                address=node_info.get("http", {}).get("publish_address") or node_info.get("ip"),
                roles=list(node_info.get("roles", [])),
                version=node_info.get("version"),
                plugins=sorted(
                    (
                        {"name": p["name"], "version": p["version"]}
                        for p in node_info.get("plugins", [])
                    ),
                    key=lambda plugin: plugin["name"],
                ),
            )
            jvm = node_stats.get("jvm", {})
            if jvm:
                row["uptime_seconds"] = int(jvm.get("uptime_in_millis", 0)) // 1000
                row["heap_used_percent"] = jvm.get("mem", {}).get("heap_used_percent")
            fs_total = node_stats.get("fs", {}).get("total", {})
            if fs_total.get("total_in_bytes"):
                total = int(fs_total["total_in_bytes"])
                available = int(fs_total.get("available_in_bytes", 0))
                disk: dict[str, Any] = {
                    "total_bytes": total,
                    "available_bytes": available,
                    "used_percent": round(100 * (total - available) / total, 1),
                }
                disk["over"] = _highest_watermark_passed(disk, marks)
                row["disk"] = disk
                if disk["over"] is not None:
                    problems.append(
                        f"node {name}: disk {disk['used_percent']}% used is over the "
                        f"{disk['over']} watermark ({marks[disk['over']]})"
                    )
        elif name in urls and cluster_known:
            problems.append(
                f"node {name} is missing from the cluster "
                f"({len(info_by_name)} of {len(expected_names)} nodes present)"
            )
        certificate = recorded.get("certificates", {}).get(name)
        if certificate is not None:
            row["certificate"] = _certificate_row(
                name, certificate, target, now, problems if "error" not in root else []
            )
        rows.append(row)
    return rows, problems


def _highest_watermark_passed(disk: Mapping[str, Any], marks: Mapping[str, Any]) -> str | None:
    if not marks.get("threshold_enabled", True):
        return None
    passed = None
    for key in WATERMARK_KEYS:
        if _over(disk, marks.get(key)):
            passed = key
    return passed


def _certificate_row(
    name: str, certificate: Mapping[str, Any], target: Target, now: datetime, problems: list[str]
) -> dict[str, Any]:
    if "error" in certificate:
        problems.append(f"node {name}: no TLS handshake on its HTTP port: {certificate['error']}")
        return dict(certificate)
    row = dict(certificate)
    not_after = datetime.fromisoformat(str(certificate["not_after"]))
    row["days_left"] = (not_after - now).days
    if not certificate.get("verified"):
        problems.append(
            f"node {name} serves a certificate the cluster CA does not verify: "
            f"{certificate.get('verify_error')}"
        )
    if not_after <= now:
        problems.append(f"node {name}: its certificate expired on {not_after.isoformat()}")
    elif not_after - now <= timedelta(days=target.renew_within_days):
        problems.append(
            f"node {name}: its certificate expires on {not_after.isoformat()}, within "
            f"opensearch_cert_renew_within_days ({target.renew_within_days}); renew it"
        )
    return row


def _security(target: Target, recorded: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    if not target.secured:
        return {"enabled": False, "initialized": None, "config": None}, []
    problems: list[str] = []
    health = recorded.get("security_health") or {"error": "not asked"}
    if "error" in health:
        # No node answered HTTP: the nodes' own problems say so; security is unknown.
        return {"enabled": True, "initialized": None, "health": None, "config": None}, []
    body = health.get("body")
    initialized = (
        health.get("status") == 200 and isinstance(body, dict) and body.get("status") == "UP"
    )
    section: dict[str, Any] = {
        "enabled": True,
        "initialized": initialized,
        "health": body,
        "config": None,
    }
    if not initialized:
        problems.append(
            f"security is not initialized ({_answer_error(health) or body}); "
            "rerun playbooks/site.yml to load it"
        )
    config = recorded.get("security_config") or {}
    errors = {kind: _answer_error(config.get(kind)) for kind in SECURITY_CONFIG_TYPES}
    failed = {kind: error for kind, error in errors.items() if error}
    if not failed:
        section["config"] = security_digest(config)
    elif initialized:
        # Uninitialized already explains it; initialized and unreadable is a problem of its own.
        problems.append(
            "the security configuration could not be read as admin: "
            + "; ".join(f"{kind}: {error}" for kind, error in failed.items())
        )
    return section, problems


def _endpoint(
    label: str, url: str, answer: Mapping[str, Any], *, green_state: bool
) -> tuple[dict[str, Any], list[str]]:
    error = _answer_error(answer)
    body = answer.get("body")
    state = None
    if green_state and isinstance(body, dict):
        state = body.get("status", {}).get("overall", {}).get("state")
    healthy = error is None and (state == "green" if green_state else True)
    row = {"url": url, "healthy": healthy, "state": state, "http_status": answer.get("status")}
    if "error" in answer:
        row["error"] = answer["error"]
    problems = [] if healthy else [f"{label} at {url} is not healthy: {error or state}"]
    return row, problems


def build_report(target: Target, recorded: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """The status report (the ``--json`` document) with every problem listed."""
    problems: list[str] = []
    health_answer = recorded.get("health") or {}
    health_error = _answer_error(health_answer)
    health: dict[str, Any] = health_answer.get("body") or {} if health_error is None else {}
    if health_error is not None:
        problems.append(f"the cluster did not answer its health: {health_error}")
    elif health.get("status") != "green":
        problems.append(
            f"cluster health is {health.get('status')} "
            f"({health.get('unassigned_shards')} unassigned shards)"
        )
    settings_answer = recorded.get("settings") or {}
    marks: dict[str, Any] = (
        watermarks(settings_answer["body"]) if _answer_error(settings_answer) is None else {}
    )
    nodes, node_problems = _node_rows(target, recorded, marks, now)
    problems.extend(node_problems)
    if _answer_error(settings_answer) is None:
        problems.extend(half_done(settings_answer["body"]))
    versions = sorted({row["version"] for row in nodes if row["version"]})
    if len(versions) > 1:
        by_version = {
            version: [row["name"] for row in nodes if row["version"] == version]
            for version in versions
        }
        problems.append(f"version skew between nodes: {by_version}")
    if target.version and versions and versions != [target.version]:
        problems.append(f"nodes run {', '.join(versions)} but the inventory says {target.version}")
    security, security_problems = _security(target, recorded)
    problems.extend(security_problems)
    console = None
    if target.console:
        console, console_problems = _endpoint(
            "the console", target.console, recorded.get("console") or {}, green_state=True
        )
        problems.extend(console_problems)
    services: dict[str, Any] = {}
    for name, url in target.services.items():
        services[name], service_problems = _endpoint(
            f"service {name}", url, recorded.get("services", {}).get(name) or {}, green_state=False
        )
        problems.extend(service_problems)
    for name, reason in target.unchecked_services.items():
        services[name] = {"url": None, "healthy": None, "not_checked": reason}
    snapshots, snapshot_problems = snapshot_status(
        recorded.get("snapshots") or {}, now=now, declared=target.snapshot_schedule
    )
    problems.extend(snapshot_problems)
    return {
        "checked_at": now.isoformat(),
        "source": target.source,
        "cluster": {
            "name": health.get("cluster_name") or target.cluster_name,
            "mode": target.mode,
            "health": health.get("status"),
            "nodes_expected": len(target.nodes),
            "nodes_present": sum(1 for row in nodes if row["in_cluster"]),
            "versions": versions,
            "watermarks": marks or None,
            "renew_within_days": target.renew_within_days,
        },
        "nodes": nodes,
        "security": security,
        "console": console,
        "services": services,
        "snapshots": snapshots,
        "problems": problems,
    }
