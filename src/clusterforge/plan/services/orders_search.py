"""Orders in the cluster (issue 13): the order service's delivery, wired from the one inventory.

When the inventory deploys a ``tls`` cluster and hosts in the ``order_service`` group,
delivery is on unless ``order_service_search_enabled: false`` says otherwise:

- the service's ``orders.search`` settings get every node's https URL, the CA bundle
  the order_service role places on its host, and an internal user of the cluster;
- that user (``order_service_search_username``, default ``orders-writer``) is added to
  internal_users.yml with role :data:`WRITER_ROLE`, which may write ``orders*`` and
  nothing else; :data:`READER_ROLE` may read ``orders*`` only and is mapped to the backend
  role of the same name, which nobody holds until the inventory gives it to a user;
- its password is ``order_service_search_password`` (vaulted), or one generated once on
  the control node into ``<inventory>/.opensearch/<user>.password`` (0600, in a 0700
  directory) and reused on every later run;
- the index template ``orders`` (:func:`index_template`) and the index are created from
  one node by roles/order_service/tasks/orders_index.yml, from this plan.

Only ``tls`` qualifies: the service sends a password and refuses plain http. The
password never leaves :class:`OrdersSearch` except into the service's 0600 settings file
(``content``) and the bcrypt hash of internal_users.yml; its repr and :meth:`public`
leave it out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.errors import InventoryError
from clusterforge.plan.security.toolkit_users import (
    ToolkitUser,
    generated_password_at,
    generated_password_path,
)

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

ENABLED_VARIABLE = "order_service_search_enabled"
USERNAME_VARIABLE = "order_service_search_username"
PASSWORD_VARIABLE = "order_service_search_password"  # noqa: S105 - a variable name
CONFIG_DIR_VARIABLE = "order_service_config_dir"
SHARED_VARIABLES = (ENABLED_VARIABLE, USERNAME_VARIABLE, PASSWORD_VARIABLE)

DEFAULT_USERNAME = "orders-writer"
SMARTCN_PLUGIN = "analysis-smartcn"
INDEX_NAME = "orders"
TEMPLATE_NAME = "orders"
INDEX_PATTERN = "orders*"
# The order_service role copies the cluster's ca-bundle.pem (the bundle nodes and clients
# trust; both CAs during a rotation) to this name in the service's config directory.
CA_FILE_NAME = "ca-bundle.pem"
# The digest of the planned template rides in its _meta: the cluster answers a template
# normalized (settings as strings, defaults filled in), so comparing bodies would report
# a change on every run; comparing the digest does not.
TEMPLATE_DIGEST_KEY = "clusterforge_digest"

WRITER_ROLE = "clusterforge_orders_writer"
READER_ROLE = "clusterforge_orders_reader"

# What a _bulk of "index" actions with ids needs, and nothing more. The bulk request itself
# is checked as a cluster action; each shard's part (bulk[s]) and each document's index
# action against the index. indices:admin/create lets a bulk recreate a deleted orders
# index from the template (automatic index creation), without waiting for the next run.
# The template is strict, so no write ever needs a mapping update (indices:admin/mapping/*).
WRITER_ROLE_BODY: Mapping[str, Any] = {
    "description": "The order service: write orders* with _bulk, nothing else (clusterforge)",
    "cluster_permissions": ["indices:data/write/bulk"],
    "index_permissions": [
        {
            "index_patterns": [INDEX_PATTERN],
            "allowed_actions": [
                "indices:admin/create",
                "indices:data/write/bulk*",
                "indices:data/write/index",
            ],
        }
    ],
}
# Searches and gets on orders* (the plugin's "read" action group: indices:data/read*,
# field mappings, resolve index); the cluster part lets _msearch and _mget through to
# those index checks. No write, no admin, no other index.
READER_ROLE_BODY: Mapping[str, Any] = {
    "description": "Read orders* only: search, get, mget, msearch (clusterforge)",
    "cluster_permissions": ["cluster_composite_ops_ro"],
    "index_permissions": [
        {
            "index_patterns": [INDEX_PATTERN],
            "allowed_actions": ["read"],
        }
    ],
}

_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_AUTO = "auto"


def index_template() -> dict[str, Any]:
    """The body of ``PUT _index_template/orders``: the five fields of ``OrderDocument``.

    ``productName`` is analyzed with ``smartcn`` (keyword subfield for sorting and exact
    matches). ``amount`` is a ``scaled_float`` in cents: exact sums of money, in half the
    space of a double. It lives in the mapper-extras module, which every engine source
    carries (the official archive, and the Maven one with its modules assembled:
    clusterforge.plan.cluster.engine_modules). ``createTime`` is what format_create_time
    writes (``2026-01-31T08:00:00``, no zone: UTC). ``dynamic: strict`` refuses a field
    the template does not type, instead of guessing its type.
    """
    body: dict[str, Any] = {
        "index_patterns": [INDEX_PATTERN],
        "priority": 100,
        "template": {
            "mappings": {
                "dynamic": "strict",
                "properties": {
                    "orderId": {"type": "keyword"},
                    "userId": {"type": "keyword"},
                    "productName": {
                        "type": "text",
                        "analyzer": "smartcn",
                        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
                    },
                    "amount": {"type": "scaled_float", "scaling_factor": 100},
                    "createTime": {
                        "type": "date",
                        "format": "strict_date_hour_minute_second||strict_date_optional_time",
                    },
                },
            }
        },
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    body["_meta"] = {"managed_by": "clusterforge", TEMPLATE_DIGEST_KEY: digest}
    return body


@dataclass(frozen=True, kw_only=True)
class OrdersSearch:
    """Delivery, decided: where the service sends orders and as whom.

    ``password`` is the one secret; ``repr`` and :meth:`public` leave it out.
    """

    urls: tuple[str, ...]
    username: str
    password: str = field(repr=False)
    password_file: str | None  # the generated file on the control node, or None (inventory)
    ca_bundle: str  # the bundle on the control node that the role copies
    template: Mapping[str, Any]

    def settings_for(self, config_dir: str) -> dict[str, Any]:
        """One service host's ``orders.search`` (password included: the 0600 file only)."""
        return {
            "urls": list(self.urls),
            "ca-file": f"{config_dir.rstrip('/')}/{CA_FILE_NAME}",
            "username": self.username,
            "password": self.password,
            "index": INDEX_NAME,
        }

    def public(self) -> dict[str, Any]:
        """What the plan shows and the roles read: no password."""
        return {
            "enabled": True,
            "urls": list(self.urls),
            "username": self.username,
            "password_file": self.password_file,
            "ca_bundle": self.ca_bundle,
            "ca_file_name": CA_FILE_NAME,
            "index": INDEX_NAME,
            "template_name": TEMPLATE_NAME,
            "template": dict(self.template),
            "template_digest": self.template["_meta"][TEMPLATE_DIGEST_KEY],
            "writer_role": WRITER_ROLE,
            "reader_role": READER_ROLE,
        }


DISABLED: Mapping[str, Any] = {"enabled": False}


def _enabled_setting(value: Any) -> bool | None:
    """``order_service_search_enabled``: True, False, or None for auto."""
    if value is None or value == _AUTO:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InventoryError(
        [
            f"{ENABLED_VARIABLE} is {value!r}; set it to auto (on when the cluster is tls), "
            "true or false"
        ]
    )


def _shared_value(
    service_hosts: Sequence[tuple[str, Mapping[str, Any]]], name: str, problems: list[str]
) -> Any:
    """A variable that must be equal on every order_service host (one user, one password)."""
    values = [variables.get(name) for _host, variables in service_hosts]
    if any(value != values[0] for value in values[1:]):
        problems.append(
            f"{name} differs between the order_service hosts; the cluster has one user for "
            "them all, so set it once, in group_vars/order_service"
        )
    return values[0] if values else None


# The password of a check (plan_orders_search(generate=False)): the settings are checked
# with it; the plan generates or reads the real one after every host answered.
NOT_GENERATED = "not-generated-by-the-inventory-check"


def read_or_generate_password(path: Path) -> str:
    """The delivery user's password in ``path``, generated there first
    (:func:`clusterforge.plan.security.toolkit_users.generated_password_at`, as every toolkit
    user's)."""
    return generated_password_at(path, fix=f"or set {PASSWORD_VARIABLE} (vaulted)")


def plan_orders_search(
    *,
    security_mode: str | None,
    node_urls: Sequence[str],
    plugin_names: Sequence[str],
    ca_bundle: str | None,
    service_hosts: Sequence[tuple[str, Mapping[str, Any]]],
    inventory_dir: Path,
    generate: bool = True,
) -> OrdersSearch | None:
    """Decide delivery for the order_service hosts; None when it is off.

    ``generate=False`` (the inventory check, which writes nothing) neither reads nor
    generates the password file: the result's password is then :data:`NOT_GENERATED`,
    good for checking the settings, never for a host.

    ``security_mode`` is None when the inventory has no OpenSearch cluster.
    ``plugin_names`` are the plugins the cluster installs (state present).
    ``service_hosts`` are the order_service hosts' variables, role defaults included.
    Raises :class:`InventoryError` naming the variable and the fix.
    """
    if not service_hosts:
        return None
    problems: list[str] = []
    enabled = _enabled_setting(_shared_value(service_hosts, ENABLED_VARIABLE, problems))
    if problems:
        raise InventoryError(problems)
    if enabled is False:
        return None
    if security_mode != "tls":
        if enabled is None:
            return None
        where = (
            "the inventory has no opensearch group"
            if security_mode is None
            else f"opensearch_security_mode is {security_mode}"
        )
        raise InventoryError(
            [
                f"{ENABLED_VARIABLE} is true but {where}: the order service sends a "
                "password and refuses plain http, so delivery needs a tls cluster; set "
                f"opensearch_security_mode: tls, or {ENABLED_VARIABLE}: false"
            ]
        )
    if SMARTCN_PLUGIN not in plugin_names:
        problems.append(
            f"order delivery is on ({ENABLED_VARIABLE}) and the orders index analyzes "
            f"productName with smartcn, but opensearch_plugins has no {SMARTCN_PLUGIN}; add "
            f"{{name: {SMARTCN_PLUGIN}, source: build, path: engine-plugins/{SMARTCN_PLUGIN}}} "
            f"to opensearch_plugins (README: Plugins), or set {ENABLED_VARIABLE}: false"
        )
    username = str(_shared_value(service_hosts, USERNAME_VARIABLE, problems) or DEFAULT_USERNAME)
    if not _USERNAME.fullmatch(username):
        problems.append(
            f"{USERNAME_VARIABLE} is {username!r}; use letters, digits, '_', '.' and '-' "
            f"(default {DEFAULT_USERNAME})"
        )
    given = _shared_value(service_hosts, PASSWORD_VARIABLE, problems)
    if given is not None and not str(given):
        problems.append(
            f"{PASSWORD_VARIABLE} is empty; set it to a vaulted password, or leave it unset "
            "to have one generated"
        )
    if given:
        from clusterforge.pki.hashing import PasswordRejectedError, check_password_allowed

        try:
            check_password_allowed(username, str(given), setting=PASSWORD_VARIABLE)
        except PasswordRejectedError as error:
            problems.append(str(error))
    if not node_urls:
        problems.append("order delivery is on but the cluster has no node to deliver to")
    if problems:
        raise InventoryError(problems)
    password_file: Path | None = None
    if given:
        password = str(given)
    else:
        password_file = generated_password_path(inventory_dir, username)
        password = read_or_generate_password(password_file) if generate else NOT_GENERATED
    return OrdersSearch(
        urls=tuple(node_urls),
        username=username,
        password=password,
        password_file=str(password_file) if password_file else None,
        ca_bundle=str(ca_bundle or ""),
        template=index_template(),
    )


def with_generated_password(search: OrdersSearch) -> OrdersSearch:
    """``search`` planned by a check (``generate=False``) with its real password: the one
    in its generated file, generated there first when missing. A password the inventory
    gives is kept as it is."""
    if search.password != NOT_GENERATED or not search.password_file:
        return search
    return replace(search, password=read_or_generate_password(Path(search.password_file)))


def toolkit_user(search: OrdersSearch) -> ToolkitUser:
    """The order service's writer as a row of the toolkit's users; the reader role is
    mapped to a backend role, which nobody holds until the inventory gives it to a user
    (opensearch_security_users: backend_roles: [clusterforge_orders_reader])."""
    from clusterforge.pki.security_config import RoleMapping

    return ToolkitUser(
        name=search.username,
        description="The order service: writes orders* (clusterforge)",
        mapping_description="The order service's internal user",
        password=search.password,
        password_file=search.password_file,
        permissions={WRITER_ROLE: WRITER_ROLE_BODY},
        other_roles={READER_ROLE: READER_ROLE_BODY},
        other_mappings={
            READER_ROLE: RoleMapping(
                backend_roles=(READER_ROLE,),
                description="Users with backend role clusterforge_orders_reader read orders*",
            )
        },
    )


def plan_for_cluster(
    cluster: Cluster | None,
    service_hosts: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    inventory_dir: Path,
    generate: bool = True,
) -> OrdersSearch | None:
    """:func:`plan_orders_search` for a cluster model (None: the inventory has none).

    The plan (clusterforge.plan.plan) and the services' settings action
    (plugins/action/clusterforge_service_settings.py, which puts its password into the
    settings the inventory check validated) both decide through here, so a service
    deployed alone with playbooks/services.yml gets what site.yml planned.
    """
    from clusterforge.pki.ca_rotation import CA_BUNDLE_FILE
    from clusterforge.plan.cluster.cluster_pki import resolve_pki_dir

    if cluster is None:
        return plan_orders_search(
            security_mode=None,
            node_urls=(),
            plugin_names=(),
            ca_bundle=None,
            service_hosts=service_hosts,
            inventory_dir=inventory_dir,
            generate=generate,
        )
    return plan_orders_search(
        security_mode=cluster.security_mode,
        node_urls=[cluster.http_url(node) for node in cluster.nodes],
        plugin_names=[plugin.name for plugin in cluster.plugins if plugin.state != "absent"],
        ca_bundle=str(resolve_pki_dir(cluster, inventory_dir) / CA_BUNDLE_FILE),
        service_hosts=service_hosts,
        inventory_dir=inventory_dir,
        generate=generate,
    )
