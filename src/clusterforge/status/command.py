"""``scripts/status``: what a running cluster looks like, and what needs attention.

    scripts/status [--lab-json PATH | --inventory PATH [--vault-password-file F]]
                   [-e EXTRA_VARS ...] [--json]

Exit codes: 0 when nothing needs attention, 1 when the report lists problems, 2 for usage
or configuration errors. The table (or, with ``--json``, one JSON document) goes to
stdout; progress and errors go to stderr. docs/status.md describes the JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clusterforge.client import DEFAULT_TIMEOUT, ClusterClient
from clusterforge.errors import ClusterforgeError
from clusterforge.plan.cluster_config import ClusterConfig
from clusterforge.status import lifecycle as lifecycle_status
from clusterforge.status.alerts import alert_problems, firing_alerts, render_alerts
from clusterforge.status.drift import (
    declared_config,
    drift_problems,
    find_drift,
    lab_inventory_vars,
    parse_extra_vars,
)
from clusterforge.status.probe import collect
from clusterforge.status.report import build_report
from clusterforge.status.target import Target, load_inventory, load_lab_json

__all__ = ["build_report", "main", "render_table"]

# scripts/status sets CLUSTERFORGE_LAB_JSON to the checkout's lab.json.
DEFAULT_LAB_JSON = Path(os.environ.get("CLUSTERFORGE_LAB_JSON", "inventories/lab/lab.json"))
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f}{unit}" if unit == "B" else f"{amount:.1f}{unit}"
        amount /= 1024
    return f"{amount:.1f}TiB"


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{seconds}s"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [headers, *rows]
    ]


def _node_state(node: dict[str, Any]) -> str:
    if node["reachable"] is False:
        return "UNREACHABLE"
    if node["http_status"] not in (None, 200):
        return f"HTTP {node['http_status']}"
    if node["in_cluster"] is False:
        return "MISSING"
    if node["in_cluster"] is None:
        return "unknown"
    return "up" if node["in_inventory"] else "up (not in inventory)"


def _snapshots_line(section: dict[str, Any] | None) -> str:
    """Scheduled snapshots: the latest success's age and the next run."""
    if section is None:
        return "snapshots no scheduled snapshot found"
    if "error" in section:
        return f"snapshots unreadable ({section['error']})"
    latest = section["latest_success"]
    return (
        f"snapshots {section['repository']}  schedule {section['schedule']}  latest "
        + (f"{latest} ({_duration(section['age_seconds'])} ago)" if latest else "NONE succeeded")
        + f"  next run {section['next_run'] or 'unknown'}"
    )


def render_table(report: dict[str, Any]) -> str:
    """The human-readable report."""
    cluster = report["cluster"]
    marks = cluster["watermarks"] or {}
    lines = [
        f"cluster   {cluster['name']}  health {cluster['health'] or 'unknown'}  "
        f"mode {cluster['mode']}  nodes {cluster['nodes_present']}/{cluster['nodes_expected']}",
        "watermarks "
        + (
            f"low {marks.get('low')}  high {marks.get('high')}  flood {marks.get('flood_stage')}"
            + ("" if marks.get("threshold_enabled", True) else "  (disk threshold disabled)")
            if marks
            else "unknown"
        ),
    ]
    security = report["security"]
    if not security["enabled"]:
        lines.append("security  off (open mode)")
    else:
        digest = (security["config"] or {}).get("sha256")
        initialized = {True: "initialized", False: "NOT initialized", None: "unknown"}
        lines.append(
            f"security  {initialized[security['initialized']]}  "
            f"config sha256 {digest or 'unreadable'}"
        )
    lines.append("")
    node_rows = []
    for node in report["nodes"]:
        disk = node["disk"]
        certificate = node["certificate"] or {}
        node_rows.append(
            [
                node["name"],
                node["address"] or (node["url"] or "-"),
                ",".join(node["roles"]) or "-",
                node["version"] or "-",
                _duration(node["uptime_seconds"]),
                "-" if node["heap_used_percent"] is None else f"{node['heap_used_percent']}%",
                "-"
                if disk is None
                else f"{disk['used_percent']}% of {_size(disk['total_bytes'])}"
                + (f" >{disk['over']}" if disk["over"] else ""),
                certificate.get("not_after", "-")[:10]
                + (f" ({certificate['days_left']}d)" if "days_left" in certificate else ""),
                certificate.get("serial", "-"),
                _node_state(node),
            ]
        )
    lines += _table(
        [
            "NODE",
            "ADDRESS",
            "ROLES",
            "VERSION",
            "UPTIME",
            "HEAP",
            "DISK",
            "CERT EXPIRES",
            "SERIAL",
            "STATE",
        ],
        node_rows,
    )
    lines.append("")
    plugin_rows = [
        [node["name"], plugin["name"], plugin["version"]]
        for node in report["nodes"]
        for plugin in node["plugins"]
    ]
    lines += _table(["NODE", "PLUGIN", "VERSION"], plugin_rows) if plugin_rows else ["no plugins"]
    lines.append("")
    if report["console"] is not None:
        console = report["console"]
        lines.append(
            f"console   {console['url']}  "
            + (
                "healthy"
                if console["healthy"]
                else f"UNREACHABLE ({console['error']})"
                if "error" in console
                else f"NOT healthy (HTTP {console['http_status']}, state {console['state']})"
            )
        )
    else:
        lines.append("console   none in this inventory")
    if report["services"]:
        for name, service in report["services"].items():
            state = (
                "healthy"
                if service["healthy"]
                else f"not checked: {service['not_checked']}"
                if service["healthy"] is None
                else f"UNREACHABLE ({service['error']})"
                if "error" in service
                else f"NOT healthy (HTTP {service['http_status']})"
            )
            lines.append(f"service   {name}  {service['url'] or '-'}  {state}")
    else:
        lines.append("services  none in this inventory")
    lines.append(_snapshots_line(report.get("snapshots")))
    if report.get("lifecycle") is not None:  # docs/lifecycle.md
        lines += lifecycle_status.status_lines(report["lifecycle"], datetime.now(UTC).timestamp())
    lines.append("")
    alerts = report.get("alerts")
    if alerts is not None:
        lines += render_alerts(alerts)
        lines.append("")
    drift = report.get("drift")
    if drift is not None:
        lines.append(
            "drift     "
            + (
                ", ".join(f"{item['kind']} {item['name']} {item['state']}" for item in drift)
                or "none: the cluster's objects match the inventory"
            )
        )
        lines.append("")
    if report["problems"]:
        lines.append(f"{len(report['problems'])} problem(s):")
        lines += [f"  - {problem}" for problem in report["problems"]]
    else:
        lines.append("no problems")
    return "\n".join(lines) + "\n"


def _target(args: argparse.Namespace, extra_vars: Mapping[str, Any]) -> Target:
    if args.inventory is not None:
        return load_inventory(args.inventory, args.vault_password_file, extra_vars)
    lab_json = args.lab_json or DEFAULT_LAB_JSON
    if args.lab_json is None and not lab_json.exists():
        raise _UsageError(
            f"no --inventory given and {lab_json} does not exist; run scripts/up, or pass "
            "--lab-json PATH or --inventory PATH"
        )
    return load_lab_json(lab_json)


def _opensearch_vars(
    args: argparse.Namespace, target: Target, extra_vars: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The opensearch group's variables, read once: the inventory's (an ``--inventory``
    target has them), or the lab's inventory beside its lab.json, ``-e`` on top; None for
    a lab.json without an inventory beside it and no ``-e``."""
    if target.opensearch_vars is not None:
        return target.opensearch_vars
    inventory = Path(args.lab_json or DEFAULT_LAB_JSON).parent
    if not extra_vars and not (inventory / "hosts.yml").exists():
        return None
    return lab_inventory_vars(inventory, args.vault_password_file, extra_vars)


def _declared(target: Target, variables: Mapping[str, Any] | None) -> ClusterConfig | None:
    """The cluster objects the inventory declares; None when it declares none."""
    if variables is None:
        return None
    return declared_config(variables, secured=target.secured)


def _lab_monitoring(args: argparse.Namespace, target: Target) -> Mapping[str, Any] | None:
    """A lab.json's monitoring (the lifecycle runs' metrics are in its Prometheus)."""
    if target.opensearch_vars is not None:
        return None
    try:
        facts = json.loads(Path(args.lab_json or DEFAULT_LAB_JSON).read_text())
    except (OSError, ValueError):
        return None
    monitoring = facts.get("monitoring")
    return monitoring if isinstance(monitoring, Mapping) else None


class _UsageError(ClusterforgeError):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/status", description=__doc__.split("\n", maxsplit=1)[0]
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--lab-json", type=Path, help=f"a lab.json (default: {DEFAULT_LAB_JSON} when it exists)"
    )
    source.add_argument("--inventory", type=Path, help="an Ansible inventory file or directory")
    parser.add_argument(
        "--vault-password-file", type=Path, help="decrypts the inventory's vaulted variables"
    )
    parser.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="EXTRA_VARS",
        help="variables on top of the inventory's, as ansible-playbook takes them "
        "(key=value, YAML/JSON, or @FILE); the declared cluster objects are compared",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per request (default 10)"
    )
    args = parser.parse_args(argv)
    if args.vault_password_file is not None and args.inventory is None:
        parser.error("--vault-password-file needs --inventory")
    try:
        extra_vars = parse_extra_vars(args.extra_vars)
        target = _target(args, extra_vars)
        variables = _opensearch_vars(args, target, extra_vars)
        declared = _declared(target, variables)
    except ClusterforgeError as error:
        print(f"scripts/status: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"scripts/status: asking {len(target.nodes)} node(s) of {target.source}", file=sys.stderr)
    credentials = (
        (target.admin_user, target.admin_password)
        if target.admin_user and target.admin_password is not None
        else None
    )
    with ClusterClient(
        ca_cert=target.ca_cert, credentials=credentials, timeout=args.timeout
    ) as client:
        recorded = collect(target, client, timeout=args.timeout)
        report = build_report(target, recorded, now=datetime.now(UTC))
        if declared is not None:
            found = find_drift(target, declared, client)
            report["drift"] = found["drift"]
            report["problems"] += drift_problems(found)
    lifecycle = lifecycle_status.status_report(
        target, variables, monitoring=_lab_monitoring(args, target)
    )
    if lifecycle is not None:
        report["lifecycle"] = lifecycle
        report["problems"] += lifecycle_status.status_problems(lifecycle)
    if target.alertmanager is not None:
        alerts = firing_alerts(target.alertmanager, timeout=args.timeout)
        report["alerts"] = alerts
        report["problems"] += alert_problems(alerts)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(render_table(report))
    return EXIT_PROBLEMS if report["problems"] else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
