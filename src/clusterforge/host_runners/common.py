"""What the runners on the hosts share: the HTTPS client, the settings and credentials
they load, the journal line and the atomic write of the node exporter's textfile.

Standard library only, like every module of this package (see ``__init__``).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_TIMEOUT = 30.0


class ApiError(Exception):
    """The cluster answered with an error status, or did not answer."""

    def __init__(self, status: int, body: Any, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class Client:
    """HTTPS calls to the first node of ``urls`` that answers, with the cluster's CA
    verified (hostname included) and HTTP basic authentication as the runner's user."""

    def __init__(
        self, *, urls: Sequence[str], ca_file: str, username: str, password: str, timeout: float
    ) -> None:
        self._urls = list(urls)
        self._context = ssl.create_default_context(cafile=ca_file)
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"
        self._timeout = timeout

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        last: ApiError | None = None
        for url in self._urls:
            if not url.startswith("https://"):
                raise ApiError(0, None, f"{url}: the runner talks HTTPS only")
            request = urllib.request.Request(  # noqa: S310 - https, checked above
                url.rstrip("/") + path, data=data, method=method
            )
            request.add_header("Authorization", self._authorization)
            request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(  # noqa: S310 - https URLs from the plan
                    request, context=self._context, timeout=timeout or self._timeout
                ) as answer:
                    return json.loads(answer.read() or b"null")
            except urllib.error.HTTPError as error:
                raw = error.read()
                try:
                    parsed = json.loads(raw or b"null")
                except ValueError:
                    parsed = raw.decode(errors="replace")
                raise ApiError(error.code, parsed, f"{method} {path}: HTTP {error.code}") from None
            except (urllib.error.URLError, OSError) as error:
                # That node is down or unreachable: the next one may answer.
                last = ApiError(0, None, f"{url}: {getattr(error, 'reason', error)}")
        raise last or ApiError(0, None, "no node URL configured")


def load(config_path: str) -> tuple[dict[str, Any], str, str]:
    """The settings and the credentials (username, password) the settings point to."""
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    with open(str(config["credentials_file"]), encoding="utf-8") as handle:
        credentials = json.load(handle)
    return config, str(credentials["username"]), str(credentials["password"])


def client_from(config: Mapping[str, Any], username: str, password: str) -> Client:
    """The client a run's settings describe."""
    return Client(
        urls=config["urls"],
        ca_file=str(config["ca_file"]),
        username=username,
        password=password,
        timeout=float(config.get("timeout", DEFAULT_TIMEOUT)),
    )


def error_detail(error: Exception) -> str:
    """What a failed run adds to its journal line: the start of the engine's answer."""
    if isinstance(error, ApiError) and error.body is not None:
        return " " + json.dumps(error.body)[:300]
    return ""


def journal_line(tag: str, order: Sequence[str], fields: Mapping[str, Any]) -> str:
    """One line, ``tag`` then ``key=value`` pairs in ``order``; values with spaces are
    quoted, a list is joined with commas (``none`` when empty)."""
    parts = []
    for key in order:
        if key not in fields:
            continue
        value = fields[key]
        if isinstance(value, list | tuple):
            text = ",".join(str(item) for item in value) or "none"
        else:
            text = str(value)
        parts.append(f"{key}={json.dumps(text) if (' ' in text or not text) else text}")
    return f"{tag} " + " ".join(parts)


def label_value(value: str) -> str:
    """A Prometheus label value, quoted and escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def write_atomically(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a file beside it and a rename, so a reader (the
    node exporter) never sees half of it."""
    directory = os.path.dirname(path) or "."
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
