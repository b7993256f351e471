"""The kinds of cluster object clusterforge manages, as the engine serves them, and the
comparison of a declaration with what the cluster answers (clusterforge.plan.cluster_config
validates the declarations; the action ``clusterforge_cluster_config`` and
``scripts/status`` compare and apply with the functions here).

Pure: no HTTP and no Ansible. The comparison is normalised as the engine answers: a
declared body matches when every value it sets is what the cluster holds (keys the engine
adds with defaults are not a difference, and key order never is); settings compare
flattened, as strings, with the ``index.`` prefix the engine adds. A key dropped from a
declaration counts as a change only where the kind names the key's default (a role's
permission lists, say).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Kind:
    """One kind of cluster object and how the REST API serves it."""

    name: str  # as reported: "role", "index template", ...
    variable: str
    list_path: str  # GET: every object of the kind
    object_path: str  # PUT and DELETE, with {name}
    security: bool = False
    # Top-level keys whose absence from a declaration means their default.
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _security_kind(
    name: str, variable: str, endpoint: str, defaults: Mapping[str, Any] | None = None
) -> Kind:
    """A kind the security plugin serves, at ``/_plugins/_security/api/<endpoint>``."""
    path = f"/_plugins/_security/api/{endpoint}"
    return Kind(name, variable, path, path + "/{name}", security=True, defaults=defaults or {})


ACTION_GROUPS = _security_kind(
    "action group",
    "opensearch_security_action_groups",
    "actiongroups",
    defaults={"allowed_actions": []},
)
TENANTS = _security_kind("tenant", "opensearch_security_tenants", "tenants")
ROLES = _security_kind(
    "role",
    "opensearch_security_roles",
    "roles",
    defaults={"cluster_permissions": [], "index_permissions": [], "tenant_permissions": []},
)
ROLE_MAPPINGS = _security_kind(
    "role mapping",
    "opensearch_security_role_mappings",
    "rolesmapping",
    defaults={"backend_roles": [], "hosts": [], "users": []},
)
COMPONENT_TEMPLATES = Kind(
    "component template",
    "opensearch_component_templates",
    "/_component_template",
    "/_component_template/{name}",
)
INDEX_TEMPLATES = Kind(
    "index template",
    "opensearch_index_templates",
    "/_index_template",
    "/_index_template/{name}",
    defaults={"composed_of": []},
)
INGEST_PIPELINES = Kind(
    "ingest pipeline",
    "opensearch_ingest_pipelines",
    "/_ingest/pipeline",
    "/_ingest/pipeline/{name}",
)
CLUSTER_SETTINGS = Kind(
    "cluster setting",
    "opensearch_cluster_settings",
    "/_cluster/settings?flat_settings=true",
    "/_cluster/settings",
)

# In the order they are applied: what a later kind names exists by then (an action group
# before the roles that use it, a role before its mapping, a component template before the
# index templates composed of it).
KINDS = (
    ACTION_GROUPS,
    TENANTS,
    ROLES,
    ROLE_MAPPINGS,
    COMPONENT_TEMPLATES,
    INDEX_TEMPLATES,
    INGEST_PIPELINES,
    CLUSTER_SETTINGS,
)
KINDS_BY_VARIABLE = {kind.variable: kind for kind in KINDS}

# The security plugin's own objects (its static configuration and demo defaults) and the
# names the toolkit writes into the security files itself: never declared, never pruned.
BUILT_IN_NAMES: Mapping[str, frozenset[str]] = {
    "role": frozenset(
        {
            "all_access",
            "kibana_user",
            "kibana_server",
            "kibana_read_only",
            "logstash",
            "manage_snapshots",
            "own_index",
            "readall",
            "readall_and_monitor",
            "security_rest_api_access",
            "security_rest_api_full_access",
            "cross_cluster_replication_leader_full_access",
            "cross_cluster_replication_follower_full_access",
            "reports_read_access",
            "reports_instances_read_access",
            "reports_full_access",
            "alerting_read_access",
            "alerting_ack_alerts",
            "alerting_full_access",
            "anomaly_read_access",
            "anomaly_full_access",
            "index_management_full_access",
            "asynchronous_search_full_access",
            "asynchronous_search_read_access",
            "point_in_time_full_access",
            "snapshot_management_full_access",
            "snapshot_management_read_access",
            "admin",
        }
    ),
    "role mapping": frozenset(
        {"all_access", "kibana_server", "kibana_user", "readall", "own_index", "admin"}
    ),
    "action group": frozenset(
        {
            "unlimited",
            "indices_all",
            "cluster_all",
            "get",
            "read",
            "write",
            "delete",
            "crud",
            "search",
            "suggest",
            "data_access",
            "create_index",
            "manage_aliases",
            "indices_monitor",
            "index",
            "manage",
            "cluster_monitor",
            "cluster_composite_ops_ro",
            "cluster_composite_ops",
            "cluster_manage_index_templates",
            "cluster_manage_pipelines",
            "manage_snapshots",
            "kibana_all_read",
            "kibana_all_write",
        }
    ),
    "tenant": frozenset({"global_tenant", "admin_tenant", "__user__", "private"}),
}


@dataclass(frozen=True)
class Change:
    """One object to make match: ``create``, ``update`` or (with prune) ``delete``."""

    kind: str
    name: str
    action: str
    before: Any
    after: Any

    def describe(self) -> str:
        return f"{self.action} {self.kind} {self.name}"


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay values."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        dotted = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat.update(flatten(item, f"{dotted}."))
        else:
            flat[dotted] = item
    return flat


def setting_string(value: Any) -> Any:
    """A setting as the engine answers it: scalars as strings, booleans lower-case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [setting_string(item) for item in value]
    if value is None:
        return None
    return str(value)


def normalised_index_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    flat = flatten(settings)
    return {
        (key if key.startswith("index.") else f"index.{key}"): setting_string(value)
        for key, value in flat.items()
    }


def _normalised(kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
    normal = json.loads(json.dumps(body))  # a plain copy: tuples to lists, keys as strings
    for meta in ("reserved", "hidden", "static"):
        normal.pop(meta, None)
    template = normal.get("template") if kind in (INDEX_TEMPLATES, COMPONENT_TEMPLATES) else None
    if isinstance(template, dict) and isinstance(template.get("settings"), dict):
        template["settings"] = normalised_index_settings(template["settings"])
    return dict(normal)


def matches(declared: Any, actual: Any) -> bool:
    """Whether every value ``declared`` sets is what ``actual`` holds."""
    if isinstance(declared, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and matches(value, actual[key]) for key, value in declared.items()
        )
    if isinstance(declared, list):
        return (
            isinstance(actual, list)
            and len(declared) == len(actual)
            and all(matches(mine, theirs) for mine, theirs in zip(declared, actual, strict=True))
        )
    if isinstance(declared, bool) or isinstance(actual, bool):
        return bool(declared == actual)
    if isinstance(declared, int | float) and isinstance(actual, int | float):
        return float(declared) == float(actual)
    return bool(declared == actual)


def _object_matches(kind: Kind, declared: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    wanted = {**kind.defaults, **_normalised(kind, declared)}
    present = _normalised(kind, actual)
    for key, default in kind.defaults.items():
        present.setdefault(key, default)
    return matches(wanted, present)


def actual_objects(kind: Kind, answer: Any) -> dict[str, dict[str, Any]]:
    """The objects of ``kind`` in the answer to ``GET kind.list_path``, by name."""
    if kind is INDEX_TEMPLATES:
        return {
            item["name"]: dict(item["index_template"])
            for item in (answer or {}).get("index_templates", [])
        }
    if kind is COMPONENT_TEMPLATES:
        return {
            item["name"]: dict(item["component_template"])
            for item in (answer or {}).get("component_templates", [])
        }
    if kind is CLUSTER_SETTINGS:
        return {"persistent": dict((answer or {}).get("persistent", {}))}
    return {
        str(name): dict(body) for name, body in (answer or {}).items() if isinstance(body, Mapping)
    }


def protected(kind: Kind, name: str, body: Mapping[str, Any]) -> bool:
    """Built-in, reserved, hidden or static: never changed, never pruned."""
    return (
        name in BUILT_IN_NAMES.get(kind.name, ())
        or bool(body.get("reserved"))
        or bool(body.get("hidden"))
        or bool(body.get("static"))
        or name.startswith(".")
    )


def changes_for(
    kind: Kind,
    declared: Mapping[str, Any],
    answer: Any,
    *,
    prune: bool = False,
    keep: frozenset[str] = frozenset(),
) -> list[Change]:
    """What makes the cluster's ``kind`` objects match ``declared``.

    ``answer`` is the cluster's answer to ``GET kind.list_path``. With ``prune``, objects
    the declarations do not name are deleted too, except protected ones and ``keep``
    (objects the toolkit writes itself, index templates a data stream uses).
    """
    actual = actual_objects(kind, answer)
    if kind is CLUSTER_SETTINGS:
        return _setting_changes(declared, actual["persistent"])
    changes: list[Change] = []
    for name, body in declared.items():
        current = actual.get(name)
        if current is None:
            changes.append(Change(kind.name, name, "create", None, _normalised(kind, body)))
        elif not _object_matches(kind, body, current):
            changes.append(
                Change(
                    kind.name, name, "update", _normalised(kind, current), _normalised(kind, body)
                )
            )
    if prune:
        for name, body in sorted(actual.items()):
            if name in declared or name in keep or protected(kind, name, body):
                continue
            changes.append(Change(kind.name, name, "delete", _normalised(kind, body), None))
    return changes


def _setting_changes(declared: Mapping[str, Any], persistent: Mapping[str, Any]) -> list[Change]:
    changes: list[Change] = []
    for key, value in flatten(declared).items():
        wanted = setting_string(value)
        current = persistent.get(key)
        if current != wanted:
            action = "create" if current is None else "update"
            changes.append(Change(CLUSTER_SETTINGS.name, key, action, current, wanted))
    return changes


def request_for(kind: Kind, change: Change, declared: Mapping[str, Any]) -> tuple[str, str, Any]:
    """The (method, path, body) that carries out ``change``."""
    if kind is CLUSTER_SETTINGS:
        return "PUT", kind.object_path, {"persistent": {change.name: change.after}}
    path = kind.object_path.format(name=change.name)
    if change.action == "delete":
        return "DELETE", path, None
    return "PUT", path, dict(declared[change.name])
