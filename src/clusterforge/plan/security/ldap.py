"""The company directory (LDAP) as the cluster's people and groups (docs/ldap.md).

The ``opensearch_ldap_*`` variables become one :class:`LdapDirectory`, checked with
every other variable before any host is contacted (:func:`build_ldap`, called by the
model). From it the plan renders the security plugin's LDAP authentication and
authorization domains into ``config.yml`` (:func:`config_domains`), beside the internal
user database, which stays: the console's service account and the toolkit's own users
live there.

The bind password never enters ``config.yml``, the plan or a log. ``config.yml`` names
it as ``${env.OPENSEARCH_LDAP_BIND_PASSWORD}``: the plugin (2.19,
``SecurityUtils.replaceEnvVars``) substitutes environment variables when a node loads
its configuration from the security index, and securityadmin uploads the placeholder
unresolved (it resolves only with ``-rev``, which the toolkit never passes). The
variable reaches the engine through a root-only (0600) ``EnvironmentFile`` of its
unit (:data:`ENV_FILE_NAME`, written by roles/opensearch with no_log). The plugin
substitutes into JSON text, so the password may not hold characters that JSON or the
environment file would read differently (:data:`BIND_PASSWORD_REFUSED`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from clusterforge.plan.security.ldap_syntax import dn_problem, filter_problem
from clusterforge.plan.security.tls_profile import TlsProfile

__all__ = [
    "BIND_PASSWORD_ENV",
    "BIND_PASSWORD_REFUSED",
    "CA_FILE_NAME",
    "ENV_FILE_NAME",
    "LdapDirectory",
    "bind_password_problem",
    "build_ldap",
    "ca_problems",
    "config_domains",
    "ldap_facts",
]

BIND_PASSWORD_ENV = "OPENSEARCH_LDAP_BIND_PASSWORD"  # noqa: S105 - a variable name
# In the state directory, which only root writes
# (clusterforge.plan.cluster.model.Cluster.state_dir).
ENV_FILE_NAME = "ldap.env"
# In the node's config directory, beside the node's own CA certificate.
CA_FILE_NAME = "ldap-ca.pem"
# ", \ break the JSON the plugin substitutes into; ', $, ` and control characters the
# environment file's quoting.
BIND_PASSWORD_REFUSED = frozenset("\"\\'$`")

# Milliseconds: a directory that does not answer fails a login within this, never hangs it.
CONNECT_TIMEOUT_MS = 5000
RESPONSE_TIMEOUT_MS = 10000

_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
_PLACEHOLDER = re.compile(r"\{[0-2]\}")


@dataclass(frozen=True, kw_only=True)
class LdapDirectory:
    """The directory's non-secret facts; the bind password stays in the inventory."""

    hosts: tuple[str, ...]
    tls: str
    ca_path: str
    bind_dn: str
    userbase: str
    usersearch: str
    username_attribute: str
    rolebase: str
    rolesearch: str
    rolename_attribute: str
    nested_groups: bool
    skip_users: tuple[str, ...]
    domain_order: str
    check: bool

    def public(self) -> dict[str, Any]:
        """What the plan carries (no password: it has none)."""
        return {
            "hosts": list(self.hosts),
            "tls": self.tls,
            "ca_path": self.ca_path,
            "ca_file": CA_FILE_NAME,
            "bind_dn": self.bind_dn,
            "userbase": self.userbase,
            "env_file": ENV_FILE_NAME,
            "env_name": BIND_PASSWORD_ENV,
            "check": self.check,
        }


def _filter_problem(name: str, value: str) -> str | None:
    syntax = filter_problem(name, value)
    if syntax:
        return syntax
    if not _PLACEHOLDER.search(value):
        return f"{name} {value!r} has no placeholder; use {{0}} where the value goes"
    return None


def bind_password_problem(password: Any) -> str | None:
    """Why the bind password cannot be used (never echoing it), or None."""
    name = "opensearch_ldap_bind_password"
    if password is None or str(password) == "":
        return f"{name} is not set; set the bind DN's password (keep it in an ansible-vault file)"
    text = str(password)
    if any(char in BIND_PASSWORD_REFUSED or ord(char) < 32 or ord(char) == 127 for char in text):
        return (
            f"{name} holds one of \" \\ ' $ ` or a control character, which the plugin's "
            "substitution into its JSON config or the unit's environment file would change; "
            "give the bind account a password without them"
        )
    return None


def build_ldap(
    value: Callable[[str], Any], *, secured: bool, error: Callable[[str], None]
) -> LdapDirectory | None:
    """The directory from the ``opensearch_ldap_*`` values (already schema-checked), or
    None when it is off. Every problem goes to ``error``, each naming its variable."""
    if not value("opensearch_ldap_enabled"):
        return None
    if not secured:
        error(
            "opensearch_ldap_enabled is true but opensearch_security_mode is open, where no "
            "one logs in; set opensearch_security_mode: tls (or basic), or "
            "opensearch_ldap_enabled: false"
        )
    hosts = tuple(str(host) for host in value("opensearch_ldap_hosts") or ())
    if not hosts:
        error(
            "opensearch_ldap_enabled is true but opensearch_ldap_hosts is empty; list the "
            "directory's servers as host:port, e.g. [ldap.example.internal:636]"
        )
    for host in hosts:
        match = _HOST_PORT.fullmatch(host)
        if match is None or not 1 <= int(match.group("port")) <= 65535:
            error(
                f"opensearch_ldap_hosts entry {host!r} is not host:port; write e.g. "
                "ldap.example.internal:636 (LDAPS) or :389 (StartTLS)"
            )
    required = {
        "opensearch_ldap_ca_path": "the directory's CA certificate (PEM) on the control node",
        "opensearch_ldap_bind_dn": "the DN the nodes bind as, e.g. cn=opensearch,ou=services,...",
        "opensearch_ldap_userbase": "where people are, e.g. ou=people,dc=example,dc=internal",
        "opensearch_ldap_rolebase": "where groups are, e.g. ou=groups,dc=example,dc=internal",
    }
    for name, what in required.items():
        given = str(value(name) or "").strip()
        if not given:
            error(f"opensearch_ldap_enabled is true but {name} is empty; set it to {what}")
        elif name != "opensearch_ldap_ca_path" and (problem := dn_problem(name, given)):
            error(problem)
    password_problem = bind_password_problem(value("opensearch_ldap_bind_password"))
    if password_problem:
        error(password_problem)
    for name in ("opensearch_ldap_usersearch", "opensearch_ldap_rolesearch"):
        problem = _filter_problem(name, str(value(name)))
        if problem:
            error(problem)
    skip_users = tuple(str(user) for user in value("opensearch_ldap_skip_users") or ())
    return LdapDirectory(
        hosts=hosts,
        tls=str(value("opensearch_ldap_tls")),
        ca_path=str(value("opensearch_ldap_ca_path") or ""),
        bind_dn=str(value("opensearch_ldap_bind_dn") or ""),
        userbase=str(value("opensearch_ldap_userbase") or ""),
        usersearch=str(value("opensearch_ldap_usersearch")),
        username_attribute=str(value("opensearch_ldap_username_attribute")),
        rolebase=str(value("opensearch_ldap_rolebase") or ""),
        rolesearch=str(value("opensearch_ldap_rolesearch")),
        rolename_attribute=str(value("opensearch_ldap_rolename_attribute")),
        nested_groups=bool(value("opensearch_ldap_nested_groups")),
        skip_users=skip_users,
        domain_order=str(value("opensearch_ldap_domain_order")),
        check=bool(value("opensearch_ldap_check")),
    )


def _connection(ldap: LdapDirectory, config_dir: str, tls: TlsProfile) -> dict[str, Any]:
    # The cluster's one profile on the nodes' connections to the directory too (JDK names,
    # as the plugin takes them); unset, the plugin chose its own list.
    profile: dict[str, Any] = (
        {"enabled_ssl_protocols": list(tls.protocols), "enabled_ssl_ciphers": list(tls.ciphers)}
        if tls.protocols and tls.ciphers
        else {}
    )
    return {
        **profile,
        "hosts": list(ldap.hosts),
        "enable_ssl": ldap.tls == "ldaps",
        "enable_start_tls": ldap.tls == "starttls",
        "enable_ssl_client_auth": False,
        "verify_hostnames": True,
        "pemtrustedcas_filepath": f"{config_dir}/{CA_FILE_NAME}",
        "bind_dn": ldap.bind_dn,
        # Resolved by each node from its environment when it loads the config; the
        # security index and every file hold this placeholder only.
        "password": "${env." + BIND_PASSWORD_ENV + "}",
        "connect_timeout": CONNECT_TIMEOUT_MS,
        "response_timeout": RESPONSE_TIMEOUT_MS,
    }


def config_domains(
    ldap: LdapDirectory,
    *,
    config_dir: str,
    internal_users: Sequence[str],
    tls: TlsProfile | None = None,
) -> dict[str, Mapping[str, Any]]:
    """config.yml's ``authc`` (internal and LDAP) and ``authz`` (LDAP groups) sections.

    The first domain in ``domain_order`` sends the Basic challenge; the other does not,
    so a login the first refuses is still tried against the second. The internal users
    (``internal_users``) are skipped by the group lookup: their roles are in the
    internal database, and a directory that is down must not slow or fail their logins.
    """
    internal_first = ldap.domain_order == "internal_first"
    connection = _connection(ldap, config_dir, tls or TlsProfile.of((), ()))
    internal = {
        "description": "HTTP Basic against the internal user database",
        "http_enabled": True,
        "order": 0 if internal_first else 1,
        "http_authenticator": {"type": "basic", "challenge": internal_first},
        "authentication_backend": {"type": "intern"},
    }
    directory = {
        "description": "HTTP Basic against the LDAP directory",
        "http_enabled": True,
        "transport_enabled": False,
        "order": 1 if internal_first else 0,
        "http_authenticator": {"type": "basic", "challenge": not internal_first},
        "authentication_backend": {
            "type": "ldap",
            "config": {
                **connection,
                "userbase": ldap.userbase,
                "usersearch": ldap.usersearch,
                "username_attribute": ldap.username_attribute,
            },
        },
    }
    skip = sorted({*internal_users, *ldap.skip_users})
    groups = {
        "description": "The directory's groups as backend roles",
        "http_enabled": True,
        "transport_enabled": False,
        "authorization_backend": {
            "type": "ldap",
            "config": {
                **connection,
                "userbase": ldap.userbase,
                "usersearch": ldap.usersearch,
                "username_attribute": ldap.username_attribute,
                "rolebase": ldap.rolebase,
                "rolesearch": ldap.rolesearch,
                "rolename": ldap.rolename_attribute,
                # Groups come from the group search only, not from an attribute of the person.
                "userrolename": "disabled",
                "resolve_nested_roles": ldap.nested_groups,
                "skip_users": skip,
            },
        },
    }
    authc = (
        {"basic_internal_auth_domain": internal, "ldap": directory}
        if internal_first
        else {"ldap": directory, "basic_internal_auth_domain": internal}
    )
    return {"authc": authc, "authz": {"ldap_roles": groups}}


def _ca_file(ldap: LdapDirectory, inventory_dir: Path) -> Path:
    path = Path(ldap.ca_path).expanduser()
    return path if path.is_absolute() else inventory_dir / path


def ca_problems(ldap: LdapDirectory | None, inventory_dir: Path) -> list[str]:
    """The directory's CA must be a readable PEM certificate on the control node."""
    if ldap is None or not ldap.ca_path:
        return []
    path = _ca_file(ldap, inventory_dir)
    try:
        x509.load_pem_x509_certificates(path.read_bytes())
    except OSError as error:
        return [
            f"opensearch_ldap_ca_path {ldap.ca_path!r} cannot be read on the control node "
            f"({error.strerror}); set it to the directory's CA certificate (PEM), absolute or "
            "relative to the inventory"
        ]
    except ValueError:
        return [
            f"opensearch_ldap_ca_path {ldap.ca_path!r} holds no PEM certificate; set it to the "
            "CA certificate that issued the directory's server certificate"
        ]
    return []


def ldap_facts(
    ldap: LdapDirectory | None, *, config_dir: str, state_dir: str, inventory_dir: Path
) -> dict[str, Any] | None:
    """The plan's ``cluster.ldap``: what roles/opensearch places on every node, and what
    the post-deploy check binds to. The CA certificate is public; no password here."""
    if ldap is None:
        return None
    try:
        ca_pem: str | None = _ca_file(ldap, inventory_dir).read_text()
    except OSError:  # a review elsewhere than the control node; a deploy refused it already
        ca_pem = None
    return {
        **ldap.public(),
        "ca_pem": ca_pem,
        # For the post-deploy bind from the control node (clusterforge.ldap_check).
        "ca_control_path": str(_ca_file(ldap, inventory_dir).resolve()),
        "ca_on_node": f"{config_dir}/{CA_FILE_NAME}",
        "env_path": f"{state_dir}/{ENV_FILE_NAME}",
    }
