"""Files that hold secrets (settings, tokens) are read only when other users cannot.

One rule for both services: a regular file; no permission for others; for the group,
nothing (0600, 0400), or read alone (0640, 0440) when the file belongs to root and its
group is the one this process runs as, the way the toolkit's roles deploy it
(root:<service> 0640): the service reads it but cannot rewrite it. Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class PrivateFileError(ValueError):
    """A settings or token file is missing, unreadable, not a file, or open to other users."""


def check_private_file(path: Path, *, setting: str) -> None:
    """Raise :class:`PrivateFileError` naming ``setting``, the file and the fix."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise PrivateFileError(
            f"cannot read {setting} {path}: it does not exist; create it or correct the path"
        ) from None
    except OSError as error:
        raise PrivateFileError(
            f"cannot read {setting} {path} ({error.strerror}); correct its path or permissions"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        raise PrivateFileError(f"{setting} {path} is not a regular file; point to the file")
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o007:
        raise PrivateFileError(
            f"{setting} {path} is open to other users (mode {mode:04o}) and holds secrets; "
            f"run chmod 600 {path}"
        )
    group_bits = mode & 0o070
    root_with_our_group = status.st_uid == 0 and status.st_gid == os.getegid()
    if group_bits and (group_bits != 0o040 or not root_with_our_group):
        raise PrivateFileError(
            f"{setting} {path} is open to its group (mode {mode:04o}, owner uid "
            f"{status.st_uid}, group gid {status.st_gid}); run chmod 600 {path}, or give it "
            f"to root with the service's group (gid {os.getegid()}) and mode 0640"
        )


def read_private_text(path: Path, *, setting: str) -> str:
    """The file's UTF-8 text, once :func:`check_private_file` accepts it."""
    check_private_file(path, setting=setting)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PrivateFileError(f"{setting} {path} is not UTF-8 text; rewrite it") from None
    except OSError as error:
        raise PrivateFileError(
            f"cannot read {setting} {path} ({error.strerror}); correct its path or permissions"
        ) from None
