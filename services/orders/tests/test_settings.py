"""Settings from defaults, a YAML file and the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge_orders import (
    ConfigurationError,
    OrderServiceRuntime,
    ThreadPoolTaskExecutor,
    environment_variable_for,
    load_settings,
)


def test_defaults_are_the_specs() -> None:
    settings = load_settings(environ={})
    pool = settings.event_async
    assert (pool.core_pool_size, pool.max_pool_size, pool.queue_capacity) == (4, 8, 200)
    assert pool.thread_name_prefix == "event-task-"
    assert settings.orders.port == 8082
    assert settings.orders.database_url == "sqlite:///orders.db"


def test_shutdown_waits_thirty_seconds_by_default(tmp_path: Path) -> None:
    assert ThreadPoolTaskExecutor().await_termination_seconds == 30
    settings = load_settings(
        environ={}, overrides={"orders.database-url": f"sqlite:///{tmp_path}/o.db"}
    )
    runtime = OrderServiceRuntime.open(settings)
    try:
        assert runtime.executor.await_termination_seconds == 30
        assert runtime.executor.name == "eventTaskExecutor"
    finally:
        runtime.close()


def test_yaml_file_then_environment(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    config.write_text(
        "event:\n"
        "  async:\n"
        "    core-pool-size: 2\n"
        "    max-pool-size: 3\n"
        "    queue-capacity: 10\n"
        "    thread-name-prefix: ev-\n"
        "orders:\n"
        "  port: 9000\n"
        # A settings file says how clients authenticate (issue 49).
        "  allow-unauthenticated: true\n"
        "  listeners:\n"
        "    after-commit-sync:\n"
        "      fallback-execution: true\n",
        encoding="utf-8",
    )
    config.chmod(0o600)
    settings = load_settings(
        environ={"CLUSTERFORGE_ORDERS_CONFIG": str(config), "EVENT_ASYNC_MAX_POOL_SIZE": "6"}
    )
    pool = settings.event_async
    assert (pool.core_pool_size, pool.max_pool_size, pool.queue_capacity) == (2, 6, 10)
    assert pool.thread_name_prefix == "ev-"
    assert settings.orders.port == 9000
    assert settings.orders.listeners.after_commit_sync.fallback_execution is True


def test_command_line_overrides_environment() -> None:
    settings = load_settings(
        environ={"ORDERS_PORT": "9100", "ORDERS_DATABASE_URL": "sqlite:///x.db"},
        overrides={"orders.port": 9200, "orders.database-url": None},
    )
    assert settings.orders.port == 9200
    assert settings.orders.database_url == "sqlite:///x.db"


def test_environment_names() -> None:
    assert environment_variable_for("event.async.core-pool-size") == "EVENT_ASYNC_CORE_POOL_SIZE"
    assert (
        environment_variable_for("orders.listeners.notification.webhook-url")
        == "ORDERS_LISTENERS_NOTIFICATION_WEBHOOK_URL"
    )


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"EVENT_ASYNC_CORE_POOL_SIZE": "nine"}, "event.async.core-pool-size"),
        ({"EVENT_ASYNC_CORE_POOL_SIZE": "9"}, "max-pool-size 8 is below core-pool-size 9"),
        ({"ORDERS_LISTENERS_NOTIFICATION_SENDER": "webhook"}, "webhook-url is empty"),
        ({"ORDERS_LISTENERS_NOTIFICATION_SENDER": "pigeon"}, "notification.sender"),
    ],
)
def test_invalid_settings_name_the_key(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigurationError, match=expected):
        load_settings(environ=environ)


def test_unknown_yaml_key_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    config.write_text("event:\n  async:\n    core-size: 2\n", encoding="utf-8")
    config.chmod(0o600)
    with pytest.raises(ConfigurationError, match="core-size"):
        load_settings(config_file=config, environ={})


def test_a_yaml_error_never_echoes_the_file(tmp_path: Path) -> None:
    config = tmp_path / "orders.yml"
    # An unclosed quote on the line that holds the password: PyYAML's own message quotes
    # that line.
    config.write_text(
        "orders:\n"
        '  database-url: "postgresql+psycopg://orders:Hunter2-secret@db/orders\n'
        "  search: {password: 'Other-secret', urls: [\n",
        encoding="utf-8",
    )
    config.chmod(0o600)
    with pytest.raises(ConfigurationError) as caught:
        load_settings(config_file=config, environ={})
    message = str(caught.value)
    assert "not valid YAML (line" in message
    for fragment in ("Hunter2", "secret", "postgresql", "orders:"):
        assert fragment not in message.replace(str(config), ""), fragment
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_search_settings_are_checked_and_the_password_never_shows(tmp_path: Path) -> None:
    base = {
        "orders.search.urls": "https://a.example:9200, https://b.example:9200",
        "orders.search.ca-file": "/etc/ca.pem",
        "orders.search.username": "orders_writer",
        "orders.search.password": "pa55-word-9",
    }
    settings = load_settings(environ={}, overrides=base)
    assert settings.orders.search.urls == ["https://a.example:9200", "https://b.example:9200"]
    assert "pa55-word-9" not in repr(settings)
    for change, expected in (
        ({"orders.search.urls": "http://a.example:9200"}, "is not https"),
        ({"orders.search.ca-file": None}, "ca-file is empty"),
        ({"orders.search.password": ""}, "username and orders.search.password"),
    ):
        overrides = {**base, **change}
        with pytest.raises(ConfigurationError, match=expected) as caught:
            load_settings(
                environ={"ORDERS_SEARCH_CA_FILE": ""} if "ca-file" in str(change) else {},
                overrides={key: value for key, value in overrides.items() if value is not None},
            )
        assert "pa55-word-9" not in str(caught.value)
    assert load_settings(environ={}).orders.search.enabled is False
