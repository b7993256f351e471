"""Client settings under the keys ``demo.rest-template.*``, from YAML or the environment.

Keys (YAML, nested or dotted) and their environment names:

=============================================  ==============================================
``demo.rest-template.root-uri``                ``DEMO_REST_TEMPLATE_ROOT_URI``
``demo.rest-template.connect-timeout``         ``DEMO_REST_TEMPLATE_CONNECT_TIMEOUT``
``demo.rest-template.connection-request-timeout`` ``DEMO_REST_TEMPLATE_CONNECTION_REQUEST_TIMEOUT``
``demo.rest-template.read-timeout``            ``DEMO_REST_TEMPLATE_READ_TIMEOUT``
``demo.rest-template.max-connections``         ``DEMO_REST_TEMPLATE_MAX_CONNECTIONS``
``demo.rest-template.max-connections-per-route`` ``DEMO_REST_TEMPLATE_MAX_CONNECTIONS_PER_ROUTE``
``demo.rest-template.status-style``            ``DEMO_REST_TEMPLATE_STATUS_STYLE``
``demo.rest-template.tenant-id``               ``DEMO_REST_TEMPLATE_TENANT_ID``
``demo.rest-template.bearer-token``            ``DEMO_REST_TEMPLATE_BEARER_TOKEN``
``demo.rest-template.total-timeout``           ``DEMO_REST_TEMPLATE_TOTAL_TIMEOUT``
``demo.rest-template.max-response-bytes``      ``DEMO_REST_TEMPLATE_MAX_RESPONSE_BYTES``
=============================================  ==============================================

Durations are written like Spring's: ``3s``, ``500ms``, ``1m``, or a bare number of
milliseconds. The environment wins over the file, the file over the defaults.

A YAML file that holds ``bearer-token`` is read only when other users cannot read it
(the rule of :func:`clusterforge_userdir.private_files.check_private_file`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from .errors import ClientConfigError
from .private_files import SettingsFileError, check_private_file

KEY_PREFIX = "demo.rest-template."
DEFAULT_ROOT_URI = "http://localhost:8081"
# A whole call, pool wait to last body byte: the connect timeout plus two reads of the
# default read timeout, and then some.
DEFAULT_TOTAL_TIMEOUT = 30.0
# The largest answer the service gives (1000 users in a list) is about 200 KiB.
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m)?\s*$")


class StatusStyle(StrEnum):
    """How a multi-valued ``status`` goes on the query string."""

    REPEATED = "repeated"  # status=0&status=1
    COMMA_JOINED = "comma"  # status=0,1


@dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """Everything the client needs; times are in seconds."""

    root_uri: str = DEFAULT_ROOT_URI
    connect_timeout: float = 3.0
    connection_request_timeout: float = 2.0
    read_timeout: float = 10.0
    max_connections: int = 200
    max_connections_per_route: int = 50
    status_style: StatusStyle = StatusStyle.REPEATED
    tenant_id: str | None = None
    bearer_token: str | None = field(default=None, repr=False)
    remote_service: str | None = None
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # A PEM file of the CA certificates an https root-uri is verified against (the
    # cluster's CA bundle behind the TLS proxy); None: the system's CAs. Verification
    # is always on (UserDirectoryClient's verify= can replace it, for tests).
    ca_bundle: str | None = None

    def __post_init__(self) -> None:
        if "@" in self.root_uri.partition("://")[2].partition("/")[0]:
            # Credentials in a URL end up in logs and error messages; the URL is not
            # repeated here for the same reason.
            raise ClientConfigError(
                f"{KEY_PREFIX}root-uri carries a user name or password (user:password@); "
                f"remove it and put the token in {KEY_PREFIX}bearer-token"
            )
        if not re.match(r"^https?://[^/]+", self.root_uri):
            raise ClientConfigError(
                f"{KEY_PREFIX}root-uri '{self.root_uri}' is not an http(s) URL; "
                "set it like http://localhost:8081"
            )
        for name in (
            "connect_timeout",
            "connection_request_timeout",
            "read_timeout",
            "total_timeout",
        ):
            if getattr(self, name) <= 0:
                raise ClientConfigError(
                    f"{KEY_PREFIX}{name.replace('_', '-')} must be above zero, e.g. 3s"
                )
        if self.max_response_bytes < 1024:
            raise ClientConfigError(
                f"{KEY_PREFIX}max-response-bytes ({self.max_response_bytes}) must be at least "
                f"1024, e.g. {DEFAULT_MAX_RESPONSE_BYTES}"
            )
        if not 1 <= self.max_connections_per_route <= self.max_connections:
            raise ClientConfigError(
                f"{KEY_PREFIX}max-connections-per-route ({self.max_connections_per_route}) "
                f"must be between 1 and max-connections ({self.max_connections})"
            )

    @property
    def service_label(self) -> str:
        return self.remote_service or self.root_uri.rstrip("/")

    def with_changes(self, **changes: Any) -> ClientConfig:
        return replace(self, **changes)


def parse_duration(value: Any, *, key: str) -> float:
    """Seconds from ``3s``, ``500ms``, ``1m`` or a bare number of milliseconds."""
    if isinstance(value, bool):
        raise ClientConfigError(f"{key} must be a duration like 3s or 500ms, not {value!r}")
    if isinstance(value, int | float):
        return float(value) / 1000.0
    match = _DURATION.match(str(value))
    if match is None:
        raise ClientConfigError(f"{key} '{value}' is not a duration; write it like 3s or 500ms")
    number, unit = float(match.group(1)), match.group(2) or "ms"
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _environment_name(key: str) -> str:
    return re.sub(r"[.-]", "_", key).upper()


_FIELDS: dict[str, str] = {
    "root-uri": "root_uri",
    "connect-timeout": "connect_timeout",
    "connection-request-timeout": "connection_request_timeout",
    "read-timeout": "read_timeout",
    "max-connections": "max_connections",
    "max-connections-per-route": "max_connections_per_route",
    "status-style": "status_style",
    "tenant-id": "tenant_id",
    "bearer-token": "bearer_token",
    "total-timeout": "total_timeout",
    "max-response-bytes": "max_response_bytes",
    "ca-bundle": "ca_bundle",
}


def load_client_config(
    *, yaml_file: Path | str | None = None, environ: Mapping[str, str] | None = None
) -> ClientConfig:
    """The client config from a YAML file and the environment (which wins)."""
    raw: dict[str, Any] = {}
    if yaml_file is not None:
        document = _read_yaml(yaml_file)
        if not isinstance(document, Mapping):
            raise ClientConfigError(f"{yaml_file} must hold a mapping with a 'demo' key")
        raw.update({k: v for k, v in _flatten(document).items() if k.startswith(KEY_PREFIX)})
        if raw.get(f"{KEY_PREFIX}bearer-token"):
            try:
                check_private_file(Path(yaml_file), setting="client settings file")
            except SettingsFileError as error:
                raise ClientConfigError(str(error)) from None
    environment = os.environ if environ is None else environ
    for suffix in _FIELDS:
        env_value = environment.get(_environment_name(KEY_PREFIX + suffix))
        if env_value is not None and env_value != "":
            raw[KEY_PREFIX + suffix] = env_value

    values: dict[str, Any] = {}
    for full_key, value in raw.items():
        suffix = full_key.removeprefix(KEY_PREFIX)
        if suffix not in _FIELDS:
            raise ClientConfigError(
                f"unknown key {full_key}; known keys: "
                + ", ".join(KEY_PREFIX + name for name in _FIELDS)
            )
        values[_FIELDS[suffix]] = _convert(suffix, value, key=full_key)
    return ClientConfig(**values)


def _read_yaml(yaml_file: Path | str) -> Any:
    """The file's document; a syntax error names the line and column, never the text.

    PyYAML's messages can quote the file (a snippet of the line, an alias or a tag), and
    the line at fault may be the bearer token's. The original error is not chained, so a
    traceback does not show it either.
    """
    try:
        with open(yaml_file, encoding="utf-8") as stream:
            return yaml.safe_load(stream) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ClientConfigError(
            f"{yaml_file} is not valid YAML{where}; check the quoting and indentation there "
            "(its text is not shown: it may hold demo.rest-template.bearer-token)"
        ) from None
    except UnicodeDecodeError:
        raise ClientConfigError(f"{yaml_file} is not UTF-8 text; rewrite it as UTF-8") from None
    except OSError as error:
        raise ClientConfigError(
            f"cannot read the client settings file {yaml_file} ({error.strerror}); "
            "correct the path or its permissions"
        ) from None


def _convert(suffix: str, value: Any, *, key: str) -> Any:
    if suffix.endswith("timeout"):
        return parse_duration(value, key=key)
    if suffix.startswith("max-"):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ClientConfigError(f"{key} '{value}' must be a whole number") from None
    if suffix == "status-style":
        try:
            return StatusStyle(str(value).lower())
        except ValueError:
            raise ClientConfigError(f"{key} '{value}' must be 'repeated' or 'comma'") from None
    return None if value is None else str(value)
