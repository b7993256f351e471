"""Bearer tokens: one rule for what a service accepts, one constant-time comparison.

A token is refused when it is a placeholder, shorter than :data:`MIN_TOKEN_LENGTH`, or
holds white space or a control character (an ``Authorization`` header cannot carry it,
so such a token could never be sent). Messages name the token's position and where it
came from, never its text.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

MIN_TOKEN_LENGTH = 16
PLACEHOLDER_TOKENS = frozenset({"changeme", "change-me", "secret", "token", "password", "example"})
TOKEN_RECIPE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"  # noqa: S105 (how to make one)


def split_tokens(raw: str) -> list[str]:
    """Tokens from a comma- or newline-separated text (the environment, a token file)."""
    return [token.strip() for token in raw.replace("\n", ",").split(",") if token.strip()]


def check_tokens(tokens: Iterable[str], *, source: str) -> None:
    """Raise ValueError for the first token the services refuse (see the module docstring)."""
    for position, token in enumerate(tokens, start=1):
        if token.lower() in PLACEHOLDER_TOKENS or len(token) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"token #{position} in {source} is a placeholder or shorter than "
                f"{MIN_TOKEN_LENGTH} characters; generate one, e.g. {TOKEN_RECIPE}"
            )
        if any(character.isspace() or not character.isprintable() for character in token):
            raise ValueError(
                f"token #{position} in {source} holds a space or control character, which "
                f"an Authorization header cannot carry; generate one, e.g. {TOKEN_RECIPE}"
            )


class BearerTokens:
    """The tokens a service accepts, and the check of an ``Authorization`` header."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = tuple(token.encode() for token in tokens)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def accepts(self, authorization: bytes) -> bool:
        """Whether ``authorization`` is ``Bearer <one of the tokens>``.

        Every token is compared, in constant time, so the time taken tells nothing
        about which token was close.
        """
        scheme, _separator, token = authorization.partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return False
        accepted = False
        for candidate in self._tokens:
            accepted |= hmac.compare_digest(candidate, token)
        return accepted

    def accepts_headers(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """:meth:`accepts` on the one ``authorization`` of ASGI ``headers``.

        Two of them are refused whatever they hold: which one counts would be the
        reader's choice (the services' HTTP edge answers them with 400 before this).
        """
        authorizations = [value for name, value in headers if name == b"authorization"]
        return len(authorizations) == 1 and self.accepts(authorizations[0])
