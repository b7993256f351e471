"""The index lifecycle runner (clusterforge.host_runners.lifecycle): its pure decision over a
fetched state, what it never does (a write index, an index no policy matches, a red
cluster, a rollover without shard room, an index ISM manages), the executor's own
refusals, the textfile metric and the journal line; and, against a real HTTPS server on
loopback that answers as the engine does, one whole run's calls. It runs on the nodes
with their python3 alone, so it must import the standard library only. Against a real
engine it runs on the lab (docs/lifecycle.md, "The live check")."""

from __future__ import annotations

import ast
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusterforge.host_runners import lifecycle as lifecycle_runner
from clusterforge.host_runners.common import Client
from clusterforge.host_runners.lifecycle import (
    LAST_RUN_SUCCESS,
    LAST_SUCCESS,
    Action,
    ClusterState,
    Index,
    Series,
    decide,
    execute,
    journal_line,
    metric_text,
    policy_gauges,
)
from clusterforge.plan.lifecycle.lifecycle import check_policies
from loopback_pki import loopback_server_certificate

NOW = 1_800_000_000.0
MB = 1024**2
GREEN = ClusterState(status="green", open_shards=10, data_nodes=3, max_shards_per_node=1000)
(EVENTS, LOGS) = check_policies(
    [
        {
            "name": "events",
            "index_pattern": "events-*",
            "alias": "events",
            "rollover": {"max_docs": 1000, "max_primary_size": "1mb"},
            "replicas_after": "1m",
            "replicas": 0,
            "read_only_after": "2m",
            "force_merge_after": "2m",
            "max_segments": 1,
            "delete_after": "5m",
            "max_total_size": "10mb",
        },
        {"name": "logs", "data_stream": "logs-app", "delete_after": "5m"},
    ]
)


def index(name: str, age_seconds: float, **fields: Any) -> Index:
    """An index that rolled over ``age_seconds`` ago (a write index: created then)."""
    if fields.get("is_write"):
        return Index(name=name, created_epoch=NOW - age_seconds, **fields)
    return Index(
        name=name,
        created_epoch=NOW - age_seconds - 600,
        rolled_over_epoch=NOW - age_seconds,
        **fields,
    )


def series(*indices: Index, policy: dict[str, Any] = EVENTS, **fields: Any) -> Series:
    return Series(policy=policy, indices=indices, **fields)


def kinds(decision: Any) -> list[tuple[str, str]]:
    return [(action.action, action.index) for action in decision.actions]


def test_the_runner_imports_the_standard_library_only() -> None:
    # Its own package's modules come in relatively (level 1); the whole package runs
    # alone under python3 -I in tests/test_host_runners.py.
    tree = ast.parse(Path(lifecycle_runner.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_a_write_index_over_a_threshold_rolls_over_with_its_reason() -> None:
    decision = decide(GREEN, [series(index("events-000001", 30, is_write=True, docs=1200))], NOW)
    (action,) = decision.actions
    assert (action.action, action.index, action.target) == ("rollover", "events-000001", "events")
    assert action.reason == "1200 docs >= max_docs 1000"
    under = decide(GREEN, [series(index("events-000001", 30, is_write=True, docs=999))], NOW)
    assert under.actions == []
    by_size = decide(
        GREEN, [series(index("events-000001", 30, is_write=True, primary_bytes=MB))], NOW
    )
    assert by_size.actions[0].reason == "primary size 1.0mb >= max_primary_size 1.0mb"


def test_the_phases_apply_by_age_since_rollover_oldest_first_never_to_the_write_index() -> None:
    old = index("events-000001", 400, total_bytes=MB)
    middle = index("events-000002", 150, replicas=1, primary_segments=4, total_bytes=MB)
    young = index("events-000003", 70, replicas=1, primary_segments=4, total_bytes=MB)
    write = index("events-000004", 70, is_write=True, replicas=1, primary_segments=9, docs=5)
    decision = decide(GREEN, [series(old, middle, young, write)], NOW)
    assert kinds(decision) == [
        ("delete", "events-000001"),
        ("replicas", "events-000002"),
        ("read_only", "events-000002"),
        ("force_merge", "events-000002"),
        ("replicas", "events-000003"),
    ]
    reasons = {(a.action, a.index): a.reason for a in decision.actions}
    assert reasons[("delete", "events-000001")] == "rolled over 6m ago >= delete_after 5m"
    assert reasons[("force_merge", "events-000002")].endswith("4 primary segments > 1 per shard")
    assert all(action.index != "events-000004" for action in decision.actions)


def test_age_counts_from_the_rollover_not_the_creation() -> None:
    # Created 10 minutes ago, rolled over 1 minute ago: not yet past delete_after 5m.
    fresh = Index(name="events-000001", created_epoch=NOW - 600, rolled_over_epoch=NOW - 60)
    write = index("events-000002", 60, is_write=True)
    assert ("delete", "events-000001") not in kinds(decide(GREEN, [series(fresh, write)], NOW))


def test_what_is_done_already_is_not_done_again() -> None:
    done = index(
        "events-000001", 200, replicas=0, write_blocked=True, primary_segments=1, primaries=1
    )
    write = index("events-000002", 10, is_write=True)
    assert decide(GREEN, [series(done, write)], NOW).actions == []


def test_the_size_cap_deletes_the_oldest_non_write_indices_while_over() -> None:
    indices = [
        index(f"events-00000{n}", 100 - n * 10, total_bytes=4 * MB, replicas=0, primary_segments=1)
        for n in range(1, 4)
    ]
    write = index("events-000004", 5, is_write=True, total_bytes=4 * MB)
    decision = decide(GREEN, [series(*indices, write)], NOW)
    # 16 MB over a 10 MB cap: the two oldest go, and 8 MB is left.
    deletes = [a for a in decision.actions if a.action == "delete"]
    assert [a.index for a in deletes] == ["events-000001", "events-000002"]
    assert deletes[0].reason == "the pattern holds 16.0mb > max_total_size 10.0mb; oldest index"
    # Only the write index over the cap: it is never deleted; the run says so.
    alone = decide(
        GREEN, [series(index("events-000009", 5, is_write=True, total_bytes=20 * MB))], NOW
    )
    assert alone.actions == []
    assert "with no index left to delete but the write index" in alone.notes[0]


def test_without_a_known_write_index_nothing_is_touched() -> None:
    # The alias is missing (a real engine's answer for orders, which has none): every
    # index of the pattern might be written to, so none is deleted.
    lone = index("events-000001", 9999, total_bytes=100 * MB)
    decision = decide(GREEN, [series(lone, target_found=False)], NOW)
    assert decision.actions == []
    assert "no write index behind events; nothing done" in decision.notes[0]


def test_a_red_cluster_is_left_alone() -> None:
    red = ClusterState(status="red", open_shards=10, data_nodes=3)
    decision = decide(
        red, [series(index("events-000001", 9999), index("x", 1, is_write=True))], NOW
    )
    assert decision.actions == []
    assert decision.notes == ["the cluster is red: nothing done until it is not"]


def test_no_rollover_without_room_under_the_shard_limit() -> None:
    full = ClusterState(status="yellow", open_shards=2999, data_nodes=3, max_shards_per_node=1000)
    write = index("events-000001", 30, is_write=True, docs=5000, primaries=1, replicas=1)
    decision = decide(full, [series(write)], NOW)
    assert decision.actions == []
    assert "2999 open shards + 2 new > the limit 3000" in decision.notes[0]
    # The rollovers of one run count against the limit together.
    room_for_one = ClusterState(status="green", open_shards=2997, data_nodes=3)
    other = dict(EVENTS, name="other", index_pattern="other-*", alias="other")
    both = decide(
        room_for_one,
        [
            series(write),
            series(index("other-000001", 30, is_write=True, docs=5000, replicas=1), policy=other),
        ],
        NOW,
    )
    assert kinds(both) == [("rollover", "events-000001")]


def test_an_index_the_policy_does_not_match_is_never_acted_on() -> None:
    stranger = index("orders", 99999, total_bytes=100 * MB)
    write = index("events-000002", 10, is_write=True)
    decision = decide(GREEN, [series(stranger, write)], NOW)
    assert all(action.index != "orders" for action in decision.actions)


def test_a_pattern_ism_manages_is_left_to_ism() -> None:
    managed = index("events-000001", 9999, ism_policy="hot-warm")
    decision = decide(GREEN, [series(managed, index("events-000002", 1, is_write=True))], NOW)
    assert decision.actions == []
    assert "ISM manages events-000001" in decision.notes[0]


def test_a_data_streams_newest_backing_index_is_its_write_index() -> None:
    backing = [
        index(".ds-logs-app-000001", 600),
        index(".ds-logs-app-000002", 30, is_write=True),
    ]
    decision = decide(GREEN, [series(*backing, policy=LOGS)], NOW)
    assert kinds(decision) == [("delete", ".ds-logs-app-000001")]


def test_without_an_alias_the_newest_index_counts_as_written_to() -> None:
    (dated,) = check_policies([{"name": "daily", "index_pattern": "app-*", "delete_after": "1m"}])
    older = Index(name="app-2027.01.14", created_epoch=NOW - 86400)
    newest = Index(name="app-2027.01.15", created_epoch=NOW - 3600)
    assert kinds(decide(GREEN, [series(older, newest, policy=dated)], NOW)) == [
        ("delete", "app-2027.01.14")
    ]


def test_the_executor_refuses_a_write_index_and_a_stranger_whatever_asked() -> None:
    one = series(index("events-000001", 999), index("events-000002", 1, is_write=True))
    client: Any = None  # never reached: the refusal comes first
    with pytest.raises(ValueError, match="is the write index of events"):
        execute(client, Action("events", "delete", "events-000002", "asked"), one)
    with pytest.raises(ValueError, match="orders is not an index of policy events"):
        execute(client, Action("events", "delete", "orders", "asked"), one)
    with pytest.raises(ValueError, match="not the write index"):
        execute(client, Action("events", "rollover", "events-000001", "asked"), one)


def test_the_metric_and_the_journal_line() -> None:
    one = series(
        index("events-000001", 100, total_bytes=3 * MB), index("events-000002", 1, is_write=True)
    )
    gauges = policy_gauges([one], deleted=set())
    text = metric_text(
        cluster="lab",
        now=NOW,
        run_ok=True,
        acting=True,
        last_success=NOW,
        counts={("events", "delete"): 2},
        gauges=gauges,
    )
    assert f'{LAST_SUCCESS}{{cluster="lab"}} 1800000000.000' in text
    assert f'{LAST_RUN_SUCCESS}{{cluster="lab"}} 1' in text
    assert (
        'clusterforge_lifecycle_actions_total{cluster="lab",policy="events",action="delete"} 2'
        in text
    )
    assert 'clusterforge_lifecycle_size_bytes{cluster="lab",policy="events"} 3145728.000' in text
    assert (
        'clusterforge_lifecycle_oldest_index_timestamp_seconds{cluster="lab",policy="events"} '
        f"{NOW - 100:.3f}" in text
    )
    assert 'clusterforge_lifecycle_delete_after_seconds{cluster="lab",policy="events"} 300' in text
    standby = metric_text(
        cluster="lab", now=NOW, run_ok=False, acting=False, last_success=None, counts={}, gauges={}
    )
    assert LAST_SUCCESS + "{" not in standby
    line = journal_line(
        {
            "node": "os-1",
            "role": "acting",
            "state": "OK",
            "actions": ["delete:events-1"],
            "note": "a b",
        }
    )
    assert (
        line == "clusterforge-lifecycle node=os-1 role=acting state=OK actions=delete:events-1 "
        'note="a b"'
    )


# ---------------------------------------------------------------- one run over HTTPS


class FakeEngine:
    """What a run reads, and the calls it makes, as the engine answers them."""

    def __init__(self, manager: str) -> None:
        self.manager = manager
        self.calls: list[tuple[str, str, Any]] = []
        # (method, path) -> an error status to answer instead.
        self.errors: dict[tuple[str, str], int] = {}
        created = int((NOW - 900) * 1000)
        rolled = int((NOW - 400) * 1000)
        self.answers: dict[tuple[str, str], Any] = {
            ("GET", "/_cat/cluster_manager"): [{"node": manager}],
            ("GET", "/_cluster/health"): {
                "status": "yellow",
                "active_shards": 10,
                "number_of_data_nodes": 3,
            },
            # As a 2.19 engine nests it (the lab answered {"defaults": {"cluster": ...}}).
            ("GET", "/_cluster/settings"): {
                "persistent": {"cluster": {"max_shards_per_node": "4"}},
                "defaults": {"cluster": {"max_shards_per_node": "1000"}},
            },
            ("GET", "/events-*/_alias/events"): {
                "events-000001": {"aliases": {"events": {"is_write_index": False}}},
                "events-000002": {"aliases": {"events": {"is_write_index": True}}},
            },
            ("GET", "/_cat/indices/events-*"): [
                {
                    "index": "events-000001",
                    "status": "open",
                    "pri": "1",
                    "rep": "0",
                    "docs.count": "1000",
                    "store.size": "100",
                    "pri.store.size": "100",
                    "pri.segments.count": "1",
                },
                {
                    "index": "events-000002",
                    "status": "open",
                    "pri": "1",
                    "rep": "0",
                    "docs.count": "1500",
                    "store.size": "100",
                    "pri.store.size": "100",
                    "pri.segments.count": "3",
                },
            ],
            ("GET", "/_cluster/state/metadata/events-*"): {
                "metadata": {
                    "indices": {
                        "events-000001": {
                            "state": "open",
                            "settings": {
                                "index": {
                                    "creation_date": str(created),
                                    "number_of_replicas": "0",
                                    "number_of_shards": "1",
                                    "blocks": {"write": "true"},
                                }
                            },
                            "rollover_info": {"events": {"time": rolled}},
                        },
                        "events-000002": {
                            "state": "open",
                            "settings": {
                                "index": {
                                    "creation_date": str(rolled),
                                    "number_of_replicas": "0",
                                    "number_of_shards": "1",
                                }
                            },
                        },
                    }
                }
            },
            ("GET", "/_data_stream/logs-app"): {"data_streams": []},
            ("GET", "/_cat/indices/.ds-logs-app-*"): [],
            ("GET", "/_cluster/state/metadata/.ds-logs-app-*"): {},
            ("POST", "/events-000002/_refresh"): {"_shards": {"total": 1, "successful": 1}},
            ("POST", "/events/_rollover"): {"rolled_over": True, "new_index": "events-000003"},
            ("DELETE", "/events-000001"): {"acknowledged": True},
        }


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[FakeEngine, dict[str, Any]]]:
    """A real HTTPS server on loopback answering as the engine, and a node's config.json
    (its credentials file and state directory in tmp_path)."""
    ca, cert, key = loopback_server_certificate(tmp_path / "pki", "lifecycle-test")
    fake = FakeEngine(manager="os-1")
    server, url = _serve(fake, cert, key)
    credentials = tmp_path / "credentials.json"
    credentials.write_text(json.dumps({"username": "clusterforge-lifecycle", "password": "pw"}))
    state = tmp_path / "state"
    state.mkdir()
    config = {
        "cluster": "lab",
        "node": "os-1",
        "node_name": "os-1",
        "policies": [EVENTS, LOGS],
        "ism_installed": False,
        # A stopped node first: the run goes on through the next one.
        "urls": ["https://127.0.0.1:1", url],
        "ca_file": str(ca),
        "credentials_file": str(credentials),
        "state_dir": str(state),
        "metric_file": "clusterforge_lifecycle.prom",
        "timeout": 5,
    }
    yield fake, config
    server.shutdown()
    server.server_close()


def _client(config: dict[str, Any]) -> Client:
    return Client(
        urls=config["urls"], ca_file=config["ca_file"], username="u", password="p", timeout=5
    )


def test_a_run_acts_through_the_core_apis_and_records_it(
    engine: tuple[FakeEngine, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, config = engine
    monkeypatch.setattr(lifecycle_runner.time, "time", lambda: NOW)
    assert lifecycle_runner.main([str(Path(config["credentials_file"]).parent / "c.json")]) == 1
    config_file = Path(config["state_dir"]).parent / "config.json"
    config_file.write_text(json.dumps(config))
    assert lifecycle_runner.main([str(config_file)]) == 0
    writes = [(method, path, body) for method, path, body in fake.calls if method != "GET"]
    # The write index is refreshed before its stats are read (a search-idle shard's
    # counts stand still). events-000002 (the write index) holds 1500 docs: rolled over
    # with the conditions; events-000001 rolled over 400 s ago, past delete_after 5m:
    # deleted. Nothing else.
    assert writes == [
        ("POST", "/events-000002/_refresh", None),
        (
            "POST",
            "/events/_rollover",
            {"conditions": {"max_docs": 1000, "max_size": f"{MB}b"}},
        ),
        ("DELETE", "/events-000001", None),
    ]
    metric = (Path(config["state_dir"]) / "clusterforge_lifecycle.prom").read_text()
    assert f'{LAST_SUCCESS}{{cluster="lab"}} {NOW:.3f}' in metric
    assert 'action="rollover"} 1' in metric and 'action="delete"} 1' in metric
    # The counters add up across runs.
    assert lifecycle_runner.main([str(config_file)]) == 0
    metric = (Path(config["state_dir"]) / "clusterforge_lifecycle.prom").read_text()
    assert 'action="delete"} 2' in metric


def test_a_node_that_is_not_the_elected_manager_only_records_a_standby_run(
    engine: tuple[FakeEngine, dict[str, Any]],
) -> None:
    fake, config = engine
    fake.answers[("GET", "/_cat/cluster_manager")] = [{"node": "os-2"}]
    ok, line, record = lifecycle_runner.run(config, _client(config), now=NOW, node="os-1")
    assert ok and "role=standby" in line and "the elected manager os-2 acts" in line
    assert [method for method, _, _ in fake.calls] == ["GET"]
    assert LAST_SUCCESS + "{" not in record["text"]


def test_a_red_cluster_gets_no_call_but_reads(engine: tuple[FakeEngine, dict[str, Any]]) -> None:
    fake, config = engine
    fake.answers[("GET", "/_cluster/health")] = {"status": "red", "number_of_data_nodes": 3}
    ok, line, _ = lifecycle_runner.run(config, _client(config), now=NOW, node="os-1")
    assert ok and "the cluster is red" in line
    assert {method for method, _, _ in fake.calls} == {"GET"}


def test_an_index_another_run_deleted_is_no_failure(
    engine: tuple[FakeEngine, dict[str, Any]],
) -> None:
    fake, config = engine
    del fake.answers[("DELETE", "/events-000001")]  # the fake answers 404
    ok, line, _ = lifecycle_runner.run(config, _client(config), now=NOW, node="os-1")
    assert ok and "delete:events-000001: not deleted: already gone" in line


def test_a_failed_action_fails_the_run_and_keeps_the_last_success(
    engine: tuple[FakeEngine, dict[str, Any]],
) -> None:
    fake, config = engine
    fake.answers[("DELETE", "/events-000001")] = None  # the fake answers 404
    fake.errors[("DELETE", "/events-000001")] = 503
    ok, line, record = lifecycle_runner.run(config, _client(config), now=NOW, node="os-1")
    assert not ok
    assert "state=FAILED" in line and "failed=delete:events-000001" in line
    assert f'{LAST_RUN_SUCCESS}{{cluster="lab"}} 0' in record["text"]


def _serve(fake: FakeEngine, cert: Path, key: Path) -> tuple[ThreadingHTTPServer, str]:
    import ssl

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            path = self.path.split("?", 1)[0]
            fake.calls.append((self.command, self.path, body))
            answer = fake.answers.get((self.command, path))
            status = 200 if answer is not None else 404
            status = fake.errors.get((self.command, path), status)
            data = json.dumps(answer if answer is not None else {"error": "none"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PUT(self) -> None:
            self._answer()

        def do_DELETE(self) -> None:
            self._answer()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"https://127.0.0.1:{server.server_address[1]}"


# ---------------------------------------------------------------- properties of decide()

from hypothesis import given, settings  # noqa: E402 - the properties' own imports
from hypothesis import strategies as st  # noqa: E402

NAMES = st.sampled_from(["events-000001", "events-000002", "events-000003", "orders", "logs-1"])


@st.composite
def states(draw: st.DrawFn) -> tuple[ClusterState, Series]:
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    write = draw(st.sampled_from(names))
    indices = []
    for name in names:
        rolled = draw(st.one_of(st.none(), st.floats(0, 3600)))
        indices.append(
            Index(
                name=name,
                created_epoch=NOW - draw(st.floats(0, 7200)),
                rolled_over_epoch=None if rolled is None else NOW - rolled,
                is_write=name == write,
                docs=draw(st.integers(0, 5000)),
                primary_bytes=draw(st.integers(0, 4 * MB)),
                total_bytes=draw(st.integers(0, 8 * MB)),
                replicas=draw(st.integers(0, 2)),
                primary_segments=draw(st.integers(0, 9)),
                write_blocked=draw(st.booleans()),
                is_open=draw(st.booleans()),
            )
        )
    cluster = ClusterState(
        status=draw(st.sampled_from(["green", "yellow", "red"])),
        open_shards=draw(st.integers(0, 3000)),
        data_nodes=3,
    )
    return cluster, series(*indices, target_found=draw(st.booleans()) or True)


@settings(max_examples=400, deadline=None)
@given(states())
def test_decide_never_breaks_its_promises(state: tuple[ClusterState, Series]) -> None:
    cluster, one = state
    decision = decide(cluster, [one], NOW)
    write = next(index.name for index in one.indices if index.is_write)
    by_name = {index.name: index for index in one.indices}
    if cluster.status == "red":
        assert decision.actions == []
    for action in decision.actions:
        # Only the policy's own indices, and the write index only for its rollover.
        assert action.index.startswith("events-"), action
        assert (action.index == write) == (action.action == "rollover"), action
        if action.action == "delete" and "max_total_size" not in action.reason:
            assert NOW - by_name[action.index].age_basis >= 300, action
    rollovers = [action for action in decision.actions if action.action == "rollover"]
    assert len(rollovers) <= 1
    if rollovers:
        assert cluster.open_shards + 1 <= cluster.shard_limit


def test_the_shard_limit_is_read_as_the_engine_nests_it(
    engine: tuple[FakeEngine, dict[str, Any]],
) -> None:
    fake, config = engine
    # 3 per node x 3 data nodes = 9 < 10 open shards + 1: the rollover waits.
    fake.answers[("GET", "/_cluster/settings")] = {
        "persistent": {"cluster": {"max_shards_per_node": "3"}},
        "defaults": {"cluster": {"max_shards_per_node": "1000"}},
    }
    ok, line, _ = lifecycle_runner.run(config, _client(config), now=NOW, node="os-1")
    assert ok and "10 open shards + 1 new > the limit 9" in line
    assert ("POST", "/events/_rollover") not in {(m, p.split("?")[0]) for m, p, _ in fake.calls}


def test_a_runner_that_cannot_reach_the_cluster_keeps_what_it_saw_last(
    engine: tuple[FakeEngine, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The age of the oldest index keeps growing against the clock, so the alert on an
    # index past its delete age fires even when every run fails.
    fake, config = engine
    fake.answers.pop(("DELETE", "/events-000001"))
    fake.errors[("DELETE", "/events-000001")] = 503
    monkeypatch.setattr(lifecycle_runner.time, "time", lambda: NOW)
    config_file = Path(config["state_dir"]).parent / "config.json"
    config_file.write_text(json.dumps(config))
    assert lifecycle_runner.main([str(config_file)]) == 1  # the delete failed
    config_file.write_text(json.dumps(dict(config, urls=["https://127.0.0.1:1"])))
    assert lifecycle_runner.main([str(config_file)]) == 1  # no node answers
    metric = (Path(config["state_dir"]) / "clusterforge_lifecycle.prom").read_text()
    assert f'{LAST_RUN_SUCCESS}{{cluster="lab"}} 0' in metric
    assert (
        'clusterforge_lifecycle_oldest_index_timestamp_seconds{cluster="lab",policy="events"} '
        f"{NOW - 400:.3f}" in metric
    )
