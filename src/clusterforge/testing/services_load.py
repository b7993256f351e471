"""A client load on both services, through what lab.json names, while something happens.

``python -m clusterforge.testing.services_load --lab-json PATH --seconds N`` creates one
user, then, until N seconds have passed (or SIGTERM/SIGINT), two threads send requests
over kept-alive HTTPS connections that verify the lab's CA (``services_ca_cert``): one
reads that user by id from the user directory, the other places an order. Every few
hundred requests a thread opens a new connection, so handshakes happen all along too.
A request fails when it raises or answers anything but 200/201. Prints one JSON report
(requests, failures, samples of them) and exits 1 when any request failed.

Tokens are read from the 0600 files lab.json names and sent in headers only: never in
argv, never printed.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

RECONNECT_EVERY = 200


class _Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.samples: list[str] = []

    def record(self, name: str, failure: str | None) -> None:
        with self.lock:
            self.requests[name] += 1
            if failure is not None:
                self.failures[name] += 1
                if len(self.samples) < 10:
                    self.samples.append(f"{name}: {failure}")


def _client(base: str, ca: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=base,
        verify=ca,
        timeout=httpx.Timeout(10.0),
        headers={"Authorization": f"Bearer {token}"},
    )


def _run(
    name: str,
    make: Callable[[], httpx.Client],
    request: Callable[[httpx.Client], httpx.Response],
    counter: _Counter,
    stop: threading.Event,
) -> None:
    client = make()
    sent = 0
    try:
        while not stop.is_set():
            try:
                answer = request(client)
                failure = None if answer.status_code in (200, 201) else f"{answer.status_code}"
            except httpx.HTTPError as error:
                failure = f"{type(error).__name__}: {error}"
            counter.record(name, failure)
            sent += 1
            if sent % RECONNECT_EVERY == 0:
                client.close()
                client = make()
    finally:
        client.close()


def run_load(lab_json: Path, seconds: float, stop: threading.Event | None = None) -> dict[str, Any]:
    facts = json.loads(lab_json.read_text())
    services, ca = facts["services"], facts["services_ca_cert"]
    userdir_token = Path(facts["user_directory_token_file"]).read_text().strip()
    orders_token = Path(facts["orders_token_file"]).read_text().strip()
    with _client(services["user_directory"], ca, userdir_token) as setup:
        created = setup.post(
            "/mock-api/users",
            json={
                "username": f"load-{time.time_ns()}",
                "nickname": "Load",
                "mobile": "13800138000",
            },
        )
        created.raise_for_status()
        user_id = created.json()["id"]
    stop = stop or threading.Event()
    counter = _Counter()
    order = {"userId": "load", "productName": "widget", "amount": 1}
    threads = [
        threading.Thread(
            target=_run,
            args=(
                "user_directory",
                lambda: _client(services["user_directory"], ca, userdir_token),
                lambda client: client.get(f"/mock-api/users/{user_id}"),
                counter,
                stop,
            ),
        ),
        threading.Thread(
            target=_run,
            args=(
                "orders",
                lambda: _client(services["orders"], ca, orders_token),
                lambda client: client.post("/orders", json=order),
                counter,
                stop,
            ),
        ),
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return {
        "seconds": round(time.monotonic() - started, 1),
        "requests": dict(counter.requests),
        "failures": dict(counter.failures),
        "failure_samples": counter.samples,
        "ok": not counter.failures and all(counter.requests.values()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--lab-json", type=Path, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    arguments = parser.parse_args(argv)
    stop = threading.Event()

    def finish(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    report = run_load(arguments.lab_json, arguments.seconds, stop)
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
