"""Benchmark: user-directory reads by id through the TLS proxy against the service directly.

Not a test: run ``bench/userdir/proxy.py --lab-json inventories/lab/lab.json`` against a
running lab (``scripts/up``), and it prints a table and one JSON line; nothing is
asserted. The same client (wrk, kept-alive connections, the same thread and connection
counts) reads one user by id, alternating rounds: the proxy's ``https://`` URL from
lab.json, then the application's own loopback port behind it (``user_directory_app_port``,
plain HTTP). Each round's requests per second and the load average before it are
recorded; the ratio is of the medians.

The bearer token is read by wrk's Lua script from the 0600 file lab.json names, so it is
in no process's arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import httpx

LUA = """
local file = io.open(os.getenv("USERDIR_TOKEN_FILE"))
local token = file:read("*l")
file:close()
wrk.headers["Authorization"] = "Bearer " .. token
"""


def _rate(output: str) -> float:
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if match is None:
        raise SystemExit(f"wrk printed no rate:\n{output}")
    return float(match.group(1))


def _wrk(url: str, script: Path, token_file: str, *, seconds: int, connections: int) -> str:
    environment = {**os.environ, "USERDIR_TOKEN_FILE": token_file}
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url]
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, check=True
    ).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab-json", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--app-port", type=int, default=18081)
    arguments = parser.parse_args()
    facts = json.loads(arguments.lab_json.read_text())
    proxied = facts["services"]["user_directory"]
    token_file = facts["user_directory_token_file"]
    token = Path(token_file).read_text().strip()
    with httpx.Client(
        base_url=proxied,
        verify=facts["services_ca_cert"],
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        created = client.post(
            "/mock-api/users", json={"username": f"bench-{os.getpid()}", "nickname": "Bench"}
        )
        created.raise_for_status()
        user_id = created.json()["id"]
    host = urlsplit(proxied).hostname
    targets = {
        "proxy (https)": f"{proxied}/mock-api/users/{user_id}",
        "direct (http)": f"http://{host}:{arguments.app_port}/mock-api/users/{user_id}",
    }
    rounds: dict[str, list[float]] = {name: [] for name in targets}
    loads: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "token.lua"
        script.write_text(LUA)
        for url in targets.values():  # warm both paths
            _wrk(url, script, token_file, seconds=3, connections=arguments.connections)
        for index in range(arguments.rounds):
            for name, url in targets.items():
                loads.append(os.getloadavg()[0])
                rate = _rate(
                    _wrk(
                        url,
                        script,
                        token_file,
                        seconds=arguments.seconds,
                        connections=arguments.connections,
                    )
                )
                rounds[name].append(rate)
                print(f"round {index + 1} {name:<14} {rate:9.1f} req/s  load {loads[-1]:.2f}")
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    ratio = medians["proxy (https)"] / medians["direct (http)"]
    print(f"medians: proxy {medians['proxy (https)']:.1f}, direct {medians['direct (http)']:.1f}")
    print(f"ratio proxy/direct: {ratio:.3f}")
    print(
        json.dumps(
            {
                "rounds": rounds,
                "medians": medians,
                "ratio": round(ratio, 3),
                "load_before_rounds": loads,
                "connections": arguments.connections,
                "seconds": arguments.seconds,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
