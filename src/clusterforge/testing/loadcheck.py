"""A bounded client load to run while something disruptive happens, then a report.

Wrap a rolling restart, an upgrade or a config change with :class:`ClusterLoad` and read
the :class:`LoadReport` afterwards::

    target = LoadTarget.from_lab_json(Path("inventories/lab/lab.json"))
    with ClusterLoad(target, index="loadcheck", max_requests=50_000, max_seconds=900) as load:
        restart_every_node_one_at_a_time()
    report = load.report
    assert report.ok, report.problems()

or, from a shell or a playbook, ``python -m clusterforge.testing.loadcheck --lab-json PATH
--seconds N`` (it also stops early, and still reports, on SIGTERM or SIGINT).

What the load does: one thread alternates writes and reads, round-robin over the nodes,
the way a multi-node client does; a second thread samples ``GET /_cluster/health``. On
the way out every acknowledged write is read back. What counts as a failure is written
on :class:`ClusterLoad`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import httpx

from clusterforge.testing.load_report import LoadcheckError, LoadReport, LoadTarget, StopReason

__all__ = [
    "ClusterLoad",
    "LoadReport",
    "LoadTarget",
    "LoadcheckError",
    "main",
]

MAX_FAILURE_SAMPLES = 10
_MGET_BATCH = 1000
_ERROR_TEXT_LIMIT = 240
# 429 is back-pressure from a node that is busy (e.g. recovering); a client retries it.
_RETRYABLE_STATUSES = frozenset({429})


@dataclass
class _Outcome:
    ok: bool
    attempts: int
    errors: list[str]
    body: Any = None
    status: int | None = None
    # Why each node before the last one tried did not answer: for the report.
    causes: list[str] = field(default_factory=list)


class _RoundRobin:
    """Send one logical request to the next node; on a connection error, a timeout, a
    429 or a 5xx, try the following node, until each node was tried once."""

    def __init__(self, target: LoadTarget, *, timeout_s: float) -> None:
        self.urls = target.urls
        self.client = target.http_client(timeout_s=timeout_s)
        self._next = 0

    def close(self) -> None:
        self.client.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        accept: Callable[[httpx.Response], str | None] | None = None,
    ) -> _Outcome:
        """``accept`` may refuse a 2xx answer (returns why), which is then retried."""
        first = self._next
        self._next = (self._next + 1) % len(self.urls)
        errors: list[str] = []
        causes: list[str] = []
        for offset in range(len(self.urls)):
            url = self.urls[(first + offset) % len(self.urls)]
            try:
                response = self.client.request(method, url + path, json=json_body)
            except httpx.TransportError as error:
                errors.append(f"{url}: {type(error).__name__} {_short(str(error))}")
                causes.append(type(error).__name__)
                continue
            status = response.status_code
            if status >= 500 or status in _RETRYABLE_STATUSES:
                errors.append(f"{url}: HTTP {status} {_short(response.text)}")
                causes.append(f"HTTP {status}")
                continue
            if status >= 400:
                # The request itself is wrong (or the document is gone): every node
                # would answer the same, so another node is not asked.
                errors.append(f"{url}: HTTP {status} {_short(response.text)}")
            else:
                refusal = accept(response) if accept else None
                if refusal:
                    errors.append(f"{url}: {refusal}")
                    causes.append("refused answer")
                    continue
            return _Outcome(
                ok=status < 400,
                attempts=offset + 1,
                errors=errors,
                body=_json_or_none(response),
                status=status,
                causes=causes,
            )
        return _Outcome(ok=False, attempts=len(self.urls), errors=errors, causes=causes)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _ERROR_TEXT_LIMIT else flat[:_ERROR_TEXT_LIMIT] + "..."


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _complete_shards(response: httpx.Response) -> str | None:
    body = _json_or_none(response)
    if not isinstance(body, dict):
        return "answer is not JSON"
    shards = body.get("_shards", {})
    if shards.get("failed", 0) or body.get("timed_out"):
        return f"partial result: _shards {shards}, timed_out {body.get('timed_out')}"
    return None


def _percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class ClusterLoad:
    """A bounded client load against a cluster, for use as a context manager.

    On enter it creates ``index`` (3 shards, 1 replica, a fixed mapping so that no write
    needs a mapping update from the cluster manager) unless it exists, waits until the
    index is at least yellow, and starts two threads:

    - the load: writes and reads alternate, each request to the next node in turn.
      A write indexes ``{"run", "seq", "written_at"}`` with an id of its own
      (``<run id>-<seq>``), so that retrying a write whose answer was lost cannot create
      a duplicate. A read fetches an earlier acknowledged write by id (a realtime GET);
      every fifth read is a ``match_all`` search with the total hit count instead. After
      each request the thread sleeps ``interval_s``.
    - the health sampler: ``GET /_cluster/health`` every ``health_interval_s``.

    It stops when the ``with`` block ends, or earlier after ``max_requests`` requests or
    ``max_seconds`` (``report.stopped_by`` says which). Then it refreshes the index and
    fetches every acknowledged write with ``_mget``.

    Retries and failures, as a real multi-node client sees them: a request that meets a
    connection error, a timeout (``request_timeout_s``; 30 s by default, because a write
    waits on the node for a new cluster manager to be elected rather than failing), a 429,
    a 5xx, or a search with failed shards is sent again to the next node. It counts as
    **retried** when it needed more than one node, and as **failed** only when every node
    failed it. Any other 4xx fails the request at once (another node would answer the
    same); a read answering 404 for an acknowledged write is such a failure. A write counts as
    acknowledged when a node answered it with a 2xx.

    The report's ``ok`` is false when a request failed, health was ever red, an
    acknowledged write was not readable afterwards (or could not be checked), or no
    write was acknowledged at all.
    """

    def __init__(
        self,
        target: LoadTarget,
        *,
        index: str = "clusterforge-loadcheck",
        max_requests: int = 100_000,
        max_seconds: float = 900.0,
        interval_s: float = 0.05,
        request_timeout_s: float = 30.0,
        health_interval_s: float = 0.5,
    ) -> None:
        if max_requests < 1 or max_seconds <= 0 or interval_s < 0 or health_interval_s <= 0:
            raise LoadcheckError(
                "max_requests must be at least 1, max_seconds and health_interval_s "
                "positive, and interval_s not negative"
            )
        if not index or index.startswith(("_", "-", "+")) or index != index.lower():
            raise LoadcheckError(f"index name {index!r} is not a valid lowercase index name")
        self.target = target
        self.index = index
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.interval_s = interval_s
        self.request_timeout_s = request_timeout_s
        self.health_interval_s = health_interval_s
        self.run_id = secrets.token_hex(4)

        self._stop = threading.Event()
        self._finished = threading.Event()
        self._threads: list[threading.Thread] = []
        self._thread_errors: list[BaseException] = []
        self._report: LoadReport | None = None
        self._started_at = 0.0
        self._stopped_by: StopReason = "caller"

        self._requests = 0
        self._by_kind: Counter[str] = Counter()
        self._failed = 0
        self._retried = 0
        self._retry_causes: Counter[str] = Counter()
        self._failure_samples: list[str] = []
        self._latencies_s: list[float] = []
        self._acknowledged: list[str] = []
        self._health: Counter[str] = Counter()
        self._health_samples = 0

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> ClusterLoad:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Create the index if missing, then start the load and the health sampler."""
        if self._threads:
            raise LoadcheckError("this load was already started; make a new ClusterLoad")
        self._ensure_index()
        self._started_at = time.monotonic()
        self._threads = [
            threading.Thread(target=self._guarded(self._run_load), name="loadcheck-load"),
            threading.Thread(target=self._guarded(self._sample_health), name="loadcheck-health"),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the load reached ``max_requests`` or ``max_seconds`` (true), or
        ``timeout_s`` passed (false)."""
        return self._finished.wait(timeout_s)

    def stop(self) -> LoadReport:
        """Stop both threads, verify the acknowledged writes and return the report.
        Calling it again returns the same report."""
        if self._report is not None:
            return self._report
        if not self._threads:
            raise LoadcheckError("the load was never started")
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._thread_errors:
            raise LoadcheckError(
                f"the load thread crashed: {self._thread_errors[0]!r}"
            ) from self._thread_errors[0]
        duration_s = time.monotonic() - self._started_at
        readable, counted, verification_error = self._verify_writes()
        latencies = sorted(self._latencies_s)
        self._report = LoadReport(
            index=self.index,
            run_id=self.run_id,
            duration_s=round(duration_s, 3),
            stopped_by=self._stopped_by,
            requests=self._requests,
            requests_by_kind=dict(self._by_kind),
            failed=self._failed,
            retried=self._retried,
            failure_samples=tuple(self._failure_samples),
            latency_max_ms=round(latencies[-1] * 1000, 1) if latencies else 0.0,
            latency_p50_ms=round(_percentile(latencies, 0.50) * 1000, 1),
            latency_p99_ms=round(_percentile(latencies, 0.99) * 1000, 1),
            health_samples=self._health_samples,
            health_statuses=dict(self._health),
            red_seen=self._health["red"] > 0,
            acknowledged_writes=len(self._acknowledged),
            writes_readable_afterwards=readable,
            documents_counted=counted,
            verification_error=verification_error,
            retry_causes=dict(self._retry_causes),
        )
        return self._report

    @property
    def report(self) -> LoadReport:
        """The report, once the load stopped (the ``with`` block ended)."""
        if self._report is None:
            raise LoadcheckError("the load is still running; the report exists after stop()")
        return self._report

    def _guarded(self, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as error:  # handed to stop(), which raises it
                self._thread_errors.append(error)
                self._stop.set()
                self._finished.set()

        return run

    # -- setup -------------------------------------------------------------------------

    def _ensure_index(self) -> None:
        nodes = _RoundRobin(self.target, timeout_s=max(self.request_timeout_s, 30.0))
        try:
            exists = nodes.call("HEAD", f"/{self.index}")
            if not exists.ok and exists.status != 404:
                raise LoadcheckError(
                    f"no node could check whether index {self.index} exists: "
                    + "; ".join(exists.errors)
                )
            if not exists.ok:
                created = nodes.call(
                    "PUT",
                    f"/{self.index}",
                    json_body={
                        "settings": {"number_of_shards": 3, "number_of_replicas": 1},
                        "mappings": {
                            "properties": {
                                "run": {"type": "keyword"},
                                "seq": {"type": "long"},
                                "written_at": {"type": "date", "format": "epoch_millis"},
                            }
                        },
                    },
                )
                # Another client may have created it in between; that is fine.
                if not created.ok and not any(
                    "resource_already_exists_exception" in error for error in created.errors
                ):
                    raise LoadcheckError(
                        f"cannot create index {self.index}: " + "; ".join(created.errors)
                    )
            # Answers 408 with the current status when green did not come in time.
            health = nodes.call(
                "GET", f"/_cluster/health/{self.index}?wait_for_status=green&timeout=30s"
            )
            status = health.body.get("status") if isinstance(health.body, dict) else None
            if status not in ("green", "yellow"):
                raise LoadcheckError(
                    f"index {self.index} is not usable (health {status or 'unknown'}): "
                    + "; ".join(health.errors)
                )
        finally:
            nodes.close()

    # -- the two threads ---------------------------------------------------------------

    def _run_load(self) -> None:
        nodes = _RoundRobin(self.target, timeout_s=self.request_timeout_s)
        chooser = random.Random(self.run_id)  # noqa: S311 - picks documents to read, no secret
        sequence = 0
        reads = 0
        try:
            while not self._stop.is_set():
                if self._requests >= self.max_requests:
                    self._stopped_by = "max_requests"
                    break
                if time.monotonic() - self._started_at >= self.max_seconds:
                    self._stopped_by = "max_seconds"
                    break
                if self._requests % 2 == 0 or not self._acknowledged:
                    sequence += 1
                    self._write(nodes, sequence)
                else:
                    reads += 1
                    if reads % 5 == 0:
                        self._search(nodes)
                    else:
                        self._read(nodes, chooser.choice(self._acknowledged))
                if self.interval_s:
                    self._stop.wait(self.interval_s)
        finally:
            nodes.close()
            self._finished.set()
            # The sampler stops with the load, so that health is only sampled under load.
            self._stop.set()

    def _write(self, nodes: _RoundRobin, sequence: int) -> None:
        document_id = f"{self.run_id}-{sequence}"
        outcome = self._timed(
            "write",
            nodes,
            "POST",
            f"/{self.index}/_doc/{document_id}?refresh=false",
            json_body={"run": self.run_id, "seq": sequence, "written_at": int(time.time() * 1000)},
        )
        if outcome.ok:
            self._acknowledged.append(document_id)

    def _read(self, nodes: _RoundRobin, document_id: str) -> None:
        self._timed("read", nodes, "GET", f"/{self.index}/_doc/{document_id}")

    def _search(self, nodes: _RoundRobin) -> None:
        self._timed(
            "search",
            nodes,
            "POST",
            f"/{self.index}/_search",
            json_body={
                "size": 0,
                "track_total_hits": True,
                "query": {"match_all": {}},
            },
            accept=_complete_shards,
        )

    def _timed(
        self,
        kind: str,
        nodes: _RoundRobin,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        accept: Callable[[httpx.Response], str | None] | None = None,
    ) -> _Outcome:
        started = time.monotonic()
        outcome = nodes.call(method, path, json_body=json_body, accept=accept)
        self._latencies_s.append(time.monotonic() - started)
        self._requests += 1
        self._by_kind[kind] += 1
        if outcome.attempts > 1:
            self._retried += 1
            # Each attempt but the last was sent on to another node; the last, when it
            # failed too, had no node left to go to.
            self._retry_causes.update(outcome.causes[: outcome.attempts - 1])
        if not outcome.ok:
            self._failed += 1
            if len(self._failure_samples) < MAX_FAILURE_SAMPLES:
                elapsed = time.monotonic() - self._started_at
                self._failure_samples.append(
                    f"t+{elapsed:.1f}s {kind} {method} {path}: " + " | ".join(outcome.errors)
                )
        return outcome

    def _sample_health(self) -> None:
        nodes = _RoundRobin(self.target, timeout_s=min(self.request_timeout_s, 5.0))
        try:
            while not self._stop.is_set():
                outcome = nodes.call("GET", "/_cluster/health")
                status = outcome.body.get("status") if isinstance(outcome.body, dict) else None
                self._health[str(status) if outcome.ok and status else "unavailable"] += 1
                self._health_samples += 1
                self._stop.wait(self.health_interval_s)
        finally:
            nodes.close()

    # -- afterwards --------------------------------------------------------------------

    def _verify_writes(self) -> tuple[int, int | None, str | None]:
        """(acknowledged writes found by id, documents of this run counted, error)."""
        nodes = _RoundRobin(self.target, timeout_s=max(self.request_timeout_s, 30.0))
        try:
            refreshed = nodes.call("POST", f"/{self.index}/_refresh")
            if not refreshed.ok:
                return 0, None, "refresh failed: " + "; ".join(refreshed.errors)
            found = 0
            for batch in _batches(self._acknowledged, _MGET_BATCH):
                fetched = nodes.call(
                    "POST", f"/{self.index}/_mget?_source=false", json_body={"ids": batch}
                )
                if not fetched.ok or not isinstance(fetched.body, dict):
                    return found, None, "mget failed: " + "; ".join(fetched.errors)
                found += sum(1 for doc in fetched.body.get("docs", []) if doc.get("found"))
            counted = nodes.call(
                "POST",
                f"/{self.index}/_count",
                json_body={"query": {"term": {"run": self.run_id}}},
            )
            count = counted.body.get("count") if isinstance(counted.body, dict) else None
            return found, count if isinstance(count, int) else None, None
        finally:
            nodes.close()


def _batches(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# -- command line -----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load for ``--seconds`` (or until SIGTERM/SIGINT) and print the report as
    JSON on stdout. Exit 0 when the report is ok, 1 when it is not, 2 when the load
    could not start.

    With a command after ``--``, the load runs while that command runs (the disruption:
    a rolling restart, an upgrade) and stops when it exits, ``--seconds`` being the upper
    bound; the command's output goes to stderr, and a failing command also exits 1."""
    parser = argparse.ArgumentParser(
        prog="python -m clusterforge.testing.loadcheck",
        description="Client load against a cluster while something disruptive happens.",
    )
    parser.add_argument("--lab-json", type=Path, required=True, help="lab.json of the cluster")
    parser.add_argument("--seconds", type=float, required=True, help="how long the load runs")
    parser.add_argument("--index", default="clusterforge-loadcheck", help="index to write to")
    parser.add_argument("--max-requests", type=int, default=1_000_000)
    parser.add_argument("--interval", type=float, default=0.05, help="pause between requests")
    parser.add_argument("--report", type=Path, help="also write the JSON report to this file")
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="after --: a command to run under the load; the load stops when it exits",
    )
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    interrupted = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        interrupted.set()

    try:
        target = LoadTarget.from_lab_json(args.lab_json)
        load = ClusterLoad(
            target,
            index=args.index,
            max_requests=args.max_requests,
            max_seconds=args.seconds,
            interval_s=args.interval,
        )
        previous = {
            sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            load.start()
            print(
                f"loadcheck: load on {len(target.urls)} node(s), index {args.index}, "
                f"run {load.run_id}, up to {args.seconds:g}s",
                file=sys.stderr,
                flush=True,
            )
            disruption = (
                subprocess.Popen(command, stdout=sys.stderr, stderr=sys.stderr)  # noqa: S603
                if command
                else None
            )
            while not interrupted.is_set() and not load.wait(0.2):
                if disruption is not None and disruption.poll() is not None:
                    break
            report = load.stop()
            if disruption is not None and disruption.poll() is None:
                disruption.terminate()
            command_failed = disruption is not None and disruption.wait() != 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    except LoadcheckError as error:
        print(f"loadcheck: error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(report.to_dict(), indent=2)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    if command_failed:
        print(
            f"loadcheck: the command under load failed: {' '.join(command[:3])} ...",
            file=sys.stderr,
        )
        return 1
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
