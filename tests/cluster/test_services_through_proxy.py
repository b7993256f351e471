"""Both services' conformance, through their TLS proxy, as a client on the network sees it.

Against the lab (`CLUSTERFORGE_CLUSTER_JSON=inventories/lab/lab.json pytest
tests/cluster/test_services_through_proxy.py`): every endpoint of the user directory's
spec and the order service's POST /orders, over HTTPS verified with lab.json's
`services_ca_cert` (hostname checks on), with the bearer tokens from their 0600 files.
Skips when the file names no services.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest


def _client(cluster: dict[str, Any], service: str, token_file: str) -> httpx.Client:
    services = cluster.get("services") or {}
    if service not in services or not cluster.get("services_ca_cert"):
        pytest.skip(f"lab.json names no {service} behind a TLS proxy")
    token = Path(cluster[token_file]).read_text().strip()
    return httpx.Client(
        base_url=services[service],
        verify=cluster["services_ca_cert"],
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        timeout=15,
    )


@pytest.fixture(scope="module")
def userdir(cluster: dict[str, Any]) -> Iterator[httpx.Client]:
    with _client(cluster, "user_directory", "user_directory_token_file") as client:
        yield client


@pytest.fixture(scope="module")
def orders(cluster: dict[str, Any]) -> Iterator[httpx.Client]:
    with _client(cluster, "orders", "orders_token_file") as client:
        yield client


def test_the_base_urls_are_https(cluster: dict[str, Any]) -> None:
    services = cluster.get("services") or {}
    if not services:
        pytest.skip("lab.json names no services")
    assert all(url.startswith("https://") for url in services.values()), services


def test_every_user_directory_endpoint_answers_through_the_proxy(userdir: httpx.Client) -> None:
    name = f"proxy-{uuid.uuid4().hex[:10]}"
    created = userdir.post(  # 3
        "/mock-api/users", json={"username": name, "nickname": "Proxy", "mobile": "13800138000"}
    )
    assert created.status_code == 201, created.text
    user = created.json()
    assert user["username"] == name and created.headers.get("X-Request-Id")
    user_id = user["id"]
    assert userdir.get(f"/mock-api/users/{user_id}").json()["username"] == name  # 1
    listed = userdir.get("/mock-api/users", params={"keyword": name, "pageNum": 1, "pageSize": 10})
    assert [row["username"] for row in listed.json()] == [name]  # 2
    updated = userdir.put(f"/mock-api/users/{user_id}", json={"nickname": "Renamed"})  # 4
    assert updated.is_success
    assert userdir.get(f"/mock-api/orgs/1/users/{user_id}").status_code in (200, 404)  # 6
    searched = userdir.post("/mock-api/users/search", json={"keyword": name})  # 7
    assert [row["nickname"] for row in searched.json()] == ["Renamed"]
    health = userdir.get("/mock-api/health")  # 8
    assert health.text == "UP"
    result = userdir.get(f"/mock-api/result/users/{user_id}").json()  # 9
    assert result["code"] in (0, 200) and result["data"]["username"] == name
    assert isinstance(userdir.get("/mock-api/result/users").json()["data"], list)  # 10
    page = userdir.get("/mock-api/result/users/page", params={"pageNum": 1, "pageSize": 5})
    assert page.json()["data"]["pageSize"] == 5  # 11
    other = f"{name}-r"
    wrapped = userdir.post("/mock-api/result/users", json={"username": other})  # 12
    assert wrapped.json()["data"]["username"] == other
    assert userdir.delete(f"/mock-api/users/{user_id}").is_success  # 5
    assert userdir.get(f"/mock-api/users/{user_id}").status_code == 404
    userdir.delete(f"/mock-api/users/{wrapped.json()['data']['id']}")


def test_the_user_directory_still_wants_its_token_behind_the_proxy(
    cluster: dict[str, Any], userdir: httpx.Client
) -> None:
    answer = httpx.get(
        f"{str(userdir.base_url).rstrip('/')}/mock-api/users/1",
        verify=cluster["services_ca_cert"],
        timeout=15,
    )
    assert answer.status_code == 401


def test_an_order_is_placed_and_an_invalid_one_refused_in_the_specs_words(
    orders: httpx.Client,
) -> None:
    placed = orders.post("/orders", json={"userId": "proxy", "productName": "键盘", "amount": 9.5})
    assert placed.status_code in (200, 201), placed.text
    assert placed.json()["orderId"]
    refused = orders.post("/orders", json={"userId": "", "productName": "", "amount": 0})
    assert refused.status_code == 400
    messages = [item["message"] for item in refused.json()["violations"]]
    assert messages == ["用户ID不能为空", "商品名称不能为空", "订单金额必须大于0"]
    assert orders.get("/health").json()["status"] == "UP"
