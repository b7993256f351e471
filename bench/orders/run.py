"""Benchmark POST /orders: listeners off, on, on with outbox delivery, and slow targets.

Each scenario starts the real console script (SQLite file, access log off) in its own
process, drives it from wrk (a second process) on loopback, then reads /metrics for the
asynchronous backlog at the moment the load stops, waits up to ``--drain`` seconds for
the outbox to empty, and stops the service with SIGTERM. The delivery scenarios point the
service at a stand-in for the OpenSearch cluster: a local HTTPS server speaking ``_bulk``
(``StandInCluster`` of the order service's tests), not a real cluster.

At the end of each run it records the rejected listener tasks, the undelivered outbox
rows (when the load stopped, after the drain, and after the process exited), and the
delay from an order's commit (its outbox row's ``created_at``, set inside POST /orders)
to its row being marked delivered, p50 and p99, read from the SQLite file.

    bench/orders/run [--duration 30] [--connections 64] [--drain 60] [--only NAME]
    bench/orders/run --paired 5 [--pair listeners-off,outbox-delivery] [--duration 10]

``--paired`` runs two scenarios' services under load at the same moment instead (see
:func:`run_paired`): the listeners' cost per order without the machine's speed swings
between two runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

import httpx

# The stand-in cluster and its throwaway CA come from the order service's tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "services" / "orders" / "tests"))
from orders_testing import (
    STAND_IN_PASSWORD,
    STAND_IN_USER,
    StandInCluster,
    make_test_certificates,
)

HERE = Path(__file__).resolve().parent
SERVICE = Path(sys.executable).with_name("clusterforge-orders")
SLOW_WEBHOOK_SECONDS = 0.5
# The services run with a bearer token, as deployed, so the bench measures the checked
# path. It reaches the service and wrk (post.lua) through the environment, never argv.
BENCH_TOKEN = secrets.token_urlsafe(32)
BENCH_TOKEN_VARIABLE = "ORDERS_BENCH_TOKEN"  # noqa: S105 (a variable name, not a token)
AUTH_HEADERS = {"Authorization": f"Bearer {BENCH_TOKEN}"}
os.environ[BENCH_TOKEN_VARIABLE] = BENCH_TOKEN
SLOW_TARGET_SECONDS = 3.0


@dataclass
class Result:
    scenario: str
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: str
    backlog_queued: int
    backlog_active: int
    rejections: int
    listener_failures: int
    shutdown_seconds: float
    undelivered_at_stop: int | None = None
    undelivered_after_drain: int | None = None
    drain_seconds: float | None = None
    undelivered_at_exit: int | None = None
    outbox_rows: int = 0
    delay_p50_ms: float | None = None
    delay_p99_ms: float | None = None
    target_delays_ms: list[float] = field(default_factory=list)
    target_delay_kind: str = ""
    bulk_requests: int | None = None
    documents_received: int | None = None
    load_before: str = ""
    load_after: str = ""


class _SlowWebhook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(SLOW_WEBHOOK_SECONDS)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _to_ms(value: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def _metric_or_none(text: str, name: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


def _metric(text: str, prefix: str) -> int:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(prefix):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _requests_per_second(wrk_output: str) -> float:
    return float(re.search(r"Requests/sec:\s+([\d.]+)", wrk_output).group(1))  # type: ignore[union-attr]


def _non_2xx(wrk_output: str) -> int:
    found = re.search(r"Non-2xx or 3xx responses: (\d+)", wrk_output)
    return int(found.group(1)) if found else 0


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _outbox_numbers(
    database: Path, arrivals: dict[str, float] | None = None
) -> tuple[int, int, list[float], list[float]]:
    """(rows, undelivered, commit-to-delivered delays in ms, commit-to-arrival delays in ms)
    from the service's SQLite; ``arrivals`` are the stand-in's wall-clock arrival times."""
    if not database.exists():
        return 0, 0, [], []
    with contextlib.closing(sqlite3.connect(database)) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "order_sync_outbox" not in tables:
            return 0, 0, [], []
        rows = connection.execute("SELECT count(*) FROM order_sync_outbox").fetchone()[0]
        undelivered = connection.execute(
            "SELECT count(*) FROM order_sync_outbox WHERE delivered_at IS NULL"
        ).fetchone()[0]
        delays = [
            float(delay)
            for (delay,) in connection.execute(
                "SELECT (julianday(delivered_at) - julianday(created_at)) * 86400000.0 "
                "FROM order_sync_outbox WHERE delivered_at IS NOT NULL"
            )
        ]
        to_target: list[float] = []
        if arrivals:
            for order_id, created_at in connection.execute(
                "SELECT order_id, created_at FROM order_sync_outbox"
            ):
                arrived = arrivals.get(order_id)
                if arrived is not None:
                    created = datetime.fromisoformat(created_at).timestamp()
                    to_target.append((arrived - created) * 1000.0)
    return int(rows), int(undelivered), delays, to_target


class StandInTarget:
    """Delivery to the STAND-IN cluster (a local HTTPS ``_bulk`` server, not OpenSearch)."""

    def __init__(self, cluster: StandInCluster, ca_file: Path, *, label: str) -> None:
        self.cluster = cluster
        self.ca_file = ca_file
        self.label = label
        # The stand-in stamps arrivals with time.monotonic() in this process.
        self._wall_offset = time.time() - time.monotonic()

    def environment(self) -> dict[str, str]:
        # The password goes through the environment of the service, never its argv.
        return {
            "ORDERS_SEARCH_URLS": self.cluster.url,
            "ORDERS_SEARCH_CA_FILE": str(self.ca_file),
            "ORDERS_SEARCH_USERNAME": STAND_IN_USER,
            "ORDERS_SEARCH_PASSWORD": STAND_IN_PASSWORD,
        }

    def counts(self) -> tuple[int, int]:
        """(bulk requests, documents held) so far."""
        with self.cluster.lock:
            return self.cluster.bulk_requests, len(self.cluster.arrivals)

    def arrivals(self) -> dict[str, float]:
        with self.cluster.lock:
            return {key: value + self._wall_offset for key, value in self.cluster.arrivals.items()}


@dataclass(kw_only=True)
class ClusterTarget:
    """Delivery to a real OpenSearch cluster; the delay is POST to searchable, by probes."""

    urls: list[str]
    ca_file: Path
    username: str | None
    password: str | None = field(repr=False)  # kept out of any printed target
    index: str
    probe_interval: float

    @property
    def label(self) -> str:
        return (
            f"the cluster given by --lab-json/--search-url: {', '.join(self.urls)} "
            f"index {self.index}"
        )

    def environment(self) -> dict[str, str]:
        env = {
            "ORDERS_SEARCH_URLS": ",".join(self.urls),
            "ORDERS_SEARCH_CA_FILE": str(self.ca_file),
            "ORDERS_SEARCH_INDEX": self.index,
        }
        if self.username:
            env["ORDERS_SEARCH_USERNAME"] = self.username
            env["ORDERS_SEARCH_PASSWORD"] = self.password or ""
        return env

    def client(self) -> httpx.Client:
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca_file))
        auth = httpx.BasicAuth(self.username, self.password or "") if self.username else None
        return httpx.Client(verify=context, auth=auth, timeout=10, trust_env=False)


class Prober:
    """Posts a probe order every ``interval`` s and times it until a search finds it."""

    def __init__(self, target: ClusterTarget, base_url: str) -> None:
        self._target = target
        self._base_url = base_url
        self._stop = threading.Event()
        self._posted: dict[str, float] = {}  # orderId -> monotonic time just before POST
        self._found: dict[str, float] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._post_loop, daemon=True),
            threading.Thread(target=self._search_loop, daemon=True),
        ]
        self._posting = threading.Event()

    def start(self) -> None:
        self._posting.set()
        for thread in self._threads:
            thread.start()

    def stop_posting(self) -> None:
        self._posting.clear()

    def _post_loop(self) -> None:
        with httpx.Client(timeout=30, trust_env=False, headers=AUTH_HEADERS) as client:
            while self._posting.is_set():
                body = {
                    "userId": f"bench-probe-{uuid.uuid4().hex[:12]}",
                    "productName": "机械键盘 benchmark probe",
                    "amount": 1,
                }
                started = time.monotonic()
                try:
                    answer = client.post(f"{self._base_url}/orders", json=body)
                    if answer.status_code == 200:
                        with self._lock:
                            self._posted[str(answer.json()["orderId"])] = started
                except httpx.HTTPError:
                    pass
                time.sleep(self._target.probe_interval)

    def _search_loop(self) -> None:
        url = self._target.urls[0].rstrip("/")
        with self._target.client() as client:
            while not self._stop.is_set():
                with self._lock:
                    pending = [key for key in self._posted if key not in self._found]
                if pending:
                    try:
                        answer = client.post(
                            f"{url}/{self._target.index}/_search",
                            json={
                                "size": len(pending),
                                "_source": False,
                                "query": {"ids": {"values": pending}},
                            },
                        )
                        now = time.monotonic()
                        if answer.status_code == 200:
                            with self._lock:
                                for hit in answer.json()["hits"]["hits"]:
                                    self._found.setdefault(str(hit["_id"]), now)
                    except (httpx.HTTPError, ValueError, KeyError):
                        pass
                self._stop.wait(0.05)

    def wait_found(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if set(self._posted) <= set(self._found):
                    return
            time.sleep(0.2)

    def finish(self) -> tuple[list[float], int]:
        """(POST-to-searchable delays in ms of the probes found, probes never found)."""
        self._stop.set()
        self._posting.clear()
        with self._lock:
            delays = [
                (self._found[key] - started) * 1000.0
                for key, started in self._posted.items()
                if key in self._found
            ]
            missing = len(self._posted) - len(delays)
        return delays, missing


Target = StandInTarget | ClusterTarget


@dataclass
class _RunningService:
    process: subprocess.Popen[bytes]
    base_url: str
    workdir: Path
    log: IO[str]

    def cpu_seconds(self) -> float:
        """User plus system CPU the service process has used so far (all its threads)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_service(
    name: str, environment: dict[str, str], target: Target | None
) -> _RunningService:
    """The real console script on a free loopback port, once /health answers 200."""
    workdir = Path(tempfile.mkdtemp(prefix=f"orders-bench-{name}-"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))}
    env.update(environment)
    if target is not None:
        env.update(target.environment())
    env["ORDERS_ACCESS_LOG"] = "false"
    env["ORDERS_AUTH_TOKENS"] = BENCH_TOKEN
    log = (workdir / "service.log").open("w")
    process = subprocess.Popen(
        [str(SERVICE), "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    service = _RunningService(process, f"http://127.0.0.1:{port}", workdir, log)
    # Generous: on a loaded machine importing the service alone took over 30 s.
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{service.base_url}/health", timeout=1).status_code == 200:
                return service
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            _stop_service(service)
            raise SystemExit(f"{name}: service did not start; see {workdir}/service.log")
        time.sleep(0.1)


def _stop_service(service: _RunningService) -> float:
    """SIGTERM, as systemd stops it; the seconds until the process exited."""
    started = time.monotonic()
    service.process.send_signal(signal.SIGTERM)
    try:
        service.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        service.process.kill()
        service.process.wait()
    service.log.close()
    return time.monotonic() - started


def _wrk(*, threads: int, connections: int) -> list[str]:
    return [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(HERE / "post.lua"),
    ]


def _undelivered_after_drain(
    service: _RunningService, undelivered: int | None, drain: float
) -> tuple[int | None, float]:
    """Wait at most ``drain`` s for the outbox to empty; (undelivered then, seconds waited)."""
    started = time.monotonic()
    while undelivered and time.monotonic() - started < drain:
        time.sleep(0.5)
        undelivered = _metric_or_none(
            httpx.get(f"{service.base_url}/metrics", timeout=10, headers=AUTH_HEADERS).text,
            "orders_outbox_undelivered",
        )
    return undelivered, time.monotonic() - started


def run_scenario(
    name: str, environment: dict[str, str], target: Target | None, args: argparse.Namespace
) -> Result:
    load_before = _load()
    counts_before = target.counts() if isinstance(target, StandInTarget) else None
    service = _start_service(name, environment, target)
    base_url, workdir = service.base_url, service.workdir
    prober: Prober | None = None
    try:
        wrk = _wrk(threads=2, connections=args.connections)
        subprocess.run([*wrk, "-d3s", base_url], check=True, capture_output=True)  # warm-up
        if isinstance(target, ClusterTarget):
            prober = Prober(target, base_url)
            prober.start()
        output = subprocess.run(
            [*wrk, f"-d{args.duration}s", base_url], check=True, capture_output=True, text=True
        ).stdout
        if prober is not None:
            prober.stop_posting()
        metrics = httpx.get(f"{base_url}/metrics", timeout=10, headers=AUTH_HEADERS).text
        undelivered_at_stop = _metric_or_none(metrics, "orders_outbox_undelivered")
        # Without a target nothing can drain the outbox: waiting would only add --drain s.
        undelivered_after_drain, drain_seconds = _undelivered_after_drain(
            service, undelivered_at_stop, args.drain if target is not None else 0.0
        )
        final_metrics = httpx.get(f"{base_url}/metrics", timeout=10, headers=AUTH_HEADERS).text
        if prober is not None:
            prober.wait_found(timeout=max(5.0, args.drain - drain_seconds))
    finally:
        shutdown_seconds = _stop_service(service)
    print(f"--- {name} ---\n{output}", flush=True)
    rps = _requests_per_second(output)
    p50 = _to_ms(re.search(r"\s50%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    p99 = _to_ms(re.search(r"\s99%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    errors_match = re.search(r"Socket errors: (.*)", output)
    result = Result(
        scenario=name,
        requests_per_second=rps,
        p50_ms=p50,
        p99_ms=p99,
        non_2xx=_non_2xx(output),
        socket_errors=errors_match.group(1) if errors_match else "none",
        backlog_queued=_metric(metrics, "orders_event_executor_queue_size"),
        backlog_active=_metric(metrics, "orders_event_executor_active_threads"),
        rejections=_metric(metrics, "orders_event_task_rejections_total"),
        listener_failures=_metric(metrics, "orders_listener_failures_total"),
        shutdown_seconds=shutdown_seconds,
    )
    arrivals = target.arrivals() if isinstance(target, StandInTarget) else None
    rows, undelivered_at_exit, delays, to_target = _outbox_numbers(workdir / "orders.db", arrivals)
    result.outbox_rows = rows
    if target is not None:
        result.undelivered_at_stop = undelivered_at_stop
        result.undelivered_after_drain = undelivered_after_drain
        result.drain_seconds = drain_seconds
        result.undelivered_at_exit = undelivered_at_exit
        if delays:
            result.delay_p50_ms = _percentile(delays, 0.50)
            result.delay_p99_ms = _percentile(delays, 0.99)
        result.bulk_requests = _metric_or_none(final_metrics, "orders_outbox_batches_total")
        if isinstance(target, StandInTarget):
            result.target_delays_ms = to_target
            result.target_delay_kind = "POST to stand-in received, every order"
            assert counts_before is not None
            requests, documents = target.counts()
            result.bulk_requests = requests - counts_before[0]
            result.documents_received = documents - counts_before[1]
        elif prober is not None:
            probe_delays, missing = prober.finish()
            result.target_delays_ms = probe_delays
            result.target_delay_kind = (
                f"POST to searchable, {len(probe_delays)} probes ({missing} not found)"
            )
    result.load_before = load_before
    result.load_after = _load()
    shutil.rmtree(workdir, ignore_errors=True)
    return result


@dataclass
class PairedSide:
    scenario: str
    requests_per_second: float
    cpu_ms_per_order: float
    non_2xx: int
    rejections: int
    undelivered_after_drain: int | None
    undelivered_at_exit: int


def run_paired(
    pair: list[tuple[str, dict[str, str], Target | None]], args: argparse.Namespace
) -> tuple[str, list[PairedSide]]:
    """Both scenarios' services under load at the same moment, each from its own wrk.

    The machine's speed here moved by a third within a minute with nothing else running,
    so two runs one after the other compare two machines. Side by side, both services
    see the same machine; each gets half the connections and one wrk thread. What it
    measures is the work per order (req/s and CPU per order, side by side), not either
    service's throughput alone. Returns (the load before, both sides).
    """
    load_before = _load()
    services = [_start_service(name, environment, target) for name, environment, target in pair]
    connections = max(1, args.connections // 2)
    try:
        warm_ups = [
            subprocess.Popen(
                [*_wrk(threads=1, connections=connections), "-d3s", service.base_url],
                stdout=subprocess.DEVNULL,
            )
            for service in services
        ]
        for warm_up in warm_ups:
            warm_up.wait()
        cpu_before = [service.cpu_seconds() for service in services]
        loads = [
            subprocess.Popen(
                [
                    *_wrk(threads=1, connections=connections),
                    f"-d{args.duration}s",
                    service.base_url,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for service in services
        ]
        outputs = [load.communicate()[0] for load in loads]
        cpu_used = [
            service.cpu_seconds() - before
            for service, before in zip(services, cpu_before, strict=True)
        ]
        sides = []
        for (name, _, target), service, output, cpu in zip(
            pair, services, outputs, cpu_used, strict=True
        ):
            requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
            metrics = httpx.get(
                f"{service.base_url}/metrics", timeout=10, headers=AUTH_HEADERS
            ).text
            undelivered, _ = _undelivered_after_drain(
                service,
                _metric_or_none(metrics, "orders_outbox_undelivered"),
                args.drain if target is not None else 0.0,
            )
            sides.append(
                PairedSide(
                    scenario=name,
                    requests_per_second=_requests_per_second(output),
                    cpu_ms_per_order=cpu * 1000.0 / max(1, requests),
                    non_2xx=_non_2xx(output),
                    rejections=_metric(metrics, "orders_event_task_rejections_total"),
                    undelivered_after_drain=undelivered,
                    undelivered_at_exit=0,
                )
            )
    finally:
        for service in services:
            _stop_service(service)
    for side, service in zip(sides, services, strict=True):
        side.undelivered_at_exit = _outbox_numbers(service.workdir / "orders.db")[1]
        shutil.rmtree(service.workdir, ignore_errors=True)
    return load_before, sides


def _print_paired(rounds: list[tuple[str, list[PairedSide]]], args: argparse.Namespace) -> None:
    first, second = rounds[0][1][0].scenario, rounds[0][1][1].scenario
    print(
        f"\nSide by side: {first} and {second} under load at the same moment, "
        f"{args.duration} s, each from its own wrk -t1 -c{max(1, args.connections // 2)}, "
        f"SQLite, {os.cpu_count()} CPUs. Ratio: {second} to {first}, same round.\n"
    )
    print(
        f"| round | {first} req/s | {second} req/s | ratio | {first} CPU ms/order "
        f"| {second} CPU ms/order | CPU per order ratio | non-2xx | {second} rejected tasks "
        f"| {second} undelivered after drain / at exit | load before (1, 5, 15 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for number, (load_before, (a, b)) in enumerate(rounds, start=1):
        ratio = b.requests_per_second / a.requests_per_second
        ratios.append(ratio)
        print(
            f"| {number} | {a.requests_per_second:.0f} | {b.requests_per_second:.0f} | "
            f"{ratio:.2f}x | {a.cpu_ms_per_order:.3f} | {b.cpu_ms_per_order:.3f} | "
            f"{b.cpu_ms_per_order / a.cpu_ms_per_order:.2f} | {a.non_2xx + b.non_2xx} | "
            f"{b.rejections} | {_fmt(b.undelivered_after_drain)} / {b.undelivered_at_exit} | "
            f"{load_before} |"
        )
    print(
        f"\nMedian ratio over {len(ratios)} rounds: {statistics.median(ratios):.2f}x "
        f"(lowest {min(ratios):.2f}x, highest {max(ratios):.2f}x)."
    )


def _fmt(value: float | int | None, pattern: str = "{}") -> str:
    return "-" if value is None else pattern.format(value)


def _cluster_target(args: argparse.Namespace) -> ClusterTarget | None:
    """The real cluster the options name, or None (the stand-in)."""
    if args.lab_json is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
        from clusterforge.testing.loadcheck import LoadTarget

        lab = LoadTarget.from_lab_json(args.lab_json)
        if lab.ca_cert is None:
            raise SystemExit(f"{args.lab_json} has no ca_cert: the service delivers over https")
        username, password = lab.credentials if lab.credentials else (None, None)
        urls, ca_file = list(lab.urls), Path(lab.ca_cert)
    elif args.search_url:
        if args.ca_file is None:
            raise SystemExit("--search-url needs --ca-file (the cluster's CA, PEM)")
        urls, ca_file, username, password = args.search_url, args.ca_file, args.username, None
    else:
        return None
    if args.username:
        username = args.username
        password = None
    if args.password_file is not None:
        password = args.password_file.read_text().strip()
    elif username and password is None:
        password = os.environ.get("ORDERS_BENCH_SEARCH_PASSWORD")
        if password is None:
            raise SystemExit(
                "give the password of --username in --password-file or the environment "
                "variable ORDERS_BENCH_SEARCH_PASSWORD (never on the command line)"
            )
    return ClusterTarget(
        urls=urls,
        ca_file=ca_file,
        username=username,
        password=password,
        index=args.index,
        probe_interval=args.probe_interval,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--drain", type=int, default=60, help="seconds to wait for the outbox after the load"
    )
    parser.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the whole list this many times (noise)"
    )
    parser.add_argument(
        "--paired",
        type=int,
        metavar="ROUNDS",
        help="instead of the list: ROUNDS rounds of --pair's two scenarios side by side",
    )
    parser.add_argument(
        "--pair",
        default="listeners-off,outbox-delivery",
        help="the two scenarios --paired runs (listeners-off,listeners-off: the method's spread)",
    )
    real = parser.add_argument_group(
        "a real cluster instead of the stand-in (the lead's lab)",
        "The password is read from --password-file, the lab.json's admin_password_file or "
        "ORDERS_BENCH_SEARCH_PASSWORD, and reaches the service through its environment.",
    )
    real.add_argument("--lab-json", type=Path, help="inventories/lab/lab.json of the cluster")
    real.add_argument("--search-url", action="append", help="https URL of a node (repeatable)")
    real.add_argument("--ca-file", type=Path, help="the cluster's CA certificate (PEM)")
    real.add_argument("--username", help="user that may write (and search) the index")
    real.add_argument("--password-file", type=Path, help="file holding that user's password")
    real.add_argument("--index", default="orders", help="index to deliver to (orders)")
    real.add_argument(
        "--probe-interval", type=float, default=0.25, help="seconds between probe orders"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is missing; install Debian's wrk package (apt-get install wrk)")
        return 1

    webhook = ThreadingHTTPServer(("127.0.0.1", 0), _SlowWebhook)
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    certificates = make_test_certificates(Path(tempfile.mkdtemp(prefix="orders-bench-tls-")))
    cluster = StandInCluster(certificates)
    slow_cluster = StandInCluster(certificates)
    slow_cluster.delay_seconds = SLOW_TARGET_SECONDS
    real_cluster = _cluster_target(args)
    target: Target = real_cluster or StandInTarget(
        cluster, certificates.ca_file, label="STAND-IN cluster (local HTTPS _bulk server)"
    )
    slow_target = StandInTarget(
        slow_cluster,
        certificates.ca_file,
        label=f"STAND-IN cluster answering each bulk request after {SLOW_TARGET_SECONDS} s",
    )
    off = {
        "ORDERS_LISTENERS_AUDIT_LOG_ENABLED": "false",
        "ORDERS_LISTENERS_NOTIFICATION_ENABLED": "false",
        "ORDERS_LISTENERS_AFTER_COMMIT_SYNC_ENABLED": "false",
    }
    slow_webhook = {
        "ORDERS_LISTENERS_NOTIFICATION_SENDER": "webhook",
        "ORDERS_LISTENERS_NOTIFICATION_WEBHOOK_URL": (
            f"http://127.0.0.1:{webhook.server_address[1]}/hook"
        ),
    }
    scenarios: dict[str, tuple[dict[str, str], Target | None]] = {
        "listeners-off": (off, None),
        "listeners-on-no-target": ({}, None),
        "listeners-on-slow-webhook-no-target": (slow_webhook, None),
        "outbox-delivery": ({}, target),
        "outbox-delivery-slow-webhook": (slow_webhook, target),
        "outbox-delivery-slow-target": ({}, slow_target),
    }
    if real_cluster is not None:
        del scenarios["outbox-delivery-slow-target"]  # a stand-in knob, not the cluster's
    if args.paired:
        pair_names = args.pair.split(",")
        unknown = [name for name in pair_names if name not in scenarios]
        if len(pair_names) != 2 or unknown:
            raise SystemExit(f"--pair takes two of {', '.join(scenarios)}; got {args.pair!r}")
        pair = [(name, *scenarios[name]) for name in pair_names]
    chosen = [
        name for name in scenarios if not args.only or name in args.only or name == "listeners-off"
    ]
    results: list[tuple[int, Result]] = []
    paired_rounds: list[tuple[str, list[PairedSide]]] = []
    try:
        if args.paired:
            paired_rounds = [run_paired(pair, args) for _ in range(args.paired)]
        else:
            for round_number in range(1, args.repeat + 1):
                for name in chosen:
                    environment, scenario_target = scenarios[name]
                    results.append(
                        (round_number, run_scenario(name, environment, scenario_target, args))
                    )
    finally:
        webhook.shutdown()
        cluster.close()
        slow_cluster.close()
    if args.paired:
        _print_paired(paired_rounds, args)
        return 0

    print(
        f"\nPOST /orders, {args.connections} connections, {args.duration} s, wrk -t2, "
        f"SQLite, 1 uvicorn process, {os.cpu_count()} CPUs; delivery target: {target.label}; "
        f"slow target: {slow_target.label}; slow webhook {SLOW_WEBHOOK_SECONDS} s. "
        "Ratio: to the listeners-off run of the same round.\n"
    )
    print(
        "| round | scenario | req/s | ratio to off | p50 ms | p99 ms | non-2xx | backlog at end "
        "(queued+running) | rejected tasks | listener failures | outbox rows | undelivered "
        "at stop / after drain (s) / at exit | bulk requests (docs received) "
        "| commit to delivered p50 / p99 ms | POST to target p50 / p99 ms (what) "
        "| SIGTERM to exit s | load before / after (1, 5, 15 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    baselines = {
        round_number: item.requests_per_second
        for round_number, item in results
        if item.scenario == "listeners-off"
    }
    for round_number, item in results:
        undelivered = (
            f"{_fmt(item.undelivered_at_stop)} / {_fmt(item.undelivered_after_drain)} "
            f"({_fmt(item.drain_seconds, '{:.1f}')}) / {_fmt(item.undelivered_at_exit)}"
        )
        delay = f"{_fmt(item.delay_p50_ms, '{:.0f}')} / {_fmt(item.delay_p99_ms, '{:.0f}')}"
        if item.target_delays_ms:
            to_target = (
                f"{_percentile(item.target_delays_ms, 0.50):.0f} / "
                f"{_percentile(item.target_delays_ms, 0.99):.0f} ({item.target_delay_kind})"
            )
        else:
            to_target = "-"
        bulk = f"{_fmt(item.bulk_requests)} ({_fmt(item.documents_received)})"
        print(
            f"| {round_number} | {item.scenario} | {item.requests_per_second:.0f} | "
            f"{item.requests_per_second / baselines[round_number]:.2f}x | {item.p50_ms:.1f} | "
            f"{item.p99_ms:.1f} | {item.non_2xx} | {item.backlog_queued}+{item.backlog_active} | "
            f"{item.rejections} | {item.listener_failures} | {item.outbox_rows} | "
            f"{undelivered} | {bulk} | {delay} | {to_target} | "
            f"{item.shutdown_seconds:.1f} | {item.load_before} / {item.load_after} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
