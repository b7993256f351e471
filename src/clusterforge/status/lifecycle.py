"""The index lifecycle seen from the control node (docs/lifecycle.md): ``scripts/lifecycle
--plan``, what the next run would do, index by index, with the reason; and the
``lifecycle`` section of ``scripts/status``, per policy: its indices, total size, oldest
age and the last run.

Both read the cluster the way a run reads it (clusterforge.host_runners.lifecycle.fetch_state)
and the preview decides with the run's own pure :func:`~clusterforge.host_runners.lifecycle.decide`,
so the two cannot disagree but for what changes in between. Neither changes anything.

    scripts/lifecycle --plan [--lab-json PATH | --inventory PATH [--vault-password-file F]]
                      [--url URL ...] [--ca FILE] [--credentials FILE] [--json]

The lab's defaults come from its ``lab.json`` (the nodes' URLs, the CA, the admin's
password file) and the inventory beside it (the policies). ``--credentials`` is a JSON
file ``{"username": ..., "password": ...}``, like the nodes' own, so the preview can run
as the lifecycle user itself; the password is never taken from the command line.
Exit codes: 0, 2 for usage or configuration errors, 3 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterforge.errors import ClusterforgeError
from clusterforge.host_runners.common import ApiError, Client
from clusterforge.host_runners.lifecycle import (
    LAST_RUN,
    LAST_SUCCESS,
    Series,
    decide,
    describe_bytes,
    describe_seconds,
    fetch_state,
    write_index_of,
)
from clusterforge.plan.lifecycle.lifecycle import VARIABLE, check_policies
from clusterforge.plan.snapshots.snapshots import SM_PLUGINS
from clusterforge.schema import load_schema

DEFAULT_LAB_JSON = Path(os.environ.get("CLUSTERFORGE_LAB_JSON", "inventories/lab/lab.json"))
EXIT_OK, EXIT_USAGE, EXIT_UNREADABLE = 0, 2, 3
TIMEOUT = 10.0


class LifecycleConfigError(ClusterforgeError):
    """What ``scripts/lifecycle`` was given cannot be used (exit code 2)."""


def ism_declared(variables: Mapping[str, Any]) -> bool:
    """Whether the inventory's engine runs the index-management plugin (ISM): the tarball
    bundles it; otherwise both of its plugins must be listed present."""
    source = variables.get("opensearch_distribution_source") or load_schema().default_of(
        "opensearch_distribution_source"
    )
    if source == "tarball":
        return True
    present = {
        str(plugin.get("name"))
        for plugin in variables.get("opensearch_plugins") or []
        if isinstance(plugin, Mapping) and plugin.get("state", "present") == "present"
    }
    return all(name in present for name in SM_PLUGINS)


def preview_lines(series: Sequence[Series], decision_of: Any) -> list[str]:
    """The preview, one line per action (policy, action, index, reason), then what is
    left alone and why."""
    lines = []
    for action in decision_of.actions:
        target = f" ({action.target})" if action.target else ""
        lines.append(
            f"{action.policy:<12} {action.action:<12} {action.index}{target}: {action.reason}"
        )
    if not decision_of.actions:
        lines.append("nothing to do")
    lines += [f"left alone: {note}" for note in decision_of.notes]
    for one in series:
        if one.unreadable:
            continue
        write = write_index_of(one) or "none"
        lines.append(f"{one.name:<12} {len(one.indices)} indices, write index {write}")
    return lines


def status_section(
    series: Sequence[Series], now: float, last_runs: Mapping[str, float] | None
) -> dict[str, Any]:
    """``scripts/status``'s lifecycle section: per policy its indices, total size and the
    age of its oldest index; and the last run and success the metrics recorded (None where
    no monitoring was asked)."""
    policies: list[dict[str, Any]] = []
    for one in series:
        if one.unreadable:
            policies.append({"policy": one.name, "error": one.unreadable})
            continue
        ages = [now - index.age_basis for index in one.indices]
        policies.append(
            {
                "policy": one.name,
                "pattern": str(one.policy.get("data_stream") or one.policy.get("index_pattern")),
                "indices": [index.name for index in one.indices],
                "total_bytes": sum(index.total_bytes for index in one.indices),
                "oldest_age_seconds": int(max(ages)) if ages else None,
                "max_total_size_bytes": one.policy.get("max_total_size_bytes"),
            }
        )
    return {"policies": policies, "last_run": dict(last_runs) if last_runs else None}


def status_lines(section: Mapping[str, Any], now: float) -> list[str]:
    if section.get("error"):
        return [f"lifecycle unreadable ({section['error']})"]
    lines = []
    runs = section.get("last_run")
    if runs:
        run = runs.get(LAST_RUN)
        success = runs.get(LAST_SUCCESS)
        lines.append(
            "lifecycle last run "
            + (f"{describe_seconds(now - run)} ago" if run else "never")
            + ", last success "
            + (f"{describe_seconds(now - success)} ago" if success else "never")
        )
    else:
        lines.append(
            "lifecycle last run: not known here (journalctl -u clusterforge-lifecycle on the "
            "nodes, or the monitoring's clusterforge_lifecycle_* metrics)"
        )
    for policy in section.get("policies") or []:
        if "error" in policy:
            lines.append(f"lifecycle {policy['policy']}  unreadable ({policy['error']})")
            continue
        cap = policy.get("max_total_size_bytes")
        oldest = policy.get("oldest_age_seconds")
        lines.append(
            f"lifecycle {policy['policy']}  {policy['pattern']}  "
            f"{len(policy['indices'])} indices  {describe_bytes(policy['total_bytes'])}"
            + (f" of {describe_bytes(int(cap))}" if cap else "")
            + f"  oldest {describe_seconds(oldest) if oldest is not None else '-'}"
        )
    return lines


def status_problems(section: Mapping[str, Any]) -> list[str]:
    """A policy over its cap, or unreadable, needs attention."""
    problems = []
    if section.get("error"):
        problems.append(f"lifecycle: {section['error']}")
    for policy in section.get("policies") or []:
        if "error" in policy:
            problems.append(f"lifecycle policy {policy['policy']}: unreadable ({policy['error']})")
            continue
        cap = policy.get("max_total_size_bytes")
        if cap and policy["total_bytes"] > int(cap):
            problems.append(
                f"lifecycle policy {policy['policy']} holds {describe_bytes(policy['total_bytes'])}"
                f", over its max_total_size {describe_bytes(int(cap))}: see scripts/lifecycle "
                "--plan and journalctl -u clusterforge-lifecycle"
            )
    return problems


def prometheus_last_runs(monitoring: Mapping[str, Any] | None) -> dict[str, float] | None:
    """The newest run and success over every node, from the lab's Prometheus (lab.json's
    ``monitoring``), or None without one or when it does not answer."""
    if not monitoring or not monitoring.get("prometheus"):
        return None
    context = ssl.create_default_context(cafile=monitoring.get("ca_cert") or None)
    headers = {}
    if monitoring.get("password_file"):
        try:
            password = Path(str(monitoring["password_file"])).read_text().strip()
        except OSError:
            return None
        token = base64.b64encode(f"{monitoring.get('user', '')}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    found: dict[str, float] = {}
    for metric in (LAST_RUN, LAST_SUCCESS):
        query = urllib.parse.urlencode({"query": f"max({metric})"})
        request = urllib.request.Request(  # noqa: S310 - the lab's https URL
            f"{str(monitoring['prometheus']).rstrip('/')}/api/v1/query?{query}", headers=headers
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=TIMEOUT) as answer:  # noqa: S310
                result = json.loads(answer.read())["data"]["result"]
        except (OSError, ValueError, KeyError):
            return None
        if result:
            found[metric] = float(result[0]["value"][1])
    return found


def status_report(
    target: Any,
    variables: Mapping[str, Any] | None,
    *,
    monitoring: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> dict[str, Any] | None:
    """``scripts/status``'s lifecycle section for ``target`` (a status Target), read as
    the admin; None when the inventory declares no policy (or is not at hand)."""
    if not variables or not target.secured or not target.ca_cert or not target.admin_password:
        return None
    try:
        policies = check_policies(variables.get(VARIABLE))
    except ClusterforgeError as error:
        return {"policies": [], "last_run": None, "error": str(error)}
    if not policies:
        return None
    client = Client(
        urls=[node.url for node in target.nodes],
        ca_file=str(target.ca_cert),
        username=str(target.admin_user),
        password=str(target.admin_password),
        timeout=TIMEOUT,
    )
    try:
        _state, series = fetch_state(client, policies, ism=ism_declared(variables))
    except ApiError as error:
        return {"policies": [], "last_run": None, "error": str(error)}
    return status_section(
        series, time.time() if now is None else now, prometheus_last_runs(monitoring)
    )


def _read_credentials(path: Path) -> tuple[str, str]:
    try:
        credentials = json.loads(path.read_text())
        return str(credentials["username"]), str(credentials["password"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise LifecycleConfigError(
            f"cannot read --credentials {path}: {error}; it must be a JSON file "
            '{"username": ..., "password": ...}'
        ) from error


def _connection(
    args: argparse.Namespace,
) -> tuple[list[str], str, str, str, dict[str, Any], dict[str, Any] | None]:
    """URLs, CA, username, password, the opensearch group's variables, lab monitoring."""
    from clusterforge.status.drift import lab_inventory_vars
    from clusterforge.status.target import load_inventory, load_lab_json

    monitoring = None
    if args.inventory is not None:
        target = load_inventory(args.inventory, args.vault_password_file)
        variables = dict(target.opensearch_vars or {})
    else:
        lab_json = args.lab_json or DEFAULT_LAB_JSON
        if not lab_json.exists():
            raise LifecycleConfigError(
                f"no --inventory given and {lab_json} does not exist; run scripts/up, or "
                "pass --lab-json PATH or --inventory PATH"
            )
        target = load_lab_json(lab_json)
        variables = lab_inventory_vars(lab_json.parent, None, {})
        monitoring = json.loads(lab_json.read_text()).get("monitoring")
    urls = list(args.url or [node.url for node in target.nodes])
    ca = str(args.ca or target.ca_cert or "")
    if not ca:
        raise LifecycleConfigError("no CA: pass --ca FILE (the cluster's CA certificate)")
    if args.credentials is not None:
        username, password = _read_credentials(args.credentials)
    elif target.admin_user and target.admin_password:
        username, password = target.admin_user, target.admin_password
    else:
        raise LifecycleConfigError("no credentials: pass --credentials FILE")
    return urls, ca, username, password, variables, monitoring


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/lifecycle", description=__doc__.split("\n", maxsplit=1)[0]
    )
    parser.add_argument(
        "--plan", action="store_true", required=True, help="print what the next run would do"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--lab-json", type=Path, help=f"a lab.json (default: {DEFAULT_LAB_JSON})")
    source.add_argument("--inventory", type=Path, help="an Ansible inventory file or directory")
    parser.add_argument("--vault-password-file", type=Path)
    parser.add_argument("--url", action="append", help="a node's https URL (repeatable)")
    parser.add_argument("--ca", type=Path, help="the cluster's CA certificate")
    parser.add_argument(
        "--credentials", type=Path, help='a JSON file {"username": ..., "password": ...}'
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    try:
        urls, ca, username, password, variables, _monitoring = _connection(args)
        policies = check_policies(variables.get(VARIABLE))
    except ClusterforgeError as error:
        print(f"scripts/lifecycle: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not policies:
        print(f"no lifecycle policy: {VARIABLE} is empty in the inventory")
        return EXIT_OK
    client = Client(urls=urls, ca_file=ca, username=username, password=password, timeout=TIMEOUT)
    now = time.time()
    try:
        cluster, series = fetch_state(client, policies, ism=ism_declared(variables))
    except ApiError as error:
        print(f"scripts/lifecycle: cannot read the cluster: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    decision = decide(cluster, series, now)
    if args.json:
        document = {
            "cluster": {"status": cluster.status, "shard_limit": cluster.shard_limit},
            "actions": [vars(action) for action in decision.actions],
            "notes": decision.notes,
        }
        print(json.dumps(document, indent=2))
    else:
        print(f"the next lifecycle run on a {cluster.status} cluster would:")
        print("\n".join(preview_lines(series, decision)))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
