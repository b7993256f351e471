"""The server over real sockets, with a plain HTTP client: shapes and every decision."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from userdir_support import RunningServer, StartServer, unique_username

LOCAL_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
USER_FIELDS = {"id", "username", "nickname", "mobile", "status", "createdAt"}
TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def http(userdir_server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=userdir_server.base_url, timeout=10) as client:
        yield client


def create(http: httpx.Client, **fields: Any) -> dict[str, Any]:
    fields.setdefault("username", unique_username())
    response = http.post("/mock-api/users", json=fields)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_error(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == status
    assert isinstance(body["message"], str) and body["message"]


# ---------------------------------------------------------------- endpoints 1-8


def test_create_answers_201_with_location_and_camel_case_user(http: httpx.Client) -> None:
    name = unique_username()
    response = http.post(
        "/mock-api/users", json={"username": name, "nickname": "Nick", "mobile": "+8613800138000"}
    )
    assert response.status_code == 201
    user = response.json()
    assert set(user) == USER_FIELDS
    assert user["username"] == name and user["status"] == 1
    assert LOCAL_DATE_TIME.match(user["createdAt"])
    assert response.headers["Location"] == f"/mock-api/users/{user['id']}"


def test_get_user_and_missing_user(http: httpx.Client) -> None:
    user = create(http, nickname="Reader")
    assert http.get(f"/mock-api/users/{user['id']}").json() == user
    assert_error(http.get("/mock-api/users/999999999"), 404)
    assert_error(http.get("/mock-api/users/abc"), 400)
    assert_error(http.get("/mock-api/users/0"), 400)


def test_update_changes_only_given_fields_and_delete_answers_204(http: httpx.Client) -> None:
    user = create(http, nickname="Before", mobile="12345678")
    response = http.put(f"/mock-api/users/{user['id']}", json={"status": 2})
    assert response.status_code == 200
    assert response.json() | {"status": 1} == user
    assert http.get(f"/mock-api/users/{user['id']}").json()["status"] == 2
    deleted = http.delete(f"/mock-api/users/{user['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_error(http.get(f"/mock-api/users/{user['id']}"), 404)
    assert_error(http.delete(f"/mock-api/users/{user['id']}"), 404)
    assert_error(http.put(f"/mock-api/users/{user['id']}", json={"nickname": "x"}), 404)


def test_org_user_is_the_user_whatever_the_org(http: httpx.Client) -> None:
    user = create(http)
    assert http.get(f"/mock-api/orgs/7/users/{user['id']}").json() == user
    assert_error(http.get("/mock-api/orgs/7/users/999999999"), 404)
    assert_error(http.get(f"/mock-api/orgs/x/users/{user['id']}"), 400)


def test_health_is_plain_text(http: httpx.Client) -> None:
    response = http.get("/mock-api/health")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "UP"


def test_openapi_document_is_served_with_all_twelve_operations(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    operations = {
        (method.upper(), path) for path, methods in document["paths"].items() for method in methods
    }
    assert operations == {
        ("GET", "/mock-api/users/{id}"),
        ("GET", "/mock-api/users"),
        ("POST", "/mock-api/users"),
        ("PUT", "/mock-api/users/{id}"),
        ("DELETE", "/mock-api/users/{id}"),
        ("GET", "/mock-api/orgs/{orgId}/users/{userId}"),
        ("POST", "/mock-api/users/search"),
        ("GET", "/mock-api/health"),
        ("GET", "/mock-api/result/users/{id}"),
        ("GET", "/mock-api/result/users"),
        ("GET", "/mock-api/result/users/page"),
        ("POST", "/mock-api/result/users"),
    }
    assert "422" not in str(document["paths"])


# ---------------------------------------------------------------- decisions


def test_duplicate_username_is_409_ignoring_case(http: httpx.Client) -> None:
    name = unique_username("dup")
    create(http, username=name)
    assert_error(http.post("/mock-api/users", json={"username": name}), 409)
    assert_error(http.post("/mock-api/users", json={"username": name.upper()}), 409)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"username": None},
        {"username": ""},
        {"username": "   "},
        {"username": "-starts-with-dash"},
        {"username": "has space"},
        {"username": "x" * 65},
        {"username": "ok-name", "nickname": "n" * 65},
        {"username": "ok-name", "mobile": "1234"},
        {"username": "ok-name", "mobile": "1" * 16},
        {"username": "ok-name", "mobile": "138-0013-8000"},
    ],
)
def test_create_refuses_bad_fields_with_400(http: httpx.Client, body: dict[str, Any]) -> None:
    assert_error(http.post("/mock-api/users", json=body), 400)


def test_limits_accept_their_edges(http: httpx.Client) -> None:
    user = create(
        http,
        username="a" + uuid_hex(63),
        nickname="n" * 64,
        mobile="+" + "1" * 15,
    )
    assert len(user["username"]) == 64
    assert create(http, mobile="12345")["mobile"] == "12345"


def uuid_hex(length: int) -> str:
    return unique_username("").replace("-", "")[:length].ljust(length, "0")


def test_update_refuses_unknown_status(http: httpx.Client) -> None:
    user = create(http)
    assert_error(http.put(f"/mock-api/users/{user['id']}", json={"status": 3}), 400)
    assert_error(http.put(f"/mock-api/users/{user['id']}", json={"status": -1}), 400)
    for status in (0, 2, 1, 0):  # every move between the three values is allowed
        assert http.put(f"/mock-api/users/{user['id']}", json={"status": status}).is_success


def test_malformed_json_is_400(http: httpx.Client) -> None:
    response = http.post(
        "/mock-api/users", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400)


def test_unknown_path_is_404_json(http: httpx.Client) -> None:
    assert_error(http.get("/mock-api/nothing-here"), 404)


@pytest.mark.parametrize(
    "query",
    [
        {"pageSize": 101},
        {"pageSize": 0},
        {"pageNum": 0},
        {"pageNum": "x"},
        {"status": "3"},
        {"status": "1;2"},
        {"keyword": "k" * 65},
    ],
)
def test_list_refuses_bad_parameters_with_400(http: httpx.Client, query: dict[str, Any]) -> None:
    assert_error(http.get("/mock-api/users", params=query), 400)


def test_max_page_size_is_100(http: httpx.Client) -> None:
    assert http.get("/mock-api/users", params={"pageSize": 100}).status_code == 200


def test_request_body_over_64_kib_is_413(http: httpx.Client) -> None:
    body = b'{"username": "big", "nickname": "' + b"x" * (64 * 1024) + b'"}'
    assert_error(
        http.post("/mock-api/users", content=body, headers={"Content-Type": "application/json"}),
        413,
    )


def test_chunked_body_over_the_limit_is_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"username": "big", "nickname": "'
        for _ in range(70):
            yield b"x" * 1024
        yield b'"}'

    response = http.post(
        "/mock-api/users", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_error(response, 413)


# ---------------------------------------------------------------- query rules


def test_keyword_matches_username_nickname_or_mobile_ignoring_case(
    start_userdir_server: StartServer,
) -> None:
    server = start_userdir_server()
    with httpx.Client(base_url=server.base_url) as http:
        by_name = create(http, username="Keyword-Alice", nickname="a")
        by_nick = create(http, username="bob", nickname="Mr KEYWORD")
        by_mobile = create(http, username="carol", mobile="13912345678")
        create(http, username="dave", nickname="other")

        def ids(**params: Any) -> list[int]:
            return [u["id"] for u in http.get("/mock-api/users", params=params).json()]

        assert ids(keyword="keyword") == [by_name["id"], by_nick["id"]]
        assert ids(keyword="kEyWoRd") == [by_name["id"], by_nick["id"]]
        assert ids(keyword="91234") == [by_mobile["id"]]
        assert len(ids(keyword="   ")) == 4  # blank keyword is ignored
        assert ids(keyword="%") == []  # LIKE wildcards are matched literally
        assert ids(keyword="_") == []


def test_status_single_repeated_and_comma_joined(start_userdir_server: StartServer) -> None:
    server = start_userdir_server()
    with httpx.Client(base_url=server.base_url) as http:
        users = {status: create(http) for status in (0, 1, 2)}
        for status, user in users.items():
            http.put(f"/mock-api/users/{user['id']}", json={"status": status})

        def statuses(query: str) -> list[int]:
            return [u["status"] for u in http.get(f"/mock-api/users?{query}").json()]

        assert statuses("status=2") == [2]
        assert statuses("status=0&status=2") == [0, 2]
        assert statuses("status=0,2") == [0, 2]
        assert statuses("status=0,1&status=2") == [0, 1, 2]
        assert statuses("") == [0, 1, 2]


def test_paging_defaults_and_the_empty_page(start_userdir_server: StartServer) -> None:
    server = start_userdir_server()
    with httpx.Client(base_url=server.base_url) as http:
        assert http.get("/mock-api/users").json() == []
        assert http.get("/mock-api/result/users/page").json() == {
            "code": 200,
            "message": "success",
            "data": {"records": [], "total": 0, "pageNum": 1, "pageSize": 10},
        }
        created = [create(http) for _ in range(12)]
        assert [u["id"] for u in http.get("/mock-api/users").json()] == [
            u["id"] for u in created[:10]
        ]
        second = http.get("/mock-api/users", params={"pageNum": 2}).json()
        assert [u["id"] for u in second] == [u["id"] for u in created[10:]]
        page = http.get("/mock-api/result/users/page", params={"pageNum": 2, "pageSize": 5})
        data = page.json()["data"]
        assert (data["total"], data["pageNum"], data["pageSize"]) == (12, 2, 5)
        assert [u["id"] for u in data["records"]] == [u["id"] for u in created[5:10]]


def test_search_by_keyword_status_time_range_and_locked(start_userdir_server: StartServer) -> None:
    server = start_userdir_server()
    with httpx.Client(base_url=server.base_url) as http:
        active = create(http, username="search-active")
        locked = create(http, username="search-locked")
        disabled = create(http, username="search-disabled")
        http.put(f"/mock-api/users/{locked['id']}", json={"status": 2})
        http.put(f"/mock-api/users/{disabled['id']}", json={"status": 0})

        def search(**criteria: Any) -> list[str]:
            body = {
                "keyword": None,
                "statusList": None,
                "startTime": None,
                "endTime": None,
                "includeLocked": None,
            }
            response = http.post("/mock-api/users/search", json=body | criteria)
            assert response.status_code == 200, response.text
            return [u["username"] for u in response.json()]

        assert search() == ["search-active", "search-disabled"]
        assert search(includeLocked=True) == ["search-active", "search-locked", "search-disabled"]
        assert search(statusList=[2]) == []  # locked stays out unless includeLocked
        assert search(statusList=[2], includeLocked=True) == ["search-locked"]
        assert search(keyword="ACTIVE") == ["search-active"]
        created = datetime.strptime(active["createdAt"], "%Y-%m-%dT%H:%M:%S")
        day = timedelta(days=1)
        as_text = "%Y-%m-%dT%H:%M:%S"
        assert len(search(startTime=(created - day).strftime(as_text))) == 2
        assert search(startTime=(created + day).strftime(as_text)) == []
        assert search(endTime=(created - day).strftime(as_text)) == []
        reversed_range = http.post(
            "/mock-api/users/search",
            json={
                "startTime": (created + day).strftime(as_text),
                "endTime": created.strftime(as_text),
            },
        )
        assert reversed_range.json() == []  # an empty range matches nobody
        assert_error(
            http.post("/mock-api/users/search", json={"startTime": "2024-02-30T00:00:00"}), 400
        )
        assert_error(
            http.post("/mock-api/users/search", json={"startTime": "2024-01-01T00:00:00Z"}), 400
        )
        assert_error(http.post("/mock-api/users/search", json={"statusList": [9]}), 400)


# ---------------------------------------------------------------- envelope endpoints


def test_envelope_endpoints_success_and_business_failures(http: httpx.Client) -> None:
    name = unique_username("env")
    created = http.post("/mock-api/result/users", json={"username": name})
    assert created.status_code == 200
    body = created.json()
    assert (body["code"], body["message"]) == (200, "success")
    user = body["data"]
    assert user["username"] == name

    assert http.get(f"/mock-api/result/users/{user['id']}").json() == {
        "code": 200,
        "message": "success",
        "data": user,
    }
    listed = http.get("/mock-api/result/users").json()
    assert listed["code"] == 200 and user in listed["data"]

    for response, code in [
        (http.get("/mock-api/result/users/999999999"), 404),
        (http.post("/mock-api/result/users", json={"username": name}), 409),
        (http.post("/mock-api/result/users", json={"username": ""}), 400),
        (http.get("/mock-api/result/users/page", params={"pageSize": 1000}), 400),
        (http.get("/mock-api/result/users/not-a-number"), 400),
    ]:
        assert response.status_code == 200, response.text
        envelope = response.json()
        assert envelope["code"] == code and envelope["data"] is None and envelope["message"]


# ---------------------------------------------------------------- headers and auth


def test_every_response_carries_request_id_and_trace_id(http: httpx.Client) -> None:
    seen_request_ids = set()
    for response in [
        http.get("/mock-api/health"),
        http.get("/mock-api/users/999999999"),
        http.get("/mock-api/users", params={"pageSize": 1000}),
        http.get("/openapi.json"),
    ]:
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-Id"])
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Trace-Id"])
        seen_request_ids.add(response.headers["X-Request-Id"])
    assert len(seen_request_ids) == 4
    echoed = http.get("/mock-api/health", headers={"X-Trace-Id": "trace-from-caller-1"})
    assert echoed.headers["X-Trace-Id"] == "trace-from-caller-1"
    unsafe = http.get("/mock-api/health", headers={"X-Trace-Id": "a b"})
    assert re.fullmatch(r"[0-9a-f]{32}", unsafe.headers["X-Trace-Id"])


def test_bearer_auth_when_tokens_are_configured(start_userdir_server: StartServer) -> None:
    server = start_userdir_server(auth_tokens=f"{TOKEN},second-token-0123456789")
    with httpx.Client(base_url=server.base_url) as http:
        assert http.get("/mock-api/health").status_code == 200
        assert http.get("/openapi.json").status_code == 200
        for headers in [
            {},
            {"Authorization": "Bearer wrong-token-0123456789"},
            {"Authorization": TOKEN},
        ]:
            response = http.get("/mock-api/users", headers=headers)
            assert_error(response, 401)
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert "X-Request-Id" in response.headers
        assert_error(http.get("/mock-api/result/users"), 401)
        for token in (TOKEN, "second-token-0123456789"):
            ok = http.get("/mock-api/users", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200


@pytest.mark.parametrize("token", ["changeme", "short"])
def test_placeholder_or_short_tokens_are_refused(token: str) -> None:
    from clusterforge_userdir import ServerSettings

    with pytest.raises(ValueError, match="placeholder or shorter"):
        ServerSettings(auth_tokens=token)


# ---------------------------------------------------------------- text the database refuses


@pytest.fixture(params=["sqlite", "postgresql"])
def server_on_each_backend(
    request: pytest.FixtureRequest, start_userdir_server: StartServer
) -> RunningServer:
    """A fresh server on SQLite, then on PostgreSQL (skipped without a PostgreSQL server)."""
    if request.param == "postgresql":
        return start_userdir_server(database_url=request.getfixturevalue("postgres_database_url"))
    return start_userdir_server()


def assert_refused_naming(response: httpx.Response, field: str, *, envelope: bool = False) -> None:
    """400 in the spec's error body (or an envelope with code 400) whose message names field."""
    assert response.status_code == (200 if envelope else 400), response.text
    body = response.json()
    assert body["code"] == 400
    named = body["message"].split(":")[0]
    assert named == field or named.endswith(f".{field}"), body["message"]


def json_request(http: httpx.Client, method: str, path: str, raw_json: str) -> httpx.Response:
    # Written by hand: the escapes (\u0000, \ud800) must reach the server as sent.
    return http.request(
        method, path, content=raw_json.encode(), headers={"Content-Type": "application/json"}
    )


@pytest.mark.parametrize(
    ("escape", "character"), [("\\u0000", "NUL"), ("\\ud800", "lone surrogate")]
)
def test_text_no_database_can_store_is_400_naming_the_field(
    server_on_each_backend: RunningServer, escape: str, character: str
) -> None:
    # PostgreSQL refuses NUL in text, and no backend can encode a lone surrogate: both
    # were a 500 waiting to happen.
    with httpx.Client(base_url=server_on_each_backend.base_url, timeout=10) as http:
        user = create(http, nickname="kept")
        name = unique_username()
        nickname = f'"a{escape}b"'
        assert_refused_naming(
            json_request(
                http, "POST", "/mock-api/users", f'{{"username":"{name}","nickname":{nickname}}}'
            ),
            "nickname",
        )
        assert_refused_naming(
            json_request(
                http,
                "POST",
                "/mock-api/result/users",
                f'{{"username":"{name}","nickname":{nickname}}}',
            ),
            "nickname",
            envelope=True,
        )
        assert_refused_naming(
            json_request(
                http, "PUT", f"/mock-api/users/{user['id']}", f'{{"nickname":{nickname}}}'
            ),
            "nickname",
        )
        assert_refused_naming(
            json_request(http, "POST", "/mock-api/users/search", f'{{"keyword":"{escape}"}}'),
            "keyword",
        )
        if character == "NUL":  # a query string cannot carry a lone surrogate
            assert_refused_naming(http.get("/mock-api/users?keyword=a%00b"), "keyword")
        assert http.get("/mock-api/users").json() == [user]  # nothing stored, nothing changed
        assert http.get("/mock-api/health").text == "UP"


def test_any_other_text_is_stored_as_sent(server_on_each_backend: RunningServer) -> None:
    with httpx.Client(base_url=server_on_each_backend.base_url, timeout=10) as http:
        nickname = "机械键盘 \U0001f3b9\ttab\u200bzero-width"
        user = create(http, nickname=nickname)
        assert http.get(f"/mock-api/users/{user['id']}").json()["nickname"] == nickname
        found = http.post("/mock-api/users/search", json={"keyword": "键盘"}).json()
        assert [u["id"] for u in found] == [user["id"]]


# ---------------------------------------------------------------- canonical whole numbers

# Each was taken for 1 or 10 before: one user had many URLs, and a typo reached another.
NOT_CANONICAL = [
    "1_0",
    "+1",
    "%201",
    "1%20",
    "1.0",
    "01",
    "00",
    "1e0",
    "0x1",
    "-1",
    "%D9%A1",  # ARABIC-INDIC DIGIT ONE
    "%EF%BC%91",  # FULLWIDTH DIGIT ONE
    "10000000000000000000",  # 20 digits
]


@pytest.mark.parametrize("value", NOT_CANONICAL)
def test_ids_are_accepted_only_in_canonical_decimal(http: httpx.Client, value: str) -> None:
    user = create(http)
    assert_refused_naming(http.get(f"/mock-api/users/{value}"), "id")
    assert_refused_naming(http.put(f"/mock-api/users/{value}", json={"nickname": "x"}), "id")
    assert_refused_naming(http.delete(f"/mock-api/users/{value}"), "id")
    assert_refused_naming(http.get(f"/mock-api/orgs/{value}/users/{user['id']}"), "orgId")
    assert_refused_naming(http.get(f"/mock-api/orgs/1/users/{value}"), "userId")
    assert_refused_naming(http.get(f"/mock-api/result/users/{value}"), "id", envelope=True)
    assert http.get(f"/mock-api/users/{user['id']}").json() == user  # untouched


def test_canonical_ids_up_to_the_largest_are_accepted(http: httpx.Client) -> None:
    user = create(http)
    assert http.get(f"/mock-api/orgs/1/users/{user['id']}").json() == user
    assert_error(http.get(f"/mock-api/users/{2**63 - 1}"), 404)
    assert_refused_naming(http.get(f"/mock-api/users/{2**63}"), "id")  # 19 digits, too large


@pytest.mark.parametrize("value", ["+1", "01", "1.0", "1_0", " 1", "1 "])
@pytest.mark.parametrize("parameter", ["pageNum", "pageSize"])
def test_paging_numbers_are_canonical_too(http: httpx.Client, parameter: str, value: str) -> None:
    assert_refused_naming(http.get("/mock-api/users", params={parameter: value}), parameter)
    assert_refused_naming(
        http.get("/mock-api/result/users/page", params={parameter: value}), parameter, envelope=True
    )


@pytest.mark.parametrize("status", ['"1"', "true", '"0"', "false"])
def test_status_in_a_body_must_be_a_json_integer(http: httpx.Client, status: str) -> None:
    user = create(http)
    assert_refused_naming(
        json_request(http, "PUT", f"/mock-api/users/{user['id']}", f'{{"status":{status}}}'),
        "status",
    )
    refused = json_request(http, "POST", "/mock-api/users/search", f'{{"statusList":[{status}]}}')
    assert_error(refused, 400)
    assert refused.json()["message"].startswith("statusList.0:")


def test_a_status_without_fraction_is_the_integer_json_schema_says_it_is(
    http: httpx.Client,
) -> None:
    # JSON Schema, and so the OpenAPI document, counts 0.0 as the integer 0.
    user = create(http)
    changed = json_request(http, "PUT", f"/mock-api/users/{user['id']}", '{"status":0.0}')
    assert changed.status_code == 200 and changed.json()["status"] == 0
    assert_refused_naming(
        json_request(http, "PUT", f"/mock-api/users/{user['id']}", '{"status":0.5}'), "status"
    )
