"""Issue 49: the user directory's settings fail closed.

Every source (the environment with the service's prefix, the settings file, the options)
is parsed strictly: a line or name the service does not understand, a file that is not
UTF-8, a number that is not finite or out of its range, a SQLite URL with options, each
stop the start with one line naming the setting and the fix, exit status 2, and nothing
listening. A missing or misspelled token is never read as "no authentication".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from userdir_support import free_port

TOKEN = "fail-closed-token-0123456789abcdef"
PREFIX = "CLUSTERFORGE_USERDIR_"


def start(
    tmp_path: Path, *arguments: str, port: int | None = None, **environment: str
) -> subprocess.CompletedProcess[str]:
    """Run the service; a start that is not refused is stopped after 8 s (timeout)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(PREFIX)}
    env.update(environment)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "clusterforge_userdir.cli",
            "--port",
            str(port or free_port()),
            "--database-url",
            f"sqlite:///{tmp_path}/u.db",
            *arguments,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=8,
        check=False,
    )


def refused(answer: subprocess.CompletedProcess[str], *names: str) -> str:
    assert answer.returncode == 2, answer.stderr
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr
    assert lines[0].startswith("clusterforge-userdir: "), lines[0]
    assert "Traceback" not in answer.stderr
    assert TOKEN not in answer.stderr + answer.stdout
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def settings_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "userdir.env"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    ("line", "names"),
    [
        # The audit's three lines that turned authentication off on loopback.
        (f'{PREFIX}AUTH_TOKEN="{TOKEN}"', [f"{PREFIX}AUTH_TOKEN", "not a setting"]),
        (f"{PREFIX}AUTH_TOKENS", [f"{PREFIX}AUTH_TOKENS", "line 1", "="]),
        (f'{PREFIX}AUTH_TOKENS="{TOKEN}', [f"{PREFIX}AUTH_TOKENS", "quote"]),
        (f"{PREFIX}AUTH_TOKENS='{TOKEN}", [f"{PREFIX}AUTH_TOKENS", "quote"]),
        (f'{PREFIX}AUTH_TOKENS="{TOKEN}"x', [f"{PREFIX}AUTH_TOKENS", "quote"]),
        # A token setting named without a token.
        (f"{PREFIX}AUTH_TOKENS=", [f"{PREFIX}AUTH_TOKENS", "no token"]),
        (f'{PREFIX}AUTH_TOKENS=","', [f"{PREFIX}AUTH_TOKENS", "no token"]),
        (f'{PREFIX}AUTH_TOKENS_FILE=""', [f"{PREFIX}AUTH_TOKENS_FILE"]),
        (f"export {PREFIX}AUTH_TOKENS={TOKEN}", ["line 1"]),
    ],
)
def test_a_settings_line_it_does_not_understand_stops_the_start(
    tmp_path: Path, line: str, names: list[str]
) -> None:
    path = settings_file(tmp_path, line + "\n")
    refused(start(tmp_path, "--settings-file", str(path)), *names)


def test_a_settings_file_naming_no_token_must_say_so(tmp_path: Path) -> None:
    """Deleting the token line of a settings file does not turn authentication off."""
    path = settings_file(tmp_path, f'{PREFIX}MAX_PAGE_SIZE="100"\n')
    refused(
        start(tmp_path, "--settings-file", str(path)),
        f"{PREFIX}AUTH_TOKENS",
        f"{PREFIX}ALLOW_UNAUTHENTICATED",
    )


def test_a_token_and_allow_unauthenticated_together_are_refused(tmp_path: Path) -> None:
    path = settings_file(
        tmp_path, f'{PREFIX}AUTH_TOKENS="{TOKEN}"\n{PREFIX}ALLOW_UNAUTHENTICATED="true"\n'
    )
    refused(start(tmp_path, "--settings-file", str(path)), f"{PREFIX}ALLOW_UNAUTHENTICATED")


def test_a_setting_given_twice_in_the_file_is_refused(tmp_path: Path) -> None:
    path = settings_file(
        tmp_path, f'{PREFIX}AUTH_TOKENS="{TOKEN}"\n{PREFIX}AUTH_TOKENS="{TOKEN}-other"\n'
    )
    refused(start(tmp_path, "--settings-file", str(path)), f"{PREFIX}AUTH_TOKENS", "twice")


def test_a_settings_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = settings_file(tmp_path, f'{PREFIX}AUTH_TOKENS="{TOKEN}\xff"\n'.encode("latin-1"))
    refused(start(tmp_path, "--settings-file", str(path)), str(path), "UTF-8")


def test_a_misspelled_variable_in_the_environment_is_refused(tmp_path: Path) -> None:
    refused(start(tmp_path, **{f"{PREFIX}AUTH_TOKEN": TOKEN}), f"{PREFIX}AUTH_TOKEN")


def test_an_empty_token_file_is_not_no_authentication(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("\n", encoding="utf-8")
    tokens.chmod(0o600)
    refused(start(tmp_path, "--auth-tokens-file", str(tokens)), str(tokens), "no token")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("REQUEST_READ_TIMEOUT", "inf"),
        ("REQUEST_READ_TIMEOUT", "nan"),
        ("REQUEST_READ_TIMEOUT", "1e300"),
        ("DATABASE_CONNECT_TIMEOUT", "1e12"),
        ("MAX_PAGE_SIZE", "1000000000000"),
        ("LIST_LIMIT", "1e300"),
        ("MAX_REQUEST_BODY_BYTES", "99999999999999999999"),
        ("MAX_REQUEST_HEADER_BYTES", "-inf"),
    ],
)
def test_a_number_that_is_not_finite_or_out_of_range_is_refused(
    tmp_path: Path, variable: str, value: str
) -> None:
    line = refused(
        start(tmp_path, **{f"{PREFIX}{variable}": value, f"{PREFIX}AUTH_TOKENS": TOKEN}),
        f"{PREFIX}{variable}",
    )
    assert "set a finite number" in line, "the fix names the range"


@pytest.mark.parametrize("workers", ["0", "100000"])
def test_workers_out_of_range_is_refused(tmp_path: Path, workers: str) -> None:
    refused(start(tmp_path, "--workers", workers), "--workers")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{tmp}/u.db?timeout=abc",
        "sqlite:///file:m?mode=memory&uri=true",
        "sqlite:///file:{tmp}/u.db",
    ],
)
def test_a_sqlite_url_with_options_is_refused(tmp_path: Path, url: str) -> None:
    refused(
        start(
            tmp_path, "--database-url", url.format(tmp=tmp_path), **{f"{PREFIX}AUTH_TOKENS": TOKEN}
        ),
        "--database-url",
        "sqlite:///<path",
    )


def test_nothing_listens_after_a_refusal(tmp_path: Path) -> None:
    port = free_port()
    refused(start(tmp_path, port=port, **{f"{PREFIX}AUTH_TOKEN": TOKEN}))
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("host", ["a b", "host/name"])
def test_a_host_that_is_no_address_is_refused(tmp_path: Path, host: str) -> None:
    refused(start(tmp_path, "--host", host, **{f"{PREFIX}AUTH_TOKENS": TOKEN}), "--host")


def test_a_postgresql_port_out_of_range_is_refused(tmp_path: Path) -> None:
    refused(
        start(tmp_path, "--database-url", "postgresql+psycopg://userdir@db:99999/userdir"),
        "--database-url",
        "cannot be parsed",
    )
