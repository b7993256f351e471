"""Issue 49: a fuzz of the order service's settings file, seeded, so every run is the same.

Every single-line mutation of a valid settings file (with a token), and files of random
lines and keys, either load with exactly the declared settings or end in one
ConfigurationError line; nothing else is raised (no traceback), and no mutation of the
file with a token loads with authentication off. The bulk goes through the loader; a
sample runs the console script.
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
from typing import Any

import httpx
import pytest
import yaml

from clusterforge_orders import ConfigurationError, load_settings

SCRIPT = Path(sys.executable).with_name("clusterforge-orders")
TOKEN = "orders-fuzz-token-0123456789abcdefghij"
SEED = 49
BOOLEAN_TEXTS = {
    True: {"1", "t", "true", "y", "yes", "on"},
    False: {"0", "f", "false", "n", "no", "off"},
}


def valid_file(tmp_path: Path, port: int = 8082) -> str:
    """A whole settings file as the toolkit's plan writes it: every key, one token."""
    database = f"sqlite:///{tmp_path}/orders.db"
    tree = {
        "orders": {
            "host": "127.0.0.1",
            "port": port,
            "database-url": database,
            "database-connect-timeout-seconds": 10.0,
            "access-log": True,
            "log-level": "info",
            "max-header-bytes": 16384,
            "read-timeout-seconds": 10.0,
            "auth-tokens": [TOKEN],
            "auth-tokens-file": None,
            "listeners": {
                "audit-log": {"enabled": True},
                "notification": {
                    "enabled": True,
                    "sender": "logging",
                    "webhook-url": None,
                    "webhook-timeout-seconds": 5.0,
                },
                "after-commit-sync": {"enabled": True, "fallback-execution": False},
            },
            "outbox": {
                "relay-interval-seconds": 5.0,
                "relay-grace-seconds": 10.0,
                "batch-size": 500,
                "handoff-capacity": 10000,
                "delivery-linger-seconds": 0.25,
                "retry-initial-seconds": 1.0,
                "retry-max-seconds": 300.0,
            },
        },
        "event": {
            "async": {
                "core-pool-size": 4,
                "max-pool-size": 8,
                "queue-capacity": 200,
                "thread-name-prefix": "event-task-",
            }
        },
    }
    return yaml.safe_dump(tree, sort_keys=True)


def single_line_mutations(text: str, chance: random.Random) -> Iterator[str]:
    """Each line deleted, doubled, cut, re-indented, its colon dropped, a character
    changed, a quote or a random key added: what a hand edit or a bad copy does."""
    lines = text.splitlines()
    junk = ["'", '"', ":", "-", "[", "{", "#", " ", "\t", "\\", "é", "\x00", "1e300", "inf"]
    for index, line in enumerate(lines):

        def replaced(new: str | None, where: int = index) -> str:
            changed = [*lines[:where], *([] if new is None else [new]), *lines[where + 1 :]]
            return "\n".join(changed) + "\n"

        yield replaced(None)
        yield "\n".join([*lines[: index + 1], line, *lines[index + 1 :]]) + "\n"
        yield replaced(line.replace(":", "", 1))
        yield replaced("  " + line)
        yield replaced(line[2:] if line.startswith("  ") else line)
        for cut in sorted({len(line) // 3, len(line) // 2, len(line) - 1}):
            yield replaced(line[:cut])
        for _ in range(3):
            position = chance.randrange(len(line) + 1)
            yield replaced(line[:position] + chance.choice(junk) + line[position + 1 :])
        key, colon, value = line.partition(":")
        if colon and value.strip():
            for odd in (".inf", "-.inf", ".nan", "1e300", "1.0e+12", "-1", "true", "''", "[]"):
                yield replaced(f"{key}: {odd}")


def random_files(chance: random.Random, count: int) -> Iterator[str]:
    """Files of random lines: known and misspelled keys, at random depths, odd values."""
    keys = [
        "orders",
        "event",
        "async",
        "port",
        "host",
        "auth-tokens",
        "auth-token",
        "auth-tokens-file",
        "allow-unauthenticated",
        "outbox",
        "relay-grace-seconds",
        "relay-interval-seconds",
        "search",
        "urls",
        "core-pool-size",
        "database-url",
        "listeners",
        "notification",
        "webhook-url",
        "prot",
    ]
    values = [
        "",
        "1",
        "8082",
        ".inf",
        ".nan",
        "1e300",
        "1.0e+12",
        "-5",
        "true",
        "no",
        f"[{TOKEN}]",
        "[]",
        "'https://[::1'",
        "https://127.0.0.1:99999",
        "sqlite:///file:m?mode=memory&uri=true",
        "sqlite:///orders.db?timeout=abc",
        "'",
        "{",
    ]
    for _ in range(count):
        lines = []
        for _ in range(chance.randint(1, 8)):
            indent = "  " * chance.randint(0, 3)
            lines.append(f"{indent}{chance.choice(keys)}: {chance.choice(values)}".rstrip())
        yield "\n".join(lines) + "\n"


def random_trees(chance: random.Random, count: int) -> Iterator[str]:
    """Files of random known keys (and now and then an unknown one), values of every
    kind, always saying how clients authenticate: most of them load, and must load as
    declared."""
    from clusterforge_orders.settings import OrderServiceSettings, _leaf_keys

    keys = [key for key in _leaf_keys(OrderServiceSettings) if "auth" not in key]
    values: list[Any] = [
        0, 1, 2, 3, 10, 200, 8082, 65535, 0.25, 2.5, 299.5, 1e300, float("inf"),
        True, False, None, "", "1", "12", "2.5", "info", "debug", "loud", "logging",
        "webhook", "orders", "ev-", "127.0.0.1", "a b", [], ["https://127.0.0.1:9200"],
    ]  # fmt: skip
    for _ in range(count):
        tree: dict[str, Any] = {}
        for key in chance.sample(keys, chance.randint(1, 6)):
            node = tree
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = chance.choice(values)
        orders = tree.setdefault("orders", {})
        if chance.random() < 0.5:
            orders["allow-unauthenticated"] = True
        else:
            orders["auth-tokens"] = [TOKEN]
        if chance.random() < 0.1:
            orders[chance.choice(["prot", "auth-token", "outbox-x"])] = 1
        yield yaml.safe_dump(tree, sort_keys=False)


def leaves(tree: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaves(value, (*prefix, str(key)))
    else:
        yield prefix, tree


def loaded_value(dumped: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = dumped
    for part in path:
        node = node[part]
    return node


def same(declared: Any, loaded: Any) -> bool:
    """Whether the service took the declared value as written (pydantic's lax reading)."""
    if isinstance(loaded, bool):
        return declared is loaded or str(declared).lower() in BOOLEAN_TEXTS[loaded]
    if isinstance(loaded, (int, float)):
        try:
            number = float(declared)
        except (TypeError, ValueError):
            return False
        return not isinstance(declared, bool) and math.isfinite(number) and number == loaded
    if isinstance(loaded, list):
        if isinstance(declared, str):
            declared = [part.strip() for part in declared.split(",") if part.strip()]
        return (
            isinstance(declared, list)
            and len(declared) == len(loaded)
            and all(same(one, other) for one, other in zip(declared, loaded, strict=True))
        )
    if loaded is None:
        return declared is None
    return str(declared) == str(loaded) or str(declared).lower() == str(loaded)


def judge(path: Path, text: str) -> tuple[str, Any]:
    """Load ``text`` as the settings file: ("refused", message) or ("loaded", settings)."""
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    path.chmod(0o600)
    try:
        settings = load_settings(config_file=path, environ={})
        # What the start does next (OrderServiceRuntime.open): read the token file.
        settings.orders.accepted_tokens()
    except ConfigurationError as error:
        message = str(error)
        assert "\n" not in message, message
        assert TOKEN not in message, message
        assert message.strip(), text
        return "refused", message
    # Exactly the declared settings: every leaf of the file, as the service holds it.
    declared = yaml.safe_load(text)
    dumped = settings.model_dump(mode="python", by_alias=True)
    for leaf_path, value in leaves(declared):
        loaded = loaded_value(dumped, leaf_path)
        assert same(value, loaded), (leaf_path, value, loaded, text)
    return "loaded", settings


def test_no_single_line_mutation_loads_with_authentication_off(tmp_path: Path) -> None:
    chance = random.Random(SEED)
    started = time.monotonic()
    outcomes = {"refused": 0, "loaded": 0}
    for text in single_line_mutations(valid_file(tmp_path), chance):
        outcome, result = judge(tmp_path / "orders.yml", text)
        outcomes[outcome] += 1
        if outcome == "loaded":
            assert result.orders.accepted_tokens(), f"authentication off:\n{text}"
            assert not result.orders.allow_unauthenticated
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 20, outcomes
    assert time.monotonic() - started < 30


def test_random_files_load_as_declared_or_are_refused_in_one_line(tmp_path: Path) -> None:
    chance = random.Random(SEED + 1)
    outcomes = {"refused": 0, "loaded": 0}
    for text in random_files(chance, 1500):
        try:
            outcome, _ = judge(tmp_path / "orders.yml", text)
        except AssertionError:
            raise
        except Exception as error:  # a traceback in the service
            pytest.fail(f"{type(error).__name__} for:\n{text}")
        outcomes[outcome] += 1
    assert outcomes["refused"] > 1000, outcomes


NUMERIC_VARIABLES = [
    "ORDERS_PORT",
    "ORDERS_DATABASE_CONNECT_TIMEOUT_SECONDS",
    "ORDERS_MAX_HEADER_BYTES",
    "ORDERS_READ_TIMEOUT_SECONDS",
    "ORDERS_LISTENERS_NOTIFICATION_WEBHOOK_TIMEOUT_SECONDS",
    "ORDERS_SEARCH_TIMEOUT_SECONDS",
    "ORDERS_SEARCH_BULK_ATTEMPTS",
    "ORDERS_OUTBOX_RELAY_INTERVAL_SECONDS",
    "ORDERS_OUTBOX_RELAY_GRACE_SECONDS",
    "ORDERS_OUTBOX_BATCH_SIZE",
    "ORDERS_OUTBOX_HANDOFF_CAPACITY",
    "ORDERS_OUTBOX_DELIVERY_LINGER_SECONDS",
    "ORDERS_OUTBOX_RETRY_INITIAL_SECONDS",
    "ORDERS_OUTBOX_RETRY_MAX_SECONDS",
    "EVENT_ASYNC_CORE_POOL_SIZE",
    "EVENT_ASYNC_MAX_POOL_SIZE",
    "EVENT_ASYNC_QUEUE_CAPACITY",
]


def test_random_known_keys_load_exactly_as_declared(tmp_path: Path) -> None:
    chance = random.Random(SEED + 3)
    outcomes = {"refused": 0, "loaded": 0}
    for text in random_trees(chance, 1500):
        outcome, _ = judge(tmp_path / "orders.yml", text)
        outcomes[outcome] += 1
    assert outcomes["loaded"] > 50 and outcomes["refused"] > 100, outcomes


def test_every_numeric_variable_is_covered() -> None:
    from clusterforge_orders.settings import (
        OrderServiceSettings,
        _field_at,
        _leaf_keys,
        environment_variable_for,
        numeric_range,
    )

    numeric = set()
    for key in _leaf_keys(OrderServiceSettings):
        field = _field_at(tuple(key.split(".")))
        assert field is not None
        if field.annotation in (int, float):
            assert numeric_range(field) is not None, f"{key} has no range"
            numeric.add(environment_variable_for(key))
    assert numeric == set(NUMERIC_VARIABLES)


@pytest.mark.parametrize("variable", NUMERIC_VARIABLES)
def test_non_finite_and_huge_numbers_in_every_numeric_setting(variable: str) -> None:
    for value in ("inf", "-inf", "nan", "NaN", "1e300", "-1e300", "1e12", "9" * 400, "1e-400"):
        try:
            load_settings(environ={variable: value})
        except ConfigurationError as error:
            assert "\n" not in str(error)
            assert "set a finite number" in str(error), str(error)
            continue
        # 1e-400 is 0.0: a number in range for those that take 0.
        assert value == "1e-400", (variable, value)


def _start(tmp_path: Path, config: Path) -> subprocess.Popen[str]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ORDERS_", "EVENT_", "CLUSTERFORGE_ORDERS_"))
    }
    return subprocess.Popen(
        [str(SCRIPT), "--config", str(config)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_sample_through_the_console_script(tmp_path: Path) -> None:
    """The process agrees with the loader: refused ones exit 2 with one line, loaded ones
    serve with the token required."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = int(probe.getsockname()[1])
    chance = random.Random(SEED + 2)
    judged = tmp_path / "judged.yml"
    by_outcome: dict[str, list[str]] = {"refused": [], "loaded": []}
    for text in single_line_mutations(valid_file(tmp_path, free_port), chance):
        by_outcome[judge(judged, text)[0]].append(text)
    # Both kinds: most mutations are refused, and a sample of ten may hold no start.
    sample = chance.sample(by_outcome["refused"], 6) + chance.sample(by_outcome["loaded"], 4)
    for number, text in enumerate(sample):
        outcome, loaded = judge(judged, text)
        config = tmp_path / f"orders-{number}.yml"
        config.write_text(text, encoding="utf-8", errors="surrogateescape")
        config.chmod(0o600)
        process = _start(tmp_path, config)
        try:
            if outcome == "refused":
                _, errors = process.communicate(timeout=30)
                assert process.returncode == 2, errors
                assert len(errors.strip().splitlines()) == 1, errors
                assert "Traceback" not in errors
                continue
            host, port = loaded.orders.host or "127.0.0.1", loaded.orders.port
            deadline = time.monotonic() + 30
            while True:
                try:
                    answer = httpx.get(f"http://{host}:{port}/metrics", timeout=1)
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
