"""Issue 49: the order service's settings fail closed.

Every source (the YAML file, ``ORDERS_*``/``EVENT_*`` variables, the flags) is read
strictly: a key the service does not know, a key given twice, a file that is not UTF-8,
a number that is not finite or outside its range, a URL that does not parse, a SQLite URL
with options, each end in one line naming the setting and the fix, exit status 2, and
nothing started. A missing or misspelled token is never read as "no authentication".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge_orders import ConfigurationError, load_settings

SCRIPT = Path(sys.executable).with_name("clusterforge-orders")
TOKEN = "orders-fail-closed-token-0123456789"


def start(tmp_path: Path, *arguments: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """Run the service; a start that is not refused runs into the 8 s timeout."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ORDERS_", "EVENT_", "CLUSTERFORGE_ORDERS_"))
    }
    environment.update(variables)
    return subprocess.run(
        [str(SCRIPT), "--port", "1", *arguments],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=8,
        check=False,
    )


def refused(answer: subprocess.CompletedProcess[str], *names: str) -> str:
    assert answer.returncode == 2, answer.stderr
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr
    assert lines[0].startswith("clusterforge-orders: "), lines[0]
    assert "Traceback" not in answer.stderr
    assert TOKEN not in answer.stderr + answer.stdout
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def config(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "orders.yml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def refused_by_loader(*names: str, **keywords: object) -> str:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**keywords)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    assert TOKEN not in message
    for name in names:
        assert name in message, message
    return message


# -- the audit's cases, through the console script ---------------------------------------


@pytest.mark.parametrize("value", ["inf", "1e300", "1e12", "nan", "-1"])
def test_a_relay_grace_that_is_not_finite_or_too_large_is_refused(
    tmp_path: Path, value: str
) -> None:
    refused(
        start(tmp_path, ORDERS_OUTBOX_RELAY_GRACE_SECONDS=value),
        "orders.outbox.relay-grace-seconds",
    )


def test_an_infinite_relay_interval_is_refused(tmp_path: Path) -> None:
    refused(
        start(tmp_path, ORDERS_OUTBOX_RELAY_INTERVAL_SECONDS="inf"),
        "orders.outbox.relay-interval-seconds",
    )


@pytest.mark.parametrize(
    "url", ["https://[::1", "https://127.0.0.1:99999", "https://127.0.0.1:0", "https://:9200"]
)
def test_a_search_url_that_does_not_parse_is_refused(tmp_path: Path, url: str) -> None:
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text("not used\n", encoding="utf-8")
    refused(
        start(tmp_path, ORDERS_SEARCH_URLS=url, ORDERS_SEARCH_CA_FILE=str(ca_file)),
        "orders.search.urls",
    )


def test_a_config_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = config(tmp_path, b"orders:\n  port: 8082\n  log-level: \xff\n")
    refused(start(tmp_path, "--config", str(path)), str(path), "UTF-8")


@pytest.mark.parametrize(
    "url", ["sqlite:///{tmp}/o.db?timeout=abc", "sqlite:///file:m?mode=memory&uri=true"]
)
def test_a_sqlite_url_with_options_is_refused(tmp_path: Path, url: str) -> None:
    refused(
        start(tmp_path, "--database-url", url.format(tmp=tmp_path)),
        "orders.database-url",
        "sqlite:///<path",
    )


def test_a_misspelled_token_variable_is_refused(tmp_path: Path) -> None:
    refused(start(tmp_path, ORDERS_AUTH_TOKEN=TOKEN), "ORDERS_AUTH_TOKEN")


def test_a_bad_flag_is_one_line(tmp_path: Path) -> None:
    refused(start(tmp_path, "--port", "x"), "--port")


# -- the loader, every source ------------------------------------------------------------


@pytest.mark.parametrize(
    "variable",
    ["ORDERS_AUTH_TOKEN", "ORDERS_PROT", "EVENT_ASYNC_CORE_POOL", "CLUSTERFORGE_ORDERS_CONFG"],
)
def test_an_unknown_variable_with_the_services_prefix_is_refused(variable: str) -> None:
    refused_by_loader(variable, environ={variable: TOKEN})


def test_an_unknown_key_in_the_file_is_refused(tmp_path: Path) -> None:
    path = config(tmp_path, f"orders:\n  auth-token: [{TOKEN}]\n")
    refused_by_loader("auth-token", config_file=path, environ={})


def test_a_key_given_twice_in_the_file_is_refused(tmp_path: Path) -> None:
    path = config(tmp_path, f"orders:\n  auth-tokens: [{TOKEN}]\n  auth-tokens: [{TOKEN}x]\n")
    refused_by_loader("auth-tokens", "twice", config_file=path, environ={})


@pytest.mark.parametrize(
    "text",
    [
        "orders:\n  auth-tokens:\n",
        "orders:\n  auth-tokens: []\n",
        "orders:\n  auth-tokens: ''\n",
        "orders:\n  auth-tokens-file: ''\n",
    ],
)
def test_a_token_setting_named_without_a_token_is_refused(tmp_path: Path, text: str) -> None:
    path = config(tmp_path, text)
    refused_by_loader("orders.auth-tokens", config_file=path, environ={})


def test_a_settings_file_naming_no_token_must_say_so(tmp_path: Path) -> None:
    """Deleting the token line of a settings file does not turn authentication off."""
    path = config(tmp_path, "orders:\n  port: 8082\n")
    refused_by_loader(
        "orders.auth-tokens", "orders.allow-unauthenticated", config_file=path, environ={}
    )
    allowed = config(tmp_path, "orders:\n  port: 8082\n  allow-unauthenticated: true\n")
    assert load_settings(config_file=allowed, environ={}).orders.allow_unauthenticated


def test_a_token_and_allow_unauthenticated_together_are_refused(tmp_path: Path) -> None:
    path = config(tmp_path, f"orders:\n  auth-tokens: [{TOKEN}]\n  allow-unauthenticated: true\n")
    refused_by_loader("orders.allow-unauthenticated", config_file=path, environ={})


NUMERIC_KEYS = [
    "orders.port",
    "orders.database-connect-timeout-seconds",
    "orders.max-header-bytes",
    "orders.read-timeout-seconds",
    "orders.listeners.notification.webhook-timeout-seconds",
    "orders.search.timeout-seconds",
    "orders.search.bulk-attempts",
    "orders.outbox.relay-interval-seconds",
    "orders.outbox.relay-grace-seconds",
    "orders.outbox.batch-size",
    "orders.outbox.handoff-capacity",
    "orders.outbox.delivery-linger-seconds",
    "orders.outbox.retry-initial-seconds",
    "orders.outbox.retry-max-seconds",
    "event.async.core-pool-size",
    "event.async.max-pool-size",
    "event.async.queue-capacity",
]


@pytest.mark.parametrize("key", NUMERIC_KEYS)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", "1e12", "-1e300"])
def test_every_number_refuses_non_finite_and_huge_values(key: str, value: str) -> None:
    variable = key.replace(".", "_").replace("-", "_").upper()
    message = refused_by_loader(key, environ={variable: value})
    assert "set a finite number" in message, "the fix names the range"


@pytest.mark.parametrize(
    ("key", "url"),
    [
        ("orders.listeners.notification.webhook-url", "https://[::1"),
        ("orders.listeners.notification.webhook-url", "http://127.0.0.1:99999/hook"),
        ("orders.listeners.notification.webhook-url", "http:///hook"),
    ],
)
def test_a_webhook_url_that_does_not_parse_is_refused(key: str, url: str) -> None:
    variable = key.replace(".", "_").replace("-", "_").upper()
    refused_by_loader(key, environ={variable: url})


@pytest.mark.parametrize(
    "url",
    ["postgresql+psycopg://orders@db:99999/orders", "postgresql+psycopg://orders@[::1/orders"],
)
def test_a_postgresql_url_that_does_not_parse_is_refused(url: str) -> None:
    refused_by_loader(
        "orders.database-url",
        "cannot be parsed",
        environ={},
        overrides={"orders.database-url": url},
    )


@pytest.mark.parametrize("host", ["a b", "127.0.0.1\n", "host/name"])
def test_a_host_that_is_no_address_is_refused(host: str) -> None:
    refused_by_loader("orders.host", environ={"ORDERS_HOST": host})
