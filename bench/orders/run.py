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
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _outbox_numbers(database: Path) -> tuple[int, int, list[float]]:
    """(rows, undelivered, commit-to-delivered delays in ms) from the service's SQLite."""
    if not database.exists():
        return 0, 0, []
    with contextlib.closing(sqlite3.connect(database)) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "order_sync_outbox" not in tables:
            return 0, 0, []
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
    return int(rows), int(undelivered), delays


def run_scenario(name: str, environment: dict[str, str], args: argparse.Namespace) -> Result:
    load_before = _load()
    workdir = Path(tempfile.mkdtemp(prefix=f"orders-bench-{name}-"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORDERS_", "EVENT_"))}
    env.update(environment)
    env["ORDERS_ACCESS_LOG"] = "false"
    log = (workdir / "service.log").open("w")
    service = subprocess.Popen(
        [str(SERVICE), "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        # Generous: on a loaded machine importing the service alone took over 30 s.
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: service did not start; see {workdir}/service.log")
            time.sleep(0.1)
        wrk = [
            "wrk",
            "-t2",
            f"-c{args.connections}",
            "--latency",
            "--timeout",
            "10s",
            "-s",
            str(HERE / "post.lua"),
        ]
        subprocess.run([*wrk, "-d3s", base_url], check=True, capture_output=True)  # warm-up
        output = subprocess.run(
            [*wrk, f"-d{args.duration}s", base_url], check=True, capture_output=True, text=True
        ).stdout
        metrics = httpx.get(f"{base_url}/metrics", timeout=10).text
        undelivered_at_stop = _metric_or_none(metrics, "orders_outbox_undelivered")
        undelivered_after_drain = undelivered_at_stop
        drain_seconds = 0.0
        drain_started = time.monotonic()
        while undelivered_after_drain and time.monotonic() - drain_started < args.drain:
            time.sleep(0.5)
            undelivered_after_drain = _metric_or_none(
                httpx.get(f"{base_url}/metrics", timeout=10).text, "orders_outbox_undelivered"
            )
        drain_seconds = time.monotonic() - drain_started
    finally:
        stop_started = time.monotonic()
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        shutdown_seconds = time.monotonic() - stop_started
        log.close()
    print(f"--- {name} ---\n{output}", flush=True)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    p50 = _to_ms(re.search(r"\s50%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    p99 = _to_ms(re.search(r"\s99%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    non_2xx_match = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors_match = re.search(r"Socket errors: (.*)", output)
    result = Result(
        scenario=name,
        requests_per_second=rps,
        p50_ms=p50,
        p99_ms=p99,
        non_2xx=int(non_2xx_match.group(1)) if non_2xx_match else 0,
        socket_errors=errors_match.group(1) if errors_match else "none",
        backlog_queued=_metric(metrics, "orders_event_executor_queue_size"),
        backlog_active=_metric(metrics, "orders_event_executor_active_threads"),
        rejections=_metric(metrics, "orders_event_task_rejections_total"),
        listener_failures=_metric(metrics, "orders_listener_failures_total"),
        shutdown_seconds=shutdown_seconds,
    )
    rows, undelivered_at_exit, delays = _outbox_numbers(workdir / "orders.db")
    delivering = "ORDERS_SEARCH_URLS" in environment
    result.outbox_rows = rows
    if delivering:
        result.undelivered_at_stop = undelivered_at_stop
        result.undelivered_after_drain = undelivered_after_drain
        result.drain_seconds = drain_seconds
        result.undelivered_at_exit = undelivered_at_exit
        if delays:
            result.delay_p50_ms = _percentile(delays, 0.50)
            result.delay_p99_ms = _percentile(delays, 0.99)
    result.load_before = load_before
    result.load_after = _load()
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def _fmt(value: float | int | None, pattern: str = "{}") -> str:
    return "-" if value is None else pattern.format(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--drain", type=int, default=60, help="seconds to wait for the outbox after the load"
    )
    parser.add_argument("--only", action="append", help="run only this scenario (repeatable)")
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

    def delivery(target: StandInCluster) -> dict[str, str]:
        # The password goes through the environment of the service, never its argv.
        return {
            "ORDERS_SEARCH_URLS": target.url,
            "ORDERS_SEARCH_CA_FILE": str(certificates.ca_file),
            "ORDERS_SEARCH_USERNAME": STAND_IN_USER,
            "ORDERS_SEARCH_PASSWORD": STAND_IN_PASSWORD,
        }

    scenarios = {
        "listeners-off": off,
        "listeners-on-no-target": {},
        "listeners-on-slow-webhook-no-target": slow_webhook,
        "outbox-delivery": delivery(cluster),
        "outbox-delivery-slow-webhook": {**delivery(cluster), **slow_webhook},
        "outbox-delivery-slow-target": delivery(slow_cluster),
    }
    results = [
        run_scenario(name, environment, args)
        for name, environment in scenarios.items()
        if not args.only or name in args.only or name == "listeners-off"
    ]
    webhook.shutdown()
    cluster.close()
    slow_cluster.close()

    baseline = results[0].requests_per_second
    print(
        f"\nPOST /orders, {args.connections} connections, {args.duration} s, wrk -t2, "
        f"SQLite, 1 uvicorn process, {os.cpu_count()} CPUs; delivery to a stand-in "
        f"cluster (local HTTPS _bulk server; slow target {SLOW_TARGET_SECONDS} s per "
        f"request; slow webhook {SLOW_WEBHOOK_SECONDS} s)\n"
    )
    print(
        "| scenario | req/s | ratio to off | p50 ms | p99 ms | non-2xx | backlog at end "
        "(queued+running) | rejected tasks | listener failures | outbox rows | undelivered "
        "at stop / after drain (s) / at exit | commit to delivered p50 / p99 ms "
        "| SIGTERM to exit s | load before / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for item in results:
        undelivered = (
            f"{_fmt(item.undelivered_at_stop)} / {_fmt(item.undelivered_after_drain)} "
            f"({_fmt(item.drain_seconds, '{:.1f}')}) / {_fmt(item.undelivered_at_exit)}"
        )
        delay = f"{_fmt(item.delay_p50_ms, '{:.0f}')} / {_fmt(item.delay_p99_ms, '{:.0f}')}"
        print(
            f"| {item.scenario} | {item.requests_per_second:.0f} | "
            f"{item.requests_per_second / baseline:.2f}x | {item.p50_ms:.1f} | "
            f"{item.p99_ms:.1f} | {item.non_2xx} | {item.backlog_queued}+{item.backlog_active} | "
            f"{item.rejections} | {item.listener_failures} | {item.outbox_rows} | "
            f"{undelivered} | {delay} | {item.shutdown_seconds:.1f} | "
            f"{item.load_before} / {item.load_after} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
