"""What the load check reads and what it reports: where the load goes (:class:`LoadTarget`,
from a lab.json), and what it saw (:class:`LoadReport`, with its verdict).
clusterforge.testing.loadcheck runs the load; these names are importable from there too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from clusterforge.client import ClusterClient
from clusterforge.errors import ClusterforgeError

StopReason = Literal["caller", "max_requests", "max_seconds"]


class LoadcheckError(ClusterforgeError):
    """The load could not be set up or read: an unreadable lab.json, or an index that
    could not be created on any node. Failed requests during the load are not errors;
    they are counted in the :class:`LoadReport`."""


@dataclass(frozen=True)
class LoadTarget:
    """Where the load goes: the nodes' base URLs, the CA to verify HTTPS against, and
    the Basic-auth user. The password is kept out of ``repr`` and never logged."""

    urls: tuple[str, ...]
    ca_cert: Path | None = None
    credentials: tuple[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.urls:
            raise LoadcheckError("a load target needs at least one node URL")
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise LoadcheckError(f"node URL {url!r} must start with http:// or https://")

    @classmethod
    def from_lab_json(cls, path: Path) -> LoadTarget:
        """Read ``nodes[].url``, ``ca_cert``, ``admin_user`` and ``admin_password_file``
        from a lab.json (``scripts/up`` and molecule write one). Relative paths are taken
        from the file's directory. In the open mode there is no user and no CA."""
        try:
            facts = json.loads(path.read_text())
            urls = tuple(str(node["url"]).rstrip("/") for node in facts["nodes"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise LoadcheckError(
                f"{path} is not a readable lab.json with nodes[].url ({error}); "
                "scripts/up writes inventories/lab/lab.json"
            ) from error
        ca_cert = _relative_to(path, facts["ca_cert"]) if facts.get("ca_cert") else None
        credentials = None
        if facts.get("admin_user"):
            if not facts.get("admin_password_file"):
                raise LoadcheckError(f"{path} names admin_user but no admin_password_file")
            password_file = _relative_to(path, facts["admin_password_file"])
            try:
                password = password_file.read_text().strip()
            except OSError as error:
                raise LoadcheckError(
                    f"cannot read the admin password file {password_file} named in {path}: "
                    f"{error.strerror}"
                ) from error
            credentials = (str(facts["admin_user"]), password)
        return cls(urls=urls, ca_cert=ca_cert, credentials=credentials)

    def http_client(self, *, timeout_s: float) -> httpx.Client:
        """An HTTP client that verifies HTTPS against ``ca_cert`` (with hostname checks)
        and sends the Basic credentials. Environment proxies are ignored: the load must
        reach the nodes themselves."""
        return ClusterClient(
            ca_cert=self.ca_cert,
            credentials=self.credentials,
            timeout=timeout_s,
            connect_timeout=min(timeout_s, 3.0),
            trust_env=False,
        ).http


def _relative_to(lab_json: Path, value: str) -> Path:
    candidate = Path(value)
    return candidate if candidate.is_absolute() else lab_json.parent / candidate


@dataclass(frozen=True)
class LoadReport:
    """What the load saw. ``ok`` is the verdict; ``problems()`` says why not.

    Latencies are per logical request, retries on other nodes included.
    ``retry_causes`` counts, by cause (``ConnectError`` for a refused connection,
    ``ReadTimeout``, ``HTTP 503``, ...), every attempt that failed on one node and was
    sent on to the next. Health
    statuses are ``green``/``yellow``/``red`` as the cluster reported them, or
    ``unavailable`` when no node answered the health call.
    """

    index: str
    run_id: str
    duration_s: float
    stopped_by: StopReason
    requests: int
    requests_by_kind: dict[str, int]
    failed: int
    retried: int
    failure_samples: tuple[str, ...]
    latency_max_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    health_samples: int
    health_statuses: dict[str, int]
    red_seen: bool
    acknowledged_writes: int
    writes_readable_afterwards: int
    documents_counted: int | None
    verification_error: str | None
    retry_causes: dict[str, int] = field(default_factory=dict)

    @property
    def lost_writes(self) -> int:
        return self.acknowledged_writes - self.writes_readable_afterwards

    @property
    def ok(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        """Every reason the load does not pass: failed requests, red health, lost or
        unverified writes, and a load that never got going."""
        found = []
        if self.failed:
            found.append(f"{self.failed} of {self.requests} request(s) failed on every node")
        if self.red_seen:
            found.append(f"cluster health was red in {self.health_statuses['red']} sample(s)")
        if self.verification_error:
            found.append(f"acknowledged writes could not be verified: {self.verification_error}")
        elif self.lost_writes:
            found.append(
                f"{self.lost_writes} of {self.acknowledged_writes} acknowledged write(s) "
                "were not readable afterwards"
            )
        if self.acknowledged_writes == 0:
            found.append("no write was acknowledged; the load proves nothing")
        return found

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failure_samples"] = list(self.failure_samples)
        data["lost_writes"] = self.lost_writes
        data["ok"] = self.ok
        data["problems"] = self.problems()
        return data
