"""Settings of the order service, read from a YAML file and the environment.

Keys are dotted and hyphenated, as the spec writes them (``event.async.core-pool-size``).
A YAML file nests them (``event: {async: {core-pool-size: 4}}``). The environment
names a key by upper-casing it and turning dots and hyphens into underscores
(``EVENT_ASYNC_CORE_POOL_SIZE``). Later sources win: defaults, then the YAML file, then
the environment, then command-line flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from clusterforge_service_kit import (
    DATABASE_URL_PREFIXES,
    TOKEN_RECIPE,
    PrivateFileError,
    check_database_url,
    check_tokens,
    is_loopback_host,
    split_tokens,
)
from clusterforge_service_kit import check_private_file as kit_check_private_file
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigurationError

__all__ = [
    "TOKEN_RECIPE",
    "OrderServiceSettings",
    "check_private_file",
    "check_tokens",
    "environment_variable_for",
    "is_loopback_host",
    "load_settings",
    "split_tokens",
]

CONFIG_FILE_ENVIRONMENT_VARIABLE = "CLUSTERFORGE_ORDERS_CONFIG"
DEFAULT_PORT = 8082
DEFAULT_DATABASE_URL = "sqlite:///orders.db"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def refuse_credentials_in_url(url: str, *, setting: str, fix: str) -> None:
    """Refuse ``user:password@`` in a URL: URLs reach logs, credentials have their own settings.

    The message never repeats the URL, since it holds the credentials.
    """
    _scheme, separator, rest = url.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0] if separator else ""
    if "@" in authority:
        raise ValueError(
            f"{setting} holds credentials (user:password@) in its URL, which would reach "
            f"the log; remove them from the URL and {fix}"
        )


def check_private_file(path: Path, *, setting: str) -> None:
    """The kit's one rule for files holding secrets, failing as ConfigurationError.

    Accepted: a regular file with no permission for group and others (``chmod 600``), or
    group read alone (0640, 0440) when it belongs to root and its group is the service's
    own (the role deploys root:<service> 0640). Anything else is refused naming the file
    and the fix.
    """
    try:
        kit_check_private_file(path, setting=setting)
    except PrivateFileError as error:
        raise ConfigurationError(str(error)) from None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class EventAsyncSettings(_Section):
    """``event.async``: the pool that runs asynchronous listeners (``eventTaskExecutor``)."""

    core_pool_size: int = Field(default=4, ge=0, alias="core-pool-size")
    max_pool_size: int = Field(default=8, ge=1, alias="max-pool-size")
    queue_capacity: int = Field(default=200, ge=0, alias="queue-capacity")
    thread_name_prefix: str = Field(default="event-task-", min_length=1, alias="thread-name-prefix")

    @model_validator(mode="after")
    def _max_not_below_core(self) -> EventAsyncSettings:
        if self.max_pool_size < self.core_pool_size:
            raise ValueError(
                f"max-pool-size {self.max_pool_size} is below core-pool-size "
                f"{self.core_pool_size}; set max-pool-size to at least core-pool-size"
            )
        return self


class EventSettings(_Section):
    async_: EventAsyncSettings = Field(default_factory=EventAsyncSettings, alias="async")


class NotificationSenderKind(StrEnum):
    LOGGING = "logging"
    WEBHOOK = "webhook"


class AuditLogListenerSettings(_Section):
    enabled: bool = True


class NotificationListenerSettings(_Section):
    enabled: bool = True
    sender: NotificationSenderKind = NotificationSenderKind.LOGGING
    # A webhook URL often carries a token, so it is never logged.
    webhook_url: str | None = Field(default=None, alias="webhook-url", repr=False)
    webhook_timeout_seconds: float = Field(default=5.0, gt=0, alias="webhook-timeout-seconds")

    @field_validator("webhook_url")
    @classmethod
    def _no_credentials_in_webhook_url(cls, value: str | None) -> str | None:
        if value:
            if not value.startswith(("https://", "http://")):
                raise ValueError(
                    "orders.listeners.notification.webhook-url must be an http:// or "
                    "https:// URL; set it to the receiver's URL"
                )
            refuse_credentials_in_url(
                value,
                setting="orders.listeners.notification.webhook-url",
                fix="give the receiver's token in the query string, which is never logged",
            )
        return value

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> NotificationListenerSettings:
        if self.sender is NotificationSenderKind.WEBHOOK and not self.webhook_url:
            raise ValueError(
                "sender is 'webhook' but webhook-url is empty; set "
                "orders.listeners.notification.webhook-url or use sender 'logging'"
            )
        return self


class AfterCommitSyncListenerSettings(_Section):
    enabled: bool = True
    fallback_execution: bool = Field(default=False, alias="fallback-execution")


class ListenersSettings(_Section):
    audit_log: AuditLogListenerSettings = Field(
        default_factory=AuditLogListenerSettings, alias="audit-log"
    )
    notification: NotificationListenerSettings = Field(default_factory=NotificationListenerSettings)
    after_commit_sync: AfterCommitSyncListenerSettings = Field(
        default_factory=AfterCommitSyncListenerSettings, alias="after-commit-sync"
    )


class SearchSettings(_Section):
    """``orders.search``: the OpenSearch cluster orders are delivered to (the outbox's sink).

    With no ``urls`` delivery is off: outbox rows are still written in every order's
    transaction and stay undelivered, so setting ``urls`` later delivers every order
    taken meanwhile.
    """

    urls: list[str] = Field(default_factory=list)
    ca_file: str | None = Field(default=None, alias="ca-file")
    username: str | None = None
    # Read from the 0600 settings file (or the environment); repr=False keeps it out of
    # every repr of the settings, and nothing logs it.
    password: str | None = Field(default=None, repr=False)
    index: str = Field(default="orders", min_length=1, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    timeout_seconds: float = Field(default=10.0, gt=0, alias="timeout-seconds")
    # Attempts of one bulk request (one delivery) before its rows are left to the relay.
    bulk_attempts: int = Field(default=3, ge=1, le=10, alias="bulk-attempts")

    @field_validator("urls", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        # The environment can only give a string: "https://a:9200,https://b:9200".
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _complete_when_on(self) -> SearchSettings:
        if not self.urls:
            return self
        for position, url in enumerate(self.urls, start=1):
            # Checked first: the other messages quote the URL.
            refuse_credentials_in_url(
                url,
                setting=f"orders.search.urls #{position}",
                fix="set orders.search.username and orders.search.password instead",
            )
            if not url.startswith("https://"):
                raise ValueError(
                    f"url {url!r} is not https; the service sends a password, so give "
                    "https:// URLs in orders.search.urls"
                )
        if not self.ca_file:
            raise ValueError(
                "urls are set but ca-file is empty; set orders.search.ca-file to the "
                "cluster's CA certificate (PEM)"
            )
        if bool(self.username) != bool(self.password):
            raise ValueError(
                "set both orders.search.username and orders.search.password, or neither"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.urls)


class OutboxSettings(_Section):
    """``orders.outbox``: the relay that re-delivers undelivered outbox rows."""

    # How often the relay looks for due rows (it also runs once at start).
    relay_interval_seconds: float = Field(default=5.0, gt=0, alias="relay-interval-seconds")
    # A new row is left to the after-commit listener this long before the relay takes it.
    relay_grace_seconds: float = Field(default=10.0, ge=0, alias="relay-grace-seconds")
    batch_size: int = Field(default=500, ge=1, le=10_000, alias="batch-size")
    # Orders the after-commit listener may queue for the delivery worker; beyond it an
    # order is left to the relay (its row is committed), so memory stays bounded.
    handoff_capacity: int = Field(default=10_000, ge=1, le=1_000_000, alias="handoff-capacity")
    # The delivery worker starts at most one bulk request per interval, so under load each
    # carries many orders; an order after a quiet spell is sent at once.
    delivery_linger_seconds: float = Field(
        default=0.25, ge=0, le=10, alias="delivery-linger-seconds"
    )
    # Backoff of a row whose delivery failed: initial * 2^(failures-1), capped, jittered.
    retry_initial_seconds: float = Field(default=1.0, gt=0, alias="retry-initial-seconds")
    retry_max_seconds: float = Field(default=300.0, gt=0, alias="retry-max-seconds")


class OrdersSection(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)
    database_url: str = Field(default=DEFAULT_DATABASE_URL, min_length=1, alias="database-url")
    database_connect_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, alias="database-connect-timeout-seconds"
    )
    access_log: bool = Field(default=True, alias="access-log")
    log_level: str = Field(default="info", alias="log-level")
    # HTTP limits (the kit's http_edge guard): request line plus headers, and the time a request may
    # take to arrive whole; beyond them the answer is 431 or 408 and the connection closes.
    max_header_bytes: int = Field(
        default=16 * 1024, ge=1024, le=1024 * 1024, alias="max-header-bytes"
    )
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=300, alias="read-timeout-seconds")
    # Bearer tokens accepted on POST /orders and GET /metrics; /health stays open. Secrets:
    # repr=False keeps them out of every repr, and no message repeats one.
    auth_tokens: list[str] = Field(default_factory=list, alias="auth-tokens", repr=False)
    # A file with more tokens, one a line (0600, see check_private_file); read at start.
    auth_tokens_file: str | None = Field(default=None, alias="auth-tokens-file")
    listeners: ListenersSettings = Field(default_factory=ListenersSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    outbox: OutboxSettings = Field(default_factory=OutboxSettings)

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(
                f"orders.log-level {value!r} is not a log level; set it to one of "
                + ", ".join(LOG_LEVELS)
            )
        return value.lower()

    @field_validator("database_url")
    @classmethod
    def _supported_database_url(cls, value: str) -> str:
        # The URL itself is never repeated: it may hold the database password.
        if not value.startswith(DATABASE_URL_PREFIXES):
            raise ValueError(
                "orders.database-url must be sqlite:///<path> or "
                "postgresql+psycopg://<user>@<host>/<database>; set it to one of those"
            )
        if value.startswith("sqlite:///"):
            # The kit's rule (both services'): a file, not sqlite:/// or :memory:. A
            # PostgreSQL URL's syntax is judged where it is parsed (storage.Database).
            check_database_url(value)  # the message is put under the key's name
        return value

    @field_validator("auth_tokens", mode="before")
    @classmethod
    def _tokens_from_text(cls, value: object) -> object:
        # The environment can only give a string: "token-a,token-b".
        if isinstance(value, str):
            return split_tokens(value)
        return value

    @field_validator("auth_tokens")
    @classmethod
    def _refuse_weak_tokens(cls, value: list[str]) -> list[str]:
        check_tokens(value, source="orders.auth-tokens")
        return value

    @model_validator(mode="after")
    def _token_required_off_loopback(self) -> OrdersSection:
        # Whoever reaches the port could place orders and read the metrics.
        if self.auth_tokens or self.auth_tokens_file or is_loopback_host(self.host):
            return self
        raise ValueError(
            f"orders.auth-tokens is empty while orders.host is {self.host or '(every address)'!r}, "
            "not a loopback address, so anyone who reaches the port could place orders; set "
            f"orders.auth-tokens (or orders.auth-tokens-file) to a token made by {TOKEN_RECIPE}, "
            "or bind orders.host to 127.0.0.1"
        )

    def accepted_tokens(self) -> frozenset[str]:
        """The inline tokens plus those of ``auth-tokens-file`` (checked private, then read).

        Raises ConfigurationError naming the file when it cannot be used.
        """
        tokens = list(self.auth_tokens)
        if self.auth_tokens_file:
            path = Path(self.auth_tokens_file)
            check_private_file(path, setting="orders.auth-tokens-file")
            try:
                from_file = split_tokens(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as error:
                reason = getattr(error, "strerror", None) or "not UTF-8 text"
                raise ConfigurationError(
                    f"cannot read orders.auth-tokens-file {path}: {reason}; fix the file"
                ) from None
            if not from_file:
                raise ConfigurationError(
                    f"orders.auth-tokens-file {path} holds no token; write one token a line, "
                    f"e.g. made by {TOKEN_RECIPE}"
                )
            try:
                check_tokens(from_file, source=f"orders.auth-tokens-file {path}")
            except ValueError as error:
                raise ConfigurationError(str(error)) from None
            tokens.extend(from_file)
        return frozenset(tokens)


class OrderServiceSettings(_Section):
    """Every setting of the service; see ``docs/orders.md`` for each key."""

    orders: OrdersSection = Field(default_factory=OrdersSection)
    event: EventSettings = Field(default_factory=EventSettings)

    @property
    def event_async(self) -> EventAsyncSettings:
        return self.event.async_


def environment_variable_for(key: str) -> str:
    """``event.async.core-pool-size`` -> ``EVENT_ASYNC_CORE_POOL_SIZE``."""
    return key.replace(".", "_").replace("-", "_").upper()


def _leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_leaf_keys(annotation, f"{key}."))
        else:
            keys.append(key)
    return keys


def _set_dotted(tree: dict[str, Any], key: str, value: object) -> None:
    *parents, leaf = key.split(".")
    node = tree
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigurationError(f"setting {key!r}: {part!r} must be a mapping")
        node = child
    node[leaf] = value


def _describe_validation_error(error: ValidationError, source: str) -> str:
    problems = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        problems.append(f"{key or '(root)'}: {item['msg']}")
    return f"invalid order service settings ({source}): " + "; ".join(problems)


def _yaml_error_place(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return ""
    return f" (line {mark.line + 1}, column {mark.column + 1})"


def load_settings(
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> OrderServiceSettings:
    """Build the settings from defaults, a YAML file, the environment and ``overrides``.

    ``config_file`` defaults to the file named by ``CLUSTERFORGE_ORDERS_CONFIG``.
    ``overrides`` maps dotted keys to values (the command line uses it).
    """
    environ = os.environ if environ is None else environ
    if config_file is None and environ.get(CONFIG_FILE_ENVIRONMENT_VARIABLE):
        config_file = Path(environ[CONFIG_FILE_ENVIRONMENT_VARIABLE])

    tree: dict[str, Any] = {}
    source = "defaults"
    if config_file is not None:
        source = str(config_file)
        check_private_file(config_file, setting="settings file")
        try:
            loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigurationError(
                f"cannot read settings file {config_file}: {error.strerror}"
            ) from error
        except yaml.YAMLError as error:
            # PyYAML's message quotes the offending line, which may hold the database or
            # cluster password: name the place only, and drop the exception (from None),
            # whose text a traceback would print.
            raise ConfigurationError(
                f"settings file {config_file} is not valid YAML{_yaml_error_place(error)}; "
                "fix the syntax there"
            ) from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigurationError(f"settings file {config_file} must hold a mapping at the top")
        tree = loaded

    for key in _leaf_keys(OrderServiceSettings):
        variable = environment_variable_for(key)
        if variable in environ:
            _set_dotted(tree, key, environ[variable])
            source = source if source.endswith(" + environment") else f"{source} + environment"
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(tree, key, value)
            source = source if source.endswith(" + command line") else f"{source} + command line"

    try:
        return OrderServiceSettings.model_validate(tree)
    except ValidationError as error:
        # from None: the chained error's text would show the inputs, a token among them.
        raise ConfigurationError(_describe_validation_error(error, source)) from None
