"""100 concurrent creates through the client: nothing lost, every duplicate refused."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from clusterforge_userdir import (
    ClientConfig,
    RemoteCallError,
    UserCreateRequest,
    UserDirectoryClient,
)
from userdir_support import StartServer

CREATES = 100


def create_concurrently(base_urls: list[str], usernames: list[str]) -> list[int | str]:
    """Each outcome is the new id, or 'duplicate' for a 409; requests alternate servers."""
    clients = [UserDirectoryClient(config=ClientConfig(root_uri=url)) for url in base_urls]
    try:

        def create(numbered: tuple[int, str]) -> int | str:
            number, username = numbered
            client = clients[number % len(clients)]
            try:
                user = client.create_user(UserCreateRequest(username=username))
            except RemoteCallError as failure:
                assert failure.status_code == 409, failure.response_body
                return "duplicate"
            assert user is not None
            return user.id

        with ThreadPoolExecutor(max_workers=CREATES) as pool:
            return list(pool.map(create, enumerate(usernames)))
    finally:
        for client in clients:
            client.close()


def check_distinct_and_duplicates(base_urls: list[str]) -> None:
    base_url = base_urls[0]
    prefix = uuid.uuid4().hex[:8]
    distinct = [f"{prefix}-distinct-{n}" for n in range(CREATES)]
    outcomes = create_concurrently(base_urls, distinct)
    assert "duplicate" not in outcomes
    assert len(set(outcomes)) == CREATES
    with UserDirectoryClient(config=ClientConfig(root_uri=base_url)) as client:
        stored = {
            u.username
            for page in range(1, 3)
            for u in client.list_users(keyword=f"{prefix}-distinct", page_num=page, page_size=50)
        }
    assert stored == set(distinct)

    # 10 names, each sent 10 times at once, some in another letter case.
    names = [f"{prefix}-dup-{n % 10}" for n in range(CREATES)]
    names = [name.upper() if i % 3 == 0 else name for i, name in enumerate(names)]
    outcomes = create_concurrently(base_urls, names)
    assert sum(1 for o in outcomes if o != "duplicate") == 10
    assert outcomes.count("duplicate") == CREATES - 10
    with UserDirectoryClient(config=ClientConfig(root_uri=base_url)) as client:
        stored_duplicates = client.list_users(keyword=f"{prefix}-dup", page_size=100)
    assert sorted(u.username.lower() for u in stored_duplicates) == sorted(
        f"{prefix}-dup-{n}" for n in range(10)
    )


def test_concurrent_creates_on_sqlite(start_userdir_server: StartServer) -> None:
    check_distinct_and_duplicates([start_userdir_server().base_url])


@pytest.mark.postgres
def test_concurrent_creates_on_postgresql(
    start_userdir_server: StartServer, postgres_database_url: str
) -> None:
    # Two instances on one database, as behind one address; requests alternate.
    first = start_userdir_server(database_url=postgres_database_url)
    second = start_userdir_server(database_url=postgres_database_url)
    check_distinct_and_duplicates([first.base_url, second.base_url])
