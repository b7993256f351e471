"""Delivery targets of the outbox ("sinks"), and the one that indexes into OpenSearch.

A sink takes a batch of order documents and answers which of them it now holds. It never
raises for a failed delivery: what it does not report as delivered stays in the outbox
and is retried by the relay, so a sink's only duty is to never report an order it does
not have.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .errors import ConfigurationError
from .logsafe import url_for_log
from .models import (
    OrderCreatedEvent,
    decimal_to_json_number,
    format_create_time,
    json_string,
)
from .shared_client import SharedHttpClient

logger = logging.getLogger(__name__)

# A bulk item with one of these statuses may succeed when sent again; any other
# non-2xx (a mapping error, 400) will not, but is retried on the relay's capped
# backoff anyway, so that fixing the index template heals it without an operator.
RETRYABLE_ITEM_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# Error text kept per outbox row; the cluster's reason, never a credential.
MAX_ERROR_CHARS = 300


@dataclass(frozen=True, slots=True)
class OrderDocument:
    """One order as the target stores it: the five fields of ``OrderCreatedEvent``.

    ``source`` is the JSON text, with ``amount`` as the exact number the client sent.
    """

    order_id: str
    source: str

    @classmethod
    def from_event(cls, event: OrderCreatedEvent) -> OrderDocument:
        return cls.from_values(
            order_id=event.order_id,
            user_id=event.user_id,
            product_name=event.product_name,
            amount_json=decimal_to_json_number(event.amount),
            create_time=format_create_time(event.create_time),
        )

    @classmethod
    def from_values(
        cls, *, order_id: str, user_id: str, product_name: str, amount_json: str, create_time: str
    ) -> OrderDocument:
        source = (
            "{"
            f'"orderId":{json_string(order_id)},'
            f'"userId":{json_string(user_id)},'
            f'"productName":{json_string(product_name)},'
            f'"amount":{amount_json},'
            f'"createTime":{json_string(create_time)}'
            "}"
        )
        return cls(order_id=order_id, source=source)


@dataclass
class DeliveryResult:
    """Which documents the target now holds, and why the others are not there."""

    delivered: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)


class DeliverySink(Protocol):
    def deliver(
        self, documents: Sequence[OrderDocument], *, attempts: int | None = None
    ) -> DeliveryResult:
        """Send ``documents``; report each as delivered or failed. Never raises for I/O.

        ``attempts`` overrides the sink's own number of tries (1: no retry here).
        """

    def close(self) -> None:
        """Release connections; called once at shutdown."""


def backoff_seconds(attempt: int, *, initial: float, cap: float) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, capped."""
    ceiling = min(cap, initial * 2.0 ** max(0, attempt - 1))
    return ceiling / 2 + random.uniform(0.0, ceiling / 2)  # noqa: S311 (jitter, not secrets)


class OpenSearchBulkSink:
    """Indexes orders with ``_bulk`` into one index, document id = orderId (idempotent).

    TLS is verified against ``ca_file`` only (not the system store) with full hostname
    verification; basic auth when a user is given. The password is handed to httpx and
    never logged or put in an exception message. A bulk request is retried, on the next
    URL, up to ``attempts`` times with backoff: the whole request when the cluster is
    unreachable or answers 429/5xx, only the failed items when it answers 200 with
    ``errors: true``.
    """

    def __init__(
        self,
        *,
        urls: Sequence[str],
        ca_file: str,
        username: str | None = None,
        password: str | None = None,
        index: str = "orders",
        timeout_seconds: float = 10.0,
        attempts: int = 3,
        retry_initial_seconds: float = 0.2,
        retry_max_seconds: float = 2.0,
    ) -> None:
        if not urls:
            raise ValueError("OpenSearchBulkSink needs at least one URL")
        self._urls = [url.rstrip("/") for url in urls]
        self._index = index
        self._attempts = attempts
        self._retry_initial = retry_initial_seconds
        self._retry_max = retry_max_seconds
        self._next_url = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        try:
            context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as error:
            reason = getattr(error, "strerror", None) or "not a PEM certificate"
            raise ConfigurationError(
                f"orders.search.ca-file {ca_file} cannot be used ({reason}); set it to the "
                "cluster's CA certificate file (PEM)"
            ) from None
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
        auth = httpx.BasicAuth(username, password or "") if username else None
        self._client = SharedHttpClient(
            httpx.Client(
                verify=context,
                auth=auth,
                timeout=timeout_seconds,
                limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
            )
        )

    def _url(self) -> str:
        with self._lock:
            url = self._urls[self._next_url % len(self._urls)]
            self._next_url += 1
        return url

    def _body(self, documents: Sequence[OrderDocument]) -> bytes:
        lines: list[str] = []
        for document in documents:
            action = {"index": {"_index": self._index, "_id": document.order_id}}
            lines.append(json.dumps(action))
            lines.append(document.source)
        return ("\n".join(lines) + "\n").encode()

    def deliver(
        self, documents: Sequence[OrderDocument], *, attempts: int | None = None
    ) -> DeliveryResult:
        result = DeliveryResult()
        pending = {document.order_id: document for document in documents}
        for attempt in range(1, (attempts or self._attempts) + 1):
            if not pending or self._closed.is_set():
                break
            if attempt > 1:
                delay = backoff_seconds(
                    attempt - 1, initial=self._retry_initial, cap=self._retry_max
                )
                if self._closed.wait(delay):
                    break
            failures = self._send(list(pending.values()))
            for order_id in list(pending):
                if order_id in failures:
                    result.failed[order_id] = failures[order_id]
                else:
                    result.failed.pop(order_id, None)
                    result.delivered.add(order_id)
                    del pending[order_id]
        for order_id in pending:
            result.failed.setdefault(order_id, "not sent: the sink is closed")
        return result

    def _send(self, documents: list[OrderDocument]) -> dict[str, str]:
        """One bulk request; the failed order ids with the reason (empty: all indexed)."""
        url = self._url()
        # What logs and the outbox's last_error show: no query, no user information.
        shown = url_for_log(url)
        try:
            response = self._client.post(
                f"{url}/_bulk",
                content=self._body(documents),
                headers={"Content-Type": "application/x-ndjson"},
            )
        except (httpx.HTTPError, RuntimeError) as error:
            # RuntimeError: a shutdown closed the client before this request started.
            reason = f"{shown} unreachable: {type(error).__name__}"
            logger.warning("bulk delivery of %d order(s) failed: %s", len(documents), reason)
            return dict.fromkeys((document.order_id for document in documents), reason)
        if response.status_code != 200:
            reason = f"{shown} answered HTTP {response.status_code}"
            logger.warning("bulk delivery of %d order(s) failed: %s", len(documents), reason)
            return dict.fromkeys((document.order_id for document in documents), reason)
        try:
            answer = response.json()
            items: list[dict[str, Any]] = answer["items"]
        except (ValueError, KeyError, TypeError):
            reason = f"{shown} answered 200 without bulk items"
            return dict.fromkeys((document.order_id for document in documents), reason)
        if not answer.get("errors"):
            return {}
        failures: dict[str, str] = {}
        for document, item in zip(documents, items, strict=False):
            outcome: dict[str, Any] = {}
            if isinstance(item, dict) and item:
                outcome = next(iter(item.values()))
            status = int(outcome.get("status", 0))
            if 200 <= status < 300:
                continue
            cause = outcome.get("error")
            kind = cause.get("type", "error") if isinstance(cause, dict) else "error"
            failures[document.order_id] = f"item HTTP {status}: {kind}"[:MAX_ERROR_CHARS]
        for document in documents[len(items) :]:
            failures[document.order_id] = "no bulk item in the answer"
        if failures:
            logger.warning(
                "bulk delivery: %d of %d item(s) failed (%s)",
                len(failures),
                len(documents),
                next(iter(failures.values())),
            )
        return failures

    def close(self) -> None:
        self._closed.set()
        self._client.close()
