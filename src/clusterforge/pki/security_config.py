"""The security plugin's configuration files, rendered from plain inputs.

The plugin ships demo files (admin:admin and other well-known passwords) in
``config/opensearch-security/``; :func:`render_security_files` replaces every one of them.
Public API:

- :class:`InternalUser`, :class:`RoleMapping`: plain inputs. Hashes are computed by the
  caller (``clusterforge.pki.hashing.reuse_or_hash``), so rendering is pure and fast.
- :func:`predefined_users` builds the spec's four users (admin, kibanaserver, logstash,
  kibana) from their hashes; :data:`PREDEFINED_USERS` holds their fixed roles and flags.
- :func:`render_security_files` returns ``{file name: YAML text}`` for the ten files in
  :data:`SECURITY_CONFIG_TYPES`. The same input gives byte-identical output: keys are
  emitted in a fixed order, inventory users and mappings sorted by name, and nothing
  time-dependent is written.
- :func:`security_config_digest` maps each securityadmin config type (``-t``) to the
  SHA-256 of its file; :func:`overall_digest` condenses them; :func:`changed_config_types`
  compares a recorded digest with a new one so only changed types are reloaded.
- :func:`merge_unmanaged_users` keeps users that exist in the cluster but not in the
  inventory (created through the REST API) when internal_users.yml is reloaded.
- :data:`REST_API_ROLES_ENABLED` is the value of
  ``plugins.security.restapi.roles_enabled`` that lets the admin user use the REST API.

Errors are :class:`SecurityConfigError`, which lists every problem at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from clusterforge.errors import ClusterforgeError
from clusterforge.pki.hashing import DEMO_PASSWORD_HASHES
from clusterforge.schema import PredefinedUser, load_schema

__all__ = [
    "CONFIG_VERSION",
    "MANAGED_ATTRIBUTE",
    "PREDEFINED_USERS",
    "REST_API_ROLES_ENABLED",
    "SECURITY_CONFIG_TYPES",
    "STATIC_ROLES",
    "InternalUser",
    "PredefinedUser",
    "RoleMapping",
    "SecurityConfigError",
    "UserMerge",
    "changed_config_types",
    "merge_unmanaged_users",
    "overall_digest",
    "parse_digest_marker",
    "predefined_users",
    "render_digest_marker",
    "render_security_files",
    "security_config_digest",
]

CONFIG_VERSION = 2

SECURITY_CONFIG_TYPES: Mapping[str, str] = {
    # file name -> the config type securityadmin takes with -t (and _meta.type says)
    "internal_users.yml": "internalusers",
    "roles.yml": "roles",
    "roles_mapping.yml": "rolesmapping",
    "action_groups.yml": "actiongroups",
    "tenants.yml": "tenants",
    "config.yml": "config",
    "nodes_dn.yml": "nodesdn",
    "allowlist.yml": "allowlist",
    # Deprecated twin of allowlist.yml that securityadmin -cd still insists on reading.
    "whitelist.yml": "whitelist",
    "audit.yml": "audit",
}

REST_API_ROLES_ENABLED: tuple[str, ...] = ("all_access", "security_rest_api_access")

STATIC_ROLES: frozenset[str] = frozenset(
    {
        # Built into the plugin (static_config/static_roles.yml in its jar, 2.19); roles.yml
        # cannot redefine them, role mappings can use them.
        "all_access",
        "kibana_server",
        "kibana_user",
        "logstash",
        "manage_snapshots",
        "own_index",
        "readall",
        "readall_and_monitor",
    }
)

MANAGED_ATTRIBUTE = "clusterforge_managed"
"""User attribute that marks a user as the inventory's, so a merge can tell it from others."""

_HEADER = (
    "# Rendered by clusterforge from the inventory. Edits here are overwritten on the next\n"
    "# run; change the inventory instead.\n"
)
_BCRYPT_HASH = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_USER_NAME = re.compile(r"^[^\s:][^:]*$")
_ROLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class SecurityConfigError(ClusterforgeError):
    """The security configuration cannot be rendered; ``problems`` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(
            f"the security configuration has {len(self.problems)} problem(s):\n{lines}"
        )


@dataclass(frozen=True, kw_only=True)
class InternalUser:
    """One user of the plugin's internal user database.

    ``password_hash`` is a bcrypt hash (``$2a$``/``$2b$``/``$2y$``), never a password.
    """

    name: str
    password_hash: str
    backend_roles: tuple[str, ...] = ()
    description: str = ""
    reserved: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)


# The spec's four users with their fixed roles and flags, declared in schema.yml (the
# keys of opensearch_security_passwords).
PREDEFINED_USERS: tuple[PredefinedUser, ...] = load_schema().predefined_users
_PREDEFINED_BY_NAME = {user.name: user for user in PREDEFINED_USERS}


@dataclass(frozen=True, kw_only=True)
class RoleMapping:
    """Who gets a role: backend roles, user names and host patterns."""

    backend_roles: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    description: str = ""
    reserved: bool = False


# Each backend role of the predefined users mapped to a role that lets it do its job; the
# admin backend role also gets the REST API role named in REST_API_ROLES_ENABLED.
_BASE_ROLE_MAPPINGS: Mapping[str, RoleMapping] = {
    "all_access": RoleMapping(
        backend_roles=("admin",), description="Backend role admin has every permission"
    ),
    "security_rest_api_access": RoleMapping(
        backend_roles=("admin",), description="Backend role admin may use the security REST API"
    ),
    "kibana_server": RoleMapping(
        users=("kibanaserver",),
        reserved=True,
        description="The console's service account",
    ),
    "logstash": RoleMapping(
        backend_roles=("logstash",), description="Backend role logstash writes logstash-* indices"
    ),
    "kibana_user": RoleMapping(
        backend_roles=("kibanauser",), description="Backend role kibanauser uses the console"
    ),
    "readall": RoleMapping(
        backend_roles=("readall",), description="Backend role readall reads every index"
    ),
}

_BASE_ROLES: Mapping[str, Mapping[str, Any]] = {
    # Not static in the plugin: it exists to be named in restapi.roles_enabled, so it needs
    # no permissions of its own.
    "security_rest_api_access": {"reserved": True, "description": "Use the security REST API"},
}


# The roles and mappings the security files hold whatever the inventory says: the cluster
# objects the inventory declares (clusterforge.plan.cluster_config) may not name them.
TOOLKIT_ROLE_NAMES = frozenset(_BASE_ROLES)
TOOLKIT_ROLE_MAPPING_NAMES = frozenset(_BASE_ROLE_MAPPINGS)


def predefined_users(
    hashes: Mapping[str, str], *, descriptions: Mapping[str, str] | None = None
) -> list[InternalUser]:
    """Return the spec's predefined users with their fixed roles, given a hash for each.

    ``hashes`` maps ``admin``, ``kibanaserver``, ``logstash`` and ``kibana`` to bcrypt hashes.
    """
    missing = [user.name for user in PREDEFINED_USERS if user.name not in hashes]
    if missing:
        raise SecurityConfigError(
            [f"no password hash for predefined user {name!r}; set its password" for name in missing]
        )
    overrides = descriptions or {}
    return [
        InternalUser(
            name=user.name,
            password_hash=hashes[user.name],
            backend_roles=user.backend_roles,
            reserved=user.reserved,
            description=overrides.get(user.name, user.description),
        )
        for user in PREDEFINED_USERS
    ]


@dataclass(frozen=True)
class AuthFailureLimit:
    """How many failed logins one client address may make before it is refused."""

    allowed_tries: int
    time_window_seconds: int
    block_expiry_seconds: int


# Audit events other than failed logins (the plugin's AuditCategory names; an unknown
# one makes securityadmin refuse audit.yml): each is a log line per request, and a busy
# cluster would fill its log with them (GRANTED_PRIVILEGES alone is one per request).
AUDIT_CATEGORIES_LEFT_OUT = (
    "AUTHENTICATED",
    "GRANTED_PRIVILEGES",
    "MISSING_PRIVILEGES",
    "BAD_HEADERS",
    "SSL_EXCEPTION",
    "OPENDISTRO_SECURITY_INDEX_ATTEMPT",
    # Every admin read of an index (GET /<index>) too: as noisy as GRANTED_PRIVILEGES.
    "INDEX_EVENT",
)


def render_security_files(
    *,
    users: Sequence[InternalUser],
    roles: Mapping[str, Mapping[str, Any]] | None = None,
    role_mappings: Mapping[str, RoleMapping] | None = None,
    kibana_server_username: str = "kibanaserver",
    multitenancy_enabled: bool = True,
    audit_failed_logins: bool = False,
    auth_failure_limit: AuthFailureLimit | None = None,
    auth_domains: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """Render the ten security config files; raise :class:`SecurityConfigError` if invalid.

    ``users`` must hold the four predefined users (see :func:`predefined_users`) with the
    spec's roles and flags, plus any inventory users. ``roles`` adds custom roles (plugin
    ``roles.yml`` bodies); ``role_mappings`` adds mappings, merged with the built-in ones.
    ``audit_failed_logins`` turns on the audit log for FAILED_LOGIN events only (the
    sink is opensearch.yml's plugins.security.audit.type, clusterforge.plan.cluster.render);
    ``auth_failure_limit`` adds the per-address rate limit of failed logins.
    ``auth_domains`` (``{"authc": ..., "authz": ...}``,
    clusterforge.plan.security.ldap.config_domains) replaces the internal-only authentication domain
    with the domains it holds.
    """
    problems = _user_problems(users)
    extra_roles = dict(roles or {})
    problems += _role_problems(extra_roles)
    extra_mappings = dict(role_mappings or {})
    problems += [
        f"role mapping name {name!r} is not a valid role name; use letters, digits, '_', '.', '-'"
        for name in extra_mappings
        if not _ROLE_NAME.fullmatch(name)
    ]
    if problems:
        raise SecurityConfigError(problems)

    documents: dict[str, dict[str, Any]] = {
        "internal_users.yml": _internal_users_document(users),
        "roles.yml": _roles_document(extra_roles),
        "roles_mapping.yml": _roles_mapping_document(extra_mappings),
        "action_groups.yml": {"_meta": _meta("actiongroups")},
        "tenants.yml": {"_meta": _meta("tenants")},
        "config.yml": _config_document(
            kibana_server_username=kibana_server_username,
            multitenancy_enabled=multitenancy_enabled,
            auth_failure_limit=auth_failure_limit,
            auth_domains=auth_domains,
        ),
        "nodes_dn.yml": {"_meta": _meta("nodesdn")},
        "allowlist.yml": {
            "_meta": _meta("allowlist"),
            "config": {"enabled": False, "requests": {}},
        },
        "whitelist.yml": {
            "_meta": _meta("whitelist"),
            "config": {"enabled": False, "requests": {}},
        },
        "audit.yml": _audit_document(audit_failed_logins),
    }
    return {name: _dump(document) for name, document in documents.items()}


# --- digests ------------------------------------------------------------------------------


def security_config_digest(files: Mapping[str, str]) -> dict[str, str]:
    """Map each securityadmin config type to the SHA-256 (hex) of its rendered file."""
    unknown = sorted(set(files) - set(SECURITY_CONFIG_TYPES))
    if unknown:
        raise SecurityConfigError([f"{name} is not a security config file" for name in unknown])
    return {
        SECURITY_CONFIG_TYPES[name]: hashlib.sha256(files[name].encode("utf-8")).hexdigest()
        for name in SECURITY_CONFIG_TYPES
        if name in files
    }


def overall_digest(digests: Mapping[str, str]) -> str:
    """Condense per-type digests into one SHA-256, independent of mapping order."""
    canonical = json.dumps(dict(sorted(digests.items())), separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def changed_config_types(
    recorded: Mapping[str, str] | None, current: Mapping[str, str]
) -> list[str]:
    """Return the config types whose digest differs (all of them if nothing was recorded).

    The order is that of :data:`SECURITY_CONFIG_TYPES`, so reload commands are stable.
    """
    previous = recorded or {}
    return [
        config_type
        for config_type in SECURITY_CONFIG_TYPES.values()
        if config_type in current and previous.get(config_type) != current[config_type]
    ]


def render_digest_marker(digests: Mapping[str, str]) -> str:
    """Return the text of the marker file recording what was last loaded."""
    document = {"overall": overall_digest(digests), "types": dict(sorted(digests.items()))}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def parse_digest_marker(text: str | None) -> dict[str, str] | None:
    """Return the per-type digests of a marker, or ``None`` when absent or unreadable."""
    if not text:
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return None
    types = document.get("types") if isinstance(document, dict) else None
    if not isinstance(types, dict):
        return None
    return {str(key): str(value) for key, value in types.items()}


# --- keeping users created through the REST API -------------------------------------------


@dataclass(frozen=True, kw_only=True)
class UserMerge:
    """The internal_users.yml to load, and which cluster-only users it keeps."""

    text: str
    kept_users: tuple[str, ...]
    dropped_users: tuple[str, ...]


def merge_unmanaged_users(rendered: str, current: str) -> UserMerge:
    """Add to ``rendered`` the users of ``current`` that the inventory does not manage.

    ``current`` is internal_users.yml as the cluster holds it (from
    ``securityadmin -backup``; the REST API's GET omits hashes, so it cannot serve). Users
    carrying the ``clusterforge_managed`` attribute came from the inventory: when the
    inventory no longer has them they are dropped, not kept. Kept users are appended in
    name order, as the cluster has them.
    """
    rendered_document = _load_users_document(rendered, what="rendered internal_users.yml")
    current_document = _load_users_document(current, what="the cluster's internal_users.yml")
    kept: list[str] = []
    dropped: list[str] = []
    for name in sorted(name for name in current_document if name != "_meta"):
        if name in rendered_document:
            continue
        body = current_document[name]
        attributes = body.get("attributes") if isinstance(body, dict) else None
        managed = isinstance(attributes, dict) and attributes.get(MANAGED_ATTRIBUTE) == "true"
        if managed or name in _PREDEFINED_BY_NAME:
            dropped.append(name)
            continue
        rendered_document[name] = body
        kept.append(name)
    text = _dump(rendered_document) if kept else rendered
    return UserMerge(text=text, kept_users=tuple(kept), dropped_users=tuple(dropped))


def _load_users_document(text: str, *, what: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SecurityConfigError([f"{what} is not valid YAML: {error}"]) from error
    if not isinstance(document, dict):
        raise SecurityConfigError([f"{what} is not a mapping of users"])
    meta = document.get("_meta")
    if not isinstance(meta, dict) or meta.get("type") != "internalusers":
        raise SecurityConfigError([f"{what} has no _meta of type internalusers"])
    return document


# --- validation ---------------------------------------------------------------------------


def _user_problems(users: Sequence[InternalUser]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for user in users:
        if user.name in seen:
            problems.append(f"internal user {user.name!r} is defined twice; keep one definition")
        seen.add(user.name)
        if not _USER_NAME.fullmatch(user.name) or user.name != user.name.strip():
            problems.append(
                f"internal user name {user.name!r} is empty, has a ':' or surrounding spaces; "
                "HTTP Basic cannot carry it, rename the user"
            )
        if user.name == "_meta":
            problems.append("'_meta' is reserved by the file format; rename that user")
        if not _BCRYPT_HASH.fullmatch(user.password_hash):
            problems.append(
                f"internal user {user.name!r} has no valid bcrypt hash; compute it with "
                "clusterforge.pki.hashing.reuse_or_hash or scripts/hash-password"
            )
        elif user.password_hash in DEMO_PASSWORD_HASHES:
            problems.append(
                f"internal user {user.name!r} has a hash from the plugin's demo "
                "internal_users.yml (a well-known password); set a unique password"
            )
        problems += _predefined_user_problems(user)
        problems += [
            f"internal user {user.name!r}: backend role {role!r} is empty or has spaces"
            for role in user.backend_roles
            if not role or role != role.strip()
        ]
    problems += [
        f"predefined user {name!r} is missing; add it (see clusterforge.pki.security_config."
        "predefined_users)"
        for name in _PREDEFINED_BY_NAME
        if name not in seen
    ]
    return problems


def _predefined_user_problems(user: InternalUser) -> list[str]:
    expected = _PREDEFINED_BY_NAME.get(user.name)
    if expected is None:
        return []
    problems: list[str] = []
    if tuple(user.backend_roles) != expected.backend_roles:
        problems.append(
            f"predefined user {user.name!r} must have backend roles "
            f"{list(expected.backend_roles)}, not {list(user.backend_roles)}; give other "
            "roles to an inventory user instead"
        )
    if user.reserved != expected.reserved:
        problems.append(
            f"predefined user {user.name!r} must have reserved={expected.reserved}, "
            f"not {user.reserved}"
        )
    return problems


def _role_problems(roles: Mapping[str, Mapping[str, Any]]) -> list[str]:
    problems: list[str] = []
    for name, body in roles.items():
        if name in STATIC_ROLES or name in _BASE_ROLES:
            problems.append(
                f"role {name!r} is built in and cannot be redefined; choose another name "
                "and map it instead"
            )
        elif not _ROLE_NAME.fullmatch(name):
            problems.append(f"role name {name!r} is not valid; use letters, digits, '_', '.', '-'")
        if not isinstance(body, Mapping):
            problems.append(f"role {name!r} must be a mapping of role settings")
    return problems


# --- documents ----------------------------------------------------------------------------


def _meta(config_type: str) -> dict[str, Any]:
    return {"type": config_type, "config_version": CONFIG_VERSION}


def _internal_users_document(users: Sequence[InternalUser]) -> dict[str, Any]:
    predefined_order = {name: index for index, name in enumerate(_PREDEFINED_BY_NAME)}
    ordered = sorted(
        users,
        key=lambda user: (predefined_order.get(user.name, len(predefined_order)), user.name),
    )
    document: dict[str, Any] = {"_meta": _meta("internalusers")}
    for user in ordered:
        attributes = {key: str(user.attributes[key]) for key in sorted(user.attributes)}
        attributes[MANAGED_ATTRIBUTE] = "true"
        document[user.name] = {
            "hash": user.password_hash,
            "reserved": user.reserved,
            "backend_roles": list(user.backend_roles),
            "attributes": attributes,
            "description": user.description,
        }
    return document


def _roles_document(extra_roles: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {"_meta": _meta("roles")}
    for name, body in _BASE_ROLES.items():
        document[name] = dict(body)
    for name in sorted(extra_roles):
        document[name] = _plain(extra_roles[name])
    return document


def _roles_mapping_document(extra: Mapping[str, RoleMapping]) -> dict[str, Any]:
    merged: dict[str, RoleMapping] = dict(_BASE_ROLE_MAPPINGS)
    for name in sorted(extra):
        base = merged.get(name)
        mapping = extra[name]
        if base is None:
            merged[name] = mapping
            continue
        merged[name] = RoleMapping(
            backend_roles=_union(base.backend_roles, mapping.backend_roles),
            users=_union(base.users, mapping.users),
            hosts=_union(base.hosts, mapping.hosts),
            description=base.description,
            reserved=base.reserved or mapping.reserved,
        )
    document: dict[str, Any] = {"_meta": _meta("rolesmapping")}
    for name, mapping in merged.items():
        body: dict[str, Any] = {"reserved": mapping.reserved}
        for key, values in (
            ("backend_roles", mapping.backend_roles),
            ("users", mapping.users),
            ("hosts", mapping.hosts),
        ):
            if values:
                body[key] = list(values)
        if mapping.description:
            body["description"] = mapping.description
        document[name] = body
    return document


def _config_document(
    *,
    kibana_server_username: str,
    multitenancy_enabled: bool,
    auth_failure_limit: AuthFailureLimit | None,
    auth_domains: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    dynamic: dict[str, Any] = {
        "kibana": {
            "multitenancy_enabled": multitenancy_enabled,
            "private_tenant_enabled": True,
            "server_username": kibana_server_username,
            "index": ".kibana",
        },
        "http": {"anonymous_auth_enabled": False, "xff": {"enabled": False}},
        "authc": {
            "basic_internal_auth_domain": {
                "description": "HTTP Basic against the internal user database",
                "http_enabled": True,
                "order": 0,
                "http_authenticator": {"type": "basic", "challenge": True},
                "authentication_backend": {"type": "intern"},
            }
        },
    }
    if auth_domains is not None:
        dynamic["authc"] = _plain_ordered(auth_domains["authc"])
        dynamic["authz"] = _plain_ordered(auth_domains.get("authz") or {})
    if auth_failure_limit is not None:
        dynamic["auth_failure_listeners"] = {
            # By client address, not by user name: a limit per user name would let anyone
            # lock out admin, the user the toolkit itself signs in as, by guessing.
            "ip_rate_limiting": {
                "type": "ip",
                "allowed_tries": auth_failure_limit.allowed_tries,
                "time_window_seconds": auth_failure_limit.time_window_seconds,
                "block_expiry_seconds": auth_failure_limit.block_expiry_seconds,
                "max_blocked_clients": 100000,
                "max_tracked_clients": 100000,
            }
        }
    return {"_meta": _meta("config"), "config": {"dynamic": dynamic}}


def _audit_document(failed_logins: bool) -> dict[str, Any]:
    if not failed_logins:
        return {
            "_meta": _meta("audit"),
            "config": {
                "enabled": False,
                "audit": {"enable_rest": False, "enable_transport": False},
                "compliance": {"enabled": False},
            },
        }
    return {
        "_meta": _meta("audit"),
        "config": {
            "enabled": True,
            "audit": {
                "enable_rest": True,
                "disabled_rest_categories": list(AUDIT_CATEGORIES_LEFT_OUT),
                "enable_transport": True,
                "disabled_transport_categories": list(AUDIT_CATEGORIES_LEFT_OUT),
                "resolve_bulk_requests": False,
                "log_request_body": False,
                "resolve_indices": False,
                # The Authorization header of a failed login holds the password tried.
                "exclude_sensitive_headers": True,
            },
            "compliance": {"enabled": False},
        },
    }


def _union(first: Iterable[str], second: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(first) | set(second)))


def _plain(value: Any) -> Any:
    """Copy nested mappings/sequences into plain dicts and lists, keys in sorted order."""
    if isinstance(value, Mapping):
        return {str(key): _plain(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _plain_ordered(value: Any) -> Any:
    """Like :func:`_plain` but keeping the key order given (the domains' order reads as
    the login's order)."""
    if isinstance(value, Mapping):
        return {str(key): _plain_ordered(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_ordered(item) for item in value]
    return value


def _dump(document: Mapping[str, Any]) -> str:
    body = yaml.safe_dump(
        dict(document),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
        explicit_start=True,
    )
    return _HEADER + body
