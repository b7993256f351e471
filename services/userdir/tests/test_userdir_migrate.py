"""Versioned schema: migrations run at startup, twice is harmless, data survives restarts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import inspect

from clusterforge_userdir.migrate import (
    current_revision,
    downgrade_database,
    head_revision,
    upgrade_database,
)
from clusterforge_userdir.storage import create_database_engine
from userdir_support import free_port


def test_upgrade_creates_the_schema_and_is_idempotent(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'm.db'}")
    assert current_revision(engine) is None
    upgrade_database(engine)
    upgrade_database(engine)
    assert current_revision(engine) == head_revision()
    tables = set(inspect(engine).get_table_names())
    assert {"userdir_users", "userdir_alembic_version"} <= tables
    downgrade_database(engine, revision="base")
    assert "userdir_users" not in inspect(engine).get_table_names()
    engine.dispose()


@pytest.mark.postgres
def test_upgrade_on_postgresql(postgres_database_url: str) -> None:
    engine = create_database_engine(postgres_database_url)
    upgrade_database(engine)
    upgrade_database(engine)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def start_cli(workdir: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERFORGE_USERDIR")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clusterforge_userdir.cli",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *extra,
        ],
        cwd=workdir,
        env=environment,
    )


def wait_until_up(base_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the service exited during startup"
        try:
            if httpx.get(f"{base_url}/mock-api/health").text == "UP":
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("the service did not answer its health check within 30 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=15)


def test_cli_defaults_to_sqlite_in_the_working_directory_and_data_survives_restart(
    tmp_path: Path,
) -> None:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    first = start_cli(tmp_path, port)
    try:
        wait_until_up(base_url, first)
        created = httpx.post(f"{base_url}/mock-api/users", json={"username": "survivor"}).json()
    finally:
        stop(first)
    assert (tmp_path / "userdir.db").exists()
    second = start_cli(tmp_path, port)
    try:
        wait_until_up(base_url, second)
        assert httpx.get(f"{base_url}/mock-api/users/{created['id']}").json() == created
    finally:
        stop(second)


def test_cli_takes_tokens_from_a_file_and_refuses_weak_ones(tmp_path: Path) -> None:
    weak = tmp_path / "weak-tokens"
    weak.write_text("changeme\n", encoding="utf-8")
    weak.chmod(0o600)  # the file is judged by its content here, not refused for its mode
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "clusterforge_userdir.cli",
            "--auth-tokens-file",
            str(weak),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "placeholder or shorter" in refused.stderr
    assert "changeme" not in refused.stderr

    strong = tmp_path / "tokens"
    strong.write_text("cli-token-0123456789abcdef\n", encoding="utf-8")
    strong.chmod(0o600)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    process = start_cli(
        tmp_path,
        port,
        "--auth-tokens-file",
        str(strong),
        "--database-url",
        f"sqlite:///{tmp_path / 'auth.db'}",
    )
    try:
        wait_until_up(base_url, process)
        assert httpx.get(f"{base_url}/mock-api/users").status_code == 401
        ok = httpx.get(
            f"{base_url}/mock-api/users",
            headers={"Authorization": "Bearer cli-token-0123456789abcdef"},
        )
        assert ok.status_code == 200
    finally:
        stop(process)
