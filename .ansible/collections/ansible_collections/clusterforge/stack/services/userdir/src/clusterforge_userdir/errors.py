"""One exception tree for the user directory, under :class:`UserDirectoryError`.

Server side:

- :class:`UserNotFoundError` and :class:`DuplicateUsernameError` come out of the
  repository and become 404 and 409 answers (or envelopes with those codes).

Client side (the spec's "client error mapping"):

- :class:`RemoteCallError`: the remote service answered, but with a 4xx/5xx/other status,
  or with an envelope that is missing or not successful.
- :class:`RemoteAccessError`: the remote service could not be reached or read (connection
  refused, DNS failure, timeouts, any other failure of the client), with the cause chained.
- :class:`ClientConfigError` and :class:`UrlTemplateError`: the caller's mistake, raised
  before anything is sent.
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

    def __init__(self, *, remote_service: str, cause: BaseException) -> None:
        super().__init__(f"remote service {remote_service} is not accessible: {cause!r}")
        self.remote_service = remote_service
        self.cause = cause
        self.__cause__ = cause
