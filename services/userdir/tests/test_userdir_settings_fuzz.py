"""Issue 49: a fuzz of the user directory's settings file, seeded, so every run is the same.

Every single-line mutation of a valid settings file (with a token), and files of random
lines and names, either load with exactly the declared settings or end in one
SettingsError line; nothing else is raised (no traceback), and no mutation of the file
with a token loads with authentication off. The bulk goes through the loader the console
script uses; a sample runs the console script itself.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clusterforge_userdir.settings import (
    ServerSettings,
    SettingsError,
    load_server_settings,
)
from userdir_support import free_port

TOKEN = "userdir-fuzz-token-0123456789abcdefgh"
PREFIX = "CLUSTERFORGE_USERDIR_"
SEED = 49
BOOLEAN_TEXTS = {
    True: {"1", "t", "true", "y", "yes", "on"},
    False: {"0", "f", "false", "n", "no", "off"},
}
NUMERIC_FIELDS = [
    name for name, field in ServerSettings.model_fields.items() if field.annotation in (int, float)
]


def valid_file(tmp_path: Path) -> str:
    """A whole settings file as the toolkit's plan writes it (userdir.env), one token."""
    values = {
        "AUTH_TOKENS": TOKEN,
        "DATABASE_CONNECT_TIMEOUT": "5",
        "DATABASE_URL": f"sqlite:///{tmp_path}/userdir.db",
        "LIST_LIMIT": "1000",
        "MAX_PAGE_SIZE": "100",
        "MAX_REQUEST_BODY_BYTES": "65536",
        "MAX_REQUEST_HEADER_BYTES": "16384",
        "REQUEST_READ_TIMEOUT": "10.0",
    }
    header = "# Ansible managed\n"
    return header + "".join(f'{PREFIX}{name}="{value}"\n' for name, value in values.items())


def single_line_mutations(text: str, chance: random.Random) -> Iterator[str]:
    lines = text.splitlines()
    junk = ["'", '"', "=", "#", " ", "\t", "\\", "é", "\x00", ",", "x", "_"]
    for index, line in enumerate(lines):

        def replaced(new: str | None, where: int = index) -> str:
            changed = [*lines[:where], *([] if new is None else [new]), *lines[where + 1 :]]
            return "\n".join(changed) + "\n"

        yield replaced(None)
        yield "\n".join([*lines[: index + 1], line, *lines[index + 1 :]]) + "\n"
        yield replaced(line.replace("=", "", 1))
        yield replaced(line.replace('"', "", 1))
        yield replaced(line.replace('"', "'"))
        yield replaced(line.lower())
        yield replaced("export " + line)
        yield replaced(line.replace("=", " = ", 1))
        for cut in sorted({len(line) // 3, len(line) // 2, len(line) - 1, line.find("=") + 1}):
            yield replaced(line[:cut])
        for _ in range(6):
            position = chance.randrange(len(line) + 1)
            yield replaced(line[:position] + chance.choice(junk) + line[position + 1 :])
        name, equals, _ = line.partition("=")
        if equals:
            for odd in ("inf", "-inf", "nan", "1e300", "1e12", "-1", "", ",", "true", "0x10"):
                yield replaced(f'{name}="{odd}"')


def random_files(chance: random.Random, count: int) -> Iterator[str]:
    names = [
        *(f"{PREFIX}{field.upper()}" for field in ServerSettings.model_fields),
        f"{PREFIX}AUTH_TOKEN",
        f"{PREFIX}SETTINGS_FILE",
        "USERDIR_TOKENS",
        "AUTH_TOKENS",
        "",
    ]
    values = [
        "",
        '""',
        TOKEN,
        f'"{TOKEN}"',
        f"'{TOKEN}'",
        f'"{TOKEN}',
        "changeme",
        "100",
        "inf",
        "nan",
        "1e300",
        "1e12",
        "-3",
        "true",
        "sqlite:///file:m?mode=memory&uri=true",
        "sqlite:///u.db?timeout=abc",
        '"a b"',
        "a b",
        "\\x",
    ]
    for _ in range(count):
        lines = []
        for _ in range(chance.randint(1, 6)):
            separator = chance.choice(["=", "=", "=", "", " "])
            lines.append(f"{chance.choice(names)}{separator}{chance.choice(values)}")
        yield "\n".join(lines) + "\n"


def random_known_files(chance: random.Random, count: int) -> Iterator[str]:
    """Files of random known names with values of every kind, always saying how clients
    authenticate: many load, and must load as declared."""
    names = [
        field.upper()
        for field in ServerSettings.model_fields
        if field not in {"auth_tokens", "auth_tokens_file", "allow_unauthenticated"}
    ]
    values = [
        "0", "1", "2", "5", "100", "1000", "65536", "16384", "300", "10.5", "1e3",
        "inf", "nan", "true", "false", "yes", "", "sqlite:///{tmp}/u.db", "x",
    ]  # fmt: skip
    for _ in range(count):
        lines = [
            f'{PREFIX}{name}="{chance.choice(values)}"'
            for name in chance.sample(names, chance.randint(1, 5))
        ]
        if chance.random() < 0.5:
            lines.append(f'{PREFIX}ALLOW_UNAUTHENTICATED="true"')
        else:
            lines.append(f'{PREFIX}AUTH_TOKENS="{TOKEN}"')
        chance.shuffle(lines)
        yield "\n".join(lines) + "\n"


def declared(text: str) -> dict[str, str]:
    """The oracle: what an accepted file declares, read naively (last one wins)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, _, value = stripped.partition("=")
        value = value.strip()
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif value.startswith("'"):
            value = value[1:-1]
        found[name.strip().removeprefix(PREFIX).lower()] = value
    return found


def same(text: str, loaded: object) -> bool:
    if isinstance(loaded, bool):
        return text.strip().lower() in BOOLEAN_TEXTS[loaded]
    if isinstance(loaded, (int, float)):
        try:
            number = float(text)
        except ValueError:
            return False
        return math.isfinite(number) and number == loaded
    if hasattr(loaded, "get_secret_value"):
        return text == loaded.get_secret_value()
    return text == str(loaded) or Path(text) == loaded


def judge(path: Path, text: str) -> tuple[str, object]:
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    path.chmod(0o600)
    try:
        settings = load_server_settings(settings_file=path, environ={}, options={})
        tokens = settings.accepted_tokens()
    except ValueError as error:  # SettingsError and SettingsFileError
        message = str(error)
        assert "\n" not in message, message
        assert TOKEN not in message, message
        return "refused", message
    for field, value in declared(text).items():
        assert same(value, getattr(settings, field)), (field, value, text)
    for field in ServerSettings.model_fields.keys() - declared(text).keys():
        assert getattr(settings, field) == ServerSettings.model_fields[field].default, field
    return "loaded", tokens


def test_no_single_line_mutation_loads_with_authentication_off(tmp_path: Path) -> None:
    chance = random.Random(SEED)
    started = time.monotonic()
    outcomes = {"refused": 0, "loaded": 0}
    for text in single_line_mutations(valid_file(tmp_path), chance):
        outcome, result = judge(tmp_path / "userdir.env", text)
        outcomes[outcome] += 1
        if outcome == "loaded":
            assert result, f"authentication off:\n{text}"
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 20, outcomes
    assert time.monotonic() - started < 30


def test_random_files_load_as_declared_or_are_refused_in_one_line(tmp_path: Path) -> None:
    chance = random.Random(SEED + 1)
    outcomes = {"refused": 0, "loaded": 0}
    for text in random_files(chance, 2000):
        try:
            outcome, _ = judge(tmp_path / "userdir.env", text)
        except AssertionError:
            raise
        except Exception as error:  # a traceback in the service
            pytest.fail(f"{type(error).__name__} for:\n{text}")
        outcomes[outcome] += 1
    assert outcomes["refused"] > 1500, outcomes


def test_random_known_names_load_exactly_as_declared(tmp_path: Path) -> None:
    chance = random.Random(SEED + 3)
    outcomes = {"refused": 0, "loaded": 0}
    for text in random_known_files(chance, 1500):
        outcome, _ = judge(tmp_path / "userdir.env", text.replace("{tmp}", str(tmp_path)))
        outcomes[outcome] += 1
    assert outcomes["loaded"] > 50 and outcomes["refused"] > 100, outcomes


def test_every_numeric_setting_has_a_range() -> None:
    assert set(NUMERIC_FIELDS) == {
        "database_connect_timeout",
        "max_page_size",
        "list_limit",
        "max_request_body_bytes",
        "max_request_header_bytes",
        "request_read_timeout",
    }


@pytest.mark.parametrize("field", NUMERIC_FIELDS)
def test_non_finite_and_huge_numbers_in_every_numeric_setting(field: str) -> None:
    for value in ("inf", "-inf", "nan", "NaN", "1e300", "-1e300", "1e12", "9" * 400):
        with pytest.raises(SettingsError, match="set a finite number from") as caught:
            load_server_settings(
                settings_file=None, environ={f"{PREFIX}{field.upper()}": value}, options={}
            )
        assert "\n" not in str(caught.value)
        assert f"{PREFIX}{field.upper()}" in str(caught.value)


def test_a_sample_through_the_console_script(tmp_path: Path) -> None:
    """The process agrees with the loader: refused ones exit 2 with one line, loaded ones
    serve with the token required."""
    chance = random.Random(SEED + 2)
    by_outcome: dict[str, list[str]] = {"refused": [], "loaded": []}
    for text in single_line_mutations(valid_file(tmp_path), chance):
        by_outcome[judge(tmp_path / "judged.env", text)[0]].append(text)
    # Both kinds: most mutations are refused, and a sample of ten may hold no start.
    sample = chance.sample(by_outcome["refused"], 6) + chance.sample(by_outcome["loaded"], 4)
    environment = {name: value for name, value in os.environ.items() if not name.startswith(PREFIX)}
    for number, text in enumerate(sample):
        outcome, _ = judge(tmp_path / "judged.env", text)
        settings = tmp_path / f"userdir-{number}.env"
        settings.write_text(text, encoding="utf-8", errors="surrogateescape")
        settings.chmod(0o600)
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "clusterforge_userdir.cli",
                "--port",
                str(port),
                "--settings-file",
                str(settings),
            ],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if outcome == "refused":
                _, errors = process.communicate(timeout=30)
                assert process.returncode == 2, errors
                assert len(errors.strip().splitlines()) == 1, errors
                continue
            deadline = time.monotonic() + 30
            while True:
                try:
                    answer = httpx.get(f"http://127.0.0.1:{port}/mock-api/users", timeout=1)
                    break
                except httpx.TransportError:
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline, "the service did not come up"
                    time.sleep(0.1)
            assert answer.status_code == 401, "authentication is on"
        finally:
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30)
