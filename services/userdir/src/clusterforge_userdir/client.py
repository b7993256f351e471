"""``UserDirectoryClient``: the synchronous client of the user-directory service.

Built on ``httpx.Client``. The spec's pool settings map onto it like this:

- connect timeout -> ``httpx.Timeout(connect=...)``; read timeout -> ``read=`` (and
  ``write=``, which the spec does not name);
- wait for a pooled connection -> ``pool=``, and the same budget bounds the wait for a
  per-route slot below;
- 200 connections in total -> ``httpx.Limits(max_connections=200,
  max_keepalive_connections=200)``;
- 50 per route -> httpx has no per-host cap, so each origin (scheme, host, port) gets a
  semaphore of 50 that a request holds while it runs.

Every call runs on the calling thread, and the client is safe to share between threads.

Two bounds hold for the call as a whole, whatever the per-step timeouts say:

- ``total_timeout``: pool wait, connect, send, headers and body together. The socket
  reads and writes of a call get at most the time left (through a network backend
  that clamps each one), so a server sending a byte a second cannot stretch a call past
  it; :class:`CallDeadlineExceededError` says so.
- ``max_response_bytes``: the body is read in pieces and the call stops with
  :class:`ResponseTooLargeError` as soon as it is longer (a declared Content-Length over
  the limit stops it before any of the body is read). The bound holds for what the
  client decompresses as well as for what it receives: a gzip or deflate body is
  inflated here, never more than the limit (a 64 KiB gzip bomb would otherwise grow to
  64 MiB in one piece); other content codings are not asked for and are refused.

TLS: an https ``root_uri`` is verified, always, against ``ca_bundle`` (a PEM file, the
cluster's CA bundle) or the system's CAs; ``verify=`` of the constructor can give an
``ssl.SSLContext`` or a CA file instead, or ``False`` (tests against a stand-in only).

Logs: httpx's own INFO line (``HTTP Request: GET <url>``, query string and all) is
dropped for this client's calls; the client logs its own DEBUG lines, without query
strings.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httpcore
import httpx
from pydantic import BaseModel, TypeAdapter

from .client_config import KEY_PREFIX, ClientConfig
from .envelope import unwrap_lenient
from .errors import (
    CallDeadlineExceededError,
    ClientConfigError,
    RemoteAccessError,
    RemoteCallError,
    RequestEncodingError,
    ResponseTooLargeError,
    UserDirectoryError,
    cut_body,
)
from .models import (
    ApiResult,
    PageResponse,
    UserCreateRequest,
    UserResponse,
    UserSearchRequest,
    UserUpdateRequest,
)
from .urls import QueryValue, encode_query, expand_path

logger = logging.getLogger("clusterforge_userdir.client")

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

DEFAULT_PAGE_NUM = 1
DEFAULT_PAGE_SIZE = 10
_UNLOGGED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
_USER_LIST = TypeAdapter(list[UserResponse])

EnvelopeUnwrapper = Callable[[ApiResult[Any] | None], Any]


class _CallDeadlinePassedError(Exception):
    """Raised inside the network layer when the calling thread's deadline has passed."""


# The deadline of the call running on this thread; the network backend reads it.
_current_call = threading.local()


def _within_deadline(step: Callable[[float | None], T], timeout: float | None) -> T:
    """Run one socket step with its timeout cut to the time the call has left."""
    deadline: float | None = getattr(_current_call, "deadline", None)
    if deadline is None:
        return step(timeout)
    left = deadline - time.monotonic()
    if left <= 0:
        raise _CallDeadlinePassedError
    try:
        return step(left if timeout is None else min(timeout, left))
    except httpcore.TimeoutException:
        if time.monotonic() >= deadline:
            raise _CallDeadlinePassedError from None
        raise


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _within_deadline(lambda left: self._stream.read(max_bytes, left), timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _within_deadline(lambda left: self._stream.write(buffer, left), timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            _within_deadline(
                lambda left: self._stream.start_tls(ssl_context, server_hostname, left), timeout
            )
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, each connect, read and write cut to the call's deadline."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            _within_deadline(
                lambda left: self._backend.connect_tcp(
                    host, port, left, local_address, socket_options
                ),
                timeout,
            )
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            _within_deadline(
                lambda left: self._backend.connect_unix_socket(path, left, socket_options),
                timeout,
            )
        )

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over :class:`_DeadlineBackend`.

    httpx takes no network backend, so its pool is rebuilt with the same limits; the
    client uses neither a proxy nor HTTP/2, the only other things the pool would carry.
    """

    def __init__(self, *, limits: httpx.Limits, ssl_context: ssl.SSLContext) -> None:
        super().__init__(limits=limits, trust_env=False)
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_DeadlineBackend(),
        )


Verify = bool | str | ssl.SSLContext


def tls_context(verify: Verify, *, ca_bundle: str | None) -> ssl.SSLContext:
    """The TLS context of the client's connections (see the module docstring)."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    cafile = verify if isinstance(verify, str) else ca_bundle
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as error:
        raise ClientConfigError(
            f"{KEY_PREFIX}ca-bundle {cafile} cannot be used as a CA bundle "
            f"({getattr(error, 'strerror', None) or error}); point it to the cluster's "
            "CA certificates in PEM"
        ) from None


class _HttpxRequestLineFilter(logging.Filter):
    """Drops httpx's INFO request line during this client's calls (it carries the query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        in_call = getattr(_current_call, "deadline", None) is not None
        return not (in_call and str(record.msg).startswith("HTTP Request:"))


_HTTPX_LOG_FILTER = _HttpxRequestLineFilter()
logging.getLogger("httpx").addFilter(_HTTPX_LOG_FILTER)

# The codings the client inflates itself, within max_response_bytes; it asks for no other.
ACCEPTED_CONTENT_ENCODINGS = "gzip, deflate"


class _BoundedInflater:
    """Inflates a gzip or deflate body, never more than ``limit`` bytes in all."""

    def __init__(self, coding: str, *, limit: int) -> None:
        self._coding = coding
        self._room = limit
        self._inflater: Any = None
        if coding == "gzip":
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._inflater = zlib.decompressobj()
        self._first = True

    def feed(self, data: bytes) -> bytes | None:
        """The inflated bytes, or None once more than the limit would come out."""
        if self._inflater is None:
            inflated = data
        else:
            try:
                inflated = self._inflater.decompress(data, self._room + 1)
            except zlib.error:
                if not (self._coding == "deflate" and self._first):
                    raise
                # "deflate" is sent both with and without zlib's wrapper.
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                inflated = self._inflater.decompress(data, self._room + 1)
        self._first = False
        if len(inflated) > self._room:
            return None
        self._room -= len(inflated)
        return inflated


def _url_for_log(url: httpx.URL) -> str:
    """The URL without its query string, which may carry a secret."""
    return str(url.copy_with(query=None, fragment=None))


def new_trace_id() -> str:
    """32 lowercase hex characters: a UUID without dashes."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class FullResponse:
    """Status, headers and body of one answer, for callers that need more than the body."""

    status_code: int
    headers: httpx.Headers
    text: str
    remote_service: str

    @property
    def trace_id(self) -> str | None:
        return self._header("X-Trace-Id")

    @property
    def request_id(self) -> str | None:
        return self._header("X-Request-Id")

    @property
    def location(self) -> str | None:
        return self._header("Location")

    @property
    def content_disposition(self) -> str | None:
        return self._header("Content-Disposition")

    def _header(self, name: str) -> str | None:
        # httpx types Headers.get as returning Any; the annotation gives strict mypy the
        # str | None it really returns, here once rather than in every property.
        value: str | None = self.headers.get(name)
        return value

    def json(self) -> Any:
        """The body as JSON (None when empty); a body that is not JSON raises
        :class:`RemoteAccessError` wrapping the cause, like :meth:`decode`."""
        try:
            return json.loads(self.text) if self.text else None
        except ValueError as failure:
            raise RemoteAccessError(remote_service=self.remote_service, cause=failure) from failure

    def decode(self, model: type[M]) -> M:
        """The body as ``model`` (e.g. UserResponse, or ThirdUserResponse for snake_case).

        A body that does not decode raises :class:`RemoteAccessError` wrapping the cause.
        """
        try:
            return model.model_validate_json(self.text)
        except Exception as failure:
            raise RemoteAccessError(remote_service=self.remote_service, cause=failure) from failure


def _describe_status(status: int) -> str:
    if 400 <= status < 500:
        return "client error"
    if 500 <= status < 600:
        return "server error"
    return "other status"


def _page_defaults(page_num: int | None, page_size: int | None) -> tuple[int, int]:
    return (
        page_num if page_num is not None and page_num >= 1 else DEFAULT_PAGE_NUM,
        page_size if page_size is not None and page_size >= 1 else DEFAULT_PAGE_SIZE,
    )


class UserDirectoryClient:
    """Calls endpoints 1 to 12; see the module docstring for pool and timeout mapping.

    Errors: :class:`RemoteCallError` for 4xx/5xx/other statuses and unsuccessful
    envelopes, :class:`RemoteAccessError` for everything that kept an answer from being
    received or read. Guards (spec rule 6) return None or False without sending.
    """

    def __init__(
        self,
        *,
        config: ClientConfig | None = None,
        envelope_unwrapper: EnvelopeUnwrapper = unwrap_lenient,
        transport: httpx.BaseTransport | None = None,
        verify: Verify = True,
    ) -> None:
        self.config = config or ClientConfig()
        self._unwrap_envelope = envelope_unwrapper
        limits = httpx.Limits(
            max_connections=self.config.max_connections,
            max_keepalive_connections=self.config.max_connections,
        )
        self._http = httpx.Client(
            base_url=self.config.root_uri.rstrip("/"),
            timeout=httpx.Timeout(
                connect=self.config.connect_timeout,
                read=self.config.read_timeout,
                write=self.config.read_timeout,
                pool=self.config.connection_request_timeout,
            ),
            limits=limits,
            headers={"Accept": "application/json", "Accept-Encoding": ACCEPTED_CONTENT_ENCODINGS},
            follow_redirects=False,
            transport=transport
            or _DeadlineTransport(
                limits=limits, ssl_context=tls_context(verify, ca_bundle=self.config.ca_bundle)
            ),
            trust_env=False,
        )
        self._route_slots: dict[str, threading.BoundedSemaphore] = {}
        self._route_slots_lock = threading.Lock()

    def __enter__(self) -> UserDirectoryClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ endpoints 1-8

    def get_user(self, user_id: int | None) -> UserResponse | None:
        if user_id is None:
            return None
        return self.exchange("GET", "/mock-api/users/{id}", user_id).decode(UserResponse)

    def list_users(
        self,
        *,
        keyword: str | None = None,
        status: int | Sequence[int] | None = None,
        page_num: int | None = None,
        page_size: int | None = None,
    ) -> list[UserResponse]:
        page_num, page_size = _page_defaults(page_num, page_size)
        response = self.exchange(
            "GET",
            "/mock-api/users",
            query={
                "keyword": keyword,
                "status": status,
                "pageNum": page_num,
                "pageSize": page_size,
            },
        )
        return self._decode(response, _USER_LIST)

    def create_user(self, request: UserCreateRequest | None) -> UserResponse | None:
        if request is None or not (request.username or "").strip():
            return None
        response = self.exchange("POST", "/mock-api/users", json_body=request.to_wire())
        return response.decode(UserResponse)

    def update_user(self, user_id: int | None, request: UserUpdateRequest | None) -> bool:
        if user_id is None or request is None:
            return False
        self.exchange("PUT", "/mock-api/users/{id}", user_id, json_body=request.to_wire())
        return True

    def delete_user(self, user_id: int | None) -> bool:
        if user_id is None:
            return False
        self.exchange("DELETE", "/mock-api/users/{id}", user_id)
        return True

    def get_org_user(self, org_id: int | None, user_id: int | None) -> UserResponse | None:
        if org_id is None or user_id is None:
            return None
        response = self.exchange(
            "GET",
            "/mock-api/orgs/{orgId}/users/{userId}",
            path_variables={"orgId": org_id, "userId": user_id},
        )
        return response.decode(UserResponse)

    def search_users(self, request: UserSearchRequest | None) -> list[UserResponse]:
        criteria = request or UserSearchRequest()
        response = self.exchange("POST", "/mock-api/users/search", json_body=criteria.to_wire())
        return self._decode(response, _USER_LIST)

    def health(self) -> str:
        return self.exchange("GET", "/mock-api/health", headers={"Accept": "text/plain"}).text

    # ------------------------------------------------------------------ endpoints 9-12

    def get_user_result(self, user_id: int | None) -> UserResponse | None:
        if user_id is None:
            return None
        response = self.exchange("GET", "/mock-api/result/users/{id}", user_id)
        return self.envelope_data(response, UserResponse)

    def list_users_result(self) -> list[UserResponse]:
        response = self.exchange("GET", "/mock-api/result/users")
        return self.envelope_data(response, list[UserResponse]) or []

    def page_users_result(
        self, *, page_num: int | None = None, page_size: int | None = None
    ) -> PageResponse[UserResponse]:
        page_num, page_size = _page_defaults(page_num, page_size)
        response = self.exchange(
            "GET",
            "/mock-api/result/users/page",
            query={"pageNum": page_num, "pageSize": page_size},
        )
        page = self.envelope_data(response, PageResponse[UserResponse])
        return page if page is not None else PageResponse[UserResponse]()

    def create_user_result(self, request: UserCreateRequest | None) -> UserResponse | None:
        if request is None or not (request.username or "").strip():
            return None
        response = self.exchange("POST", "/mock-api/result/users", json_body=request.to_wire())
        return self.envelope_data(response, UserResponse)

    def get_result(self, template: str, *positional: Any, data_type: Any) -> ApiResult[Any]:
        """The raw envelope of any endpoint, decoded with ``data`` as ``data_type``."""
        response = self.exchange("GET", template, *positional)
        adapter: TypeAdapter[ApiResult[Any]] = TypeAdapter(ApiResult[data_type])
        return self._decode(response, adapter)

    # ------------------------------------------------------------------ the one way out

    def exchange(
        self,
        method: str,
        template: str,
        *positional: Any,
        path_variables: Mapping[str, Any] | None = None,
        query: Mapping[str, QueryValue] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> FullResponse:
        """Send one request and return the full response of a 2xx answer.

        ``template`` is filled by position (one placeholder) or by ``path_variables``
        (several); ``query`` values that are None or blank are left out.
        """
        started = time.monotonic()
        deadline = started + self.config.total_timeout
        path, request = self._build(
            method, template, positional, path_variables, query, json_body, headers, deadline
        )
        _current_call.deadline = deadline
        try:
            with self._route_slot(deadline):
                self._log_request(request)
                status_code, response_headers, text = self._send_and_read(request)
        except UserDirectoryError:
            raise
        except _CallDeadlinePassedError as late:
            raise CallDeadlineExceededError(
                remote_service=self.config.service_label,
                cause=late,
                total_timeout=self.config.total_timeout,
            ) from None
        except Exception as failure:
            # Refused connections, DNS failures, timeouts and any other failure of the
            # client alike: the answer never arrived, so the caller may retry elsewhere.
            raise RemoteAccessError(
                remote_service=self.config.service_label, cause=failure
            ) from failure
        finally:
            _current_call.deadline = None
        full = FullResponse(
            status_code=status_code,
            headers=response_headers,
            text=text,
            remote_service=self.config.service_label,
        )
        self._log_response(request, full, time.monotonic() - started)
        if not 200 <= full.status_code < 300:
            raise RemoteCallError(
                status_code=full.status_code,
                response_body=full.text,
                message=(
                    f"remote call {method} {path} failed with "
                    f"{_describe_status(full.status_code)}: HTTP {full.status_code}"
                ),
            )
        return full

    # ------------------------------------------------------------------ helpers

    def _build(
        self,
        method: str,
        template: str,
        positional: tuple[Any, ...],
        path_variables: Mapping[str, Any] | None,
        query: Mapping[str, QueryValue] | None,
        json_body: Any,
        headers: Mapping[str, str] | None,
        deadline: float,
    ) -> tuple[str, httpx.Request]:
        """The path and the request; a value that cannot be sent raises before any I/O."""
        part = "a path variable"
        try:
            path = expand_path(template, *positional, named=path_variables)
            part = "a query parameter"
            query_string = encode_query(query or {}, status_style=self.config.status_style)
            part = "the JSON body"
            content = (
                None
                if json_body is None
                else json.dumps(json_body, ensure_ascii=False, separators=(",", ":")).encode()
            )
            part = "a header"
            request_headers = self._headers(headers, has_body=json_body is not None)
            request = self._http.build_request(
                method,
                f"{path}?{query_string}" if query_string else path,
                content=content,
                headers=request_headers,
                timeout=self._timeout_within(deadline),
            )
        except UnicodeEncodeError:
            # The value is not repeated: it is the caller's data, possibly a secret.
            raise RequestEncodingError(
                f"{part} of {method} {template} cannot be encoded (a lone surrogate, "
                "U+D800 to U+DFFF, or a character a header cannot carry); pass valid text"
            ) from None
        return path, request

    def _timeout_within(self, deadline: float) -> httpx.Timeout:
        left = max(deadline - time.monotonic(), 0.001)
        return httpx.Timeout(
            connect=min(self.config.connect_timeout, left),
            read=min(self.config.read_timeout, left),
            write=min(self.config.read_timeout, left),
            pool=min(self.config.connection_request_timeout, left),
        )

    def _send_and_read(self, request: httpx.Request) -> tuple[int, httpx.Headers, str]:
        """Send, then read the body up to ``max_response_bytes``; status, headers, text."""
        limit = self.config.max_response_bytes
        response = self._http.send(request, stream=True)
        try:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                raise ResponseTooLargeError(
                    remote_service=self.config.service_label,
                    cause=ValueError(f"Content-Length {declared}"),
                    limit=limit,
                )
            coding = response.headers.get("Content-Encoding", "identity").strip().lower()
            raw_pieces: Iterable[bytes] = response.iter_raw()
            if response.is_stream_consumed:
                # A transport that read (and so inflated) the body already: a test's
                # httpx.MockTransport. The client's own transport streams.
                coding, raw_pieces = "identity", [response.content]
            if coding not in ("identity", "gzip", "deflate"):
                raise RemoteAccessError(
                    remote_service=self.config.service_label,
                    cause=ValueError(f"unrequested Content-Encoding {coding!r}"),
                )
            inflater = _BoundedInflater(coding, limit=limit)
            pieces: list[bytes] = []
            received = 0
            # Raw bytes, inflated here: httpx would inflate each piece whole first.
            for raw in raw_pieces:
                received += len(raw)
                piece = inflater.feed(raw) if received <= limit else None
                if piece is None:
                    raise ResponseTooLargeError(
                        remote_service=self.config.service_label,
                        cause=ValueError(f"more than {limit} bytes received or inflated"),
                        limit=limit,
                    )
                pieces.append(piece)
                if getattr(_current_call, "deadline", None) is not None and (
                    time.monotonic() > _current_call.deadline
                ):
                    # Also for transports other than the client's own (tests' mocks).
                    raise _CallDeadlinePassedError
        finally:
            response.close()
        body = b"".join(pieces)
        try:
            # The service's one rule for bodies, on the way back too: UTF-8 or nothing.
            # Replacement characters would hand the caller text the service never sent.
            text = body.decode("utf-8")
        except UnicodeDecodeError as failure:
            raise RemoteAccessError(
                remote_service=self.config.service_label,
                cause=failure,
                message=(
                    f"remote service {self.config.service_label} answered "
                    f"{response.status_code} with a body that is not UTF-8 (byte "
                    f"{failure.start}: {failure.reason}); its answers must be UTF-8"
                ),
            ) from failure
        return response.status_code, response.headers, text

    def _headers(self, overrides: Mapping[str, str] | None, *, has_body: bool) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.config.bearer_token:
            headers["Authorization"] = f"Bearer {self.config.bearer_token}"
        if self.config.tenant_id:
            headers["X-Tenant-Id"] = self.config.tenant_id
        if has_body:
            headers["Content-Type"] = "application/json"
        for name, value in (overrides or {}).items():
            # A blank trace id is no trace id: the spec generates one when the caller
            # has not set it, and an empty header would join nothing to this request.
            if name.lower() == "x-trace-id" and not value.strip():
                continue
            headers[name] = value
        if not any(name.lower() == "x-trace-id" for name in headers):
            headers["X-Trace-Id"] = new_trace_id()
        return headers

    def _route_slot(self, deadline: float) -> _RouteSlot:
        origin = str(self._http.base_url.copy_with(path="/", query=None, fragment=None))
        with self._route_slots_lock:
            slots = self._route_slots.get(origin)
            if slots is None:
                slots = threading.BoundedSemaphore(self.config.max_connections_per_route)
                self._route_slots[origin] = slots
        wait = min(self.config.connection_request_timeout, max(deadline - time.monotonic(), 0))
        return _RouteSlot(slots, wait=wait, origin=origin)

    def envelope_data(self, response: FullResponse, data_type: type[T]) -> T | None:
        """``data`` of the envelope in ``response``, checked by this client's success rule."""
        envelope_type: Any = ApiResult[data_type]  # type: ignore[valid-type]
        adapter: TypeAdapter[ApiResult[Any] | None] = TypeAdapter(envelope_type | None)
        return cast("T | None", self._unwrap_envelope(self._decode(response, adapter)))

    def _decode(self, response: FullResponse, adapter: TypeAdapter[T]) -> T:
        try:
            return adapter.validate_json(response.text or "null")
        except Exception as failure:
            raise RemoteAccessError(
                remote_service=self.config.service_label, cause=failure
            ) from failure

    def _log_request(self, request: httpx.Request) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        shown = {
            name: value
            for name, value in request.headers.items()
            if name.lower() not in _UNLOGGED_HEADERS
        }
        content = request.content
        body = cut_body(content.decode("utf-8", "replace") if content else "")
        logger.debug(
            "request %s %s headers=%s body=%s",
            request.method,
            _url_for_log(request.url),
            shown,
            body,
        )

    def _log_response(self, request: httpx.Request, response: FullResponse, elapsed: float) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        logger.debug(
            "response %s %s -> %s in %.1f ms trace=%s request=%s body=%s",
            request.method,
            _url_for_log(request.url),
            response.status_code,
            elapsed * 1000,
            request.headers.get("X-Trace-Id"),
            response.request_id,
            cut_body(response.text),
        )


class _RouteSlot:
    """Holds one of the per-route connection slots for the length of a request."""

    def __init__(self, slots: threading.BoundedSemaphore, *, wait: float, origin: str) -> None:
        self._slots = slots
        self._wait = wait
        self._origin = origin

    def __enter__(self) -> None:
        if not self._slots.acquire(timeout=self._wait):
            raise httpx.PoolTimeout(
                f"no connection to {self._origin} free within {self._wait:g} s "
                "(max-connections-per-route reached)"
            )

    def __exit__(self, *_exc: object) -> None:
        self._slots.release()
