"""Fixtures: a real database (SQLite file or PostgreSQL schema) and a real server.

The server is the real app under uvicorn on 127.0.0.1 with a free port, in a thread of
the test process, so tests can subscribe extra listeners on the runtime's bus and read
its metrics directly.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from clusterforge_orders import (
    NotificationSender,
    OrderServiceRuntime,
    OrderServiceSettings,
)
from clusterforge_orders.runtime import DEFAULT_DELIVERY_STOP_SECONDS
from clusterforge_orders.sinks import DeliverySink
from orders_testing import (
    RecordingSender,
    RunningServer,
    ServerFactory,
    StandInCertificates,
    StandInCluster,
    make_test_certificates,
    serve_in_thread,
)

POSTGRES_URL_VARIABLE = "CLUSTERFORGE_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON = (
    "PostgreSQL tests need a server: set CLUSTERFORGE_TEST_POSTGRES_URL, "
    'e.g. eval "$(scripts/postgres-up)"'
)
# Tests shorten the executor's fixed 30 s drain so a stuck listener cannot stall them.
TEST_AWAIT_TERMINATION_SECONDS = 5.0


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a PostgreSQL schema of our own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/orders.db"
        return
    base_url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not base_url:
        pytest.skip(POSTGRES_SKIP_REASON)
    schema = f"cf_orders_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


RuntimeFactory = Callable[..., OrderServiceRuntime]


@pytest.fixture
def open_runtime() -> Iterator[RuntimeFactory]:
    runtimes: list[OrderServiceRuntime] = []

    def factory(
        settings: OrderServiceSettings,
        *,
        sender: NotificationSender | None = None,
        sink: DeliverySink | None = None,
        await_termination_seconds: float = TEST_AWAIT_TERMINATION_SECONDS,
        delivery_stop_seconds: float = DEFAULT_DELIVERY_STOP_SECONDS,
    ) -> OrderServiceRuntime:
        runtime = OrderServiceRuntime.open(
            settings,
            sender=sender if sender is not None else RecordingSender(),
            sink=sink,
            executor_await_termination_seconds=await_termination_seconds,
            delivery_stop_seconds=delivery_stop_seconds,
        )
        runtimes.append(runtime)
        return runtime

    yield factory
    for runtime in runtimes:
        runtime.close()


@pytest.fixture
def start_server(open_runtime: RuntimeFactory) -> Iterator[ServerFactory]:
    servers: list[RunningServer] = []

    def factory(
        settings: OrderServiceSettings,
        *,
        sender: NotificationSender | None = None,
        sink: DeliverySink | None = None,
        before_start: Callable[[OrderServiceRuntime], None] | None = None,
        delivery_stop_seconds: float = DEFAULT_DELIVERY_STOP_SECONDS,
    ) -> RunningServer:
        runtime = open_runtime(
            settings, sender=sender, sink=sink, delivery_stop_seconds=delivery_stop_seconds
        )
        if before_start is not None:
            before_start(runtime)
        running = serve_in_thread(runtime)
        servers.append(running)
        return running

    yield factory
    for running in servers:
        if running.thread.is_alive():
            running.stop()


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> StandInCertificates:
    return make_test_certificates(tmp_path_factory.mktemp("stand-in-tls"))


@pytest.fixture
def cluster(certificates: StandInCertificates) -> Iterator[StandInCluster]:
    """A stand-in for the OpenSearch cluster (see orders_testing.StandInCluster)."""
    stand_in = StandInCluster(certificates)
    yield stand_in
    stand_in.close()
