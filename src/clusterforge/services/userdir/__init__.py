"""The user-directory service (FastAPI on uvicorn) and its synchronous client.

Server: :func:`create_app`, run standalone by ``clusterforge-userdir``.
Client: :class:`UserDirectoryClient` configured by :class:`ClientConfig` /
:func:`load_client_config` (keys ``demo.rest-template.*``).
Errors: everything raised derives from :class:`UserDirectoryError`.
"""

from .client import FullResponse, UserDirectoryClient, new_trace_id
from .client_config import ClientConfig, StatusStyle, load_client_config, parse_duration
from .envelope import is_success_lenient, is_success_strict, unwrap_lenient, unwrap_strict
from .error_handler import install_remote_error_handlers
from .errors import (
    ClientConfigError,
    DuplicateUsernameError,
    RemoteAccessError,
    RemoteCallError,
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
from .server import create_app
from .settings import ServerSettings
from .urls import encode_query, expand_path, query_pairs

__all__ = [
    "ApiResult",
    "ClientConfig",
    "ClientConfigError",
    "DuplicateUsernameError",
    "FullResponse",
    "PageResponse",
    "RemoteAccessError",
    "RemoteCallError",
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
