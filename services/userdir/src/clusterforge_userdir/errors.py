"""One exception tree for the user directory, under :class:`UserDirectoryError`.

Server side:

- :class:`UserNotFoundError` and :class:`DuplicateUsernameError` come out of the
  repository and become 404 and 409 answers (or envelopes with those codes).

Client side (the spec's "client error mapping"):

- :class:`RemoteCallError`: the remote service answered, but with a 4xx/5xx/other status,
  or with an envelope that is missing or not successful.
- :class:`RemoteAccessError`: the remote service could not be reached or read (connection
  refused, DNS failure, timeouts, any other failure of the client), with the cause chained.
  Two kinds have classes of their own: :class:`CallDeadlineExceededError` (the call took
  longer than ``total-timeout``) and :class:`ResponseTooLargeError` (the answer is longer
  than ``max-response-bytes``).
- :class:`ClientConfigError`, :class:`UrlTemplateError` and :class:`RequestEncodingError`:
  the caller's mistake, raised before anything is sent.
"""

from __future__ import annotations

RESPONSE_BODY_LIMIT = 1000
"""Response bodies kept in errors and logs are cut to this many characters."""

DEFAULT_BUSINESS_FAILURE_MESSAGE = "远程接口业务处理失败"


def cut_body(body: str | None, *, limit: int = RESPONSE_BODY_LIMIT) -> str:
    """The body as kept in errors and logs: at most ``limit`` characters, never None."""
    if body is None:
        return ""
    return body[:limit]


class UserDirectoryError(Exception):
    """Base of every error raised by the user-directory service and its client."""


class UserNotFoundError(UserDirectoryError):
    def __init__(self, *, user_id: int) -> None:
        super().__init__(f"user {user_id} not found")
        self.user_id = user_id


class DuplicateUsernameError(UserDirectoryError):
    def __init__(self, *, username: str) -> None:
        super().__init__(f"username '{username}' is already taken; choose another username")
        self.username = username


class ClientConfigError(UserDirectoryError):
    """A client setting is invalid; the message names the key and what to set."""


class UrlTemplateError(UserDirectoryError):
    """Path variables do not match the URL template; nothing was sent."""


class RequestEncodingError(UserDirectoryError):
    """A value of the request cannot be sent (a lone surrogate, say); nothing was sent.

    The message names the part of the request (path, query, body, header) and never
    repeats the value.
    """


class RemoteCallError(UserDirectoryError):
    """The remote service answered with an error status or an unsuccessful envelope.

    ``status_code`` is the HTTP status (200 for an unsuccessful envelope, 500 for a missing
    one), ``response_body`` is cut to 1000 characters.
    """

    def __init__(self, *, status_code: int | None, response_body: str | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response_body = cut_body(response_body)
        self.message = message


class RemoteAccessError(UserDirectoryError):
    """The remote service could not be reached or its answer could not be read.

    ``remote_service`` labels the service (by default its base URL); the original
    exception is ``cause`` and also ``__cause__``.
    """

    def __init__(
        self, *, remote_service: str, cause: BaseException, message: str | None = None
    ) -> None:
        super().__init__(message or f"remote service {remote_service} is not accessible: {cause!r}")
        self.remote_service = remote_service
        self.cause = cause
        self.__cause__ = cause


class CallDeadlineExceededError(RemoteAccessError):
    """The whole call (pool wait, connect, send, headers, body) outlasted ``total_timeout``.

    Per-read timeouts alone let a server that sends a byte now and then hold a call for
    ever; this bounds the call as a whole.
    """

    def __init__(self, *, remote_service: str, cause: BaseException, total_timeout: float) -> None:
        super().__init__(
            remote_service=remote_service,
            cause=cause,
            message=(
                f"remote service {remote_service} did not answer within the call's "
                f"total-timeout of {total_timeout:g} s"
            ),
        )
        self.total_timeout = total_timeout


class ResponseTooLargeError(RemoteAccessError):
    """The answer's body is longer than ``max_response_bytes``; the rest was not read."""

    def __init__(self, *, remote_service: str, cause: BaseException, limit: int) -> None:
        super().__init__(
            remote_service=remote_service,
            cause=cause,
            message=(
                f"remote service {remote_service} answered with a body over the "
                f"max-response-bytes of {limit} bytes"
            ),
        )
        self.limit = limit
