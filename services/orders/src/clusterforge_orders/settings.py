"""Settings of the order service, read from a YAML file and the environment.

Keys are dotted and hyphenated, as the spec writes them (``event.async.core-pool-size``).
A YAML file nests them (``event: {async: {core-pool-size: 4}}``). The environment
names a key by upper-casing it and turning dots and hyphens into underscores
(``EVENT_ASYNC_CORE_POOL_SIZE``). Later sources win: defaults, then the YAML file, then
the environment, then command-line flags.

Every source is read strictly (issue 49): a key the service does not know (in the file,
or a variable named ``ORDERS_*``, ``EVENT_*`` or ``CLUSTERFORGE_ORDERS_*``), a key given
twice, a file that is not UTF-8, a number that is not finite or outside its range
(docs/orders.md), a URL that does not parse, each end the start with one line naming the
setting and the fix. A token setting that is named must hold a token, and a settings file
must say how clients authenticate: a token setting, or ``orders.allow-unauthenticated:
true`` on a loopback bind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
from pydantic.fields import FieldInfo

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
# The environment's names of the service: a variable with one of these prefixes that names
# no setting is a typo (ORDERS_AUTH_TOKEN for ORDERS_AUTH_TOKENS), refused, never ignored.
ENVIRONMENT_PREFIXES = ("ORDERS_", "EVENT_", "CLUSTERFORGE_ORDERS_")
# A host to bind: an IP address, a name, or empty (every address).
_BIND_HOST = re.compile(r"[A-Za-z0-9_.:-]*")


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


def check_http_url(url: str, *, setting: str, schemes: tuple[str, ...]) -> None:
    """Refuse a URL whose scheme, host or port would only fail later (at the first send).

    The message names the setting and never repeats the URL (it may carry a token).
    """
    fix = f"set {setting} to {' or '.join(f'{scheme}://<host>[:<port>]' for scheme in schemes)}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"{setting} does not parse as a URL (host or port); {fix}") from None
    if parts.scheme not in schemes:
        raise ValueError(f"{setting} is not a {' or '.join(schemes)} URL; {fix}")
    if not parts.hostname:
        raise ValueError(f"{setting} names no host; {fix}")
    if port == 0:
        raise ValueError(f"{setting} has port 0; {fix} with a port from 1 to 65535")
    if any(character.isspace() or not character.isprintable() for character in url):
        raise ValueError(f"{setting} holds a blank or control character; {fix}")


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
    # No infinity or NaN in any number: inf passed "gt=0" and broke the relay's timer.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    @model_validator(mode="before")
    @classmethod
    def _no_true_or_false_for_a_number(cls, data: object) -> object:
        # pydantic reads YAML's true as the number 1 (port: true would bind port 1).
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                if field.annotation not in (int, float):
                    continue
                for key in (field.alias or name, name):
                    if isinstance(data.get(key), bool):
                        raise ValueError(
                            f"{key} is true or false, not a number; set a finite number "
                            f"{numeric_range(field) or ''} (docs/orders.md)"
                        )
        return data


class EventAsyncSettings(_Section):
    """``event.async``: the pool that runs asynchronous listeners (``eventTaskExecutor``)."""

    core_pool_size: int = Field(default=4, ge=0, le=256, alias="core-pool-size")
    max_pool_size: int = Field(default=8, ge=1, le=256, alias="max-pool-size")
    queue_capacity: int = Field(default=200, ge=0, le=100_000, alias="queue-capacity")
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
    webhook_timeout_seconds: float = Field(
        default=5.0, gt=0, le=300, alias="webhook-timeout-seconds"
    )

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
            check_http_url(
                value,
                setting="orders.listeners.notification.webhook-url",
                schemes=("https", "http"),
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
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, alias="timeout-seconds")
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
                    f"url #{position} is not https; the service sends a password, so give "
                    "https:// URLs in orders.search.urls"
                )
            check_http_url(url, setting=f"orders.search.urls #{position}", schemes=("https",))
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
    relay_interval_seconds: float = Field(
        default=5.0, gt=0, le=3600, alias="relay-interval-seconds"
    )
    # A new row is left to the after-commit listener this long before the relay takes it.
    # At most an hour: 1e12 s overflowed the date arithmetic of every POST /orders.
    relay_grace_seconds: float = Field(default=10.0, ge=0, le=3600, alias="relay-grace-seconds")
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
    retry_initial_seconds: float = Field(default=1.0, gt=0, le=3600, alias="retry-initial-seconds")
    retry_max_seconds: float = Field(default=300.0, gt=0, le=86_400, alias="retry-max-seconds")


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
    # Authentication off, asked for by name: a deleted or mangled token line never is.
    allow_unauthenticated: bool = Field(default=False, alias="allow-unauthenticated")
    listeners: ListenersSettings = Field(default_factory=ListenersSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    outbox: OutboxSettings = Field(default_factory=OutboxSettings)

    @field_validator("host")
    @classmethod
    def _bindable_host(cls, value: str) -> str:
        if not _BIND_HOST.fullmatch(value) or len(value) > 253:
            raise ValueError(
                "orders.host is not an address or host name; set it to an IP address "
                "(127.0.0.1), a host name, or empty for every address"
            )
        return value

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
        # The kit's rule (both services'): a SQLite file without options (not sqlite:///,
        # :memory: or a file: URI), or a PostgreSQL URL whose port parses (1 to 65535).
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
    def _refuse_weak_or_no_tokens(cls, value: list[str]) -> list[str]:
        # Runs only for a value given (not the default): the key named with no token in
        # it is a mistake, never "no authentication".
        if not value:
            raise ValueError(
                "orders.auth-tokens is set but holds no token; set it to a token made by "
                f"{TOKEN_RECIPE}, or remove the key and set orders.allow-unauthenticated: "
                "true to run on loopback without authentication"
            )
        check_tokens(value, source="orders.auth-tokens")
        return value

    @field_validator("auth_tokens_file")
    @classmethod
    def _refuse_an_empty_token_file_name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "orders.auth-tokens-file is set but empty; set it to the path of a private "
                "file of tokens, one a line, or remove the key"
            )
        return value

    @model_validator(mode="after")
    def _token_required_off_loopback(self) -> OrdersSection:
        if self.allow_unauthenticated and (
            "auth_tokens" in self.model_fields_set or self.auth_tokens_file
        ):
            raise ValueError(
                "orders.allow-unauthenticated is true while orders.auth-tokens or "
                "orders.auth-tokens-file is set; remove orders.allow-unauthenticated to keep "
                "authentication on"
            )
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


def _field_at(location: tuple[int | str, ...]) -> FieldInfo | None:
    """The field an error's location (by aliases) points to, if it is one."""
    model: type[BaseModel] = OrderServiceSettings
    found: FieldInfo | None = None
    for part in location:
        by_alias = {field.alias or name: field for name, field in model.model_fields.items()}
        found = by_alias.get(str(part))
        if found is None:
            return None
        annotation = found.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return found


def _number(value: float) -> str:
    """1048576 as written, 0.25 as 0.25 (not :g's 1.04858e+06)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def numeric_range(field: FieldInfo) -> str | None:
    """``from 1 to 65535`` (or ``above 0 up to 300``) for a numeric field, else None."""
    low = high = None
    for constraint in field.metadata:
        if getattr(constraint, "ge", None) is not None:
            low = f"from {_number(constraint.ge)}"
        if getattr(constraint, "gt", None) is not None:
            low = f"above {_number(constraint.gt)} up"
        if getattr(constraint, "le", None) is not None:
            high = _number(constraint.le)
    if low is None or high is None:
        return None
    return f"{low} to {high}"


def _describe_validation_error(error: ValidationError, source: str) -> str:
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        key = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        field = _field_at(tuple(item["loc"]))
        span = numeric_range(field) if field is not None else None
        if span is not None and item["type"] != "value_error":
            message = f"{message}; set a finite number {span} (docs/orders.md)"
        problems.append(f"{key or '(root)'}: {message}")
    return f"invalid order service settings ({source}): " + "; ".join(problems)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice (it would keep the last quietly)."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (dict, list)):
            # An unhashable key: the model refuses it by name; PyYAML's own error would
            # quote the line.
            raise yaml.constructor.ConstructorError(
                None, None, "a key that is a mapping or list", key_node.start_mark
            )
        if key in seen:
            raise _DuplicateKeyError(str(key), seen[key], key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


class _DuplicateKeyError(Exception):
    def __init__(self, key: str, first_line: int, line: int) -> None:
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping_without_duplicates,
)


def _check_environment_names(environ: Mapping[str, str], known: set[str]) -> None:
    for name in environ:
        if name.startswith(ENVIRONMENT_PREFIXES) and name not in known:
            shown = name if len(name) <= 64 else "a variable"
            raise ConfigurationError(
                f"environment: {shown} is not a setting of the order service; correct the "
                "name (docs/orders.md lists every key and its variable) or unset it"
            )


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
            loaded = yaml.load(config_file.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506 (a safe loader)
        except OSError as error:
            raise ConfigurationError(
                f"cannot read settings file {config_file}: {error.strerror}"
            ) from error
        except UnicodeDecodeError:
            raise ConfigurationError(
                f"settings file {config_file} is not UTF-8 text; rewrite it as UTF-8"
            ) from None
        except _DuplicateKeyError as duplicate:
            raise ConfigurationError(
                f"settings file {config_file}: {duplicate.key!s:.64} is given twice (lines "
                f"{duplicate.first_line} and {duplicate.line}); keep one"
            ) from None
        except RecursionError:
            raise ConfigurationError(
                f"settings file {config_file} nests too deep; fix the indentation"
            ) from None
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

    leaf_keys = _leaf_keys(OrderServiceSettings)
    _check_environment_names(
        environ,
        {environment_variable_for(key) for key in leaf_keys} | {CONFIG_FILE_ENVIRONMENT_VARIABLE},
    )
    for key in leaf_keys:
        variable = environment_variable_for(key)
        if variable in environ:
            _set_dotted(tree, key, environ[variable])
            source = source if source.endswith(" + environment") else f"{source} + environment"
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(tree, key, value)
            source = source if source.endswith(" + command line") else f"{source} + command line"

    try:
        settings = OrderServiceSettings.model_validate(tree)
    except ValidationError as error:
        # from None: the chained error's text would show the inputs, a token among them.
        raise ConfigurationError(_describe_validation_error(error, source)) from None
    orders = settings.orders
    names_a_token = "auth_tokens" in orders.model_fields_set or orders.auth_tokens_file
    if config_file is not None and not names_a_token and not orders.allow_unauthenticated:
        # A file is a deployment's whole statement: a token line deleted or mangled must
        # not read as "no authentication".
        raise ConfigurationError(
            f"settings file {config_file} names no token: set orders.auth-tokens (or "
            f"orders.auth-tokens-file) to a token made by {TOKEN_RECIPE}, or, to run on "
            "loopback without authentication, set orders.allow-unauthenticated: true"
        )
    return settings
