"""The one writer of every secret the toolkit generates on the control node.

The lab's passwords and tokens (inventories/lab/.secrets), the order service's cluster
password (``<inventory>/.opensearch``) and the services' PostgreSQL passwords
(``<inventory>/.postgresql``) all come from :func:`read_or_generate`, so they all get
the same guarantees:

- the directory is 0700 and the file 0600, made so again on every read, since a secret
  another local user can read is no secret;
- the file appears whole or not at all: the value is written and synced under a
  temporary name in the same directory, then *linked* to its final name. ``os.link``
  fails when the name exists, unlike ``os.replace``, so of two concurrent writers the
  first wins and the second reads and returns the winner's value: both runs then agree
  on one password, which the server and its clients must;
- the value is never printed, logged or passed on a command line; it is returned once.

A file that exists is never rewritten: deleting it is how an operator asks for a new
secret (then the servers that hold the old one need the new one, which the next run
sets where the toolkit manages it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import string
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusterforge.errors import ClusterforgeError

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "GeneratedSecretError",
    "alphanumeric",
    "read_or_generate",
    "url_safe",
]

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
# 32 random bytes: 256 bits, more than any of these secrets needs to resist guessing.
DEFAULT_BYTES = 32
_ALPHANUMERIC = string.ascii_letters + string.digits


class GeneratedSecretError(ClusterforgeError):
    """A generated secret's file cannot be used (empty, not a file); says how to fix it."""


def url_safe(entropy_bytes: int = DEFAULT_BYTES) -> Callable[[], str]:
    """A generator of ``secrets.token_urlsafe`` values (letters, digits, '-' and '_')."""
    return lambda: secrets.token_urlsafe(entropy_bytes)


def alphanumeric(length: int = 32) -> Callable[[], str]:
    """A generator of letters and digits only: for a value that must survive any quoting,
    such as a password inside a database URL."""
    return lambda: "".join(secrets.choice(_ALPHANUMERIC) for _position in range(length))


def read_or_generate(
    path: Path,
    *,
    generate: Callable[[], str] | None = None,
    fix: str = "",
) -> str:
    """The secret stored in ``path``; generated and stored there first when missing.

    ``generate`` makes a new value (default: :func:`url_safe`); it must not contain a
    line break, since the file holds one line. ``fix`` is appended to the error of an
    unusable file, e.g. the variable that could hold the secret instead.
    """
    directory = path.parent
    directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    # mkdir's mode is masked by the umask and ignored for an existing directory.
    os.chmod(directory, DIRECTORY_MODE)
    if not os.path.lexists(path):
        value = (generate or url_safe())()
        if not value or "\n" in value or value != value.strip():
            raise GeneratedSecretError(
                f"the generator for {path} returned an empty value or one with surrounding "
                "white space or a line break; this is a bug in clusterforge, please report it"
            )
        _publish(path, value)
    return _read(path, fix=fix)


def _publish(path: Path, value: str) -> None:
    """Write ``value`` under a temporary name, then link it to ``path`` unless a
    concurrent writer got there first (then the file is left as that writer made it)."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(value + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _read(path: Path, *, fix: str) -> str:
    advice = f"; {fix}" if fix else ""
    try:
        # O_NOFOLLOW: the mode is tightened on the file itself, never through a link
        # planted in its place on whatever file the link points at.
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise GeneratedSecretError(
            f"{path} cannot be read as a generated secret ({error.strerror}); it must be a "
            f"regular file: remove it to have a new secret generated{advice}"
        ) from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise GeneratedSecretError(
            f"{path} is not a regular file; remove it to have a new secret generated{advice}"
        )
    with os.fdopen(descriptor, "r", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), FILE_MODE)
        value = handle.read().strip()
    if not value:
        raise GeneratedSecretError(
            f"{path} is empty; remove it to have a new secret generated{advice}"
        )
    return value
