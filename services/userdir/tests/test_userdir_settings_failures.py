"""Bad settings end in one line naming the setting and the fix, status 2, no traceback and
no secret; files that hold secrets are read only when other users cannot read them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge_userdir.private_files import SettingsFileError, check_private_file
from clusterforge_userdir.storage import create_database_engine
from userdir_support import free_port

PASSWORD = "DB-PASSWORD-5e1f"
TOKEN = "settings-token-0123456789abcdef"


def run_cli(
    tmp_path: Path, *arguments: str, **environment: str
) -> subprocess.CompletedProcess[str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CLUSTERFORGE_USERDIR_")
    }
    env.update(environment)
    return subprocess.run(
        [sys.executable, "-m", "clusterforge_userdir.cli", "--port", str(free_port()), *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_refused_in_one_line(answer: subprocess.CompletedProcess[str], *names: str) -> str:
    assert answer.returncode == 2, answer.stderr
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr
    assert lines[0].startswith("clusterforge-userdir: ")
    assert "Traceback" not in answer.stderr
    assert PASSWORD not in answer.stderr + answer.stdout
    assert TOKEN not in answer.stderr + answer.stdout
    for name in names:
        assert name in lines[0]
    return lines[0]


@pytest.fixture
def ssl_answering_listener() -> Iterator[int]:
    """A stand-in PostgreSQL that agrees to TLS ('S'), so libpq goes on to load its CA."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(30)

    def answer_once() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.recv(8)
            connection.sendall(b"S")
            connection.recv(1024)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()
        thread.join(timeout=5)


@pytest.mark.parametrize(
    ("database_url", "says", "fix"),
    [
        (
            f"postgresql+psycopg://userdir:{PASSWORD}@db:notaport/userdir",
            "cannot be parsed",
            "postgresql+psycopg://<user>",
        ),
        (f"mysql://userdir:{PASSWORD}@db/userdir", "unsupported scheme", "sqlite:///<path"),
        ("sqlite:///:memory:", "names no SQLite file", "sqlite:///<path"),
        (
            f"postgresql+psycopg://userdir:{PASSWORD}@127.0.0.1:1/userdir",
            "Connection refused",
            "check the URL, the server",
        ),
        (
            "sqlite:////nonexistent-userdir-directory/userdir.db",
            "its directory /nonexistent-userdir-directory does not exist",
            "create it",
        ),
    ],
)
def test_a_bad_database_url_is_refused_in_one_line(
    tmp_path: Path, database_url: str, says: str, fix: str
) -> None:
    answer = run_cli(tmp_path, "--database-url", database_url)
    assert_refused_in_one_line(answer, "--database-url", "DATABASE_URL", says, fix)


def test_a_missing_ca_file_is_refused_in_one_line(
    tmp_path: Path, ssl_answering_listener: int
) -> None:
    url = (
        f"postgresql+psycopg://userdir:{PASSWORD}@127.0.0.1:{ssl_answering_listener}/userdir"
        "?sslmode=verify-full&sslrootcert=/nonexistent/userdir-ca.pem"
    )
    answer = run_cli(tmp_path, "--database-url", url)
    assert_refused_in_one_line(answer, "--database-url", "/nonexistent/userdir-ca.pem")


def test_a_bad_log_level_is_refused_in_one_line(tmp_path: Path) -> None:
    answer = run_cli(tmp_path, "--log-level", "loud")
    assert_refused_in_one_line(answer, "--log-level", "'info'")


def test_a_bad_number_in_the_environment_is_refused_in_one_line(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT="soon",
        CLUSTERFORGE_USERDIR_AUTH_TOKENS=TOKEN,
    )
    assert_refused_in_one_line(answer, "CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT")


def test_a_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n", encoding="utf-8")
    tokens.chmod(0o644)
    answer = run_cli(tmp_path, "--auth-tokens-file", str(tokens))
    assert_refused_in_one_line(answer, str(tokens), f"chmod 600 {tokens}", "--auth-tokens-file")


def test_a_settings_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    settings = tmp_path / "userdir.env"
    settings.write_text(f'CLUSTERFORGE_USERDIR_AUTH_TOKENS="{TOKEN}"\n', encoding="utf-8")
    settings.chmod(0o604)
    answer = run_cli(tmp_path, "--settings-file", str(settings))
    assert_refused_in_one_line(answer, str(settings), f"chmod 600 {settings}")


def test_a_private_settings_file_is_used(tmp_path: Path) -> None:
    """Its database URL (a directory that does not exist) is the one the start fails on."""
    settings = tmp_path / "userdir.env"
    settings.write_text(
        f'CLUSTERFORGE_USERDIR_AUTH_TOKENS="{TOKEN}"\n'
        'CLUSTERFORGE_USERDIR_DATABASE_URL="sqlite:////nonexistent-from-the-file/u.db"\n',
        encoding="utf-8",
    )
    settings.chmod(0o600)
    answer = run_cli(tmp_path, "--settings-file", str(settings))
    assert_refused_in_one_line(answer, "/nonexistent-from-the-file")


def test_an_unknown_name_in_the_settings_file_is_refused(tmp_path: Path) -> None:
    settings = tmp_path / "userdir.env"
    settings.write_text(f'USERDIR_TOKENS="{TOKEN}"\n', encoding="utf-8")
    settings.chmod(0o600)
    answer = run_cli(tmp_path, "--settings-file", str(settings))
    assert_refused_in_one_line(answer, "USERDIR_TOKENS", str(settings))


# -- the file rule itself ----------------------------------------------------------------


def secret_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "secret"
    path.write_text("x\n", encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_file_for_the_owner_alone_is_accepted(tmp_path: Path, mode: int) -> None:
    check_private_file(secret_file(tmp_path, mode), setting="test")


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602, 0o601, 0o666])
def test_a_file_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = secret_file(tmp_path, mode)
    with pytest.raises(SettingsFileError, match=f"chmod 600 {path}"):
        check_private_file(path, setting="test")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to root needs root")


@needs_root
def test_root_owned_group_readable_with_the_service_group_is_accepted(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o640)
    os.chown(path, 0, os.getegid())
    check_private_file(path, setting="test")


@needs_root
def test_group_readable_with_another_group_is_refused(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o640)
    os.chown(path, 0, os.getegid() + 4242)
    with pytest.raises(SettingsFileError, match="0640"):
        check_private_file(path, setting="test")


@needs_root
def test_group_readable_but_not_owned_by_root_is_refused(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o640)
    os.chown(path, 4242, os.getegid())
    with pytest.raises(SettingsFileError, match="chmod 600"):
        check_private_file(path, setting="test")


@needs_root
def test_group_writable_is_refused_even_for_root(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o660)
    os.chown(path, 0, os.getegid())
    with pytest.raises(SettingsFileError, match="0660"):
        check_private_file(path, setting="test")


def test_a_new_sqlite_file_is_created_0600(tmp_path: Path) -> None:
    database = tmp_path / "new.db"
    engine = create_database_engine(f"sqlite:///{database}")
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()
    assert database.stat().st_mode & 0o777 == 0o600
