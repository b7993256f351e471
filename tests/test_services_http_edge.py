"""The kit's HTTP edge guard in both services, over raw sockets (issue 49).

One answer per request, in order: a request refused behind others (a malformed head in the
same read, pipelined) is answered after them, and a request never runs while its client is
told it failed. A head missing Host, or with two Host or two Authorization lines, is a 400.
The head limit is measured on the bytes of the head, however they arrive. Every refusal
is counted in ``/metrics``. The fuzz at the end holds all of it on random pipelined pairs.

Each service runs under uvicorn with the kit's protocol on 127.0.0.1, as its CLI runs it;
side effects are counted in the services' own SQLite files.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from clusterforge_orders import OrderCreatedEvent, OrderServiceRuntime, create_app
from clusterforge_orders import load_settings as load_orders_settings
from clusterforge_service_kit.http_edge import DEFAULT_MAX_HEADER_BYTES, GuardedHttpToolsProtocol
from clusterforge_userdir import ServerSettings
from clusterforge_userdir import create_app as create_userdir_app
from uvicorn_server import serve_on_loopback

TOKEN = "edge-test-token-0123456789abcdef"
OTHER_TOKEN = "edge-other-token-0123456789abcd"
READ_TIMEOUT = 2.0
LIMIT = DEFAULT_MAX_HEADER_BYTES


@dataclass
class Service:
    name: str
    port: int
    database: Path
    # The request that changes something (an order, a user), and the table it lands in.
    create_path: bytes
    create_status: int
    table: str
    error_key: str
    metrics_prefix: str
    runtime: OrderServiceRuntime | None = None  # the order service's, to add a listener

    def create_body(self, marker: str = "") -> bytes:
        """A new order or user; ``marker`` comes back in the answer's body."""
        if self.name == "orders":
            document = {"userId": f"u-{marker}", "productName": "p", "amount": 2}
            return json.dumps(document).encode()
        return json.dumps({"username": f"edge-{marker}-{uuid.uuid4().hex[:12]}"}).encode()

    def rows(self) -> int:
        with contextlib.closing(sqlite3.connect(self.database)) as connection:
            return int(connection.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])  # noqa: S608 (a fixed table name)

    @property
    def health_path(self) -> bytes:
        return b"/mock-api/health" if self.name == "userdir" else b"/health"


@pytest.fixture(params=["userdir", "orders"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    yield from _service(request.param, tmp_path, GuardedHttpToolsProtocol)


@pytest.fixture
def orders_service(tmp_path: Path) -> Iterator[Service]:
    yield from _service("orders", tmp_path, GuardedHttpToolsProtocol)


@pytest.fixture(params=["userdir", "orders"])
def unguarded_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    """The app under uvicorn's h11 protocol, without the kit's guard (a test, an ASGI host)."""
    yield from _service(request.param, tmp_path, "h11")


def _service(name: str, tmp_path: Path, protocol: Any) -> Iterator[Service]:
    runtime: OrderServiceRuntime | None = None
    if name == "userdir":
        database = tmp_path / "userdir.db"
        app = create_userdir_app(
            ServerSettings(
                database_url=f"sqlite:///{database}",
                auth_tokens=f"{TOKEN},{OTHER_TOKEN}",
                request_read_timeout=READ_TIMEOUT,
            )
        )
        described = ("/mock-api/users", 201, "userdir_users", "code", "userdir")
    else:
        database = tmp_path / "orders.db"
        settings = load_orders_settings(
            environ={},
            overrides={
                "orders.database-url": f"sqlite:///{database}",
                "orders.auth-tokens": [TOKEN, OTHER_TOKEN],
                "orders.read-timeout-seconds": READ_TIMEOUT,
            },
        )
        runtime = OrderServiceRuntime.open(settings, executor_await_termination_seconds=5)
        app = create_app(runtime=runtime)
        described = ("/orders", 200, "orders", "error", "orders")
    port, server, thread = serve_on_loopback(app, protocol, name="edge-test")
    path, status, table, key, prefix = described
    yield Service(name, port, database, path.encode(), status, table, key, prefix, runtime)
    server.should_exit = True
    thread.join(timeout=30)
    if runtime is not None:
        runtime.close()


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        return [
            f"{record.name}: {record.getMessage()}"
            for record in self.records
            if record.exc_info or record.levelno >= logging.ERROR or "Traceback" in record.msg
        ]


@pytest.fixture
def server_log() -> Iterator[_Collected]:
    """Every record of the services, uvicorn and asyncio (uvicorn's do not propagate)."""
    handler = _Collected()
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.error", "asyncio")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


# -- raw HTTP ----------------------------------------------------------------------------


def create_request(service: Service, *, trace: str = "", extra: bytes = b"") -> bytes:
    body = service.create_body(trace)
    return (
        b"POST " + service.create_path + b" HTTP/1.1\r\nHost: edge\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Content-Type: application/json\r\nX-Trace-Id: "
        + trace.encode()
        + b"\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def health_request(service: Service, *, trace: str = "", extra: bytes = b"") -> bytes:
    return (
        b"GET "
        + service.health_path
        + b" HTTP/1.1\r\nHost: edge\r\nX-Trace-Id: "
        + trace.encode()
        + b"\r\n"
        + extra
        + b"\r\n"
    )


def exchange(service: Service, pieces: list[bytes], *, pause: float = 0.03) -> bytes:
    """Send ``pieces`` as separate writes (``pause`` apart) and read until the server closes."""
    with socket.create_connection(("127.0.0.1", service.port), timeout=15) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index, piece in enumerate(pieces):
            if index:
                time.sleep(pause)
            with contextlib.suppress(OSError):  # the server may answer before taking it all
                connection.sendall(piece)
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := connection.recv(65536):
                received += chunk
    return received


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def answers_in(stream: bytes) -> list[Answer]:
    """The HTTP answers in ``stream``, in order (each with a Content-Length)."""
    answers = []
    while stream:
        head, separator, rest = stream.partition(b"\r\n\r\n")
        assert separator, f"incomplete answer: {stream[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        answers.append(Answer(int(lines[0].split(" ", 2)[1]), headers, rest[:length]))
        stream = rest[length:]
    return answers


def statuses(stream: bytes) -> list[int]:
    return [answer.status for answer in answers_in(stream)]


def metrics_text(service: Service) -> str:
    answer = httpx.get(
        f"http://127.0.0.1:{service.port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code == 200
    return answer.text


def counted(text: str, method: str, status: int, prefix: str) -> float:
    sample = f'{prefix}_http_requests_total{{method="{method}",status="{status}"}} '
    for line in text.splitlines():
        if line.startswith(sample):
            return float(line.removeprefix(sample))
    return 0.0


GARBAGE = b"GARBAGE\r\n\r\n"


# -- one answer per request, in order ----------------------------------------------------


def test_a_request_before_a_malformed_head_is_answered_before_the_400(
    service: Service, server_log: _Collected
) -> None:
    stream = exchange(service, [create_request(service, trace="first") + GARBAGE])
    answers = answers_in(stream)
    assert [answer.status for answer in answers] == [service.create_status, 400], stream
    assert b"-first" in answers[0].body
    assert service.error_key in answers[1].json()
    assert answers[1].headers["connection"] == "close"
    assert service.rows() == 1  # stored, and its client was told so
    assert server_log.tracebacks() == []


def test_two_requests_then_garbage_get_three_answers_and_no_traceback(
    service: Service, server_log: _Collected
) -> None:
    stream = exchange(
        service,
        [health_request(service, trace="one") + health_request(service, trace="two") + GARBAGE],
    )
    answers = answers_in(stream)
    assert [answer.status for answer in answers] == [200, 200, 400]
    time.sleep(0.3)  # a late failure would be logged now
    assert server_log.tracebacks() == []


@pytest.mark.parametrize(
    ("follower", "refusal"),
    [
        pytest.param(GARBAGE, 400, id="malformed-head"),
        pytest.param(b"GET /health HTTP/1.1\r\nHost: edge\r\n", 408, id="head-not-finished"),
    ],
)
def test_a_refusal_decided_while_the_request_before_runs_waits_for_its_answer(
    orders_service: Service, server_log: _Collected, follower: bytes, refusal: int
) -> None:
    assert orders_service.runtime is not None
    # A synchronous listener that outlasts the read timeout: the refusal is decided (the
    # 408 at READ_TIMEOUT) while the order is still being stored.
    orders_service.runtime.bus.subscribe(
        OrderCreatedEvent, lambda _event: time.sleep(READ_TIMEOUT + 0.5), name="slow"
    )
    stream = exchange(
        orders_service, [create_request(orders_service, trace="slow"), follower], pause=0.2
    )
    answers = answers_in(stream)
    assert [answer.status for answer in answers] == [200, refusal]
    assert b"-slow" in answers[0].body
    assert orders_service.rows() == 1
    assert server_log.tracebacks() == []


def test_a_request_refused_in_its_body_is_dropped_behind_the_one_before(
    service: Service, server_log: _Collected
) -> None:
    bad_chunked = (
        b"POST " + service.create_path + b" HTTP/1.1\r\nHost: edge\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n"
    )
    stream = exchange(service, [create_request(service) + bad_chunked])
    assert statuses(stream) == [service.create_status, 400]
    assert service.rows() == 1
    assert server_log.tracebacks() == []


def test_a_head_after_a_chunked_body_is_measured_alone(service: Service) -> None:
    body = service.create_body()
    chunked = (
        b"POST " + service.create_path + b" HTTP/1.1\r\nHost: edge\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    )
    second = padded_head(service, LIMIT, connection_close=True)
    stream = exchange(service, [chunked + second])
    assert statuses(stream) == [service.create_status, 200]
    assert service.rows() == 1


# -- Host and Authorization --------------------------------------------------------------


def _head(service: Service, lines: list[bytes], version: bytes = b"HTTP/1.1") -> bytes:
    return (
        b"POST "
        + service.create_path
        + b" "
        + version
        + b"\r\n"
        + b"".join(line + b"\r\n" for line in lines)
        + b"Content-Type: application/json\r\nConnection: close\r\n"
    )


AUTH = b"Authorization: Bearer " + TOKEN.encode()
OTHER_AUTH = b"Authorization: Bearer " + OTHER_TOKEN.encode()
HEAD_PROBLEMS = [
    pytest.param([AUTH], "no Host", id="no-host"),
    pytest.param([b"Host: edge", b"Host: edge", AUTH], "2 Host", id="two-hosts"),
    pytest.param([b"Host: a", b"Host: b", AUTH], "2 Host", id="two-different-hosts"),
    pytest.param([b"Host: edge", AUTH, AUTH], "2 Authorization", id="two-same-tokens"),
    pytest.param([b"Host: edge", OTHER_AUTH, AUTH], "2 Authorization", id="two-tokens"),
    pytest.param([b"Host: edge", AUTH, b"authorization: Bearer x"], "2 Auth", id="token-and-bad"),
    pytest.param([b"Host: edge", b"authorization: Bearer x", AUTH], "2 Auth", id="bad-and-token"),
]


@pytest.mark.parametrize(("lines", "named"), HEAD_PROBLEMS)
def test_host_and_authorization_must_come_once(
    service: Service, lines: list[bytes], named: str
) -> None:
    body = service.create_body()
    request = _head(service, lines) + b"Content-Length: %d\r\n\r\n" % len(body) + body
    before = counted(metrics_text(service), "POST", 400, service.metrics_prefix)
    answers = answers_in(exchange(service, [request]))
    assert [answer.status for answer in answers] == [400]
    document = answers[0].json()
    assert named in document["message"]
    if service.error_key == "code":
        assert document["code"] == 400
    else:
        assert document["violations"] == []
    assert service.rows() == 0
    after = counted(metrics_text(service), "POST", 400, service.metrics_prefix)
    assert after == before + 1


@pytest.mark.parametrize(
    "tokens", [[AUTH, b"Authorization: Bearer x"], [b"Authorization: Bearer x", AUTH], [AUTH, AUTH]]
)
def test_without_the_guard_two_authorizations_are_refused_by_both_apps(
    unguarded_service: Service, tokens: list[bytes]
) -> None:
    # The user directory read the last line, the order service the first.
    service = unguarded_service
    body = service.create_body()
    request = _head(service, [b"Host: edge", *tokens]) + b"Content-Length: %d\r\n\r\n" % len(body)
    assert statuses(exchange(service, [request + body])) == [401]
    assert service.rows() == 0


def test_http_1_0_without_host_is_served(service: Service) -> None:
    request = b"GET " + service.health_path + b" HTTP/1.0\r\n\r\n"
    assert statuses(exchange(service, [request])) == [200]


def test_one_host_and_one_token_are_served(service: Service) -> None:
    body = service.create_body()
    request = _head(service, [b"Host: edge", AUTH]) + b"Content-Length: %d\r\n\r\n" % len(body)
    assert statuses(exchange(service, [request + body])) == [service.create_status]


# -- the head limit, however the bytes arrive -------------------------------------------


def padded_head(service: Service, size: int, *, connection_close: bool = True) -> bytes:
    """A GET of /health whose head (request line to the empty line) is ``size`` bytes."""
    start = b"GET " + service.health_path + b" HTTP/1.1\r\nHost: edge\r\n"
    if connection_close:
        start += b"Connection: close\r\n"
    start += b"X-Padding: "
    padding = size - len(start) - len(b"\r\n\r\n")
    head = start + b"a" * padding + b"\r\n\r\n"
    assert len(head) == size
    return head


def _splits(head: bytes) -> list[list[bytes]]:
    size = len(head)
    cuts = [1, 17, size // 2, LIMIT - 1, LIMIT, size - 4, size - 3, size - 2, size - 1]
    splits = [[head]]
    splits += [[head[:cut], head[cut:]] for cut in cuts if 0 < cut < size]
    splits.append([head[start : start + 1000] for start in range(0, size, 1000)])
    return splits


@pytest.mark.parametrize(
    ("size", "status"),
    [
        pytest.param(LIMIT, 200, id="at-the-limit"),
        pytest.param(LIMIT + 1, 431, id="one-over"),
        pytest.param(16_401, 431, id="16401"),
    ],
)
def test_a_head_gets_the_same_answer_however_it_is_split(
    service: Service, size: int, status: int
) -> None:
    head = padded_head(service, size)
    seen = {}
    for pieces in _splits(head):
        seen[tuple(len(piece) for piece in pieces[:2])] = statuses(exchange(service, pieces))
    assert set(map(tuple, seen.values())) == {(status,)}, seen


def test_a_head_behind_a_body_in_the_same_read_is_measured_alone(service: Service) -> None:
    # The first request's head and body must not count towards the second's head.
    stream = exchange(service, [create_request(service) + padded_head(service, LIMIT)])
    assert statuses(stream) == [service.create_status, 200]
    stream = exchange(service, [create_request(service) + padded_head(service, LIMIT + 1)])
    assert statuses(stream) == [service.create_status, 431]
    assert service.rows() == 2


# -- every refusal counted ---------------------------------------------------------------


def test_the_guards_refusals_are_counted_in_metrics(service: Service) -> None:
    prefix = service.metrics_prefix
    before = metrics_text(service)
    exchange(service, [GARBAGE])  # 400, no request line: method "other"
    exchange(service, [padded_head(service, LIMIT + 1)])  # 431
    exchange(service, [b"GET " + service.health_path + b" HTTP/1.1\r\n\r\n"])  # no Host: 400
    exchange(service, [b"GET / HTTP/1.1\r\nHost: edge\r\n"])  # 408 after READ_TIMEOUT
    after = metrics_text(service)
    for method, status in (("other", 400), ("GET", 431), ("GET", 400), ("GET", 408)):
        grown = counted(after, method, status, prefix) - counted(before, method, status, prefix)
        assert grown == 1, (method, status, after)


# -- fuzz: random pipelined pairs, random splits -----------------------------------------

FUZZ_SEED = 49
FUZZ_SECONDS = 3.0


def _malformed_heads(service: Service) -> list[Callable[[str], bytes]]:
    path = service.create_path

    def with_lines(*lines: bytes) -> Callable[[str], bytes]:
        def head(trace: str) -> bytes:
            return (
                b"POST "
                + path
                + b" HTTP/1.1\r\nX-Trace-Id: "
                + trace.encode()
                + b"\r\n"
                + b"".join(line + b"\r\n" for line in lines)
                + b"Content-Length: 2\r\n\r\n{}"
            )

        return head

    return [
        lambda _trace: GARBAGE,
        lambda _trace: b"GET /\x00 HTTP/1.1\r\nHost: edge\r\n\r\n",
        lambda _trace: b"GET / HTTP/1.1\nHost: edge\n\n",
        lambda _trace: b"GET / HTTP/9.9\r\nHost: edge\r\n\r\n",
        with_lines(AUTH),  # no Host
        with_lines(b"Host: a", b"Host: b", AUTH),
        with_lines(b"Host: edge", AUTH, OTHER_AUTH),
        with_lines(b"Host: edge", b"Bad Header: x", AUTH),
        with_lines(b"Host: edge", AUTH, b"Content-Length: 1"),  # a second Content-Length
        with_lines(b"Host: edge", AUTH, b"X-Padding: " + b"a" * LIMIT),
        with_lines(b"Host: edge", AUTH, b"Transfer-Encoding: chunked"),
    ]


def _valid_seconds(service: Service) -> list[Callable[[str], bytes]]:
    close = b"Connection: close\r\n"
    return [
        lambda trace: health_request(service, trace=trace, extra=close),
        lambda trace: create_request(service, trace=trace, extra=close),
    ]


def _random_first(chance: random.Random, service: Service, trace: str) -> bytes:
    """A new order or user, its body in Content-Length or chunked framing.

    The JSON may hold CRLF CRLF as white space: the end of a chunked body is found only
    where the parser ends it, not at the first empty line in the data.
    """
    body = service.create_body(trace)
    if chance.random() < 0.5:
        body = body.replace(b"{", b"{\r\n\r\n", 1)
    if chance.random() < 0.5:
        return create_request(service, trace=trace).split(b"Content-Length:")[0] + (
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
    cuts = sorted(chance.sample(range(1, len(body)), k=chance.randint(0, 3)))
    chunks = [body[start:stop] for start, stop in itertools.pairwise([0, *cuts, len(body)])]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks)
    head = create_request(service, trace=trace).split(b"Content-Length:")[0]
    return head + b"Transfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


def _random_split(chance: random.Random, payload: bytes) -> list[bytes]:
    cuts = chance.sample(range(1, len(payload)), k=chance.randint(0, 3))
    bounds = [0, *sorted(cuts), len(payload)]
    return [payload[start:stop] for start, stop in itertools.pairwise(bounds)]


def test_fuzz_pipelined_pairs_answer_in_order_and_as_done(
    service: Service, server_log: _Collected
) -> None:
    chance = random.Random(FUZZ_SEED)
    malformed = _malformed_heads(service)
    valid = _valid_seconds(service)
    deadline = time.monotonic() + FUZZ_SECONDS
    rounds = creations_answered = 0
    while time.monotonic() < deadline:
        rounds += 1
        first_trace, second_trace = f"f{rounds}", f"s{rounds}"
        second_is_valid = chance.random() < 0.3
        make_second = chance.choice(valid if second_is_valid else malformed)
        first = _random_first(chance, service, first_trace)
        second = make_second(second_trace)
        stream = exchange(service, _random_split(chance, first + second), pause=0.002)
        answers = answers_in(stream)
        got = [answer.status for answer in answers]
        assert all(status < 500 for status in got), (rounds, got, second[:80])
        assert got[0] == service.create_status, (rounds, got, second[:80])
        assert f"-{first_trace}".encode() in answers[0].body
        assert len(answers) == 2, (rounds, got, second[:80])
        if second_is_valid:
            assert 200 <= got[1] < 300
            if second.startswith(b"POST"):
                assert f"-{second_trace}".encode() in answers[1].body
        else:
            assert got[1] in (400, 431), (rounds, got, second[:80])
        creations_answered += sum(
            1
            for answer, sent in zip(answers, (first, second), strict=True)
            if 200 <= answer.status < 300 and sent.startswith(b"POST")
        )
    assert rounds >= 20
    assert service.rows() == creations_answered
    time.sleep(0.3)
    assert server_log.tracebacks() == []


# -- one rule for bodies -----------------------------------------------------------------

NOT_UTF8 = [
    pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
    pytest.param(b"\xff", id="ff"),
    pytest.param(b"\xc0\xaf", id="overlong"),
    pytest.param(b"\xe4\xb8", id="truncated"),
]


@pytest.mark.parametrize("where", ["ignored", "read"])
@pytest.mark.parametrize("bad", NOT_UTF8)
def test_invalid_utf8_anywhere_in_a_json_body_is_400(
    service: Service, bad: bytes, where: str
) -> None:
    document = json.loads(service.create_body("utf8"))
    field = "ignoredField" if where == "ignored" else next(iter(document))
    document[field] = "@BAD@"
    body = json.dumps(document).encode().replace(b"@BAD@", b"ok" + bad)
    answer = httpx.post(
        f"http://127.0.0.1:{service.port}{service.create_path.decode()}",
        content=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 400, answer.text
    refusal = answer.json()
    assert service.error_key in refusal
    assert "UTF-8" in refusal["message"]
    assert service.rows() == 0
