"""The one HTTP client of the cluster: ``scripts/status``, the lab and the load checker
reach the nodes through it.

HTTPS is verified against the cluster's CA with hostname checks on (the system's CAs when
none is given), Basic credentials ride on every request unless one asks without them,
and every request has a timeout.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

DEFAULT_TIMEOUT = 10.0


class ClusterClient:
    """HTTP to the cluster's nodes; ``http`` is the underlying client, for a caller that
    sends more than GETs (the load checker)."""

    def __init__(
        self,
        *,
        ca_cert: Path | None = None,
        credentials: tuple[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float | None = None,
        trust_env: bool = True,
    ) -> None:
        self.http = httpx.Client(
            verify=ssl.create_default_context(cafile=str(ca_cert) if ca_cert else None),
            auth=httpx.BasicAuth(*credentials) if credentials else None,
            timeout=httpx.Timeout(
                timeout, connect=timeout if connect_timeout is None else connect_timeout
            ),
            trust_env=trust_env,
        )

    def get(self, url: str, *, auth: bool = True) -> dict[str, Any]:
        """A recording of a GET, never an exception: ``{"status": int, "body": parsed JSON
        or text}``, or ``{"error": str}`` when no answer came."""
        try:
            answer = self.http.get(
                url, auth=httpx.USE_CLIENT_DEFAULT if auth else None, follow_redirects=True
            )
        except (httpx.HTTPError, OSError, ValueError) as error:
            reason = _innermost_os_error(error)
            return {"error": f"{type(reason).__name__}: {reason}"}
        return {"status": answer.status_code, "body": _parse(answer.content)}

    def get_json(self, url: str) -> Any:
        """The JSON body of a GET that must succeed (httpx's error otherwise)."""
        answer = self.http.get(url, follow_redirects=True)
        answer.raise_for_status()
        return answer.json()

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _innermost_os_error(error: BaseException) -> BaseException:
    """The system's own error under httpx's wrapping (ConnectionRefusedError, TimeoutError,
    SSLCertVerificationError), which says more than ConnectError; else ``error``."""
    found: BaseException = error
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError):
            found = seen
        seen = seen.__cause__ or seen.__context__
    return found


def _parse(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()
