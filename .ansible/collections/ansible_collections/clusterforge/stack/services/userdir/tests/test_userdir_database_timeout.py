"""A PostgreSQL server that never answers costs at most the connect timeout, not 130 s.

The database here is a stand-in: a listening socket that completes the TCP handshake and
then says nothing (an unused loopback address such as 127.0.0.31 would refuse at once and
prove nothing about the timeout). psycopg's own default would wait 130 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from clusterforge_userdir import ServerSettings
from clusterforge_userdir.storage import create_database_engine
from userdir_support import StartServer, silent_listener

TIMEOUT = 2  # libpq's smallest: it counts whole seconds and takes 1 as 2


def silent_database_url(port: int, query: str = "") -> str:
    return f"postgresql+psycopg://userdir@127.0.0.1:{port}/userdir{query}"


@pytest.mark.parametrize("query", ["", "?connect_timeout=600"])
def test_connecting_to_a_silent_database_fails_within_the_timeout(query: str) -> None:
    # With connect_timeout=600 in the URL: the setting wins over the URL.
    with silent_listener() as port:
        engine = create_database_engine(silent_database_url(port, query), connect_timeout=TIMEOUT)
        started = time.monotonic()
        with pytest.raises(OperationalError, match="timeout"):
            engine.connect()
        elapsed = time.monotonic() - started
        engine.dispose()
    assert TIMEOUT - 0.5 <= elapsed < TIMEOUT + 3


def test_the_health_check_answers_503_within_the_timeout(
    start_userdir_server: StartServer,
) -> None:
    with silent_listener() as port:
        server = start_userdir_server(
            database_url=silent_database_url(port),
            database_connect_timeout=TIMEOUT,
            migrate_on_start=False,
        )
        started = time.monotonic()
        response = httpx.get(f"{server.base_url}/mock-api/health", timeout=30)
        elapsed = time.monotonic() - started
    assert (response.status_code, response.text) == (503, "DOWN")
    assert elapsed < TIMEOUT + 3


def test_the_cli_gives_up_on_a_silent_database_and_says_why(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERFORGE_USERDIR")}
    environment["CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT"] = str(TIMEOUT)
    with silent_listener() as port:
        started = time.monotonic()
        answer = subprocess.run(
            [
                sys.executable,
                "-m",
                "clusterforge_userdir.cli",
                "--database-url",
                silent_database_url(port),
            ],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        elapsed = time.monotonic() - started
    assert answer.returncode != 0
    assert "cannot reach the database" in answer.stderr
    assert "CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT" in answer.stderr
    assert "Traceback" not in answer.stderr
    assert elapsed < TIMEOUT + 15  # the interpreter's start-up included


def test_the_connect_timeout_defaults_to_5_seconds_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT", raising=False)
    assert ServerSettings().database_connect_timeout == 5
    monkeypatch.setenv("CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT", "12")
    assert ServerSettings().database_connect_timeout == 12
    for refused in (0, 1, 301):
        with pytest.raises(ValueError, match="database_connect_timeout"):
            ServerSettings(database_connect_timeout=refused)
