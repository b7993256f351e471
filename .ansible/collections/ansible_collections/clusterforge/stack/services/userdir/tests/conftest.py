"""Fixtures: the real user-directory server on a free loopback port, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from clusterforge_userdir import ServerSettings, create_app
from userdir_support import (
    POSTGRES_SKIP_REASON,
    POSTGRES_URL_VARIABLE,
    RunningServer,
    StartServer,
    serve_in_thread,
)


@pytest.fixture
def start_userdir_server(tmp_path: Path) -> Iterator[StartServer]:
    """Factory: start a user-directory server with the given settings (SQLite by default)."""
    started: list[RunningServer] = []

    def start(**settings: Any) -> RunningServer:
        settings.setdefault(
            "database_url", f"sqlite:///{tmp_path / f'userdir-{uuid.uuid4().hex}.db'}"
        )
        running = serve_in_thread(create_app(ServerSettings(**settings)))
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture(scope="module")
def userdir_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server with its own SQLite file shared by a module's tests (unique usernames)."""
    database = tmp_path_factory.mktemp("userdir") / "userdir.db"
    running = serve_in_thread(create_app(ServerSettings(database_url=f"sqlite:///{database}")))
    yield running
    running.stop()


@pytest.fixture
def postgres_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database named userdir_test_<random>, dropped afterwards."""
    admin_url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not admin_url:
        pytest.skip(POSTGRES_SKIP_REASON)
    name = f"userdir_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
