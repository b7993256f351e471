"""Benchmark POST /orders: listeners off, all three on, and on with a slow webhook.

Each scenario starts the real console script (SQLite file, access log off) in its own
process, drives it from wrk (a second process) on loopback, then reads /metrics for the
asynchronous backlog at the moment the load stops, and stops the service with SIGTERM.

    bench/orders/run [--duration 30] [--connections 64]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
SERVICE = Path(sys.executable).with_name("clusterforge-orders")
SLOW_WEBHOOK_SECONDS = 0.5


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


def _metric(text: str, prefix: str) -> int:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(prefix):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def run_scenario(name: str, environment: dict[str, str], args: argparse.Namespace) -> Result:
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
        deadline = time.monotonic() + 30
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
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is missing; install Debian's wrk package (apt-get install wrk)")
        return 1

    webhook = ThreadingHTTPServer(("127.0.0.1", 0), _SlowWebhook)
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    off = {
        "ORDERS_LISTENERS_AUDIT_LOG_ENABLED": "false",
        "ORDERS_LISTENERS_NOTIFICATION_ENABLED": "false",
        "ORDERS_LISTENERS_AFTER_COMMIT_SYNC_ENABLED": "false",
    }
    slow = {
        "ORDERS_LISTENERS_NOTIFICATION_SENDER": "webhook",
        "ORDERS_LISTENERS_NOTIFICATION_WEBHOOK_URL": (
            f"http://127.0.0.1:{webhook.server_address[1]}/hook"
        ),
    }
    results = [
        run_scenario("listeners-off", off, args),
        run_scenario("listeners-on", {}, args),
        run_scenario("listeners-on-slow-webhook", slow, args),
    ]
    webhook.shutdown()

    baseline = results[0].requests_per_second
    print(
        f"\nPOST /orders, {args.connections} connections, {args.duration} s, wrk -t2, "
        f"SQLite, 1 uvicorn process, {os.cpu_count()} CPUs\n"
    )
    print(
        "| scenario | req/s | ratio to off | p50 ms | p99 ms | non-2xx | backlog at end "
        "(queued+running) | rejected tasks | listener failures | SIGTERM to exit s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for item in results:
        print(
            f"| {item.scenario} | {item.requests_per_second:.0f} | "
            f"{item.requests_per_second / baseline:.2f}x | {item.p50_ms:.1f} | "
            f"{item.p99_ms:.1f} | {item.non_2xx} | {item.backlog_queued}+{item.backlog_active} | "
            f"{item.rejections} | {item.listener_failures} | {item.shutdown_seconds:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
