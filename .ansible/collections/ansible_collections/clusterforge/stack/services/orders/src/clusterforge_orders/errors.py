"""The order service's exception tree.

Every error the package raises on purpose derives from :class:`OrdersError`, so a caller
can catch the service's failures with one ``except`` and let programming errors through.
"""

from __future__ import annotations

from dataclasses import dataclass


class OrdersError(Exception):
    """Base class of every error the order service raises on purpose."""


class ConfigurationError(OrdersError):
    """The settings (YAML file, environment or command line) are invalid.

    The message names the key and says what to set instead.
    """


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One broken validation rule: the JSON field and the spec's message for it."""

    field: str
    message: str


class RequestRejectedError(OrdersError):
    """The request cannot become an order; the HTTP layer answers 4xx with ``code``."""

    code = "bad_request"
    status_code = 400

    def __init__(self, message: str, *, violations: tuple[FieldViolation, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations


class MalformedRequestBodyError(RequestRejectedError):
    """The body is not JSON, or not a JSON object."""

    code = "malformed_json"


class RequestBodyTooLargeError(RequestRejectedError):
    """The body is larger than the service accepts."""

    code = "payload_too_large"
    status_code = 413


class UnsupportedMediaTypeError(RequestRejectedError):
    """The request does not declare a JSON body."""

    code = "unsupported_media_type"
    status_code = 415


class InvalidOrderRequestError(RequestRejectedError):
    """The body is a JSON object, but it breaks one or more validation rules."""

    code = "validation_failed"


class SynchronousListenerError(OrdersError):
    """A synchronous listener raised; the publisher's operation must fail and roll back.

    The listener's own exception is the ``__cause__``.
    """

    def __init__(self, *, listener: str) -> None:
        super().__init__(f"synchronous listener {listener!r} failed")
        self.listener = listener


class TaskRejectedError(OrdersError):
    """The executor cannot take a task: it is saturated or shut down."""

    def __init__(self, message: str, *, executor: str) -> None:
        super().__init__(message)
        self.executor = executor


class NotificationError(OrdersError):
    """A notification sender could not deliver its text."""
