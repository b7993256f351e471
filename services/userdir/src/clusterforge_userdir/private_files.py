"""Files that hold secrets (settings, tokens) are read only when other users cannot.

Standard library only: the client (without the server extra) checks its YAML file with
it, and the toolkit's plan loads ``settings.py``, which imports it, on the control node.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class SettingsFileError(ValueError):
    """A settings or token file is missing, unreadable, or open to other users."""


def check_private_file(path: Path, *, setting: str) -> None:
    """Refuse a file that holds secrets when users other than the service could read it.

    Accepted: no permission bits for others, and either none for the group (0600, 0400)
    or, read-only for the group (0640, 0440), only when the file belongs to root and its
    group is the group this process runs as, the way the toolkit's role deploys it
    (root:<service> 0640): the service reads it, but cannot rewrite it.
    """
    try:
        status = path.stat()
    except FileNotFoundError:
        raise SettingsFileError(
            f"{setting}: {path} does not exist; create it or correct the path"
        ) from None
    except OSError as error:
        raise SettingsFileError(
            f"{setting}: cannot read {path} ({error.strerror}); correct its path or permissions"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        raise SettingsFileError(f"{setting}: {path} is not a regular file; point to the file")
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o007:
        raise SettingsFileError(
            f"{setting}: {path} is open to other users (mode {mode:04o}) and holds secrets; "
            f"run chmod 600 {path}"
        )
    group_may_read = status.st_uid == 0 and status.st_gid == os.getegid()
    if mode & 0o070 and (mode & 0o030 or not group_may_read):
        raise SettingsFileError(
            f"{setting}: {path} is open to its group (mode {mode:04o}, owner uid "
            f"{status.st_uid}, group gid {status.st_gid}); run chmod 600 {path}, or give it "
            f"to root with the service's group (gid {os.getegid()}) and mode 0640"
        )


def read_private_text(path: Path, *, setting: str) -> str:
    check_private_file(path, setting=setting)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SettingsFileError(f"{setting}: {path} is not UTF-8 text; rewrite it") from None
    except OSError as error:
        raise SettingsFileError(
            f"{setting}: cannot read {path} ({error.strerror}); correct its path or permissions"
        ) from None
