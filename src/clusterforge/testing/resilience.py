"""Resilience drills (issue 50): faults production chooses, each under a continuous
writer and reader, measured. A test tool, run on the lab:

    scripts/drill --faults all
    python -m clusterforge.testing.drills --faults partition-manager,full-disk

Each drill starts a writer (acknowledged index requests with ids, plain opensearch-py)
and a reader (GETs of acknowledged ids) on ``drill-writes``, injects its fault
(clusterforge.testing.faults), heals it, and measures: failed requests, acknowledged
writes lost (every acknowledged id read back), copies that differ (each shard's primary
and replica: the same count and the same highest id), seconds to a new cluster manager
and to green, and the alerts that fired and resolved at the lab's receiver, with their
times. Every step prints a progress line and is bounded in time. The table goes to
stdout at the end (and, with ``--table FILE``, to a Markdown file).

What the product must do is checked, not only measured; a drill that finds the engine
losing writes or staying red reports it (``finding``) and fails, it is never skipped.
"""

from __future__ import annotations

import json
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import OpenSearchException, TransportError

from clusterforge.testing import faults
from clusterforge.testing.faults import LabNodeTarget

# One name for the rolling restart playbook: another branch renames the dashed playbooks
# to underscores (the old names stay as import shims); the merge changes only this line.
ROLLING_RESTART_PLAYBOOK = "playbooks/rolling_restart.yml"
SITE_PLAYBOOK = "playbooks/site.yml"
WRITES_INDEX = "drill-writes"
STEP_TIMEOUT = 600.0
HOLD_SECONDS = 60.0
CRASH_DOWN_SECONDS = 45.0
FAULTS = (
    "partition-manager",
    "partition-primary",
    "freeze-manager",
    "crash-all",
    "full-disk",
    "kill-rolling-restart",
    # Last: it leaves the lab one node smaller.
    "kill-scale-in",
)
# The alerts each drill must see fire and resolve at the lab's receiver.
EXPECTED_ALERTS: dict[str, tuple[str, ...]] = {
    "partition-manager": ("OpenSearchNodesMissing",),
    "partition-primary": ("OpenSearchNodesMissing",),
    # A 60 s freeze: the cluster needs about as long to elect a new manager, so the node
    # is not missing for the 30 s NodesMissing needs; the monitoring sees the freeze as
    # its exporter's scrapes timing out and its TLS ports not answering (measured).
    "freeze-manager": ("TargetDown", "TLSEndpointProbeFailed"),
    "crash-all": ("OpenSearchHealthUnreadable",),
    "full-disk": ("OpenSearchIndicesReadOnly", "OrderOutboxBacklog"),
    "kill-rolling-restart": (),
    "kill-scale-in": (),
}


class DrillStepError(Exception):
    """A step of a drill did not finish in its time, or a product requirement failed."""


def progress(drill: str, message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {drill}: {message}", flush=True)


def wait_until(what: str, check: Callable[[], Any], *, timeout: float, every: float = 1.0) -> Any:
    """``check()``'s first truthy answer within ``timeout`` s; errors count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        with suppress(OpenSearchException, OSError, ValueError, KeyError, DrillStepError):
            answer = check()
            if answer:
                return answer
        if time.monotonic() >= deadline:
            raise DrillStepError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


# --- the lab -----------------------------------------------------------------------------


@dataclass
class DrillLab:
    facts: dict[str, Any]
    repo: Path
    # Where the playbooks run against: the lab's inventory (with the checkout's
    # ansible.cfg), or another cluster's, such as the tls molecule scenario's (run with
    # the environment it was started with, which names its ansible.cfg).
    inventory: Path | None = None
    # Extra-vars files every playbook run reads (-e @FILE): what the cluster was converged
    # with beside its inventory.
    extra_vars: tuple[Path, ...] = ()
    # Whether the drills check scripts/status, which reads the lab's inventory.
    status: bool = True
    # How long a partition holds.
    hold_seconds: float = HOLD_SECONDS
    # Where the killed and rerun playbooks' output goes (drill-playbook.log).
    log_dir: Path | None = None

    @property
    def lab_inventory(self) -> Path:
        return self.repo / "inventories" / "lab"

    @property
    def playbook_log(self) -> Path:
        return (self.log_dir or self.lab_inventory) / "drill-playbook.log"

    def playbook_command(self, playbook: str) -> tuple[list[str], dict[str, str]]:
        """ansible-playbook's argv for ``playbook`` against this cluster, and its environment."""
        argv = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(self.inventory or self.lab_inventory),
        ]
        for extra in self.extra_vars:
            argv += ["-e", f"@{extra}"]
        env = dict(os.environ)
        if self.inventory is None:
            env["ANSIBLE_CONFIG"] = str(self.repo / "ansible.cfg")
        return [*argv, str(self.repo / playbook)], env

    @property
    def containers(self) -> list[str]:
        """Every container of the cluster: the nodes', and the services' (apps) one."""
        apps = str(self.facts.get("orders_container") or "clusterforge-lab-apps-1")
        return list(dict.fromkeys([*(node.container for node in self.nodes), apps]))

    @property
    def nodes(self) -> list[LabNodeTarget]:
        containers = self.facts.get("containers") or {}
        return [
            LabNodeTarget(
                name=node["name"],
                address=node["address"],
                container=str(containers.get(node["name"]) or f"clusterforge-lab-{node['name']}"),
            )
            for node in self.facts["nodes"]
        ]

    def node(self, name: str) -> LabNodeTarget:
        for node in self.nodes:
            if node.name == name:
                return node
        raise DrillStepError(f"node {name} is not in lab.json")

    def url(self, name: str) -> str:
        return next(str(node["url"]) for node in self.facts["nodes"] if node["name"] == name)

    def client(self, urls: Sequence[str] | None = None, *, timeout: float = 10) -> OpenSearch:
        password = Path(self.facts["admin_password_file"]).read_text().strip()
        return OpenSearch(
            hosts=list(urls or [node["url"] for node in self.facts["nodes"]]),
            http_auth=(self.facts["admin_user"], password),
            use_ssl=True,
            verify_certs=True,
            ca_certs=self.facts["ca_cert"],
            timeout=timeout,
            max_retries=2,
            retry_on_timeout=True,
        )

    def one_node_client(self, name: str, timeout: float = 5) -> OpenSearch:
        return self.client([self.url(name)], timeout=timeout)

    def manager(self, via: Sequence[str] | None = None) -> str:
        """The elected cluster manager's name, as the first of ``via`` that answers sees it."""
        for name in via or [node.name for node in self.nodes]:
            with suppress(OpenSearchException, OSError):
                rows = self.one_node_client(name).cat.cluster_manager(format="json")
                if rows:
                    return str(rows[0]["node"])
        raise DrillStepError("no node names an elected cluster manager")

    def health(self, **params: Any) -> dict[str, Any]:
        return dict(self.client(timeout=30).cluster.health(**params))

    def wait_green(self, timeout: float = STEP_TIMEOUT) -> float:
        started = time.monotonic()
        wait_until(
            "the cluster to be green",
            lambda: self.health().get("status") == "green",
            timeout=timeout,
            every=2,
        )
        return time.monotonic() - started

    @property
    def receiver_log(self) -> Path | None:
        monitoring = self.facts.get("monitoring") or {}
        return Path(monitoring["receiver_log"]) if monitoring.get("receiver_log") else None


# --- the writer and the reader -----------------------------------------------------------


@dataclass
class Workload:
    """A writer and a reader on ``drill-writes`` until :meth:`stop`."""

    lab: DrillLab
    acknowledged: list[int] = field(default_factory=list)
    write_failures: int = 0
    read_failures: int = 0
    reads: int = 0
    failure_kinds: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _next_id: int = 0

    def start(self) -> None:
        client = self.lab.client(timeout=10)
        if not client.indices.exists(index=WRITES_INDEX):
            client.indices.create(
                index=WRITES_INDEX,
                body={
                    "settings": {"number_of_shards": 3, "number_of_replicas": 1},
                    "mappings": {"properties": {"seq": {"type": "long"}}},
                },
            )
        self.lab.wait_green()
        highest = client.search(
            index=WRITES_INDEX, body={"size": 0, "aggs": {"top": {"max": {"field": "seq"}}}}
        )["aggregations"]["top"]["value"]
        self._next_id = int(highest or 0) + 1
        for target in (self._write, self._read):
            thread = threading.Thread(target=target, name=target.__name__, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _note(self, error: Exception) -> None:
        kind = type(error).__name__
        if isinstance(error, TransportError):
            kind = f"{kind} {error.status_code}"
        self.failure_kinds[kind] = self.failure_kinds.get(kind, 0) + 1

    def _write(self) -> None:
        client = self.lab.client(timeout=10)
        while not self._stop.is_set():
            seq = self._next_id
            self._next_id += 1
            try:
                answer = client.index(
                    index=WRITES_INDEX, id=str(seq), body={"seq": seq, "at": time.time()}
                )
            except (OpenSearchException, OSError) as error:
                self.write_failures += 1
                self._note(error)
                time.sleep(0.5)
                continue
            if answer.get("result") in ("created", "updated"):
                self.acknowledged.append(seq)
            time.sleep(0.05)

    def _read(self) -> None:
        client = self.lab.client(timeout=10)
        while not self._stop.is_set():
            if self.acknowledged:
                seq = random.choice(self.acknowledged)  # noqa: S311 - not a secret
                self.reads += 1
                try:
                    client.get(index=WRITES_INDEX, id=str(seq))
                except (OpenSearchException, OSError) as error:
                    self.read_failures += 1
                    self._note(error)
                    time.sleep(0.5)
            time.sleep(0.1)


def lost_writes(lab: DrillLab, acknowledged: Sequence[int]) -> list[int]:
    """The acknowledged ids that are not there (real-time GETs, in batches)."""
    client = lab.client(timeout=60)
    client.indices.refresh(index=WRITES_INDEX)
    missing = []
    for start in range(0, len(acknowledged), 500):
        batch = [str(seq) for seq in acknowledged[start : start + 500]]
        answer = client.mget(index=WRITES_INDEX, body={"ids": batch})
        missing += [int(doc["_id"]) for doc in answer["docs"] if not doc.get("found")]
    return missing


def differing_copies(lab: DrillLab) -> list[dict[str, Any]]:
    """Each shard whose copies do not hold the same count and the same highest id."""
    client = lab.client(timeout=60)
    client.indices.refresh(index=WRITES_INDEX)
    rows = client.cat.shards(index=WRITES_INDEX, format="json", h="shard,prirep,node,state")
    by_shard: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("state") != "STARTED":
            continue
        answer = client.search(
            index=WRITES_INDEX,
            preference=f"_shards:{row['shard']}|_only_nodes:{row['node']}",
            body={"size": 0, "track_total_hits": True, "aggs": {"top": {"max": {"field": "seq"}}}},
        )
        by_shard.setdefault(row["shard"], []).append(
            {
                "node": row["node"],
                "copy": row["prirep"],
                "count": answer["hits"]["total"]["value"],
                "highest": answer["aggregations"]["top"]["value"],
            }
        )
    return [
        {"shard": shard, "copies": copies}
        for shard, copies in sorted(by_shard.items())
        if len({(copy["count"], copy["highest"]) for copy in copies}) > 1
    ]


# --- the alerts --------------------------------------------------------------------------


def receiver_offset(lab: DrillLab) -> int:
    log = lab.receiver_log
    return log.stat().st_size if log and log.exists() else 0


def received_alerts(lab: DrillLab, offset: int) -> list[tuple[float, str, str]]:
    """(time received, alert name, firing|resolved) after ``offset``, in order."""
    log = lab.receiver_log
    if not log or not log.exists():
        return []
    from datetime import datetime

    seen = []
    with log.open(encoding="utf-8") as handle:
        handle.seek(offset)
        for line in handle:
            try:
                entry = json.loads(line)
                received = datetime.fromisoformat(entry["received_at"]).timestamp()
            except (ValueError, KeyError):
                continue
            for alert in (entry.get("notification") or {}).get("alerts") or []:
                name = (alert.get("labels") or {}).get("alertname", "?")
                seen.append((received, name, str(alert.get("status"))))
    return seen


def alerts_settled(lab: DrillLab, offset: int, expected: Sequence[str]) -> Callable[[], bool]:
    """True once every expected alert arrived firing and then resolved after ``offset``.
    Other alerts are reported, not waited for: one the lab raises for its own reasons
    (no snapshot within the lab's 10 minutes, say) must not hold every drill."""

    def settled() -> bool:
        states: dict[str, list[str]] = {}
        for _received, name, status in received_alerts(lab, offset):
            states.setdefault(name, []).append(status)
        return all(
            "firing" in states.get(name, []) and states[name][-1] == "resolved" for name in expected
        )

    return settled


def alert_summary(lab: DrillLab, offset: int, started: float) -> list[str]:
    """``Name fired +Ns, resolved +Ms`` per alert, times from the fault."""
    summary: dict[str, dict[str, float]] = {}
    for received, name, status in received_alerts(lab, offset):
        times = summary.setdefault(name, {})
        # A resolution counts after the alert fired (an earlier one closes an older firing).
        if status == "firing" or "firing" in times:
            times.setdefault(status, received - started)
    return [
        f"{name} fired +{times['firing']:.0f}s"
        + (f", resolved +{times['resolved']:.0f}s" if "resolved" in times else ", not resolved")
        for name, times in summary.items()
        if "firing" in times
    ]


# --- one drill ---------------------------------------------------------------------------


@dataclass
class DrillResult:
    fault: str
    target: str = ""
    acknowledged: int = 0
    write_failures: int = 0
    read_failures: int = 0
    lost: int = -1
    copies_differ: int = -1
    new_manager_s: float | None = None
    green_s: float | None = None
    alerts: list[str] = field(default_factory=list)
    alerts_ok: bool = False
    checks: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (
            self.error is None
            and self.lost == 0
            and self.copies_differ == 0
            and self.alerts_ok
            and all(self.checks.values())
        )


@dataclass
class DrillContext:
    lab: DrillLab
    result: DrillResult
    started: float = 0.0
    healed: float = 0.0
    offset: int = 0

    def step(self, message: str) -> None:
        progress(self.result.fault, message)


def run_one(lab: DrillLab, fault: str, inject: Callable[[DrillContext], None]) -> DrillResult:
    result = DrillResult(fault=fault)
    context = DrillContext(lab=lab, result=result)
    begun = time.monotonic()
    progress(fault, "waiting for green before the fault")
    try:
        lab.wait_green(timeout=STEP_TIMEOUT)
    except DrillStepError as error:
        result.error = f"not green before the fault: {error}"
        return result
    offset = receiver_offset(lab)
    context.offset = offset
    workload = Workload(lab)
    workload.start()
    progress(fault, "writer and reader running")
    time.sleep(5)
    context.started = time.time()
    try:
        inject(context)
        progress(fault, "healed; waiting for green")
        context.healed = context.healed or time.time()
        lab.wait_green()
        result.green_s = round(time.time() - context.healed, 1)
        time.sleep(5)
    except (DrillStepError, faults.FaultError, OpenSearchException, OSError) as error:
        result.error = str(error)
        progress(fault, f"FAILED: {error}")
    finally:
        workload.stop()
        # Whatever happened, no rule stays behind.
        faults.remove_rules()
    result.acknowledged = len(workload.acknowledged)
    result.write_failures = workload.write_failures
    result.read_failures = workload.read_failures
    if workload.failure_kinds:
        result.notes.append(f"failures: {workload.failure_kinds}")
    try:
        progress(fault, f"reading back {len(workload.acknowledged)} acknowledged writes")
        lab.wait_green(timeout=STEP_TIMEOUT)
        missing = lost_writes(lab, workload.acknowledged)
        result.lost = len(missing)
        if missing:
            result.notes.append(f"finding: lost acknowledged ids {missing[:20]}")
        differing = differing_copies(lab)
        result.copies_differ = len(differing)
        if differing:
            result.notes.append(f"finding: copies differ {json.dumps(differing)[:400]}")
        expected = EXPECTED_ALERTS[fault]
        progress(fault, f"waiting for the alerts to fire and resolve ({', '.join(expected)})")
        try:
            wait_until(
                "the alerts to fire and resolve",
                alerts_settled(lab, offset, expected),
                timeout=300,
                every=5,
            )
            result.alerts_ok = True
        except DrillStepError as error:
            result.notes.append(str(error))
        result.alerts = alert_summary(lab, offset, context.started)
    except (DrillStepError, OpenSearchException, OSError) as error:
        result.error = result.error or f"verification: {error}"
    result.seconds = round(time.monotonic() - begun, 1)
    progress(fault, ("PASSED" if result.passed else "FAILED") + f" in {result.seconds:.0f}s")
    return result


def _watch_new_manager(context: DrillContext, old: str, via: Sequence[str]) -> None:
    """Seconds from the fault until ``via`` (the majority) names a manager other than ``old``."""
    lab = context.lab

    def other_manager() -> str | None:
        with suppress(DrillStepError):
            name = lab.manager(via)
            return name if name != old else None
        return None

    manager = wait_until("a new cluster manager", other_manager, timeout=180, every=0.5)
    context.result.new_manager_s = round(time.time() - context.started, 1)
    context.step(f"{manager} elected after {context.result.new_manager_s}s")


# --- the faults --------------------------------------------------------------------------


def _partition(context: DrillContext, victim: str) -> None:
    lab = context.lab
    isolated = lab.node(victim)
    others = [node for node in lab.nodes if node.name != victim]
    old_manager = lab.manager()
    context.result.target = victim
    context.step(f"partitioning {victim} from {', '.join(n.name for n in others)}")
    with faults.partitioned(isolated, others):
        context.step(f"{faults.count_rules()} rules in place")
        if victim == old_manager:
            _watch_new_manager(context, old_manager, [node.name for node in others])
        wait_until(
            f"the majority to drop {victim}",
            lambda: (
                victim
                not in {
                    row["name"]
                    for row in lab.client([lab.url(others[0].name)]).cat.nodes(format="json")
                }
            ),
            timeout=180,
        )
        context.step(f"holding the partition {lab.hold_seconds:.0f}s")
        time.sleep(lab.hold_seconds)
    context.healed = time.time()
    left = faults.count_rules()
    context.result.checks["no rule left"] = left == 0
    wait_until(
        f"{victim} to rejoin",
        lambda: len(lab.client().cat.nodes(format="json")) == len(lab.nodes),
        timeout=STEP_TIMEOUT,
        every=2,
    )
    context.step(f"{victim} rejoined")


def _members(lab: DrillLab, via: str) -> set[str]:
    return {row["name"] for row in lab.one_node_client(via).cat.nodes(format="json")}


def drill_partition_manager(context: DrillContext) -> None:
    _partition(context, context.lab.manager())


def drill_partition_primary(context: DrillContext) -> None:
    lab = context.lab
    manager = lab.manager()
    rows = lab.client().cat.shards(index=WRITES_INDEX, format="json", h="prirep,node")
    holders = sorted({row["node"] for row in rows if row["prirep"] == "p"} - {manager})
    if not holders:
        raise DrillStepError("no node but the manager holds a primary of drill-writes")
    _partition(context, holders[0])


def drill_freeze_manager(context: DrillContext) -> None:
    lab = context.lab
    victim = lab.manager()
    others = [node.name for node in lab.nodes if node.name != victim]
    context.result.target = victim
    context.step(f"SIGSTOP of {victim}'s JVM for {HOLD_SECONDS:.0f}s")
    with faults.frozen(lab.node(victim).container):
        _watch_new_manager(context, victim, others)
        remaining = HOLD_SECONDS - (time.time() - context.started)
        time.sleep(max(remaining, 0))
    context.healed = time.time()
    context.step("SIGCONT sent")
    wait_until(
        f"{victim} to rejoin",
        lambda: len(lab.client().cat.nodes(format="json")) == len(lab.nodes),
        timeout=STEP_TIMEOUT,
        every=2,
    )


def drill_crash_all(context: DrillContext) -> None:
    lab = context.lab
    containers = [node.container for node in lab.nodes]
    context.result.target = "every node"
    context.step("SIGKILL of every engine")
    faults.crash_all(containers)
    # The unit restarts a failed engine after 10 s; a power cut keeps the machines down
    # longer. Cancel the restarts (the engines are dead already: nothing is stopped
    # cleanly) and hold, long enough for the monitoring's 30 s health alert.
    faults.cancel_restarts(containers)
    time.sleep(CRASH_DOWN_SECONDS)
    context.step("starting every engine")
    faults.start_all(containers)
    context.healed = time.time()
    manager = wait_until("a cluster manager", lab.manager, timeout=STEP_TIMEOUT, every=2)
    context.result.new_manager_s = round(time.time() - context.started, 1)
    context.step(f"{manager} elected; all {len(containers)} nodes started")


def _settings(lab: DrillLab, transient: dict[str, Any]) -> None:
    lab.client(timeout=30).cluster.put_settings(body={"transient": transient})


def _post_order(lab: DrillLab) -> tuple[int, str | None]:
    base = lab.facts["services"]["orders"]
    token = Path(lab.facts["orders_token_file"]).read_text().strip()
    body = {"userId": "drill-user", "productName": "full-disk drill", "amount": 1}
    ssl_context = ssl.create_default_context(cafile=lab.facts["services_ca_cert"])
    request = urllib.request.Request(  # noqa: S310
        f"{base}/orders",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=ssl_context, timeout=15) as response:  # noqa: S310
            return response.status, json.loads(response.read()).get("orderId")
    except urllib.error.HTTPError as error:
        return error.code, None


def _status_output(lab: DrillLab) -> str:
    script = lab.repo / "scripts" / "status"
    done = subprocess.run(  # noqa: S603
        [str(script)], cwd=lab.repo, text=True, capture_output=True, check=False, timeout=180
    )
    return done.stdout + done.stderr


def _blocked(lab: DrillLab) -> bool:
    """Whether the flood stage's write block is on ``drill-writes``."""
    answer = lab.client(timeout=30).indices.get_settings(index=WRITES_INDEX, flat_settings=True)
    settings = answer.get(WRITES_INDEX, {}).get("settings", {})
    return str(settings.get("index.blocks.read_only_allow_delete")).lower() == "true"


def drill_full_disk(context: DrillContext) -> None:
    lab = context.lab
    client = lab.client(timeout=30)
    stats = client.nodes.stats(metric="fs")
    free = min(int(node["fs"]["total"]["available_in_bytes"]) for node in stats["nodes"].values())
    settings = faults.full_disk_settings(free)
    context.result.target = f"every node (watermarks above {free // 2**20} MB free)"
    context.step(f"watermarks set above the free space: {settings}")
    orders: list[str] = []
    codes: list[int] = []
    try:
        _settings(lab, settings)
        wait_until(
            "the flood-stage block on drill-writes",
            lambda: _blocked(lab),
            timeout=180,
            every=2,
        )
        context.step("writes blocked; posting orders")
        for _attempt in range(5):
            code, order_id = _post_order(lab)
            codes.append(code)
            if order_id:
                orders.append(order_id)
            time.sleep(1)
        context.result.checks["orders answered 200 while blocked"] = codes == [200] * 5
        context.step(f"orders answered {codes}")
        if lab.status:
            named = "flood_stage" in _status_output(lab)
            context.result.checks["scripts/status names the flood stage"] = named
            context.step(f"scripts/status names the flood stage: {named}")
        # The outbox alert needs its minute of age; the read-only alert its for.
        wait_until(
            "the disk and outbox alerts to fire",
            lambda: (
                set(EXPECTED_ALERTS["full-disk"])
                <= {
                    name
                    for _received, name, status in received_alerts(lab, context.offset)
                    if status == "firing"
                }
            ),
            timeout=300,
            every=5,
        )
    finally:
        _settings(lab, faults.reset_disk_settings())
        context.healed = time.time()
        context.step("watermarks reset")
    wait_until(
        "the block to lift",
        lambda: not _blocked(lab),
        timeout=180,
        every=2,
    )
    context.step("block lifted; waiting for the outbox to deliver the orders")

    def delivered() -> bool:
        client.indices.refresh(index="orders")
        answer = client.mget(index="orders", body={"ids": orders})
        return all(doc.get("found") for doc in answer["docs"])

    try:
        wait_until("the orders in the index", delivered, timeout=300, every=5)
        context.result.checks["orders delivered after the block"] = bool(orders)
    except DrillStepError as error:
        context.result.checks["orders delivered after the block"] = False
        context.result.notes.append(str(error))


# --- the toolkit killed ------------------------------------------------------------------


def _playbook(lab: DrillLab, playbook: str) -> subprocess.Popen[str]:
    log = open(lab.playbook_log, "a")  # noqa: SIM115
    argv, env = lab.playbook_command(playbook)
    return subprocess.Popen(  # noqa: S603
        argv,
        cwd=lab.repo,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


@dataclass(frozen=True)
class RunningProcess:
    """One process as /proc/<pid>/stat tells it."""

    pid: int
    parent: int
    session: int
    started: str  # clock ticks after boot: with the pid, names the process for good
    state: str
    name: str


def processes() -> dict[int, RunningProcess]:
    """Every process of the host now (the containers' too: they share its kernel)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            table[int(entry.name)] = RunningProcess(
                pid=int(entry.name),
                parent=int(fields[1]),
                session=int(fields[3]),
                started=fields[19],
                state=fields[0],
                name=name,
            )
    return table


def process_tree(root: int, table: dict[int, RunningProcess]) -> list[RunningProcess]:
    """``root`` and every process under it by parent pid, whatever its session."""
    children: dict[int, list[int]] = {}
    for process in table.values():
        children.setdefault(process.parent, []).append(process.pid)
    tree: dict[int, RunningProcess] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in tree or pid not in table:
            continue
        tree[pid] = table[pid]
        todo.extend(children.get(pid, []))
    return list(tree.values())


def kill_tree(root: int) -> list[RunningProcess]:
    """SIGKILL ``root`` and everything it started: the controller dying at once.

    By the process tree, not the process group: ansible's workers call setsid, and so do
    the ssh clients mitogen's multiplexer starts, so a group kill missed them (issue 50,
    finding 2: the multiplexer outlived the playbook's group). The tree is stopped first
    (SIGSTOP, again until it no longer grows: a stopped process forks nothing more, and a
    child is not reparented away before it is seen), then every process gets SIGKILL.
    Returns the processes killed."""
    stopped: dict[int, RunningProcess] = {}
    first = processes().get(root)
    for _round in range(100):
        fresh = [p for p in process_tree(root, processes()) if p.pid not in stopped]
        if not fresh:
            break
        for process in fresh:
            with suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGSTOP)
            stopped[process.pid] = process
    if first is not None:
        # ssh's control masters (ansible.cfg: ControlMaster=auto, ControlPersist) detach
        # from the ssh that started them: no longer in the tree, they are the run's still.
        for master in detached_ssh_masters(since=int(first.started)):
            with suppress(ProcessLookupError):
                os.kill(master.pid, signal.SIGSTOP)
            stopped[master.pid] = master
    for process in stopped.values():
        with suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    return list(stopped.values())


def detached_ssh_masters(*, since: int) -> list[RunningProcess]:
    """ssh control masters (``ssh: <control path> [mux]``) started at or after ``since``
    (clock ticks after boot): one lab run at a time, so those are the run's."""
    found = []
    for process in processes().values():
        if process.name != "ssh" or int(process.started) < since:
            continue
        with suppress(OSError):
            command = (Path("/proc") / str(process.pid) / "cmdline").read_bytes()
            if b"[mux]" in command:
                found.append(process)
    return found


def still_running(killed: Sequence[RunningProcess]) -> list[RunningProcess]:
    """Those of ``killed`` that run still (the same pid and start; zombies do not run)."""
    table = processes()
    return [
        process
        for process in killed
        if (now := table.get(process.pid)) is not None
        and now.started == process.started
        and now.state != "Z"
    ]


def describe_processes(killed: Sequence[RunningProcess]) -> str:
    """``N processes in M sessions (ansible-playbook x5, ssh x3)``."""
    names: dict[str, int] = {}
    for process in killed:
        names[process.name] = names.get(process.name, 0) + 1
    listed = ", ".join(f"{name} x{count}" for name, count in sorted(names.items()))
    sessions = len({process.session for process in killed})
    return f"{len(killed)} processes in {sessions} sessions ({listed})"


# What mitogen names the interpreter it starts on a host (python3(mitogen:root@host:pid)).
MITOGEN_CONTEXT = b"(mitogen:"


def remote_contexts(containers: Sequence[str]) -> list[RunningProcess]:
    """The mitogen interpreters running in ``containers``, found by their cgroup (the
    container's id) and their name."""
    inspected = subprocess.run(  # noqa: S603
        ["docker", "inspect", "-f", "{{.Id}}", *containers],  # noqa: S607
        text=True,
        capture_output=True,
        check=False,
        timeout=60,
    )
    ids = inspected.stdout.split()  # a container that is gone prints nothing
    if not ids:
        return []
    found = []
    for process in processes().values():
        with suppress(OSError):
            argv0 = (Path("/proc") / str(process.pid) / "cmdline").read_bytes().split(b"\0")[0]
            if MITOGEN_CONTEXT not in argv0:
                continue
            cgroup = (Path("/proc") / str(process.pid) / "cgroup").read_text()
            if any(container_id in cgroup for container_id in ids):
                found.append(process)
    return found


@dataclass
class KilledRun:
    """What a drill's kill of a playbook reached, and what of it ran on in the lab."""

    killed: list[RunningProcess]
    remote: list[RunningProcess]


def kill_run(context: DrillContext, process: subprocess.Popen[Any]) -> KilledRun:
    """The playbook (or scripts/up) and everything it started SIGKILLed, the kill checked:
    none of those processes runs on (within 30 s). The mitogen interpreters it had
    started in the lab's containers are noted: they end by themselves once their ssh
    session is gone, as on a real controller's death; :func:`remote_ended` checks that."""
    killed = kill_tree(process.pid)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)
    try:
        wait_until(
            "every process of the killed run to end",
            lambda: not still_running(killed),
            timeout=30,
            every=0.5,
        )
        left: list[RunningProcess] = []
    except DrillStepError:
        left = still_running(killed)
    context.result.checks["the kill reached every process of the run"] = not left
    remote = remote_contexts(context.lab.containers)
    context.step(
        f"killed {describe_processes(killed)}; left running: "
        f"{describe_processes(left) if left else 'none'}; "
        f"its mitogen interpreters in the lab's containers: {len(remote)}"
    )
    return KilledRun(killed=killed, remote=remote)


def remote_ended(context: DrillContext, run: KilledRun) -> None:
    """The killed run's mitogen interpreters in the containers have ended (checked after
    the rerun, so that the rerun starts as soon as an operator's would)."""
    try:
        wait_until(
            "the killed run's mitogen interpreters in the lab to end",
            lambda: not still_running(run.remote),
            timeout=60,
        )
        left: list[RunningProcess] = []
    except DrillStepError:
        left = still_running(run.remote)
    context.result.checks["nothing of the killed run left running in the lab"] = not left
    context.step(
        f"the killed run's {len(run.remote)} mitogen interpreters in the lab: "
        + (f"{len(left)} still running {[p.pid for p in left]}" if left else "all ended")
    )


def _persistent(lab: DrillLab) -> dict[str, Any]:
    answer = lab.client(timeout=30).cluster.get_settings(flat_settings=True)
    return dict(answer.get("persistent") or {})


def _run_to_end(context: DrillContext, command: Callable[[], subprocess.Popen[str]]) -> None:
    log = context.lab.playbook_log
    offset = log.stat().st_size if log.exists() else 0
    started = time.monotonic()
    process = command()
    try:
        code = process.wait(timeout=1800)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        raise DrillStepError("the rerun did not finish within 1800s") from None
    context.result.checks["the rerun succeeded"] = code == 0
    context.step(f"rerun ended with {code} after {time.monotonic() - started:.0f}s")
    # What the rerun found half-done: a rolling turn that had to wait for its node says so.
    with suppress(OSError), log.open(encoding="utf-8", errors="replace") as handle:
        handle.seek(offset)
        for line in handle:
            if "before its turn, waiting" in line:
                note = "rerun: " + line.strip()[:300]
                context.result.notes.append(note)
                context.step(note)


def drill_kill_rolling_restart(context: DrillContext) -> None:
    lab = context.lab
    context.result.target = ROLLING_RESTART_PLAYBOOK
    context.step(f"running {ROLLING_RESTART_PLAYBOOK}")
    process = _playbook(lab, ROLLING_RESTART_PLAYBOOK)
    total = len(lab.nodes)

    def node_down_with_allocation_held() -> bool:
        held = _persistent(lab).get("cluster.routing.allocation.enable") == "primaries"
        present = len(lab.client(timeout=5).cat.nodes(format="json"))
        return held and present < total

    try:
        wait_until("a node down with allocation held", node_down_with_allocation_held, timeout=900)
    finally:
        context.step("SIGKILL of ansible-playbook and everything it started")
        killed = kill_run(context, process)
    if lab.status:
        status = _status_output(lab)
        named = "cluster.routing.allocation.enable" in status and ROLLING_RESTART_PLAYBOOK in status
        context.result.checks["scripts/status names what was left and how to finish"] = named
        context.step(f"scripts/status names the held allocation and the fix: {named}")
    context.step(f"rerunning {ROLLING_RESTART_PLAYBOOK}")
    _run_to_end(context, lambda: _playbook(lab, ROLLING_RESTART_PLAYBOOK))
    context.healed = time.time()
    remote_ended(context, killed)
    context.result.checks["allocation released"] = (
        "cluster.routing.allocation.enable" not in _persistent(lab)
    )


def _lab_up(lab: DrillLab, *args: str) -> subprocess.Popen[str]:
    log = open(lab.playbook_log, "a")  # noqa: SIM115
    return subprocess.Popen(  # noqa: S603
        [str(lab.repo / "scripts" / "up"), *args],
        cwd=lab.repo,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _playbook_pids(root: int) -> list[int]:
    """The ansible-playbook processes under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if any(part.endswith(b"ansible-playbook") for part in command[:2]) and (
                os.getpgid(int(entry.name)) == root
            ):
                found.append(int(entry.name))
    return found


def drill_kill_scale_in(context: DrillContext) -> None:
    lab = context.lab
    leaving = lab.nodes[-1].name
    count = str(len(lab.nodes) - 1)
    context.result.target = f"scripts/up --nodes {count} ({leaving} leaves)"
    context.step(f"scale-in: scripts/up --nodes {count}")
    process = _lab_up(lab, "--nodes", count)

    def exclusion_set() -> bool:
        return any(
            key.startswith("cluster.routing.allocation.exclude.") for key in _persistent(lab)
        )

    try:
        wait_until("the allocation exclusion", exclusion_set, timeout=1200, every=1)
    finally:
        pids = _playbook_pids(process.pid)
        context.step(f"SIGKILL of ansible-playbook {pids} and the run around it")
        killed = kill_run(context, process)
    left = {k: v for k, v in _persistent(lab).items() if "exclude" in k}
    context.step(f"left behind: {left}")
    if lab.status:
        status = _status_output(lab)
        named = "cluster.routing.allocation.exclude" in status and "site.yml" in status
        context.result.checks["scripts/status names the exclusion and how to finish"] = named
        context.step(f"scripts/status names the exclusion and the fix: {named}")
    context.step(f"rerunning scripts/up --nodes {count} (site.yml)")
    _run_to_end(context, lambda: _lab_up(lab, "--nodes", count))
    context.healed = time.time()
    remote_ended(context, killed)
    context.result.checks["exclusion cleared"] = not exclusion_set()
    # lab.json now has one node fewer.
    lab.facts = json.loads((lab.lab_inventory / "lab.json").read_text())


DRILLS: dict[str, Callable[[DrillContext], None]] = {
    "partition-manager": drill_partition_manager,
    "partition-primary": drill_partition_primary,
    "freeze-manager": drill_freeze_manager,
    "crash-all": drill_crash_all,
    "full-disk": drill_full_disk,
    "kill-rolling-restart": drill_kill_rolling_restart,
    "kill-scale-in": drill_kill_scale_in,
}


def parse_faults(text: str) -> list[str]:
    """``--faults all`` or a comma-separated list of :data:`FAULTS`."""
    if text.strip() == "all":
        return list(FAULTS)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FAULTS]
    if unknown or not names:
        raise ValueError(
            f"--faults takes 'all' or some of {', '.join(FAULTS)} (comma-separated), not {text!r}"
        )
    return sorted(dict.fromkeys(names), key=FAULTS.index)


TABLE_HEADER = (
    "| fault | target | acked writes | failed writes | failed reads | lost | copies differ "
    "| new manager (s, from the fault) | green (s, from the heal) "
    "| alerts (from the fault) | checks | result |"
)


def table(results: Sequence[DrillResult]) -> str:
    lines = [TABLE_HEADER, "|" + "---|" * 12]
    for r in results:
        checks = "; ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in r.checks.items())
        outcome = "pass" if r.passed else "FAIL: " + (r.error or "; ".join(r.notes))[:200]
        lines.append(
            f"| {r.fault} | {r.target} | {r.acknowledged} | {r.write_failures} "
            f"| {r.read_failures} | {r.lost} | {r.copies_differ} "
            f"| {'' if r.new_manager_s is None else r.new_manager_s} "
            f"| {'' if r.green_s is None else r.green_s} | {'; '.join(r.alerts) or 'none'} "
            f"| {checks or '-'} | {outcome} |"
        )
    return "\n".join(lines)


@contextmanager
def rules_removed_on_exit() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run through the ``finally``s (rules removed), not past them."""

    def _raise(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        faults.remove_rules()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages, for the table's notes."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def run_faults(lab: DrillLab, names: Sequence[str], table_file: Path | None = None) -> int:
    """The drills named, one after the other; the table printed; how many failed."""
    results = []
    with rules_removed_on_exit():
        for name in names:
            progress(name, f"start (load average {load_average()})")
            results.append(run_one(lab, name, DRILLS[name]))
            for result in results[-1:]:
                print("RESILIENCE " + json.dumps(result.__dict__, default=str), flush=True)
    rendered = table(results)
    print(rendered, flush=True)
    print(f"rules left: {faults.count_rules()}", flush=True)
    if table_file is not None:
        table_file.write_text(rendered + "\n")
    return sum(not result.passed for result in results)
