"""The user-directory HTTP service: FastAPI routes for endpoints 1 to 12 of the spec.

Handlers answer with pre-serialised JSON built from :class:`UserRecord` rather than
through ``response_model`` validation: the models still describe every answer in the
OpenAPI document, but are not re-validated on the hot path.

Handlers are ``async`` and call the repository directly. The queries are single index
lookups that take well under a millisecond, less than a hop to the thread pool costs;
the service scales out with worker processes (``--workers``) instead of threads.
"""

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any

from clusterforge_service_kit import NotUtf8BodyError, utf8_json_text
from clusterforge_service_kit.http_edge import EdgeLimits, code_and_message_body
from clusterforge_service_kit.metrics import (
    PROMETHEUS_CONTENT_TYPE,
    RequestMetrics,
    RequestMetricsMiddleware,
    render_metrics,
)
from fastapi import APIRouter, Body, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry
from pydantic import BeforeValidator, Field
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .errors import DuplicateUsernameError, UserNotFoundError
from .middleware import (
    RequestBodyTimeoutError,
    RequestBodyTooLargeError,
    RequestContextMiddleware,
    drop_query_strings_from_access_log,
)
from .migrate import upgrade_database
from .models import (
    ApiResult,
    ErrorBody,
    NewUserBody,
    PageResponse,
    StorableText,
    UserChangesBody,
    UserResponse,
    UserSearchBody,
    UserStatus,
)
from .settings import ServerSettings
from .storage import UserQuery, UserRecord, UserRepository, create_database_engine

logger = logging.getLogger("clusterforge_userdir.server")

ENVELOPE_PREFIX = "/mock-api/result/"
MAX_ID = 2**63 - 1
MAX_PAGE_NUM = 10_000_000
STATUS_QUERY_PATTERN = r"^[0-2](,[0-2])*$"

# 408 and 431 are decided before (or while) the request reaches a route, by the protocol
# and the middleware, and so come with their HTTP status on every endpoint.
_LIMIT_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token (auth on)"},
    408: {
        "model": ErrorBody,
        "description": "Request line, headers or body not received in time "
        "(request_read_timeout); the connection is closed",
    },
    413: {"model": ErrorBody, "description": "Request body too large (max_request_body_bytes)"},
    431: {
        "model": ErrorBody,
        "description": "Request line and headers too large (max_request_header_bytes); "
        "the connection is closed",
    },
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad parameters"},
    **_LIMIT_ERRORS,
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No user with this id"}
}
_ENVELOPE_ERRORS = _LIMIT_ERRORS

# Whole numbers in paths and query strings are accepted only as the server writes them:
# ASCII digits, no sign, spaces, underscores, fraction or leading zero, at most 19 digits.
# Lax parsing took "1_0" as 10 and "+1", " 1", "1.0" and "01" as 1, so one user had many
# URLs and a typo reached another user.
_CANONICAL_WHOLE_NUMBER = re.compile(r"0|[1-9][0-9]{0,18}")


def _canonical_whole_number(value: Any) -> Any:
    if isinstance(value, str) and not _CANONICAL_WHOLE_NUMBER.fullmatch(value):
        raise ValueError(
            "must be a whole number in plain decimal digits (no sign, space, underscore, "
            "fraction or leading zero, at most 19 digits), e.g. 42"
        )
    return value


# After the Path or Query marker: placed before it, FastAPI documents ge/le under their
# Python names instead of minimum/maximum.
CANONICAL = BeforeValidator(_canonical_whole_number)
UserId = Annotated[int, Path(ge=1, le=MAX_ID, description="user id"), CANONICAL]


def json_response(content: Any, *, status_code: int = 200, headers: Any = None) -> Response:
    text = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    try:
        body = text.encode()
    except UnicodeEncodeError:
        # A lone surrogate that slipped into a message: escaped, it is still valid JSON,
        # where raw it would end the request in a 500.
        body = json.dumps(content, separators=(",", ":")).encode()
    return Response(body, status_code=status_code, media_type="application/json", headers=headers)


def success(data: Any) -> Response:
    return json_response({"code": 200, "message": "success", "data": data})


def business_failure(code: int, message: str) -> Response:
    return json_response({"code": code, "message": message, "data": None})


def error(status_code: int, message: str, *, headers: Any = None) -> Response:
    return json_response(
        {"code": status_code, "message": message}, status_code=status_code, headers=headers
    )


def _parse_statuses(values: Sequence[str] | None) -> list[int]:
    statuses: list[int] = []
    for value in values or ():
        statuses.extend(int(part) for part in value.split(",") if part.strip())
    return statuses


def _wire(records: list[UserRecord]) -> list[dict[str, Any]]:
    return [record.to_wire() for record in records]


def _describe_validation_error(exc: RequestValidationError) -> str:
    problems = []
    for problem in exc.errors()[:5]:
        location = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        problems.append(f"{location or 'body'}: {problem.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"


class NotUtf8JsonError(Exception):
    """A JSON body in another encoding than UTF-8; answered 400 like any bad parameter."""


class Utf8JsonRoute(APIRoute):
    """A route that takes JSON bodies in UTF-8 only, the kit's one rule for bodies.

    FastAPI hands the body's bytes to ``json.loads``, which guesses UTF-16 and UTF-32 from
    the first bytes (a BOM, or zero bytes) and decodes UTF-8 with ``surrogatepass``, so an
    encoded lone surrogate passed in a field the service ignores; RFC 8259 and this
    service's docs take UTF-8 alone, the whole body (``utf8_json_text``).
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def utf8_only(request: Request) -> Response:
            try:
                body = await request.body()  # kept by the request; FastAPI reads it there
            except ClientDisconnect:
                # FastAPI's own read meets the same disconnect and answers it as it did.
                return await handler(request)
            try:
                utf8_json_text(body)
            except NotUtf8BodyError as refused:
                raise NotUtf8JsonError(str(refused)) from refused
            return await handler(request)

        return utf8_only


def build_router(*, repository: UserRepository, settings: ServerSettings) -> APIRouter:
    router = APIRouter(prefix="/mock-api", route_class=Utf8JsonRoute)
    page_num_query = Query(alias="pageNum", ge=1, le=MAX_PAGE_NUM)
    page_size_query = Query(alias="pageSize", ge=1, le=settings.max_page_size)

    @router.get(
        "/users/{id}",
        response_model=UserResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="1. Read one user",
    )
    async def get_user(id: UserId) -> Response:
        return json_response(repository.get(id).to_wire())

    @router.get(
        "/users", response_model=list[UserResponse], responses=_ERRORS, summary="2. Query users"
    )
    async def list_users(
        keyword: Annotated[StorableText | None, Query(max_length=64)] = None,
        status: Annotated[
            list[Annotated[str, Field(pattern=STATUS_QUERY_PATTERN)]] | None,
            Query(description="repeated (status=0&status=1) or comma-joined (status=0,1)"),
        ] = None,
        page_num: Annotated[int, page_num_query, CANONICAL] = 1,
        page_size: Annotated[int, page_size_query, CANONICAL] = 10,
    ) -> Response:
        query = UserQuery(keyword=keyword, statuses=_parse_statuses(status))
        records = repository.find(query, offset=(page_num - 1) * page_size, limit=page_size)
        return json_response(_wire(records))

    @router.post(
        "/users",
        status_code=201,
        response_model=UserResponse,
        responses={
            **_ERRORS,
            409: {"model": ErrorBody, "description": "Username taken (case-insensitive)"},
        },
        summary="3. Create a user",
    )
    async def create_user(body: NewUserBody) -> Response:
        record = repository.create(
            username=body.username, nickname=body.nickname, mobile=body.mobile
        )
        return json_response(
            record.to_wire(),
            status_code=201,
            headers={"Location": f"/mock-api/users/{record.id}"},
        )

    @router.put(
        "/users/{id}",
        response_model=UserResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="4. Update a user (null fields keep their value)",
    )
    async def update_user(id: UserId, body: UserChangesBody) -> Response:
        changes = body.model_dump(exclude_none=True, include={"nickname", "mobile", "status"})
        return json_response(repository.update(id, changes).to_wire())

    @router.delete(
        "/users/{id}",
        status_code=204,
        response_class=Response,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="5. Delete a user",
    )
    async def delete_user(id: UserId) -> Response:
        repository.delete(id)
        return Response(status_code=204)

    @router.get(
        "/orgs/{orgId}/users/{userId}",
        response_model=UserResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="6. Read one user by organisation (organisations are not modelled)",
    )
    async def get_org_user(
        org_id: Annotated[int, Path(alias="orgId", ge=1, le=MAX_ID), CANONICAL],
        user_id: Annotated[int, Path(alias="userId", ge=1, le=MAX_ID), CANONICAL],
    ) -> Response:
        return json_response(repository.get(user_id).to_wire())

    @router.post(
        "/users/search",
        response_model=list[UserResponse],
        responses=_ERRORS,
        summary="7. Search users by criteria",
    )
    async def search_users(body: Annotated[UserSearchBody, Body()]) -> Response:
        query = UserQuery(
            keyword=body.keyword,
            statuses=body.status_list,
            created_from=body.start_time,
            created_to=body.end_time,
            exclude_locked=not body.include_locked,
        )
        return json_response(_wire(repository.find(query, offset=0, limit=settings.list_limit)))

    @router.get(
        "/health",
        response_class=PlainTextResponse,
        responses={503: {"description": "Database unreachable", "content": {"text/plain": {}}}},
        summary="8. Health check (never needs a token)",
    )
    async def health() -> PlainTextResponse:
        try:
            with repository.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception:
            logger.exception("health check: database unreachable")
            return PlainTextResponse("DOWN", status_code=503)
        return PlainTextResponse("UP")

    # Declared before /result/users/{id}, which would otherwise swallow "page".
    @router.get(
        "/result/users/page",
        response_model=ApiResult[PageResponse[UserResponse]],
        responses=_ENVELOPE_ERRORS,
        summary="11. One page of users, in an envelope",
    )
    async def page_users_result(
        page_num: Annotated[int, page_num_query, CANONICAL] = 1,
        page_size: Annotated[int, page_size_query, CANONICAL] = 10,
    ) -> Response:
        query = UserQuery()
        records = repository.find(query, offset=(page_num - 1) * page_size, limit=page_size)
        page = {
            "records": _wire(records),
            "total": repository.count(query),
            "pageNum": page_num,
            "pageSize": page_size,
        }
        return success(page)

    @router.get(
        "/result/users/{id}",
        response_model=ApiResult[UserResponse],
        responses=_ENVELOPE_ERRORS,
        summary="9. Read one user, in an envelope",
    )
    async def get_user_result(id: UserId) -> Response:
        return success(repository.get(id).to_wire())

    @router.get(
        "/result/users",
        response_model=ApiResult[list[UserResponse]],
        responses=_ENVELOPE_ERRORS,
        summary=f"10. List users (first {settings.list_limit} by id), in an envelope",
    )
    async def list_users_result() -> Response:
        return success(_wire(repository.find(UserQuery(), offset=0, limit=settings.list_limit)))

    @router.post(
        "/result/users",
        response_model=ApiResult[UserResponse],
        responses=_ENVELOPE_ERRORS,
        summary="12. Create a user, in an envelope",
    )
    async def create_user_result(body: NewUserBody) -> Response:
        record = repository.create(
            username=body.username, nickname=body.nickname, mobile=body.mobile
        )
        return success(record.to_wire())

    return router


def _install_error_handlers(app: FastAPI) -> None:
    def answer(request: Request, code: int, message: str) -> Response:
        if request.url.path.startswith(ENVELOPE_PREFIX):
            return business_failure(code, message)
        return error(code, message)

    async def on_not_found(request: Request, exc: Exception) -> Response:
        return answer(request, 404, str(exc))

    async def on_duplicate(request: Request, exc: Exception) -> Response:
        return answer(request, 409, str(exc))

    async def on_not_utf8(request: Request, exc: Exception) -> Response:
        return answer(request, 400, str(exc))

    async def on_invalid(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, RequestValidationError):
            raise exc
        return answer(request, 400, _describe_validation_error(exc))

    async def on_too_large(request: Request, exc: Exception) -> Response:
        return error(413, str(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, StarletteHTTPException):
            raise exc
        if isinstance(exc.__cause__, RequestBodyTooLargeError):
            # FastAPI wraps any failure while reading the body into a generic 400.
            return error(413, str(exc.__cause__))
        if isinstance(exc.__cause__, RequestBodyTimeoutError):
            # The rest of a late body may still come; the connection cannot be reused.
            return error(408, str(exc.__cause__), headers={"Connection": "close"})
        status = exc.status_code
        if status == 400:
            # A body FastAPI could not read (not UTF-8, say): a bad parameter like any
            # other, so the envelope endpoints answer it in an envelope too.
            return answer(request, 400, f"{exc.detail}; send a JSON body in UTF-8")
        response = error(status, str(exc.detail))
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    app.add_exception_handler(UserNotFoundError, on_not_found)
    app.add_exception_handler(DuplicateUsernameError, on_duplicate)
    app.add_exception_handler(NotUtf8JsonError, on_not_utf8)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(RequestBodyTooLargeError, on_too_large)
    app.add_exception_handler(StarletteHTTPException, on_http_error)


def _openapi_with_400(app: FastAPI) -> dict[str, Any]:
    """FastAPI documents validation failures as 422; this service answers them with 400."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The ASGI application, its database migrated to the newest schema on startup."""
    settings = settings or ServerSettings()
    engine = create_database_engine(
        settings.database_url, connect_timeout=settings.database_connect_timeout
    )
    repository = UserRepository(engine=engine)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            upgrade_database(engine)
        yield
        engine.dispose()

    app = FastAPI(
        title="clusterforge user directory",
        version="1",
        description=(
            "Users with camelCase JSON and local date-times (yyyy-MM-ddTHH:mm:ss). "
            f"status: {', '.join(f'{s.value} {s.name.lower()}' for s in UserStatus)}. "
            f"Limits: request line and headers at most {settings.max_request_header_bytes} "
            f"bytes (else 431), request body at most {settings.max_request_body_bytes} bytes "
            f"(else 413), head and body together within {settings.request_read_timeout:g} s "
            f"(else 408), pageSize at most {settings.max_page_size}, list and search "
            f"answers at most {settings.list_limit} users."
        ),
        lifespan=lifespan,
        # A trailing slash is 404, never a redirect whose Location comes from Host.
        redirect_slashes=False,
    )
    app.include_router(build_router(repository=repository, settings=settings))
    registry = CollectorRegistry()
    request_metrics = RequestMetrics(namespace="userdir", registry=registry)

    # Outside the OpenAPI document, which describes the spec's twelve endpoints; a
    # Prometheus scrape needs no schema (docs/userdir.md, "Metrics").
    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(render_metrics(registry), media_type=PROMETHEUS_CONTENT_TYPE)

    _install_error_handlers(app)
    app.add_middleware(
        RequestContextMiddleware,
        accepted_tokens=settings.accepted_tokens(),
        max_body_bytes=settings.max_request_body_bytes,
        body_timeout=settings.request_read_timeout,
    )
    # Added last, so outermost: 401s and 413s are counted and timed too.
    app.add_middleware(RequestMetricsMiddleware, metrics=request_metrics)
    app.openapi = lambda: _openapi_with_400(app)  # type: ignore[method-assign]
    app.state.repository = repository
    # Read by the kit's GuardedHttpToolsProtocol, which uvicorn creates before any request.
    app.state.http_edge = EdgeLimits(
        max_header_bytes=settings.max_request_header_bytes,
        read_timeout_seconds=settings.request_read_timeout,
        error_body=code_and_message_body,
        logger_name="clusterforge_userdir.server",
        metrics=request_metrics,
    )
    drop_query_strings_from_access_log()
    return app


def create_app_from_environment() -> FastAPI:
    """Factory for ``uvicorn --factory`` and worker processes: settings from the environment."""
    return create_app(ServerSettings())
