"""The security plugin's files for a cluster, from the inventory's users and passwords.

Passwords come in, bcrypt hashes go out. A hash is reused while the password still
verifies against it, so a rerun renders byte-identical files and reloads nothing. The
hashes of the last render are kept on the control node beside the PKI
(``internal_users.hashes.json``, 0600): they are what makes reuse possible before any
host is contacted.

Checking a kept hash costs bcrypt's full work factor, for every user on every run (0.85
s of a lab rerun). So the same file also records, per user, an HMAC of the user's name,
hash and password under a key derived from the CA's private key
(:func:`clusterforge.plan.cluster.cluster_pki.hash_check_key`). When the record still matches, the
hash is kept without bcrypt. Only whoever can decrypt the CA key can compute that key,
and they can already issue an admin certificate; without it the record tells nothing
about a password. A new CA, a changed password or an edited hash misses the record and
falls back to bcrypt.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.certificates import write_file_atomically
from clusterforge.pki.hashing import reuse_or_hash
from clusterforge.pki.security_config import (
    AuthFailureLimit,
    InternalUser,
    RoleMapping,
    predefined_users,
    render_digest_marker,
    render_security_files,
    security_config_digest,
)
from clusterforge.plan.cluster.cluster_pki import ClusterPki
from clusterforge.plan.cluster.model import Cluster, plain_data
from clusterforge.plan.cluster.model_checks import PREDEFINED_USER_NAMES
from clusterforge.plan.monitoring.monitoring import MonitoringUser
from clusterforge.plan.monitoring.monitoring_user import toolkit_user as monitoring_toolkit_user
from clusterforge.plan.security.ldap import config_domains
from clusterforge.plan.security.toolkit_users import ToolkitUser
from clusterforge.plan.security.toolkit_users import (
    security_additions as toolkit_security_additions,
)
from clusterforge.plan.services.orders_search import USERNAME_VARIABLE, OrdersSearch
from clusterforge.plan.services.orders_search import toolkit_user as orders_toolkit_user
from clusterforge.plan.snapshots.snapshot_schedule import toolkit_user as snapshot_toolkit_user

HASH_STATE_FILE = "internal_users.hashes.json"


def _strings(value: Any) -> dict[str, str]:
    return {str(key): str(item) for key, item in value.items()} if isinstance(value, dict) else {}


def _load_hash_state(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The kept hashes and their check records; a file from before the records held the
    hashes alone (``{user: hash}``)."""
    try:
        loaded = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}, {}
    if isinstance(loaded, dict) and isinstance(loaded.get("hashes"), dict):
        return _strings(loaded["hashes"]), _strings(loaded.get("checks"))
    return _strings(loaded), {}


def _check_record(key: bytes, name: str, password_hash: str, password: str) -> str:
    message = json.dumps([name, password_hash, password]).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def render_cluster_security(
    *,
    pki_dir: Path,
    passwords: Mapping[str, str],
    users: Sequence[Mapping[str, Any]],
    roles: Mapping[str, Mapping[str, Any]] | None = None,
    role_mappings: Mapping[str, RoleMapping] | None = None,
    check_key: bytes = b"",
    audit_failed_logins: bool = False,
    auth_failure_limit: AuthFailureLimit | None = None,
    auth_domains: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Render the nine security files; returns files, per-type digests and the marker text.

    ``passwords`` holds the predefined users' passwords, ``users`` the inventory's other
    users (``name``, ``password``, optional ``backend_roles`` and ``description``). Both
    were validated by the model already. ``roles`` and ``role_mappings`` add the toolkit's
    own roles (the order service's, clusterforge.plan.services.orders_search). ``check_key`` (the
    cluster PKI's ``hash_check_key``) keys the records that spare bcrypt on a rerun;
    without it every kept hash is checked with bcrypt and no record is written.
    ``audit_failed_logins``, ``auth_failure_limit`` and ``auth_domains`` (the LDAP
    domains, clusterforge.plan.security.ldap) go to render_security_files.
    """
    state_path = pki_dir / HASH_STATE_FILE
    previous, previous_checks = _load_hash_state(state_path)
    wanted = {name: str(passwords[name]) for name in PREDEFINED_USER_NAMES}
    wanted.update({str(user["name"]): str(user["password"]) for user in users})

    def recorded_match(name: str) -> bool:
        kept = previous.get(name)
        return bool(check_key and kept) and hmac.compare_digest(
            previous_checks.get(name, ""), _check_record(check_key, name, str(kept), wanted[name])
        )

    # Each bcrypt check of a kept hash costs its full work factor (0.3-0.4 s here); bcrypt
    # releases the interpreter lock, so the ones the records do not spare run side by side.
    def kept_or_new(name: str) -> str:
        if recorded_match(name):
            return previous[name]
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
    checks = (
        {name: _check_record(check_key, name, hashes[name], wanted[name]) for name in hashes}
        if check_key
        else {}
    )
    if (hashes, checks) != (previous, previous_checks):
        pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        state = {"hashes": hashes, "checks": checks}
        write_file_atomically(
            state_path, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode(), mode=0o600
        )
    files = render_security_files(
        users=[*predefined_users({name: hashes[name] for name in PREDEFINED_USER_NAMES}), *extra],
        roles=roles,
        role_mappings=role_mappings,
        audit_failed_logins=audit_failed_logins,
        auth_failure_limit=auth_failure_limit,
        auth_domains=auth_domains,
    )
    digests = security_config_digest(files)
    return {"files": files, "digests": digests, "marker": render_digest_marker(digests)}


# The security plugin's config directory on a node, relative to the config directory.
SECURITY_CONFIG_SUBDIR = "opensearch-security"


SECURITY_PASSWORDS_VARIABLE = "opensearch_security_passwords"


SECURITY_USERS_VARIABLE = "opensearch_security_users"


_WITHHELD = "<withheld: a bcrypt hash; the hosts get the real one>"


# What ``security`` holds when the caller asked for no security files: a role that reads
# ``security.files`` from such a plan fails on the missing key instead of placing nothing.
SECURITY_FILES_OMITTED = {
    "omitted": "planned with security_files false: this playbook places no security files"
}


def plan_security_files(
    first_host_vars: Mapping[str, Any],
    pki: ClusterPki | None,
    orders_search: OrdersSearch | None = None,
    cluster: Cluster | None = None,
    monitoring_user: MonitoringUser | None = None,
    snapshot_password: str | None = None,
    extra_rows: Sequence[ToolkitUser] = (),
) -> dict[str, Any] | None:
    if pki is None:
        return None
    users = list(plain_data(first_host_vars.get(SECURITY_USERS_VARIABLE) or []))
    # The toolkit's own users, each a row of one table (clusterforge.plan.security.toolkit_users).
    rows: list[ToolkitUser] = []
    if orders_search is not None:
        check_orders_user(users, orders_search)
        rows.append(orders_toolkit_user(orders_search))
    if monitoring_user is not None:  # docs/monitoring.md
        rows.append(monitoring_toolkit_user(monitoring_user))
    if snapshot_password is not None:  # the scheduled snapshots' runner
        rows.append(snapshot_toolkit_user(snapshot_password))
    rows.extend(extra_rows)  # the lifecycle runner's (clusterforge.plan.lifecycle.lifecycle)
    additions = toolkit_security_additions(rows)
    users += additions.users
    roles: dict[str, Any] = additions.roles
    role_mappings: dict[str, Any] = additions.role_mappings
    auth_domains = None
    if cluster is not None and cluster.ldap is not None:
        # The directory's domains (docs/ldap.md): every internal user, the monitoring's and
        # the order service's included, skips the directory's group lookup.
        auth_domains = config_domains(
            cluster.ldap,
            config_dir=cluster.config_dir,
            internal_users=[*PREDEFINED_USER_NAMES, *(str(user["name"]) for user in users)],
            tls=cluster.tls_profile,
        )
    rendered = render_cluster_security(
        pki_dir=Path(pki.pki_dir),
        passwords=plain_data(first_host_vars.get(SECURITY_PASSWORDS_VARIABLE) or {}),
        users=users,
        roles=roles,
        role_mappings=role_mappings,
        check_key=pki.hash_check_key,
        audit_failed_logins=cluster.audit_failed_logins if cluster else False,
        auth_failure_limit=cluster.auth_failure_limit if cluster else None,
        auth_domains=auth_domains,
    )
    return {**rendered, "api_users": api_users(rendered["files"]["internal_users.yml"])}


# What basic mode's REST API call sets of a user (PUT .../internalusers/<name>).
API_USER_FIELDS = ("hash", "backend_roles", "attributes", "description")


def api_users(internal_users: str) -> dict[str, dict[str, Any]]:
    """The users basic mode puts through the REST API (roles/opensearch_security,
    tasks/basic.yml): every user of ``internal_users`` but the reserved ones, which the
    API cannot change, each with the fields the call sets. Basic mode has no HTTP TLS, so
    securityadmin cannot load the file there after the first start."""
    document = yaml.safe_load(internal_users) or {}
    return {
        str(name): {field: entry.get(field) for field in API_USER_FIELDS}
        for name, entry in document.items()
        if name != "_meta" and isinstance(entry, Mapping) and not entry.get("reserved")
    }


def check_orders_user(users: Sequence[Any], orders_search: OrdersSearch) -> None:
    """The order service's user must not take the name of another internal user."""
    taken = {str(user.get("name")) for user in users if isinstance(user, Mapping)}
    if orders_search.username in taken | set(PREDEFINED_USER_NAMES):
        raise InventoryError(
            [
                f"{orders_search.username!r} is the order service's user "
                f"({USERNAME_VARIABLE}) and also a user of opensearch_security_users or a "
                f"predefined user; set {USERNAME_VARIABLE} to another name"
            ]
        )


def withhold_hashes(internal_users: str) -> str:
    document = yaml.safe_load(internal_users) or {}
    for name, entry in document.items():
        if name != "_meta" and isinstance(entry, dict) and "hash" in entry:
            entry["hash"] = _WITHHELD
    return str(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))
