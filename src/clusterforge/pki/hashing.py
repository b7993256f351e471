"""bcrypt password hashes for the security plugin's ``internal_users.yml``.

Public API:

- :func:`hash_password` makes a ``$2y$`` bcrypt hash, the form the plugin's own hash tool
  (``plugins/opensearch-security/tools/hash.sh``) prints. Cost 12 by default, as that tool.
- :func:`verify_password` checks a password against a ``$2a$``, ``$2b$`` or ``$2y$`` hash.
- :func:`reuse_or_hash` returns an existing hash unchanged while it still verifies, so a
  rerun with the same password renders a byte-identical ``internal_users.yml``.
- :func:`check_password_allowed` refuses what a secured cluster must never run with: an
  empty password, one of the well-known demo passwords the plugin ships, or the user's own
  name. It raises :class:`PasswordRejectedError`.
- :func:`main` is the hash tool (``scripts/hash-password``, ``python -m clusterforge.pki.hashing``).

The security plugin 2.19 checks bcrypt hashes with password4j
(``BcryptFunction.getInstanceFromHash`` then ``Password.check(...).with(...)``);
``tests/test_hashing.py`` cross-checks Python-made hashes with that library from the
plugin's own zip.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

import bcrypt

from clusterforge.errors import ClusterforgeError

__all__ = [
    "DEFAULT_BCRYPT_ROUNDS",
    "DEMO_PASSWORD_HASHES",
    "DEMO_USER_HASHES",
    "DEMO_USER_PASSWORDS",
    "MAX_PASSWORD_BYTES",
    "WELL_KNOWN_PASSWORDS",
    "PasswordRejectedError",
    "check_password_allowed",
    "hash_password",
    "main",
    "reuse_or_hash",
    "verify_password",
]

DEFAULT_BCRYPT_ROUNDS = 12
"""Cost factor of the plugin's hash tool (``plugins.security.password.hashing.bcrypt.rounds``)."""

MAX_PASSWORD_BYTES = 72
"""bcrypt reads at most 72 bytes; longer passwords would be silently cut by some verifiers."""

DEMO_USER_PASSWORDS: Mapping[str, str] = {
    # The demo internal_users.yml of opensearch-security 2.19 (config/internal_users.yml in the
    # plugin zip): every demo user's password equals its name. Checked against the shipped
    # hashes with bcrypt.
    "admin": "admin",
    "anomalyadmin": "anomalyadmin",
    "kibanaserver": "kibanaserver",
    "kibanaro": "kibanaro",
    "logstash": "logstash",
    "readall": "readall",
    "snapshotrestore": "snapshotrestore",
}

WELL_KNOWN_PASSWORDS: frozenset[str] = frozenset(
    {
        *DEMO_USER_PASSWORDS.values(),
        # Placeholders that documentation and examples put where a password goes.
        "changeit",
        "changeme",
        "password",
    }
)
"""Passwords refused for every user (compared case-insensitively)."""

DEMO_USER_HASHES: Mapping[str, str] = {
    # The hashes the demo internal_users.yml ships. A rendered file that carries one of them
    # was copied from the demo, whatever password the operator believes it holds.
    "admin": "$2a$12$VcCDgh2NDk07JGN0rjGbM.Ad41qVR/YFJcgHp0UGns5JDymv..TOG",
    "anomalyadmin": "$2y$12$TRwAAJgnNo67w3rVUz4FIeLx9Dy/llB79zf9I15CKJ9vkM4ZzAd3.",
    "kibanaserver": "$2a$12$4AcgAt3xwOWadA5s5blL6ev39OXDNhmOesEoo33eZtrq2N0YrU3H.",
    "kibanaro": "$2a$12$JJSXNfTowz7Uu5ttXfeYpeYE0arACvcwlPBStB1F.MI7f0U9Z4DGC",
    "logstash": "$2a$12$u1ShR4l4uBS3Uv59Pa2y5.1uQuZBrZtmNfqB3iM/.jL0XoV9sghS2",
    "readall": "$2a$12$ae4ycwzwvLtZxwZ82RmiEunBbIPiAmGZduBAjKN0TXdwQFtCwARz2",
    "snapshotrestore": "$2y$12$DpwmetHKwgYnorbgdvORCenv4NAK8cPUg8AI6pxLCuWf/ALc0.v7W",
}

DEMO_PASSWORD_HASHES: frozenset[str] = frozenset(DEMO_USER_HASHES.values())

_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")


class PasswordRejectedError(ClusterforgeError):
    """A password cannot be used for an internal user; the message says what to set.

    ``user`` names the internal user (``None`` when the hash tool runs without one) and
    ``reason`` is a short machine-friendly cause: ``empty``, ``demo``, ``username``,
    ``too_long`` or ``nul`` (the hash tool adds ``unset`` for a missing variable and
    ``mismatch`` for two different prompted entries). The password itself never appears in
    the message.
    """

    def __init__(self, *, user: str | None, reason: str, message: str) -> None:
        self.user = user
        self.reason = reason
        super().__init__(message)


def check_password_allowed(user: str | None, password: str, *, setting: str | None = None) -> None:
    """Raise :class:`PasswordRejectedError` unless ``password`` may protect ``user``.

    ``setting`` names the inventory variable (or vault entry) the password came from, so
    the message can say exactly what to change.
    """
    subject = f"the password of internal user '{user}'" if user else "the password"
    fix = f"set {setting} to" if setting else "choose"
    _check_hashable(password, user=user, subject=subject, fix=fix)
    folded = password.casefold()
    if folded in {known.casefold() for known in WELL_KNOWN_PASSWORDS}:
        raise PasswordRejectedError(
            user=user,
            reason="demo",
            message=(
                f"{subject} is a well-known demo or placeholder password (the security "
                f"plugin's demo users ship with such passwords); {fix} a unique password"
            ),
        )
    if user is not None and folded == user.casefold():
        raise PasswordRejectedError(
            user=user,
            reason="username",
            message=f"{subject} equals the user name; {fix} a unique password",
        )


def _check_hashable(password: str, *, user: str | None, subject: str, fix: str) -> None:
    if password == "":
        raise PasswordRejectedError(
            user=user,
            reason="empty",
            message=f"{subject} is empty; {fix} a non-empty, unique password",
        )
    if "\x00" in password:
        # C implementations of bcrypt stop at a NUL byte while others hash it, so the same
        # password would verify differently on different tools.
        raise PasswordRejectedError(
            user=user,
            reason="nul",
            message=f"{subject} contains a NUL character; {fix} a password without one",
        )
    if len(password.encode("utf-8")) > MAX_PASSWORD_BYTES:
        raise PasswordRejectedError(
            user=user,
            reason="too_long",
            message=(
                f"{subject} is longer than {MAX_PASSWORD_BYTES} bytes in UTF-8, the most "
                f"bcrypt uses; {fix} a password of at most {MAX_PASSWORD_BYTES} bytes"
            ),
        )


def hash_password(password: str, *, rounds: int = DEFAULT_BCRYPT_ROUNDS) -> str:
    """Return a ``$2y$`` bcrypt hash of ``password`` with cost ``rounds`` (4 to 31).

    Only the empty, NUL and length rules apply here (they would make a hash that does not
    work); call :func:`check_password_allowed` for the demo-password policy.
    """
    if not 4 <= rounds <= 31:
        raise ValueError(f"bcrypt rounds must be between 4 and 31, got {rounds}")
    _check_hashable(password, user=None, subject="the password", fix="choose")
    hashed = bcrypt.hashpw(password.encode("utf-8"), bcrypt.gensalt(rounds, prefix=b"2b"))
    # $2b$ (OpenBSD's name since 2014) and $2y$ (crypt_blowfish's name) mark the same, fixed
    # algorithm; only $2a$ differs, and only for passwords over 255 bytes. The plugin's hash
    # tool prints $2y$, so we print the same and files look like the tool made them.
    return "$2y$" + hashed.decode("ascii")[len("$2b$") :]


def verify_password(password: str, password_hash: str) -> bool:
    """Return whether ``password`` matches a ``$2a$``/``$2b$``/``$2y$`` bcrypt hash.

    Malformed hashes and passwords bcrypt cannot take verify as ``False``, never raise.
    """
    if not password_hash.startswith(_BCRYPT_PREFIXES) or password == "":
        return False
    encoded = password.encode("utf-8")
    if len(encoded) > MAX_PASSWORD_BYTES or b"\x00" in encoded:
        return False
    # The Python library spells the fixed algorithm $2b$; the three prefixes agree for any
    # password of at most 72 bytes.
    normalized = "$2b$" + password_hash[len("$2y$") :]
    try:
        return bcrypt.checkpw(encoded, normalized.encode("ascii"))
    except ValueError:
        return False


def reuse_or_hash(
    password: str, existing_hash: str | None, *, rounds: int = DEFAULT_BCRYPT_ROUNDS
) -> str:
    """Return ``existing_hash`` unchanged if ``password`` still verifies, else a new hash.

    This is what keeps a rerun idempotent: a fresh salt would change the file on every run.
    """
    if existing_hash and verify_password(password, existing_hash):
        return existing_hash
    return hash_password(password, rounds=rounds)


# --- the hash tool ----------------------------------------------------------------------


def _read_password(args: argparse.Namespace, stdin: TextIO) -> str:
    if args.env is not None:
        if args.env not in os.environ:
            raise PasswordRejectedError(
                user=args.user,
                reason="unset",
                message=f"environment variable {args.env} is not set; export it with the password",
            )
        return os.environ[args.env]
    given = args.password
    if given == "-" or (given is None and not stdin.isatty()):
        text = stdin.read()
        # One trailing line end comes from `echo` or a file; anything else is the password.
        if text.endswith("\r\n"):
            return text[:-2]
        return text[:-1] if text.endswith("\n") else text
    if given is None:
        first = getpass.getpass("Password: ")
        if getpass.getpass("Password again: ") != first:
            raise PasswordRejectedError(
                user=args.user, reason="mismatch", message="the two passwords differ; try again"
            )
        return first
    return str(given)


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None) -> int:
    """Print a bcrypt hash of a password; return the process exit status."""
    parser = argparse.ArgumentParser(
        prog="hash-password",
        description=(
            "Print a bcrypt hash for internal_users.yml. The password comes from -p, from "
            "stdin (-p -, or when stdin is not a terminal), from --env NAME, or from a prompt. "
            "Prefer stdin or --env: a -p value is visible to other local users in the "
            "process list."
        ),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-p", "--password", help="the password, or '-' to read it from stdin")
    source.add_argument("--env", metavar="NAME", help="read the password from this variable")
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_BCRYPT_ROUNDS,
        help=f"bcrypt cost factor (default {DEFAULT_BCRYPT_ROUNDS}, as the plugin's tool)",
    )
    parser.add_argument(
        "--user", help="the internal user the password is for (adds the user-name check)"
    )
    args = parser.parse_args(argv)
    try:
        password = _read_password(args, stdin if stdin is not None else sys.stdin)
        check_password_allowed(args.user, password)
        print(hash_password(password, rounds=args.rounds))
    except (PasswordRejectedError, ValueError) as error:
        print(f"hash-password: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
