"""Drills that make alerts fire (issue 42, item 5), on a running lab: a test tool.

    python -m clusterforge.testing.drills [--lab-json inventories/lab/lab.json] a b c d
    python -m clusterforge.testing.drills --lab-json FILE --serve-receiver 127.0.0.36:9099 \
        --receiver-token-file FILE --no-status --parallel a b

Each drill breaks something real, then waits until the lab's webhook receiver (the
``receiver_log`` of lab.json's ``monitoring``) has the alert as Alertmanager sent it,
firing; it repairs what it broke and, for (a) to (c), waits until the alert arrives
resolved. Everything goes through the real Prometheus and Alertmanager. Each drill
prints one line ``DRILL {"drill": ..., "alert": ..., "fired_after_s": ...,
"resolved_after_s": ...}`` (the times from the break and from the repair).

- ``a``: a node's engine stopped (``systemctl stop opensearch``; the unit restarts a killed
  one): OpenSearchNodesMissing, then started again.
- ``b``: the order service's cluster unreachable: its connections to the nodes' HTTP port
  are rejected (an iptables rule matching the service's user, removed after), an order
  is posted: OrderOutboxBacklog, resolved once the order is delivered.
- ``c``: monitoring_alert_cert_expiry_days (and opensearch_cert_renew_within_days, which
  must not be lower) raised above the lab's certificate validity through
  playbooks/monitoring.yml: CertificateExpiringSoon, resolved by the run that lowers it
  back.
- ``d``: a snapshot taken, then monitoring_alert_snapshot_max_age lowered to 1m:
  OpenSearchSnapshotTooOld fires (then the threshold is set back).

Outside the lab (the tls molecule scenario, molecule/tls/day2_alerts.yml) the file is
lab.json-shaped: ``containers`` maps node names to containers (else ``clusterforge-lab-<name>``),
``orders_container`` names the order service's (else the lab's apps container), and
``--serve-receiver`` runs the webhook receiver in this process for the drills' time,
writing to ``monitoring.receiver_log`` (the lab runs its own beside the lab instead).
``--no-status`` leaves out the scripts/status check of (a), which reads the lab's
inventory. ``--parallel`` runs the drills side by side, each timed on its own: (a) and
(b) break different things (a node's engine; the order service's connections), and (a)
is over long before (b) fires, so together they take as long as (b) alone.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.testing import resilience
from clusterforge.testing.alert_receiver import serve
from clusterforge.testing.faults import RULE_COMMENT

CONTAINER_PREFIX = "clusterforge-lab-"
APPS_CONTAINER = "clusterforge-lab-apps-1"
ORDERS_USER = "clusterforge-orders"
DEFAULT_TIMEOUT = 600.0


class DrillError(Exception):
    """A drill's alert did not arrive (or resolve) in time, or a step failed."""


@dataclass(frozen=True, kw_only=True)
class Lab:
    facts: dict[str, Any]
    repo: Path
    # Whether drill (a) runs scripts/status while its alert fires (the lab's inventory).
    status: bool = True

    def node_container(self, name: str) -> str:
        """The container of node ``name``: lab.json's ``containers`` says, else the lab's."""
        containers = self.facts.get("containers") or {}
        return str(containers.get(name) or f"{CONTAINER_PREFIX}{name}")

    @property
    def orders_container(self) -> str:
        return str(self.facts.get("orders_container") or APPS_CONTAINER)

    @property
    def monitoring(self) -> dict[str, Any]:
        monitoring = self.facts.get("monitoring")
        if not monitoring:
            raise DrillError("lab.json has no monitoring; run scripts/up without --no-monitoring")
        return dict(monitoring)

    @property
    def receiver_log(self) -> Path:
        return Path(self.monitoring["receiver_log"])

    def prometheus_query(self, query: str) -> list[dict[str, Any]]:
        url = (
            self.monitoring["prometheus"]
            + "/api/v1/query?"
            + urllib.parse.urlencode({"query": query})
        )
        body = _get_json(url, self.monitoring)
        return list(body["data"]["result"])


def _get_json(url: str, monitoring: dict[str, Any]) -> Any:
    context = ssl.create_default_context(cafile=monitoring["ca_cert"])
    password = Path(monitoring["password_file"]).read_text().strip()
    credentials = base64.b64encode(f"{monitoring['user']}:{password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {credentials}"})  # noqa: S310
    with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310
        return json.loads(response.read())


def _notifications(log: Path, offset: int) -> Iterator[tuple[float, dict[str, Any]]]:
    """(time received, alert) for every alert of every notification after ``offset``."""
    if not log.exists():
        return
    with log.open(encoding="utf-8") as handle:
        handle.seek(offset)
        for line in handle:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            received = _epoch(entry.get("received_at", ""))
            for alert in (entry.get("notification") or {}).get("alerts") or []:
                yield received, alert


def _epoch(iso: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return time.time()


def wait_for_alert(
    lab: Lab,
    alertname: str,
    status: str,
    *,
    offset: int,
    timeout: float = DEFAULT_TIMEOUT,
    matching: Callable[[dict[str, Any]], bool] = lambda _alert: True,
) -> float:
    """The time the receiver got ``alertname`` with ``status`` after ``offset``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for received, alert in _notifications(lab.receiver_log, offset):
            labels = alert.get("labels") or {}
            if (
                labels.get("alertname") == alertname
                and alert.get("status") == status
                and matching(alert)
            ):
                return received
        time.sleep(2)
    raise DrillError(f"{alertname} did not arrive {status} at the receiver within {timeout:.0f}s")


def _log_offset(lab: Lab) -> int:
    return lab.receiver_log.stat().st_size if lab.receiver_log.exists() else 0


def _run(command: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), check=True, text=True, capture_output=True, **kwargs)  # noqa: S603


def _report(
    drill: str,
    alert: str,
    broke: float,
    fired: float,
    repaired: float | None,
    resolved: float | None,
    **extra: Any,
) -> dict[str, Any]:
    line = {
        "drill": drill,
        "alert": alert,
        "fired_after_s": round(fired - broke, 1),
        "resolved_after_s": round(resolved - repaired, 1)
        if resolved is not None and repaired is not None
        else None,
        **extra,
    }
    print("DRILL " + json.dumps(line), flush=True)
    return line


# --- (a) a node's engine stopped ---------------------------------------------------------


def drill_node_stopped(lab: Lab, *, node: str | None = None) -> dict[str, Any]:
    name = node or lab.facts["nodes"][-1]["name"]
    container = lab.node_container(name)
    offset = _log_offset(lab)
    broke = time.time()
    _run(["docker", "exec", container, "systemctl", "stop", "opensearch"])
    try:
        fired = wait_for_alert(lab, "OpenSearchNodesMissing", "firing", offset=offset)
        status = _status_exit(lab)
    finally:
        repaired = time.time()
        _run(["docker", "exec", container, "systemctl", "start", "opensearch"])
    resolved = wait_for_alert(lab, "OpenSearchNodesMissing", "resolved", offset=offset)
    return _report(
        "a", "OpenSearchNodesMissing", broke, fired, repaired, resolved, node=name, **status
    )


def _status_exit(lab: Lab) -> dict[str, Any]:
    """scripts/status while the alert fires: its exit code and whether it names the alert."""
    script = lab.repo / "scripts" / "status"
    if not lab.status or not script.exists():
        return {}
    result = subprocess.run(  # noqa: S603
        [str(script)], cwd=lab.repo, text=True, capture_output=True, check=False, timeout=120
    )
    return {
        "status_exit": result.returncode,
        "status_names_alert": "OpenSearchNodesMissing" in result.stdout + result.stderr,
    }


# --- (b) the order service's cluster unreachable -----------------------------------------


@contextmanager
def _orders_cut_off(lab: Lab) -> Iterator[None]:
    """Reject the order service's connections to every node's HTTP port. The lab's
    containers share the host's network namespace, so the rule matches the service's
    user (its uid inside the apps container) and nothing else."""
    uid = _run(["docker", "exec", lab.orders_container, "id", "-u", ORDERS_USER]).stdout.strip()
    rule = [
        "OUTPUT",
        "-p",
        "tcp",
        "--dport",
        "9200",
        "-m",
        "owner",
        "--uid-owner",
        uid,
        # scripts/down removes what a killed drill left (clusterforge.testing.faults).
        "-m",
        "comment",
        "--comment",
        f"{RULE_COMMENT} outbox drill",
        "-j",
        "REJECT",
        "--reject-with",
        "tcp-reset",
    ]
    _run(["iptables", "-I", *rule])
    try:
        yield
    finally:
        _run(["iptables", "-D", *rule])


def _post_order(lab: Lab) -> None:
    base = lab.facts["services"]["orders"]
    token = Path(lab.facts["orders_token_file"]).read_text().strip()
    order = {"userId": "drill-user", "productName": "drill", "amount": 1}
    context = ssl.create_default_context(cafile=lab.facts["services_ca_cert"])
    request = urllib.request.Request(  # noqa: S310
        f"{base}/orders",
        data=json.dumps(order).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310
        if response.status >= 300:
            raise DrillError(f"POST /orders answered {response.status}")


def drill_outbox(lab: Lab) -> dict[str, Any]:
    offset = _log_offset(lab)
    with _orders_cut_off(lab):
        broke = time.time()
        _post_order(lab)
        fired = wait_for_alert(lab, "OrderOutboxBacklog", "firing", offset=offset)
        repaired = time.time()
    resolved = wait_for_alert(lab, "OrderOutboxBacklog", "resolved", offset=offset)
    return _report("b", "OrderOutboxBacklog", broke, fired, repaired, resolved)


# --- (c) and (d): thresholds changed through playbooks/monitoring.yml --------------------


def run_monitoring_playbook(lab: Lab, extra_vars: dict[str, Any]) -> float:
    """playbooks/monitoring.yml against the lab with ``extra_vars``; its seconds."""
    started = time.monotonic()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(extra_vars, handle)
    try:
        command = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(lab.repo / "inventories" / "lab"),
            str(lab.repo / "playbooks" / "monitoring.yml"),
        ]
        if extra_vars:
            command += ["-e", f"@{handle.name}"]
        result = subprocess.run(  # noqa: S603
            command,
            cwd=lab.repo,
            text=True,
            capture_output=True,
            check=False,
            env={**os.environ, "ANSIBLE_CONFIG": str(lab.repo / "ansible.cfg")},
        )
    finally:
        Path(handle.name).unlink(missing_ok=True)
    if result.returncode != 0:
        raise DrillError("playbooks/monitoring.yml failed:\n" + result.stdout[-4000:])
    return time.monotonic() - started


def drill_cert_expiry(lab: Lab) -> dict[str, Any]:
    offset = _log_offset(lab)
    broke = time.time()
    raised = {"monitoring_alert_cert_expiry_days": 3650, "opensearch_cert_renew_within_days": 3650}
    run_monitoring_playbook(lab, raised)
    fired = wait_for_alert(lab, "CertificateExpiringSoon", "firing", offset=offset)
    repaired = time.time()
    run_monitoring_playbook(lab, {})
    resolved = wait_for_alert(lab, "CertificateExpiringSoon", "resolved", offset=offset)
    return _report("c", "CertificateExpiringSoon", broke, fired, repaired, resolved)


def _take_snapshot(lab: Lab) -> None:
    node = lab.facts["nodes"][0]["url"]
    password = Path(lab.facts["admin_password_file"]).read_text().strip()
    credentials = base64.b64encode(f"{lab.facts['admin_user']}:{password}".encode()).decode()
    context = ssl.create_default_context(cafile=lab.facts["ca_cert"])
    name = f"drill-{int(time.time())}"
    request = urllib.request.Request(  # noqa: S310
        f"{node}/_snapshot/clusterforge-lab/{name}?wait_for_completion=true",
        data=json.dumps({"indices": "orders*", "include_global_state": False}).encode(),
        headers={"Authorization": f"Basic {credentials}", "Content-Type": "application/json"},
        method="PUT",
    )
    with urllib.request.urlopen(request, context=context, timeout=120) as response:  # noqa: S310
        if response.status >= 300:
            raise DrillError(f"the snapshot answered {response.status}")


def drill_snapshot(lab: Lab) -> dict[str, Any]:
    _take_snapshot(lab)
    offset = _log_offset(lab)
    broke = time.time()
    run_monitoring_playbook(lab, {"monitoring_alert_snapshot_max_age": "1m"})
    try:
        fired = wait_for_alert(lab, "OpenSearchSnapshotTooOld", "firing", offset=offset)
    finally:
        run_monitoring_playbook(lab, {})
    return _report("d", "OpenSearchSnapshotTooOld", broke, fired, None, None)


DRILLS: dict[str, Callable[[Lab], dict[str, Any]]] = {
    "a": drill_node_stopped,
    "b": drill_outbox,
    "c": drill_cert_expiry,
    "d": drill_snapshot,
}


def _run_drill(lab: Lab, name: str) -> bool:
    """One drill; False (and a DRILL-FAILED line) when it failed."""
    try:
        DRILLS[name](lab)
    except (DrillError, subprocess.CalledProcessError, OSError) as error:
        detail = error.stderr if isinstance(error, subprocess.CalledProcessError) else ""
        print(f"DRILL-FAILED {name}: {error} {detail or ''}".rstrip(), flush=True)
        return False
    return True


def run_drills(lab: Lab, names: Sequence[str], *, parallel: bool = False) -> int:
    """The drills named, one after the other or side by side; how many failed."""
    if not parallel:
        return sum(not _run_drill(lab, name) for name in names)
    outcomes: dict[str, bool] = {}
    threads = [
        threading.Thread(
            target=lambda name=name: outcomes.__setitem__(name, _run_drill(lab, name)),
            name=f"drill-{name}",
        )
        for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(not outcomes.get(name, False) for name in names)


@contextmanager
def serving_receiver(listen: str, *, log: Path, token_file: Path | None) -> Iterator[str]:
    """The webhook receiver (clusterforge.testing.alert_receiver) in this process, on
    ``listen`` (a loopback host:port; port 0 takes a free one), for the time of the
    block, which gets its base URL."""
    host, _separator, port = listen.rpartition(":")
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    log.touch(mode=0o600, exist_ok=True)
    server = serve(host, int(port), log_path=log, token_file=token_file)
    thread = threading.Thread(target=server.serve_forever, name="alert-receiver", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge.testing.drills", description=__doc__)
    parser.add_argument("--lab-json", type=Path, default=Path("inventories/lab/lab.json"))
    parser.add_argument("--repo", type=Path, default=Path.cwd())
    parser.add_argument(
        "--serve-receiver",
        metavar="HOST:PORT",
        help="run the webhook receiver here, on this loopback address, while the drills run",
    )
    parser.add_argument("--receiver-token-file", type=Path, help="its bearer token's file")
    parser.add_argument(
        "--no-status",
        action="store_true",
        help="leave out the scripts/status checks, which read the lab's inventory (drill "
        "(a)'s; with --faults, every drill's)",
    )
    parser.add_argument("--parallel", action="store_true", help="run the drills side by side")
    parser.add_argument(
        "--faults",
        metavar="all|NAME,...",
        help="run the resilience drills (clusterforge.testing.resilience, issue 50) instead: "
        "all, or some of " + ", ".join(resilience.FAULTS),
    )
    parser.add_argument(
        "--table", type=Path, help="with --faults: also write the Markdown table to this file"
    )
    parser.add_argument(
        "--inventory",
        type=Path,
        help="with --faults: the inventory the playbooks run against, for a cluster that is "
        "not the lab (the tls molecule scenario's); they then run with this process's "
        "environment (its ANSIBLE_CONFIG) instead of the checkout's ansible.cfg",
    )
    parser.add_argument(
        "--extra-vars",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="with --faults: an extra-vars file every playbook run reads (-e @FILE)",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=resilience.HOLD_SECONDS,
        metavar="SECONDS",
        help=f"with --faults: how long a partition holds (default {resilience.HOLD_SECONDS:.0f})",
    )
    # Checked below, not with choices=: Python 3.11's argparse checks an empty or default
    # list against the choices as one value, and refuses it. None named: all of them.
    parser.add_argument("drills", nargs="*", metavar="{" + ",".join(DRILLS) + "}")
    args = parser.parse_args(argv)
    if args.faults is not None:
        try:
            faults = resilience.parse_faults(args.faults)
        except ValueError as error:
            parser.error(str(error))
        if args.hold <= 0:
            parser.error(f"--hold takes a number of seconds above 0, not {args.hold:g}")
        drill_lab = resilience.DrillLab(
            facts=json.loads(args.lab_json.read_text()),
            repo=args.repo.resolve(),
            inventory=args.inventory.resolve() if args.inventory else None,
            extra_vars=tuple(path.resolve() for path in args.extra_vars),
            status=not args.no_status,
            hold_seconds=args.hold,
            log_dir=args.lab_json.resolve().parent,
        )
        if not args.serve_receiver:
            return 1 if resilience.run_faults(drill_lab, faults, args.table) else 0
        log = drill_lab.receiver_log
        if log is None:
            parser.error("--serve-receiver needs monitoring.receiver_log in the --lab-json file")
        with serving_receiver(args.serve_receiver, log=log, token_file=args.receiver_token_file):
            return 1 if resilience.run_faults(drill_lab, faults, args.table) else 0
    lab = Lab(
        facts=json.loads(args.lab_json.read_text()),
        repo=args.repo.resolve(),
        status=not args.no_status,
    )
    unknown = [name for name in args.drills if name not in DRILLS]
    if unknown:
        parser.error(f"unknown drill(s) {', '.join(unknown)}; choose from {', '.join(DRILLS)}")
    names = list(dict.fromkeys(args.drills or DRILLS))
    # Drill (b) cuts the order service off with an iptables rule: a SIGTERM or SIGHUP
    # (molecule stopped, a CI run cancelled) ends the run through its finally, and every
    # rule the drills tag is removed on the way out, as the resilience drills do. Left,
    # the rule cut every later order service on this host off from its cluster.
    with resilience.rules_removed_on_exit():
        if not args.serve_receiver:
            return 1 if run_drills(lab, names, parallel=args.parallel) else 0
        try:
            receiving = serving_receiver(
                args.serve_receiver, log=lab.receiver_log, token_file=args.receiver_token_file
            )
            with receiving:
                failed = run_drills(lab, names, parallel=args.parallel)
        except (ValueError, OSError) as error:
            print(f"DRILL-FAILED receiver: {error}", flush=True)
            return 1
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
