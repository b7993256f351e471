"""The toolkit's own internal users, one shape for all: the order service's writer
(clusterforge.plan.services.orders_search), the monitoring's exporter
(clusterforge.plan.monitoring.monitoring_user), the scheduled snapshots' runner
(clusterforge.plan.snapshots.snapshot_schedule) and the index lifecycle's runner
(clusterforge.plan.lifecycle.lifecycle). Each is a row of one table: its name, what it may
do (its roles, each mapped to it alone), where its password lives on the control node,
and a line for the security files. ``plan_security_files`` adds every row the inventory
calls for; no module writes the user, role and mapping by hand any more (issue 51: three
copies of one shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.errors import InventoryError
from clusterforge.pki.generated_secrets import GeneratedSecretError, read_or_generate, url_safe

# Where a toolkit user's generated password lives, beside the inventory (git-ignored).
PASSWORD_DIR_NAME = ".opensearch"  # noqa: S105 - a directory name
PASSWORD_BYTES = 32


def generated_password_path(inventory_dir: Path, username: str) -> Path:
    return inventory_dir / PASSWORD_DIR_NAME / f"{username}.password"


def generated_password_at(path: Path, *, fix: str = "") -> str:
    """The password in ``path``, generated there first (0600 in a 0700 directory, whole or
    not at all, the first of two concurrent runs wins). Never printed. ``fix`` ends the
    refusal of an unusable file (the variable that could hold the password instead)."""
    try:
        return read_or_generate(path, generate=url_safe(PASSWORD_BYTES), fix=fix)
    except GeneratedSecretError as error:
        raise InventoryError([str(error)]) from None


def generated_password(inventory_dir: Path, username: str, *, fix: str = "") -> str:
    """``username``'s password, generated once into its file beside the inventory."""
    return generated_password_at(generated_password_path(inventory_dir, username), fix=fix)


@dataclass(frozen=True, kw_only=True)
class ToolkitUser:
    """One internal user the toolkit creates for a part of itself."""

    name: str
    # The user's line in internal_users.yml, and its roles' mapping's in roles_mapping.yml.
    description: str
    mapping_description: str
    password: str = field(repr=False)
    # Its roles (name -> the role's body), each mapped to this user.
    permissions: Mapping[str, Mapping[str, Any]]
    # The generated file on the control node, or None where the inventory gives it.
    password_file: str | None = None
    # Roles it brings for others (not mapped to it), and their mappings by role name.
    other_roles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    other_mappings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SecurityAdditions:
    """What the rows add to the security files: users, roles, role mappings."""

    users: list[dict[str, Any]]
    roles: dict[str, Any]
    role_mappings: dict[str, Any]


def security_additions(rows: Iterable[ToolkitUser]) -> SecurityAdditions:
    from clusterforge.pki.security_config import RoleMapping

    users: list[dict[str, Any]] = []
    roles: dict[str, Any] = {}
    role_mappings: dict[str, Any] = {}
    for row in rows:
        users.append(
            {
                "name": row.name,
                "password": row.password,
                "backend_roles": [],
                "description": row.description,
            }
        )
        for role, body in row.permissions.items():
            roles[role] = dict(body)
            role_mappings[role] = RoleMapping(
                users=(row.name,), description=row.mapping_description
            )
        roles.update({role: dict(body) for role, body in row.other_roles.items()})
        role_mappings.update(row.other_mappings)
    return SecurityAdditions(users=users, roles=roles, role_mappings=role_mappings)
