"""ClusterLoad against a stand-in OpenSearch on loopback, and once against the real lab.

The stand-in (``StandInCluster`` / ``StandInNode``) is not OpenSearch: it is a small
``http.server`` that answers the dozen calls the load makes, with knobs to fail writes,
turn health red, lose documents, or stop a node. It exists because these failure modes
cannot be produced on demand in a real cluster inside a unit test. The last test runs the
same load against a real cluster when ``CLUSTERFORGE_CLUSTER_JSON`` names its lab.json.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from clusterforge.testing.loadcheck import ClusterLoad, LoadcheckError, LoadTarget

STAND_IN_USER = "loadcheck"
STAND_IN_PASSWORD = "stand-in-secret-Zq81"


class StandInCluster:
    """What the stand-in nodes share: the indices, the health, and the failure knobs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}
        self.health = "green"
        self.failing_write_attempts = 0  # the next N write attempts, on any node, get a 503
        self.forget_on_refresh = 0  # documents silently dropped at the next _refresh
        token = base64.b64encode(f"{STAND_IN_USER}:{STAND_IN_PASSWORD}".encode()).decode()
        self.expected_authorization = f"Basic {token}"

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = [part for part in path.split("/") if part]
        with self.lock:
            if parts[:2] == ["_cluster", "health"]:
                return 200, {"cluster_name": "stand-in", "status": self.health}
            index = parts[0]
            documents = self.indices.get(index)
            if len(parts) == 1:
                return self._index_call(method, index, body)
            if documents is None:
                return 404, {"error": {"type": "index_not_found_exception"}}
            return self._document_call(method, parts[1:], documents, body)

    def _index_call(self, method: str, index: str, body: Any) -> tuple[int, Any]:
        if method == "HEAD":
            return (200 if index in self.indices else 404), None
        if method == "PUT":
            if index in self.indices:
                return 400, {"error": {"type": "resource_already_exists_exception"}}
            assert body["settings"] == {"number_of_shards": 3, "number_of_replicas": 1}
            self.indices[index] = {}
            return 200, {"acknowledged": True, "index": index}
        return 405, {"error": f"{method} /{index} is not part of the stand-in"}

    def _document_call(
        self, method: str, rest: list[str], documents: dict[str, dict[str, Any]], body: Any
    ) -> tuple[int, Any]:
        shards = {"total": 2, "successful": 2, "failed": 0}
        if rest[0] == "_doc" and method == "POST":
            if self.failing_write_attempts:
                self.failing_write_attempts -= 1
                return 503, {"error": {"type": "unavailable_shards_exception"}}
            documents[rest[1]] = body
            return 201, {"_id": rest[1], "result": "created", "_shards": shards}
        if rest[0] == "_doc" and method == "GET":
            if rest[1] in documents:
                return 200, {"_id": rest[1], "found": True, "_source": documents[rest[1]]}
            return 404, {"_id": rest[1], "found": False}
        if rest[0] == "_search":
            return 200, {
                "timed_out": False,
                "_shards": {**shards, "total": 3, "successful": 3},
                "hits": {"total": {"value": len(documents), "relation": "eq"}, "hits": []},
            }
        if rest[0] == "_refresh":
            for document_id in list(documents)[: self.forget_on_refresh]:
                del documents[document_id]
            self.forget_on_refresh = 0
            return 200, {"_shards": shards}
        if rest[0] == "_mget":
            return 200, {"docs": [{"_id": key, "found": key in documents} for key in body["ids"]]}
        if rest[0] == "_count":
            run = body["query"]["term"]["run"]
            return 200, {"count": sum(1 for doc in documents.values() if doc["run"] == run)}
        return 405, {"error": f"{method} {rest} is not part of the stand-in"}


class StandInNode:
    """One stand-in node: a threaded HTTP/1.0 server (a connection per request, so a
    stopped node refuses every later request, as a stopped OpenSearch does)."""

    def __init__(self, cluster: StandInCluster) -> None:
        self.cluster = cluster
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                if self.headers.get("Authorization") != outer.cluster.expected_authorization:
                    self._send(401, {"error": "missing or wrong credentials"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                split = urlsplit(self.path)
                parse_qs(split.query)  # accepted and ignored, as refresh=false is here
                status, answer = outer.cluster.answer(self.command, split.path, body)
                self._send(status, answer)

            def _send(self, status: int, answer: Any) -> None:
                payload = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            # http.server dispatches on these names.
            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def do_PUT(self) -> None:
                self._serve()

            def do_HEAD(self) -> None:
                self._serve()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def stand_in() -> Iterator[tuple[StandInCluster, list[StandInNode]]]:
    """Two stand-in nodes sharing one StandInCluster."""
    cluster = StandInCluster()
    nodes = [StandInNode(cluster), StandInNode(cluster)]
    yield cluster, nodes
    for node in nodes:
        node.stop()


def target_of(nodes: list[StandInNode]) -> LoadTarget:
    return LoadTarget(
        urls=tuple(node.url for node in nodes),
        credentials=(STAND_IN_USER, STAND_IN_PASSWORD),
    )


def quick_load(target: LoadTarget, **options: Any) -> ClusterLoad:
    settings: dict[str, Any] = {
        "index": "loadcheck-test",
        "max_requests": 10_000,
        "max_seconds": 30.0,
        "interval_s": 0.005,
        "request_timeout_s": 2.0,
        "health_interval_s": 0.05,
        **options,
    }
    return ClusterLoad(target, **settings)


def test_a_healthy_cluster_gives_an_ok_report(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    cluster, nodes = stand_in
    with quick_load(target_of(nodes), max_requests=60) as load:
        assert load.wait(10)
    report = load.report
    assert report.ok, report.problems()
    assert report.stopped_by == "max_requests"
    assert report.requests == 60
    assert report.failed == report.retried == 0
    assert set(report.requests_by_kind) == {"write", "read", "search"}
    assert report.requests_by_kind["write"] == 30
    assert report.acknowledged_writes == report.writes_readable_afterwards == 30
    assert report.documents_counted == 30
    assert report.health_statuses.keys() == {"green"}
    assert 0 < report.latency_p50_ms <= report.latency_p99_ms <= report.latency_max_ms
    assert len(cluster.indices["loadcheck-test"]) == 30


def test_a_stopped_node_is_retried_on_the_other_so_nothing_fails(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    _, nodes = stand_in
    with quick_load(target_of(nodes)) as load:
        time.sleep(0.5)
        nodes[1].stop()
        time.sleep(1.0)
    report = load.report
    assert report.failed == 0, report.failure_samples
    assert report.retried > 0
    assert report.ok, report.problems()
    assert report.lost_writes == 0
    assert report.acknowledged_writes > 10


def test_a_request_failing_on_every_node_counts_as_failed(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    cluster, nodes = stand_in
    # Two nodes: the first two writes get a 503 from both, so exactly two requests fail.
    cluster.failing_write_attempts = 4
    with quick_load(target_of(nodes), max_requests=20) as load:
        assert load.wait(10)
    report = load.report
    assert report.failed == 2
    assert report.retried == 2
    # Each failed write went to the second node once; its second 503 had nowhere to go.
    assert report.retry_causes == {"HTTP 503": 2}
    assert not report.ok
    assert "2 of 20 request(s) failed on every node" in report.problems()
    assert len(report.failure_samples) == 2
    for sample in report.failure_samples:
        assert "write POST /loadcheck-test/_doc/" in sample
        assert all(f"{node.url}: HTTP 503" in sample for node in nodes)
    # Failed writes were never acknowledged, so none of them counts as lost.
    assert report.lost_writes == 0


def test_a_request_failing_on_one_node_only_is_retried_not_failed(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    cluster, nodes = stand_in
    cluster.failing_write_attempts = 1
    with quick_load(target_of(nodes), max_requests=10) as load:
        assert load.wait(10)
    assert (load.report.failed, load.report.retried) == (0, 1)
    assert load.report.retry_causes == {"HTTP 503": 1}
    assert load.report.ok


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A real local port that refuses connections, as a host whose JVM was killed does: a
    socket bound to it and never listening, so no other process can take the port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        yield f"http://127.0.0.1:{port}"


class ResettingNode:
    """A real local socket that accepts a request and resets the connection without an
    answer, as a node does when its JVM is killed while it handles the request."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.resets = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                # Linger 0: close() sends a RST, not a FIN.
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.resets += 1

    def close(self) -> None:
        self.listener.close()


def test_a_refused_connection_is_retried_on_the_next_node_not_failed(
    stand_in: tuple[StandInCluster, list[StandInNode]], refusing_url: str
) -> None:
    _, nodes = stand_in
    target = LoadTarget(
        urls=(refusing_url, *(node.url for node in nodes)),
        credentials=(STAND_IN_USER, STAND_IN_PASSWORD),
    )
    with quick_load(target, max_requests=30) as load:
        assert load.wait(10)
    report = load.report
    assert report.failed == 0, report.failure_samples
    # Round robin over three URLs: every third request starts on the refusing one.
    assert report.retried == 10
    assert report.retry_causes == {"ConnectError": 10}
    assert report.ok, report.problems()
    assert report.acknowledged_writes == report.writes_readable_afterwards == 15


def test_a_connection_reset_mid_request_is_retried_on_the_next_node(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    _, nodes = stand_in
    resetting = ResettingNode()
    try:
        target = LoadTarget(
            urls=(resetting.url, *(node.url for node in nodes)),
            credentials=(STAND_IN_USER, STAND_IN_PASSWORD),
        )
        with quick_load(target, max_requests=30) as load:
            assert load.wait(10)
    finally:
        resetting.close()
    report = load.report
    assert report.failed == 0, report.failure_samples
    assert report.retried == 10
    assert resetting.resets >= 10
    assert sum(report.retry_causes.values()) == 10
    assert set(report.retry_causes) <= {"ReadError", "RemoteProtocolError", "WriteError"}
    assert report.ok, report.problems()


def test_a_load_that_every_node_refuses_cannot_start_and_says_why(
    refusing_url: str,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as second:
        second.bind(("127.0.0.1", 0))
        other = f"http://127.0.0.1:{second.getsockname()[1]}"
        with pytest.raises(LoadcheckError, match="ConnectError"):
            quick_load(LoadTarget(urls=(refusing_url, other))).start()


def test_failure_samples_are_capped_and_carry_no_credentials(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    cluster, nodes = stand_in
    cluster.failing_write_attempts = 10_000
    with quick_load(target_of(nodes), max_requests=30) as load:
        assert load.wait(10)
    report = load.report
    assert report.failed == 30
    assert len(report.failure_samples) == 10
    assert "no write was acknowledged; the load proves nothing" in report.problems()
    serialized = json.dumps(report.to_dict())
    assert STAND_IN_PASSWORD not in serialized
    assert base64.b64encode(STAND_IN_PASSWORD.encode()).decode() not in serialized


def test_red_health_is_recorded(stand_in: tuple[StandInCluster, list[StandInNode]]) -> None:
    cluster, nodes = stand_in
    # Each phase lasts 20 health intervals, so a loaded machine still samples it twice.
    with quick_load(target_of(nodes)) as load:
        time.sleep(1.0)
        cluster.health = "red"
        time.sleep(1.0)
        cluster.health = "yellow"
        time.sleep(1.0)
    report = load.report
    assert report.red_seen
    assert report.health_statuses["red"] >= 2
    assert {"green", "red", "yellow"} <= report.health_statuses.keys()
    assert not report.ok
    assert any("health was red" in problem for problem in report.problems())


def test_health_is_unavailable_when_no_node_answers(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    _, nodes = stand_in
    load = quick_load(target_of(nodes))
    load.start()
    time.sleep(0.2)
    for node in nodes:
        node.stop()
    time.sleep(0.3)
    report = load.stop()
    assert report.health_statuses.get("unavailable", 0) >= 1
    assert report.failed > 0
    assert report.verification_error is not None
    assert any("could not be verified" in problem for problem in report.problems())


def test_lost_writes_are_detected(stand_in: tuple[StandInCluster, list[StandInNode]]) -> None:
    cluster, nodes = stand_in
    cluster.forget_on_refresh = 3  # acknowledged, then gone, as after a lost shard copy
    with quick_load(target_of(nodes), max_requests=40) as load:
        assert load.wait(10)
    report = load.report
    assert report.failed == 0
    assert report.acknowledged_writes == 20
    assert report.writes_readable_afterwards == 17
    assert report.lost_writes == 3
    assert not report.ok
    assert "3 of 20 acknowledged write(s) were not readable afterwards" in report.problems()


def test_wrong_credentials_stop_the_load_before_it_starts(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    _, nodes = stand_in
    wrong = LoadTarget(
        urls=tuple(node.url for node in nodes), credentials=(STAND_IN_USER, "not-it")
    )
    with pytest.raises(LoadcheckError, match="HTTP 401") as raised:
        quick_load(wrong).start()
    assert "not-it" not in str(raised.value)


def test_an_existing_index_is_reused(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    cluster, nodes = stand_in
    for _ in range(2):
        with quick_load(target_of(nodes), max_requests=10) as load:
            assert load.wait(10)
        assert load.report.ok
    # Each run writes its own ids, so the second run verifies only its own writes.
    assert len(cluster.indices["loadcheck-test"]) == 10


def test_the_report_is_only_there_after_stop(
    stand_in: tuple[StandInCluster, list[StandInNode]],
) -> None:
    _, nodes = stand_in
    load = quick_load(target_of(nodes))
    with pytest.raises(LoadcheckError, match="never started"):
        load.stop()
    load.start()
    with pytest.raises(LoadcheckError, match="still running"):
        _ = load.report
    first = load.stop()
    assert load.stop() is first is load.report


@pytest.mark.parametrize(
    "options",
    [{"max_requests": 0}, {"max_seconds": 0}, {"interval_s": -1}, {"index": "Upper"}],
)
def test_nonsense_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(LoadcheckError):
        ClusterLoad(LoadTarget(urls=("http://127.0.0.1:9",)), **options)


# -- LoadTarget.from_lab_json ------------------------------------------------------------


def test_a_tls_lab_json_gives_urls_ca_and_credentials(tmp_path: Path) -> None:
    (tmp_path / ".secrets").mkdir()
    (tmp_path / ".secrets" / "admin").write_text(STAND_IN_PASSWORD + "\n")
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(
        json.dumps(
            {
                "mode": "tls",
                "nodes": [{"url": "https://127.0.0.11:9200/"}, {"url": "https://127.0.0.12:9200"}],
                "ca_cert": "pki/ca.pem",
                "admin_user": "admin",
                "admin_password_file": ".secrets/admin",
            }
        )
    )
    target = LoadTarget.from_lab_json(lab_json)
    assert target.urls == ("https://127.0.0.11:9200", "https://127.0.0.12:9200")
    assert target.ca_cert == tmp_path / "pki" / "ca.pem"
    assert target.credentials == ("admin", STAND_IN_PASSWORD)
    assert STAND_IN_PASSWORD not in repr(target)


def test_an_open_lab_json_has_no_credentials(tmp_path: Path) -> None:
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(json.dumps({"mode": "open", "nodes": [{"url": "http://127.0.0.21:9200"}]}))
    target = LoadTarget.from_lab_json(lab_json)
    assert (target.ca_cert, target.credentials) == (None, None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not a readable lab.json"),
        ('{"nodes": []}', "at least one node URL"),
        ('{"nodes": [{"url": "127.0.0.1:9200"}]}', "must start with http"),
        (
            '{"nodes": [{"url": "http://127.0.0.1:9200"}], "admin_user": "admin",'
            ' "admin_password_file": "missing"}',
            "cannot read the admin password file",
        ),
    ],
)
def test_a_bad_lab_json_is_refused_with_a_reason(
    tmp_path: Path, content: str, message: str
) -> None:
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(content)
    with pytest.raises(LoadcheckError, match=message):
        LoadTarget.from_lab_json(lab_json)


# -- the command line --------------------------------------------------------------------


def write_lab_json(tmp_path: Path, nodes: list[StandInNode]) -> Path:
    password_file = tmp_path / "admin-password"
    password_file.write_text(STAND_IN_PASSWORD)
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(
        json.dumps(
            {
                "mode": "basic",
                "nodes": [{"url": node.url} for node in nodes],
                "admin_user": STAND_IN_USER,
                "admin_password_file": str(password_file),
            }
        )
    )
    return lab_json


def run_cli(lab_json: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clusterforge.testing.loadcheck",
            "--lab-json",
            str(lab_json),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_command_prints_the_report_and_exits_0_when_ok(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    _, nodes = stand_in
    report_file = tmp_path / "report.json"
    process = run_cli(
        write_lab_json(tmp_path, nodes),
        *("--seconds", "1", "--index", "cli-test", "--interval", "0.01"),
        *("--report", str(report_file)),
    )
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["ok"] and report["stopped_by"] == "max_seconds"
    assert report["failed"] == 0 and report["acknowledged_writes"] > 0
    assert json.loads(report_file.read_text()) == report
    assert STAND_IN_PASSWORD not in stdout + stderr


def test_the_command_exits_1_when_health_went_red(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    cluster, nodes = stand_in
    process = run_cli(write_lab_json(tmp_path, nodes), "--seconds", "1", "--index", "cli-red")
    assert process.stderr is not None
    assert "loadcheck: load on 2 node(s)" in process.stderr.readline()
    cluster.health = "red"
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 1
    report = json.loads(stdout)
    assert report["red_seen"] is True
    assert "cluster health was red" in report["problems"][0]


def test_the_command_exits_2_when_the_index_is_red_before_it_starts(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    cluster, nodes = stand_in
    cluster.health = "red"
    process = run_cli(write_lab_json(tmp_path, nodes), "--seconds", "1", "--index", "cli-red")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "index cli-red is not usable (health red)" in stderr


def test_the_command_stops_early_on_sigterm_and_still_reports(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    _, nodes = stand_in
    process = run_cli(write_lab_json(tmp_path, nodes), "--seconds", "600", "--index", "cli-term")
    assert process.stderr is not None
    assert "loadcheck: load on 2 node(s)" in process.stderr.readline()
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    report = json.loads(stdout)
    assert report["stopped_by"] == "caller"
    assert report["duration_s"] < 30


def test_the_command_exits_2_when_the_load_cannot_start(tmp_path: Path) -> None:
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(json.dumps({"nodes": [{"url": "http://127.0.0.1:9"}]}))
    process = run_cli(lab_json, "--seconds", "1")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "loadcheck: error: no node could check whether index" in stderr


# -- the real cluster --------------------------------------------------------------------


def test_ten_seconds_of_load_on_the_real_cluster_lose_nothing() -> None:
    lab_json = os.environ.get("CLUSTERFORGE_CLUSTER_JSON")
    if not lab_json:
        pytest.skip(
            "no cluster to talk to: set CLUSTERFORGE_CLUSTER_JSON to a lab.json "
            "(scripts/up writes inventories/lab/lab.json; molecule verify sets it)"
        )
    target = LoadTarget.from_lab_json(Path(lab_json))
    index = f"loadcheck-test-{uuid.uuid4().hex[:8]}"
    try:
        with ClusterLoad(target, index=index, max_seconds=10, interval_s=0.02) as load:
            assert load.wait(60)
        report = load.report
        assert report.ok, (report.problems(), report.failure_samples)
        assert report.failed == 0
        assert report.health_statuses.keys() == {"green"}
        assert report.acknowledged_writes == report.writes_readable_afterwards > 0
        assert report.documents_counted == report.acknowledged_writes
    finally:
        with target.http_client(timeout_s=30) as client:
            client.delete(f"{target.urls[0]}/{index}")


def test_the_real_cluster_client_verifies_the_ca() -> None:
    """The tls lab's certificates verify against its CA; without it they do not."""
    lab_json = os.environ.get("CLUSTERFORGE_CLUSTER_JSON")
    if not lab_json:
        pytest.skip("no cluster to talk to: set CLUSTERFORGE_CLUSTER_JSON to a lab.json")
    target = LoadTarget.from_lab_json(Path(lab_json))
    if target.ca_cert is None:
        pytest.skip("the cluster is not in tls mode")
    with target.http_client(timeout_s=10) as client:
        assert client.get(f"{target.urls[0]}/_cluster/health").status_code == 200
    without_ca = LoadTarget(urls=target.urls, credentials=target.credentials)
    with without_ca.http_client(timeout_s=10) as client, pytest.raises(httpx.ConnectError):
        client.get(f"{target.urls[0]}/_cluster/health")


def test_the_load_runs_while_a_command_runs_and_stops_with_it(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    _, nodes = stand_in
    process = run_cli(
        write_lab_json(tmp_path, nodes),
        *("--seconds", "60", "--index", "cli-during", "--interval", "0.01"),
        *("--", sys.executable, "-c", "import time; time.sleep(1.5); print('disruption done')"),
    )
    stdout, stderr = process.communicate(timeout=45)
    assert process.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["ok"] and report["stopped_by"] == "caller"
    assert report["duration_s"] < 30
    assert "disruption done" in stderr


def test_a_failing_command_under_load_exits_1(
    stand_in: tuple[StandInCluster, list[StandInNode]], tmp_path: Path
) -> None:
    _, nodes = stand_in
    process = run_cli(
        write_lab_json(tmp_path, nodes),
        *("--seconds", "60", "--index", "cli-during-fail", "--interval", "0.01"),
        # The command fails after a second, not at once: a load stopped before its first
        # acknowledged write "proves nothing" and is not ok, which is not what this tests.
        *("--", sys.executable, "-c", "import time; time.sleep(1); raise SystemExit(3)"),
    )
    stdout, stderr = process.communicate(timeout=45)
    assert process.returncode == 1
    assert json.loads(stdout)["ok"] is True, (stdout, stderr)
    assert "the command under load failed" in stderr
