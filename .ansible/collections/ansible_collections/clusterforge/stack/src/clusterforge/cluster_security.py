"""The security plugin's files for a cluster, from the inventory's users and passwords.

Passwords come in, bcrypt hashes go out. A hash is reused while the password still
verifies against it, so a rerun renders byte-identical files and reloads nothing. The
hashes of the last render are kept on the control node beside the PKI
(``internal_users.hashes.json``, 0600): they are what makes reuse possible before any
host is contacted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clusterforge.hashing import reuse_or_hash
from clusterforge.model import PREDEFINED_USER_NAMES
from clusterforge.pki import write_file_atomically
from clusterforge.security_config import (
    InternalUser,
    RoleMapping,
    predefined_users,
    render_digest_marker,
    render_security_files,
    security_config_digest,
)

HASH_STATE_FILE = "internal_users.hashes.json"


def _load_hash_state(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return (
        {str(key): str(value) for key, value in loaded.items()} if isinstance(loaded, dict) else {}
    )


def render_cluster_security(
    *,
    pki_dir: Path,
    passwords: Mapping[str, str],
    users: Sequence[Mapping[str, Any]],
    roles: Mapping[str, Mapping[str, Any]] | None = None,
    role_mappings: Mapping[str, RoleMapping] | None = None,
) -> dict[str, Any]:
    """Render the nine security files; returns files, per-type digests and the marker text.

    ``passwords`` holds the predefined users' passwords, ``users`` the inventory's other
    users (``name``, ``password``, optional ``backend_roles`` and ``description``). Both
    were validated by the model already. ``roles`` and ``role_mappings`` add the toolkit's
    own roles (the order service's, clusterforge.orders_search).
    """
    state_path = pki_dir / HASH_STATE_FILE
    previous = _load_hash_state(state_path)
    wanted = {name: str(passwords[name]) for name in PREDEFINED_USER_NAMES}
    wanted.update({str(user["name"]): str(user["password"]) for user in users})

    # Each check of a kept hash costs bcrypt's full work factor (0.3-0.4 s here) and every
    # run checks them all; bcrypt releases the interpreter lock, so they run side by side.
    def kept_or_new(name: str) -> str:
        return reuse_or_hash(wanted[name], previous.get(name))

    with ThreadPoolExecutor(max_workers=min(len(wanted), os.cpu_count() or 1)) as pool:
        hashes = dict(zip(wanted, pool.map(kept_or_new, wanted), strict=True))
    extra = []
    for user in users:
        name = str(user["name"])
        extra.append(
            InternalUser(
                name=name,
                password_hash=hashes[name],
                backend_roles=tuple(str(role) for role in user.get("backend_roles") or ()),
                description=str(user.get("description") or ""),
            )
        )
    if hashes != previous:
        pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_file_atomically(
            state_path, (json.dumps(hashes, indent=2, sort_keys=True) + "\n").encode(), mode=0o600
        )
    files = render_security_files(
        users=[*predefined_users({name: hashes[name] for name in PREDEFINED_USER_NAMES}), *extra],
        roles=roles,
        role_mappings=role_mappings,
    )
    digests = security_config_digest(files)
    return {"files": files, "digests": digests, "marker": render_digest_marker(digests)}
