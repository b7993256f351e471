"""The client against the real server over real sockets: every endpoint and every rule."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from clusterforge_userdir import (
    ClientConfig,
    PageResponse,
    RemoteAccessError,
    RemoteCallError,
    StatusStyle,
    ThirdUserResponse,
    UrlTemplateError,
    UserCreateRequest,
    UserDirectoryClient,
    UserResponse,
    UserSearchRequest,
    UserUpdateRequest,
    unwrap_strict,
)
from userdir_support import (
    RecordingServer,
    RunningServer,
    free_port,
    serve_in_thread,
    unique_username,
)

HEX32 = re.compile(r"^[0-9a-f]{32}$")
SECRET_TOKEN = "client-secret-token-do-not-log-0123"


@pytest.fixture
def client(userdir_server: RunningServer) -> Iterator[UserDirectoryClient]:
    with UserDirectoryClient(config=ClientConfig(root_uri=userdir_server.base_url)) as client:
        yield client


def build_echo_app() -> FastAPI:
    """A stand-in remote service whose answers the tests choose."""
    app = FastAPI()

    @app.api_route("/echo/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"])
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "method": request.method,
                "rawPath": request.scope["raw_path"].decode(),
                "query": request.scope["query_string"].decode(),
                "headers": dict(request.headers),
                "body": (await request.body()).decode(),
            },
            headers={"X-Trace-Id": request.headers.get("x-trace-id", "")},
        )

    @app.get("/status/{code}")
    async def status(code: int) -> Response:
        return PlainTextResponse("e" * 1500, status_code=code)

    @app.get("/third/{user_id}")
    async def third(user_id: int) -> JSONResponse:
        return JSONResponse(
            {"user_id": user_id, "user_name": "third", "created_at": "2024-05-01T08:30:00"}
        )

    @app.get("/file")
    async def file() -> Response:
        return PlainTextResponse(
            "a,b\n", headers={"Content-Disposition": 'attachment; filename="users.csv"'}
        )

    @app.get("/envelope/{kind}")
    async def envelope(kind: str) -> Response:
        bodies = {
            "null": "null",
            "failed": '{"code":500,"message":"库存不足","data":null}',
            "blank": '{"code":500,"message":"  ","data":null}',
            "ok": '{"code":0,"message":"OK","data":{"id":1,"username":"u","status":1,'
            '"createdAt":"2024-05-01T08:30:00"}}',
            "success-text": '{"code":0,"message":"Success","data":null}',
        }
        return Response(bodies[kind], media_type="application/json")

    @app.get("/slow")
    async def slow() -> PlainTextResponse:
        import asyncio

        await asyncio.sleep(0.6)
        return PlainTextResponse("done")

    @app.post("/sink")
    async def sink(request: Request) -> PlainTextResponse:
        await request.body()
        return PlainTextResponse("stored")

    @app.get("/not-json")
    async def not_json() -> PlainTextResponse:
        return PlainTextResponse("<html>")

    return app


@pytest.fixture(scope="module")
def echo_server() -> Iterator[RunningServer]:
    running = serve_in_thread(build_echo_app())
    yield running
    running.stop()


def echo_client(server: RunningServer, **config: Any) -> UserDirectoryClient:
    return UserDirectoryClient(config=ClientConfig(root_uri=server.base_url, **config))


# ---------------------------------------------------------------- every endpoint


def test_create_get_update_delete_round_trip(client: UserDirectoryClient) -> None:
    name = unique_username("client")
    created = client.create_user(
        UserCreateRequest(username=name, nickname="Nick", mobile="13800138000")
    )
    assert isinstance(created, UserResponse)
    assert (created.username, created.nickname, created.status) == (name, "Nick", 1)
    assert client.get_user(created.id) == created
    assert client.get_org_user(3, created.id) == created
    assert client.update_user(created.id, UserUpdateRequest(nickname="Renamed", status=2)) is True
    updated = client.get_user(created.id)
    assert updated is not None and (updated.nickname, updated.status) == ("Renamed", 2)
    assert client.delete_user(created.id) is True
    with pytest.raises(RemoteCallError) as missing:
        client.get_user(created.id)
    assert missing.value.status_code == 404
    assert '"code":404' in missing.value.response_body


def test_list_and_search(client: UserDirectoryClient) -> None:
    marker = unique_username("lst")
    ids = [
        client.create_user(UserCreateRequest(username=f"{marker}-{n}")).id  # type: ignore[union-attr]
        for n in range(3)
    ]
    found = client.list_users(keyword=marker.upper())
    assert [u.id for u in found] == ids
    assert [u.id for u in client.list_users(keyword=marker, page_size=2, page_num=2)] == ids[2:]
    assert [u.id for u in client.list_users(keyword=marker, status=[1, 2])] == ids
    assert client.list_users(keyword=marker, status=0) == []
    searched = client.search_users(UserSearchRequest(keyword=marker, status_list=[1]))
    assert [u.id for u in searched] == ids
    assert marker in {u.username[: len(marker)] for u in client.search_users(None)}


def test_health(client: UserDirectoryClient) -> None:
    assert client.health() == "UP"


def test_envelope_endpoints(client: UserDirectoryClient) -> None:
    name = unique_username("res")
    created = client.create_user_result(UserCreateRequest(username=name))
    assert created is not None and created.username == name
    assert client.get_user_result(created.id) == created
    assert created in client.list_users_result()
    page = client.page_users_result(page_num=1, page_size=100)
    assert isinstance(page, PageResponse) and page.page_size == 100 and page.total >= 1
    with pytest.raises(RemoteCallError) as duplicate:
        client.create_user_result(UserCreateRequest(username=name))
    assert duplicate.value.status_code == 200
    assert "already taken" in duplicate.value.message
    with pytest.raises(RemoteCallError) as missing:
        client.get_user_result(999_999_999)
    assert (missing.value.status_code, missing.value.message) == (200, "user 999999999 not found")


def test_duplicate_create_is_a_409_remote_call_error(client: UserDirectoryClient) -> None:
    name = unique_username("dup")
    client.create_user(UserCreateRequest(username=name))
    with pytest.raises(RemoteCallError) as duplicate:
        client.create_user(UserCreateRequest(username=name))
    assert duplicate.value.status_code == 409
    assert "client error" in duplicate.value.message


# ---------------------------------------------------------------- guards (rule 6)


def test_guards_send_nothing() -> None:
    # Nothing listens on this port: any request would raise RemoteAccessError.
    with UserDirectoryClient(config=ClientConfig(root_uri=f"http://127.0.0.1:{free_port()}")) as c:
        assert c.get_user(None) is None
        assert c.get_user_result(None) is None
        assert c.get_org_user(None, 1) is None
        assert c.get_org_user(1, None) is None
        assert c.create_user(None) is None
        assert c.create_user(UserCreateRequest(username="   ")) is None
        assert c.create_user(UserCreateRequest(username=None)) is None
        assert c.create_user_result(UserCreateRequest(username="")) is None
        assert c.update_user(None, UserUpdateRequest(nickname="x")) is False
        assert c.update_user(1, None) is False
        assert c.delete_user(None) is False
        with pytest.raises(RemoteAccessError):
            c.get_user(1)


def test_paged_queries_substitute_defaults(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c:
        sent = c.exchange("GET", "/echo/x", query={"pageNum": None, "pageSize": None})
        assert sent.json()["query"] == ""
    recorded: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        recorded.append(request.url.query.decode())
        return httpx.Response(200, json=[])

    with UserDirectoryClient(transport=httpx.MockTransport(record)) as c:
        c.list_users(page_num=None, page_size=0)
        c.list_users(keyword="  ", status=[], page_num=3, page_size=20)
    assert recorded == ["pageNum=1&pageSize=10", "pageNum=3&pageSize=20"]


# ---------------------------------------------------------------- headers (rules 7, 8)


def test_default_and_configured_headers(echo_server: RunningServer) -> None:
    with echo_client(echo_server, bearer_token=SECRET_TOKEN, tenant_id="tenant-7") as c:
        echoed = c.exchange("POST", "/echo/h", json_body={"a": None}).json()
    headers = echoed["headers"]
    assert headers["accept"] == "application/json"
    assert headers["content-type"] == "application/json"
    assert headers["authorization"] == f"Bearer {SECRET_TOKEN}"
    assert headers["x-tenant-id"] == "tenant-7"
    assert HEX32.match(headers["x-trace-id"])
    assert echoed["body"] == '{"a":null}'


def test_trace_id_set_by_the_caller_is_kept_and_each_call_gets_its_own(
    echo_server: RunningServer,
) -> None:
    with echo_client(echo_server) as c:
        kept = c.exchange("GET", "/echo/t", headers={"X-Trace-Id": "caller-trace"})
        first = c.exchange("GET", "/echo/t")
        second = c.exchange("GET", "/echo/t")
    assert kept.json()["headers"]["x-trace-id"] == "caller-trace"
    assert first.trace_id != second.trace_id


@pytest.mark.parametrize("blank", ["", " ", "\t"])
@pytest.mark.parametrize("name", ["X-Trace-Id", "x-trace-id"])
def test_a_blank_trace_id_from_the_caller_is_replaced_by_a_new_one(name: str, blank: str) -> None:
    # The spec generates a trace id when the caller has not set one; a blank one is none.
    recorder = RecordingServer()
    with recorder.running() as base_url, echo_client_at(base_url) as c:
        c.exchange("GET", "/mock-api/health", headers={name: blank})
        c.exchange("POST", "/mock-api/users", json_body={"username": "u"}, headers={name: blank})
    assert len(recorder.requests) == 2
    for request in recorder.requests:
        assert HEX32.match(request.headers["x-trace-id"]), request.headers


# ---------------------------------------------------------------- URL rules 1-4


def test_query_values_are_encoded_and_blank_ones_left_out(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c:
        query = c.exchange(
            "GET",
            "/echo/q",
            query={"keyword": "a b&c=d/é", "empty": "", "blank": "  ", "none": None, "n": 0},
        ).json()["query"]
    assert query == "keyword=a%20b%26c%3Dd%2F%C3%A9&n=0"


@pytest.mark.parametrize(
    ("style", "expected"),
    [(StatusStyle.REPEATED, "status=0&status=2"), (StatusStyle.COMMA_JOINED, "status=0%2C2")],
)
def test_multi_valued_status_is_repeated_or_comma_joined(
    echo_server: RunningServer, userdir_server: RunningServer, style: StatusStyle, expected: str
) -> None:
    with echo_client(echo_server, status_style=style) as c:
        assert c.exchange("GET", "/echo/s", query={"status": [0, 2]}).json()["query"] == expected
    # The real server accepts both forms.
    with UserDirectoryClient(
        config=ClientConfig(root_uri=userdir_server.base_url, status_style=style)
    ) as c:
        assert all(u.status in (0, 2) for u in c.list_users(status=[0, 2], page_size=100))


def test_path_variables_by_position_and_by_name(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c:
        one = c.exchange("GET", "/echo/users/{id}", "a/b c")
        assert one.json()["rawPath"] == "/echo/users/a%2Fb%20c"
        two = c.exchange(
            "GET", "/echo/orgs/{orgId}/users/{userId}", path_variables={"userId": 5, "orgId": 9}
        )
        assert two.json()["rawPath"] == "/echo/orgs/9/users/5"


def echo_client_at(base_url: str) -> UserDirectoryClient:
    return UserDirectoryClient(config=ClientConfig(root_uri=base_url))


DOT_SEGMENT_CALLS: list[tuple[str, Any]] = [
    ("get_org_user('..', 1)", lambda c: c.get_org_user("..", 1)),
    ("get_org_user(1, '..')", lambda c: c.get_org_user(1, "..")),
    ("get_org_user('.', 1)", lambda c: c.get_org_user(".", 1)),
    ("delete_user('.')", lambda c: c.delete_user(".")),
    ("delete_user('..')", lambda c: c.delete_user("..")),
    ("get_user('..')", lambda c: c.get_user("..")),
    ("update_user('.', ...)", lambda c: c.update_user(".", UserUpdateRequest(status=0))),
    ("get_user_result('..')", lambda c: c.get_user_result("..")),
    (
        "exchange by name",
        lambda c: c.exchange("DELETE", "/mock-api/users/{id}", path_variables={"id": ".."}),
    ),
]


@pytest.mark.parametrize(("call", "send"), DOT_SEGMENT_CALLS, ids=[c for c, _ in DOT_SEGMENT_CALLS])
def test_dot_segments_are_refused_before_anything_is_sent(call: str, send: Any) -> None:
    # Sent as they were, httpx normalised them away: get_org_user("..", 1) reached
    # GET /mock-api/users/1 and delete_user(".") DELETE /mock-api/users.
    recorder = RecordingServer()
    with recorder.running() as base_url, echo_client_at(base_url) as c:
        with pytest.raises(UrlTemplateError, match="dot segment"):
            send(c)
        assert c.get_org_user(7, 1) is not None  # the server is there, and answers
    assert recorder.request_lines == ["GET /mock-api/orgs/7/users/1 HTTP/1.1"]


@pytest.mark.parametrize(
    ("value", "raw_path"),
    [
        ("...", "/mock-api/users/..."),
        (".a", "/mock-api/users/.a"),
        ("a..", "/mock-api/users/a.."),
        ("%2E%2E", "/mock-api/users/%252E%252E"),
        ("../1", "/mock-api/users/..%2F1"),
        ("./", "/mock-api/users/.%2F"),
    ],
)
def test_other_values_with_dots_stay_one_segment_on_the_wire(value: str, raw_path: str) -> None:
    recorder = RecordingServer()
    with recorder.running() as base_url, echo_client_at(base_url) as c:
        c.exchange("GET", "/mock-api/users/{id}", value)
    assert recorder.request_lines == [f"GET {raw_path} HTTP/1.1"]


def test_a_name_that_matches_no_placeholder_raises_before_sending() -> None:
    with UserDirectoryClient(config=ClientConfig(root_uri=f"http://127.0.0.1:{free_port()}")) as c:
        with pytest.raises(UrlTemplateError, match="unknown"):
            c.exchange(
                "GET",
                "/mock-api/orgs/{orgId}/users/{userId}",
                path_variables={"orgId": 1, "user": 2},
            )
        with pytest.raises(UrlTemplateError, match="by position"):
            c.exchange("GET", "/mock-api/orgs/{orgId}/users/{userId}", 1, 2)


# ---------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "client error"),
        (404, "client error"),
        (409, "client error"),
        (429, "client error"),
        (500, "server error"),
        (503, "server error"),
        (302, "other status"),
        (101 + 100, None),
    ],
)
def test_status_classes_map_to_remote_call_error(
    echo_server: RunningServer, status: int, kind: str | None
) -> None:
    with echo_client(echo_server) as c:
        if kind is None:  # 2xx other than 200 is success
            assert c.exchange("GET", f"/status/{status}").status_code == status
            return
        with pytest.raises(RemoteCallError) as failure:
            c.exchange("GET", f"/status/{status}")
    assert failure.value.status_code == status
    assert failure.value.response_body == "e" * 1000
    assert kind in failure.value.message


def test_closed_port_is_remote_access_error() -> None:
    root = f"http://127.0.0.1:{free_port()}"
    with (
        UserDirectoryClient(config=ClientConfig(root_uri=root)) as c,
        pytest.raises(RemoteAccessError) as failure,
    ):
        c.health()
    assert failure.value.remote_service == root
    assert isinstance(failure.value.cause, httpx.ConnectError)


def test_dns_failure_is_remote_access_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand-in for a real DNS failure: tests send no traffic beyond loopback, so the
    # resolver is made to fail for this one name instead of asking a name server.
    real_getaddrinfo = socket.getaddrinfo

    def failing_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "userdir.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", failing_getaddrinfo)
    with (
        UserDirectoryClient(config=ClientConfig(root_uri="http://userdir.invalid:8081")) as c,
        pytest.raises(RemoteAccessError) as failure,
    ):
        c.health()
    assert isinstance(failure.value.cause, httpx.ConnectError)
    assert failure.value.remote_service == "http://userdir.invalid:8081"


@pytest.fixture
def stalled_server() -> Iterator[int]:
    """Accepts connections and reads, but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(timeout=2)
    for connection in held:
        connection.close()
    listener.close()


def test_stall_past_read_timeout_is_remote_access_error(stalled_server: int) -> None:
    config = ClientConfig(root_uri=f"http://127.0.0.1:{stalled_server}", read_timeout=0.3)
    started = time.monotonic()
    with UserDirectoryClient(config=config) as c, pytest.raises(RemoteAccessError) as failure:
        c.get_user(1)
    assert isinstance(failure.value.cause, httpx.ReadTimeout)
    assert time.monotonic() - started < 3


def test_any_other_failure_is_wrapped(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c, pytest.raises(RemoteAccessError) as failure:
        c.exchange("GET", "/not-json").decode(UserResponse)
    assert failure.value.remote_service == echo_server.base_url
    assert "json_invalid" in repr(failure.value.cause)


def test_undecodable_answer_is_remote_access_error(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c, pytest.raises(RemoteAccessError) as failure:
        c.get_result("/not-json", data_type=UserResponse)
    assert failure.value.__cause__ is failure.value.cause


def test_null_and_unsuccessful_envelopes(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c:
        for kind, status, message in [
            ("null", 500, None),
            ("failed", 200, "库存不足"),
            ("blank", 200, "远程接口业务处理失败"),
        ]:
            with pytest.raises(RemoteCallError) as failure:
                c.envelope_data(c.exchange("GET", f"/envelope/{kind}"), UserResponse)
            assert failure.value.status_code == status
            if message:
                assert failure.value.message == message
        # Lenient rule: code 200 or message "success"; "OK" fails leniently, passes strictly.
        assert c.envelope_data(c.exchange("GET", "/envelope/success-text"), UserResponse) is None
        with pytest.raises(RemoteCallError):
            c.envelope_data(c.exchange("GET", "/envelope/ok"), UserResponse)
    with UserDirectoryClient(
        config=ClientConfig(root_uri=echo_server.base_url), envelope_unwrapper=unwrap_strict
    ) as strict:
        user = strict.envelope_data(strict.exchange("GET", "/envelope/ok"), UserResponse)
        assert user is not None and user.username == "u"


def test_per_route_pool_limit_waits_then_gives_up(echo_server: RunningServer) -> None:
    config = {"max_connections_per_route": 1, "connection_request_timeout": 0.2}
    with echo_client(echo_server, **config) as c:
        outcomes: list[BaseException | str] = []

        def call() -> None:
            try:
                outcomes.append(c.exchange("GET", "/slow").text)
            except RemoteAccessError as failure:
                outcomes.append(failure)

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert "done" in outcomes
    refused = [o for o in outcomes if isinstance(o, RemoteAccessError)]
    assert len(refused) == 1 and isinstance(refused[0].cause, httpx.PoolTimeout)


def test_default_config_matches_the_spec_limits() -> None:
    config = ClientConfig()
    assert config.root_uri == "http://localhost:8081"
    assert (config.connect_timeout, config.read_timeout) == (3.0, 10.0)
    assert config.connection_request_timeout == 2.0
    assert (config.max_connections, config.max_connections_per_route) == (200, 50)
    with UserDirectoryClient() as c:
        timeout = c._http.timeout
        assert (timeout.connect, timeout.read, timeout.pool) == (3.0, 10.0, 2.0)
        assert c._http.headers["Accept"] == "application/json"


# ---------------------------------------------------------------- full response (rule 8)


def test_full_response_exposes_status_and_headers(
    client: UserDirectoryClient, echo_server: RunningServer
) -> None:
    created = client.exchange(
        "POST", "/mock-api/users", json_body={"username": unique_username("full")}
    )
    assert created.status_code == 201
    assert created.location == f"/mock-api/users/{created.json()['id']}"
    assert HEX32.match(created.request_id or "")
    assert HEX32.match(created.trace_id or "")
    assert created.content_disposition is None
    with echo_client(echo_server) as c:
        download = c.exchange("GET", "/file")
    assert download.content_disposition == 'attachment; filename="users.csv"'
    assert download.text == "a,b\n"


def test_third_user_response_decodes_snake_case(echo_server: RunningServer) -> None:
    with echo_client(echo_server) as c:
        third = c.exchange("GET", "/third/{id}", 42).decode(ThirdUserResponse)
    assert third.user_id == 42 and third.user_name == "third"
    assert third.created_at is not None and third.created_at.isoformat() == "2024-05-01T08:30:00"


# ---------------------------------------------------------------- logging (rule 14)


def test_logs_cut_bodies_and_never_show_the_token(
    echo_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="clusterforge_userdir.client")
    with echo_client(echo_server, bearer_token=SECRET_TOKEN) as c:
        c.exchange("POST", "/sink", json_body={"nickname": "n" * 3000})
        with pytest.raises(RemoteCallError):
            c.exchange("GET", "/status/500")
    records = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("request POST") for m in records)
    assert any(m.startswith("response GET") and "-> 500" in m for m in records)
    everything = "\n".join(records)
    assert SECRET_TOKEN not in everything
    assert "authorization" not in everything.lower()
    response_500 = next(m for m in records if "-> 500" in m)
    assert response_500.endswith("body=" + "e" * 1000)
    request_log = next(m for m in records if m.startswith("request POST"))
    assert len(request_log.split("body=", 1)[1]) == 1000
