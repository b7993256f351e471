"""Where the notification listener sends its text: a pluggable :class:`NotificationSender`."""

from __future__ import annotations

import logging
from typing import Protocol

import httpx

from .errors import NotificationError
from .logsafe import escape_for_log
from .shared_client import SharedClientClosedError, SharedHttpClient

logger = logging.getLogger("clusterforge_orders.notifications")


class NotificationSender(Protocol):
    def send(self, text: str) -> None:
        """Deliver ``text`` or raise; called on an executor thread."""

    def close(self) -> None:
        """Release what the sender holds; called once at shutdown."""


class LoggingNotificationSender:
    """The default: writes each notification to the log at INFO, on one line.

    The text holds the client's ``productName`` and ``userId``; their control characters
    are escaped so a newline cannot forge a log line, whatever formatter is installed.
    """

    def send(self, text: str) -> None:
        logger.info("%s", escape_for_log(text))

    def close(self) -> None:
        return None


class WebhookNotificationSender:
    """POSTs ``{"text": ...}`` as JSON to a webhook and requires a 2xx answer.

    The URL is never logged, since webhook URLs commonly embed their token.
    """

    def __init__(
        self,
        *,
        url: str,
        timeout_seconds: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url = url
        self._client = SharedHttpClient(httpx.Client(timeout=timeout_seconds, transport=transport))

    def send(self, text: str) -> None:
        try:
            response = self._client.post(self._url, json={"text": text})
        except (httpx.HTTPError, SharedClientClosedError) as error:
            raise NotificationError(f"webhook request failed: {type(error).__name__}") from None
        if not response.is_success:
            raise NotificationError(f"webhook answered HTTP {response.status_code}")

    def close(self) -> None:
        self._client.close()
