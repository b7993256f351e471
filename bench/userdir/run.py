"""Load test: the user directory vs json-server over 10,000 users, with wrk on loopback.

Not a test: started by ``bench/userdir/run``, prints a table, and records nothing itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

USERS = 10_000
CONNECTIONS = 64


@dataclass
class Result:
    target: str
    scenario: str
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    errors: int


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes], *, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


def seed_userdir(database: Path) -> None:
    from clusterforge_userdir.migrate import upgrade_database
    from clusterforge_userdir.storage import create_database_engine, users_table

    database.unlink(missing_ok=True)
    engine = create_database_engine(f"sqlite:///{database}")
    upgrade_database(engine)
    start = datetime(2024, 1, 1, 8, 0, 0)
    with engine.begin() as connection:
        connection.execute(
            users_table.insert(),
            [
                {
                    "username": f"user{n:05d}",
                    "nickname": f"Nick {n}",
                    "mobile": f"138{n:08d}",
                    "status": n % 3,
                    "created_at": start + timedelta(minutes=n),
                }
                for n in range(1, USERS + 1)
            ],
        )
    engine.dispose()


def write_json_server_db(path: Path) -> None:
    start = datetime(2024, 1, 1, 8, 0, 0)
    users = [
        {
            "id": n,
            "username": f"user{n:05d}",
            "nickname": f"Nick {n}",
            "mobile": f"138{n:08d}",
            "status": n % 3,
            "createdAt": (start + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%S"),
        }
        for n in range(1, USERS + 1)
    ]
    path.write_text(json.dumps({"users": users}), encoding="utf-8")


def lua_script(path: Path, template: str) -> None:
    """A wrk script that requests ``template`` with {n} a random number from 1 to N."""
    path.write_text(
        "math.randomseed(42)\n"
        "request = function()\n"
        f'  local path = string.gsub("{template}", "{{n}}", tostring(math.random(1, {USERS})))\n'
        "  return wrk.format(nil, path)\n"
        "end\n",
        encoding="utf-8",
    )


def parse_duration_ms(text: str) -> float:
    value, unit = re.match(r"([0-9.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(
    base_url: str, script: Path, *, duration: int, threads: int
) -> tuple[float, float, float, int]:
    output = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{CONNECTIONS}",
            f"-d{duration}s",
            "--latency",
            "--timeout",
            "5s",
            "-s",
            str(script),
            base_url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", output).group(1))  # type: ignore[union-attr]
    p50 = parse_duration_ms(re.search(r"^\s+50%\s+(\S+)", output, re.MULTILINE).group(1))  # type: ignore[union-attr]
    p99 = parse_duration_ms(re.search(r"^\s+99%\s+(\S+)", output, re.MULTILINE).group(1))  # type: ignore[union-attr]
    errors = 0
    for pattern in (r"Non-2xx or 3xx responses: (\d+)", r"Socket errors: .*?timeout (\d+)"):
        match = re.search(pattern, output)
        errors += int(match.group(1)) if match else 0
    return rps, p50, p99, errors


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--duration", type=int, default=30, help="seconds per scenario (30)")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers (2)")
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (1)")
    parser.add_argument(
        "--speedups",
        action="store_true",
        help="let uvicorn use httptools and uvloop from .cache/speedups (not project deps)",
    )
    arguments = parser.parse_args()
    cache: Path = arguments.cache

    database = cache / "userdir-bench.db"
    seed_userdir(database)
    json_db = cache / "json-server-db.json"
    write_json_server_db(json_db)

    userdir_port, peer_port = free_port(), free_port()
    userdir_cli = Path(sys.executable).with_name("clusterforge-userdir")
    userdir_environment = dict(os.environ)
    if arguments.speedups:
        userdir_environment["PYTHONPATH"] = str(cache / "speedups")
    userdir = subprocess.Popen(
        [
            str(userdir_cli),
            "--port",
            str(userdir_port),
            "--database-url",
            f"sqlite:///{database}",
            "--workers",
            str(arguments.workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        start_new_session=True,
        env=userdir_environment,
    )
    json_server = shutil.which("json-server", path=str(cache / "node_modules" / ".bin"))
    peer = subprocess.Popen(
        [str(json_server), "--port", str(peer_port), "--quiet", str(json_db)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    results: list[Result] = []
    try:
        wait_for(f"http://127.0.0.1:{userdir_port}/mock-api/health", userdir)
        wait_for(f"http://127.0.0.1:{peer_port}/users/1", peer)
        scenarios = {
            "GET user by id": ("/mock-api/users/{n}", "/users/{n}"),
            "GET page of 10": (
                "/mock-api/users?pageNum={n}&pageSize=10",
                "/users?_page={n}&_limit=10",
            ),
        }
        for scenario, (userdir_path, peer_path) in scenarios.items():
            for target, port, path in (
                ("userdir", userdir_port, userdir_path.replace("pageNum={n}", "pageNum={p}")),
                ("json-server", peer_port, peer_path.replace("_page={n}", "_page={p}")),
            ):
                # Pages run over all 1,000 pages of 10, ids over all 10,000 users.
                script = cache / f"{target}-{len(results)}.lua"
                lua_script(script, path.replace("{p}", "{n}"))
                if "{p}" in path:
                    text = script.read_text(encoding="utf-8").replace(
                        f"math.random(1, {USERS})", f"math.random(1, {USERS // 10})"
                    )
                    script.write_text(text, encoding="utf-8")
                # A short warm-up, so both start with hot caches and compiled code.
                run_wrk(f"http://127.0.0.1:{port}", script, duration=3, threads=1)
                rps, p50, p99, errors = run_wrk(
                    f"http://127.0.0.1:{port}",
                    script,
                    duration=arguments.duration,
                    threads=arguments.wrk_threads,
                )
                results.append(Result(target, scenario, rps, p50, p99, errors))
    finally:
        stop(userdir)
        stop(peer)

    print(
        f"\n{USERS} users, {CONNECTIONS} connections, {arguments.duration} s each, "
        f"userdir with {arguments.workers} uvicorn worker(s), wrk with "
        f"{arguments.wrk_threads} thread(s), {os.cpu_count()} cores, "
        f"httptools+uvloop {'on' if arguments.speedups else 'off'}\n"
    )
    print("| scenario | server | requests/s | p50 ms | p99 ms | errors | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for scenario in dict.fromkeys(r.scenario for r in results):
        ours = next(r for r in results if r.scenario == scenario and r.target == "userdir")
        peer_result = next(r for r in results if r.scenario == scenario and r.target != "userdir")
        ratio = ours.requests_per_second / peer_result.requests_per_second
        for r in (ours, peer_result):
            shown_ratio = f"{ratio:.2f}x" if r is ours else "1.00x"
            print(
                f"| {scenario} | {r.target} | {r.requests_per_second:,.0f} | {r.p50_ms:.2f} "
                f"| {r.p99_ms:.2f} | {r.errors} | {shown_ratio} |"
            )


if __name__ == "__main__":
    main()
