"""Bearer-token authentication of POST /orders and GET /metrics (pure ASGI middleware).

Like the user directory's (``clusterforge_userdir.middleware``): raw ASGI rather than
Starlette's BaseHTTPMiddleware, because it runs on every order and the latter costs a task
and a queue per request. The check is the kit's (``BearerTokens``): every accepted token
is compared, in constant time, so the time taken tells nothing about which was close.
/health (probes) and the OpenAPI document stay open; with no token configured (allowed
on a loopback bind only, see settings.py) everything is open.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge_service_kit import BearerTokens
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
UNAUTHORIZED_BODY = (
    b'{"error": "unauthorized", "message": "missing or invalid bearer token; send '
    b'Authorization: Bearer <token>", "violations": []}'
)


class BearerTokenMiddleware:
    """Answers 401 with ``WWW-Authenticate: Bearer`` unless a configured token is sent."""

    def __init__(self, app: ASGIApp, *, accepted_tokens: Iterable[str]) -> None:
        self.app = app
        self._accepted_tokens = BearerTokens(accepted_tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self._accepted_tokens
            or scope["path"] in OPEN_PATHS
            or self.token_accepted(scope["headers"])
        ):
            await self.app(scope, receive, send)
            return
        # The body is left unread: uvicorn closes the connection after this answer rather
        # than read what an unauthenticated client sends.
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(UNAUTHORIZED_BODY)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": UNAUTHORIZED_BODY})

    def token_accepted(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        return self._accepted_tokens.accepts_headers(headers)
