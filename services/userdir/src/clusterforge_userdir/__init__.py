"""The user-directory service (FastAPI on uvicorn) and its synchronous client.

Client: :class:`UserDirectoryClient` configured by :class:`ClientConfig` /
:func:`load_client_config` (keys ``demo.rest-template.*``). It needs httpx, pydantic and
PyYAML only: ``pip install clusterforge-userdir``.
Server: :func:`create_app`, run standalone by ``clusterforge-userdir``; it needs the
``server`` extra (``pip install 'clusterforge-userdir[server]'``).
Errors: everything raised derives from :class:`UserDirectoryError`.

The server's names (:func:`create_app`, :class:`ServerSettings`,
:func:`install_remote_error_handlers`) are imported on first use, so importing the
package for the client never imports FastAPI or SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .client import FullResponse, UserDirectoryClient, new_trace_id
from .client_config import ClientConfig, StatusStyle, load_client_config, parse_duration
from .envelope import is_success_lenient, is_success_strict, unwrap_lenient, unwrap_strict
from .errors import (
    CallDeadlineExceededError,
    ClientConfigError,
    DuplicateUsernameError,
    RemoteAccessError,
    RemoteCallError,
    RequestEncodingError,
    ResponseTooLargeError,
    UrlTemplateError,
    UserDirectoryError,
    UserNotFoundError,
)
from .models import (
    ApiResult,
    PageResponse,
    ThirdUserResponse,
    UserCreateRequest,
    UserResponse,
    UserSearchRequest,
    UserStatus,
    UserUpdateRequest,
)
from .urls import encode_query, expand_path, query_pairs

if TYPE_CHECKING:
    from .error_handler import install_remote_error_handlers
    from .server import create_app
    from .settings import ServerSettings

# name -> module (relative) of the names that need the server extra
_SERVER_NAMES = {
    "create_app": ".server",
    "ServerSettings": ".settings",
    "install_remote_error_handlers": ".error_handler",
}


def __getattr__(name: str) -> Any:
    module_name = _SERVER_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as error:
        raise ImportError(
            f"{__name__}.{name} needs the server extra ({error.name} is missing); "
            "install it with: pip install 'clusterforge-userdir[server]'"
        ) from error
    return getattr(module, name)


__all__ = [
    "ApiResult",
    "CallDeadlineExceededError",
    "ClientConfig",
    "ClientConfigError",
    "DuplicateUsernameError",
    "FullResponse",
    "PageResponse",
    "RemoteAccessError",
    "RemoteCallError",
    "RequestEncodingError",
    "ResponseTooLargeError",
    "ServerSettings",
    "StatusStyle",
    "ThirdUserResponse",
    "UrlTemplateError",
    "UserCreateRequest",
    "UserDirectoryClient",
    "UserDirectoryError",
    "UserNotFoundError",
    "UserResponse",
    "UserSearchRequest",
    "UserStatus",
    "UserUpdateRequest",
    "create_app",
    "encode_query",
    "expand_path",
    "install_remote_error_handlers",
    "is_success_lenient",
    "is_success_strict",
    "load_client_config",
    "new_trace_id",
    "parse_duration",
    "query_pairs",
    "unwrap_lenient",
    "unwrap_strict",
]
