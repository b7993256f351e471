"""The cluster's own configuration as code: objects declared in the inventory, compared
with what the cluster returns, and the changes that make the cluster match.

Kinds, each a mapping from name to the body the REST API takes:

- security: ``opensearch_security_action_groups``, ``opensearch_security_tenants``,
  ``opensearch_security_roles``, ``opensearch_security_role_mappings``;
- ``opensearch_component_templates`` and (composable) ``opensearch_index_templates``;
- ``opensearch_ingest_pipelines``;
- ``opensearch_cluster_settings``: persistent, dynamic settings, one mapping.

Pure: no HTTP and no Ansible. :func:`plan_cluster_config` validates the declarations (every
problem at once, naming the variable and the key); :func:`changes_for` compares one kind's
declarations with the cluster's answer. The action plugin
``clusterforge_cluster_config`` reads and writes, and ``scripts/status`` reports the
same comparison as drift.

The kinds and the comparison, normalised as the engine answers, live in
clusterforge.plan.cluster.cluster_objects; their names are importable from here too.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterforge.errors import InventoryError
from clusterforge.pki.security_config import TOOLKIT_ROLE_MAPPING_NAMES, TOOLKIT_ROLE_NAMES
from clusterforge.plan.cluster.cluster_objects import (
    ACTION_GROUPS,
    BUILT_IN_NAMES,
    CLUSTER_SETTINGS,
    COMPONENT_TEMPLATES,
    INDEX_TEMPLATES,
    INGEST_PIPELINES,
    KINDS,
    KINDS_BY_VARIABLE,
    ROLE_MAPPINGS,
    ROLES,
    TENANTS,
    Change,
    Kind,
    actual_objects,
    changes_for,
    flatten,
    matches,
    normalised_index_settings,
    protected,
    request_for,
    setting_string,
)
from clusterforge.plan.lifecycle.lifecycle import LIFECYCLE_ROLE
from clusterforge.plan.monitoring.monitoring import MONITOR_ROLE
from clusterforge.plan.services.orders_search import READER_ROLE, WRITER_ROLE
from clusterforge.plan.snapshots.snapshot_schedule import SNAPSHOT_ROLE
from clusterforge.schema import as_bool

# The kinds and the comparison (clusterforge.plan.cluster.cluster_objects), importable from here
# as before the module was split.
__all__ = [
    "ACTION_GROUPS",
    "BUILT_IN_NAMES",
    "CLUSTER_SETTINGS",
    "COMPONENT_TEMPLATES",
    "EXTRA_SETTINGS_VARIABLE",
    "INDEX_TEMPLATES",
    "INGEST_PIPELINES",
    "KINDS",
    "KINDS_BY_VARIABLE",
    "PRUNE_VARIABLE",
    "ROLES",
    "ROLE_MAPPINGS",
    "TENANTS",
    "Change",
    "ClusterConfig",
    "Kind",
    "actual_objects",
    "changes_for",
    "flatten",
    "matches",
    "normalised_index_settings",
    "patterns_overlap",
    "plan_cluster_config",
    "protected",
    "request_for",
    "setting_string",
    "toolkit_security_names",
]

PRUNE_VARIABLE = "opensearch_config_prune"
EXTRA_SETTINGS_VARIABLE = "opensearch_extra_settings"

BUILT_IN_ACTION_GROUPS = BUILT_IN_NAMES["action group"]

# A permission is an action group or an action name (with wildcards).
ACTION_PATTERN = re.compile(r"^(cluster|indices|internal|restapi):[A-Za-z0-9_*/:.\[\]-]*$")

# What the engine's core and its assembled modules (docs/engine-modules.md) process. A
# processor of another plugin (geoip, user_agent, attachment) is refused: the engine would
# refuse the pipeline anyway, after the hosts were changed.
INGEST_PROCESSORS = frozenset(
    {
        "append",
        "bytes",
        "community_id",
        "convert",
        "copy",
        "csv",
        "date",
        "date_index_name",
        "dissect",
        "dot_expander",
        "drop",
        "fail",
        "fingerprint",
        "foreach",
        "grok",
        "gsub",
        "html_strip",
        "join",
        "json",
        "kv",
        "lowercase",
        "pipeline",
        "remove",
        "remove_by_pattern",
        "rename",
        "script",
        "set",
        "sort",
        "split",
        "trim",
        "uppercase",
        "uri_parts",
        "urldecode",
    }
)

# Settings the engine reads at start only: they belong in opensearch.yml.
STATIC_SETTING_PREFIXES = (
    "bootstrap.",
    "cluster.name",
    "cluster.initial_cluster_manager_nodes",
    "cluster.initial_master_nodes",
    "discovery.",
    "http.",
    "network.",
    "node.",
    "path.",
    "plugins.security.",
    "transport.",
    "thread_pool.",
    "indices.memory.",
    "indices.fielddata.cache.size",
    "indices.queries.cache.size",
    "cluster.routing.allocation.awareness.force.",
)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ClusterConfig:
    """The declarations, validated: for each kind's variable, name -> body; and ``keep``,
    the names of objects the toolkit writes itself, by kind variable (never pruned)."""

    objects: Mapping[str, Mapping[str, Any]]
    prune: bool
    keep: Mapping[str, Sequence[str]]

    @property
    def declares_anything(self) -> bool:
        return bool(self.kinds_to_visit)

    @property
    def kinds_to_visit(self) -> list[str]:
        """The variables of the kinds a run reads and writes, in the order they are
        applied: those declared, or with prune every kind but the settings (a setting the
        inventory leaves out keeps its value: pruning one would reset it)."""
        return [
            kind.variable
            for kind in KINDS
            if self.objects.get(kind.variable) or (self.prune and kind is not CLUSTER_SETTINGS)
        ]

    def as_plan(self) -> dict[str, Any]:
        return {
            "objects": {kind: dict(objects) for kind, objects in self.objects.items()},
            "prune": self.prune,
            "keep": {kind: list(names) for kind, names in self.keep.items()},
            "kinds": self.kinds_to_visit,
            "declares_anything": self.declares_anything,
        }


# ---------------------------------------------------------------- validation


def plan_cluster_config(
    variables: Mapping[str, Any],
    *,
    secured: bool,
    toolkit_names: Mapping[str, Collection[str]] | None = None,
    managed_templates: Sequence[Mapping[str, Any]] = (),
) -> ClusterConfig:
    """The declarations in ``variables`` (the opensearch group's), validated at once.

    ``toolkit_names`` are the objects the toolkit writes itself, by kind variable (the
    security files' roles and mappings); ``managed_templates`` the index templates it
    writes (the orders template, with its ``name``), so an overlap with one is found too.
    Raises :class:`InventoryError` with every problem, each naming the variable and key.
    """
    keep = {kind: sorted(names) for kind, names in (toolkit_names or {}).items()}
    keep[INDEX_TEMPLATES.variable] = sorted(
        set(keep.get(INDEX_TEMPLATES.variable, ())) | {str(t["name"]) for t in managed_templates}
    )
    problems: list[str] = []
    objects: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        declared = variables.get(kind.variable)
        if declared is None:
            declared = {}
        if not isinstance(declared, Mapping):
            problems.append(
                f"{kind.variable} must be a mapping from name to body "
                f"(got {type(declared).__name__})"
            )
            continue
        objects[kind.variable] = dict(declared)
    given = variables.get(PRUNE_VARIABLE, False)
    # Read as Ansible reads a boolean: `-e opensearch_config_prune=true` is the string 'true'.
    prune = as_bool(given)
    if prune is None:
        problems.append(
            f"{PRUNE_VARIABLE} must be true or false (got {given!r}); yes/no, on/off and "
            "1/0 are read as Ansible reads them"
        )
        prune = False
    if not problems:
        problems.extend(_problems_of(objects, managed_templates))
        problems.extend(_toolkit_name_problems(objects, keep))
        if not secured:
            problems.extend(
                f"{kind.variable} declares {kind.name}s, which need the security plugin; "
                "set opensearch_security_mode to tls or basic, or remove them"
                for kind in KINDS
                if kind.security and objects.get(kind.variable)
            )
    if problems:
        raise InventoryError(problems)
    return ClusterConfig(objects=objects, prune=prune, keep=keep)


def _toolkit_name_problems(
    objects: Mapping[str, Mapping[str, Any]], keep: Mapping[str, Sequence[str]]
) -> list[str]:
    return [
        f"{variable}.{name}: clusterforge writes this object itself (the security files or "
        "the orders index); choose another name"
        for variable, names in keep.items()
        for name in objects.get(variable, {})
        if name in names
    ]


def _problems_of(
    objects: Mapping[str, Mapping[str, Any]], managed_templates: Sequence[Mapping[str, Any]]
) -> list[str]:
    problems: list[str] = []
    declared_groups = set(objects.get(ACTION_GROUPS.variable, {}))
    for kind in KINDS:
        if kind is CLUSTER_SETTINGS:
            continue
        for name, body in objects.get(kind.variable, {}).items():
            where = f"{kind.variable}.{name}"
            if not isinstance(name, str) or not NAME_PATTERN.match(name):
                problems.append(
                    f"{kind.variable}: {name!r} is not a valid name; use letters, digits, "
                    "'_', '.' and '-', starting with a letter or digit"
                )
                continue
            if name in BUILT_IN_NAMES.get(kind.name, ()):
                problems.append(
                    f"{where}: {name} is a built-in {kind.name} of the security plugin; "
                    "it cannot be declared (choose another name)"
                )
                continue
            if not isinstance(body, Mapping):
                problems.append(f"{where} must be a mapping (the body the REST API takes)")
                continue
            problems.extend(_kind_problems(kind, where, body, declared_groups))
    problems.extend(
        _template_overlaps(objects.get(INDEX_TEMPLATES.variable, {}), managed_templates)
    )
    problems.extend(_setting_problems(objects.get(CLUSTER_SETTINGS.variable, {})))
    problems.extend(_mapping_targets(objects))
    return problems


def _kind_problems(
    kind: Kind, where: str, body: Mapping[str, Any], declared_groups: set[str]
) -> list[str]:
    known_groups = BUILT_IN_ACTION_GROUPS | declared_groups
    problems: list[str] = []
    for meta in ("reserved", "hidden", "static"):
        if body.get(meta):
            problems.append(f"{where}.{meta}: the plugin sets {meta} itself; leave it out")
    if kind is ROLES:
        for index, action in enumerate(body.get("cluster_permissions") or []):
            problems.extend(
                _permission_problem(f"{where}.cluster_permissions[{index}]", action, known_groups)
            )
        for index, permission in enumerate(body.get("index_permissions") or []):
            if not isinstance(permission, Mapping) or not permission.get("index_patterns"):
                problems.append(
                    f"{where}.index_permissions[{index}] needs index_patterns and allowed_actions"
                )
                continue
            for number, action in enumerate(permission.get("allowed_actions") or []):
                problems.extend(
                    _permission_problem(
                        f"{where}.index_permissions[{index}].allowed_actions[{number}]",
                        action,
                        known_groups,
                    )
                )
    elif kind is ACTION_GROUPS:
        for index, action in enumerate(body.get("allowed_actions") or []):
            problems.extend(
                _permission_problem(f"{where}.allowed_actions[{index}]", action, known_groups)
            )
    elif kind is INDEX_TEMPLATES:
        patterns = body.get("index_patterns")
        if not patterns or not isinstance(patterns, list):
            problems.append(f"{where}.index_patterns must be a non-empty list of patterns")
    elif kind is INGEST_PIPELINES:
        processors = body.get("processors")
        if not isinstance(processors, list) or not processors:
            problems.append(f"{where}.processors must be a non-empty list")
        else:
            problems.extend(_processor_problems(f"{where}.processors", processors))
    return problems


def _permission_problem(
    where: str, action: Any, known_groups: set[str] | frozenset[str]
) -> list[str]:
    if isinstance(action, str) and (action in known_groups or ACTION_PATTERN.match(action)):
        return []
    return [
        f"{where}: {action!r} is neither an action group (built-in or declared in "
        f"{ACTION_GROUPS.variable}) nor an action name such as 'indices:data/read/*' or "
        "'cluster:monitor/health'; fix the permission"
    ]


def _processor_problems(where: str, processors: Sequence[Any]) -> list[str]:
    problems: list[str] = []
    for index, processor in enumerate(processors):
        if not isinstance(processor, Mapping) or len(processor) != 1:
            problems.append(f"{where}[{index}] must be one {{type: options}} mapping")
            continue
        [(kind, options)] = processor.items()
        if kind not in INGEST_PROCESSORS:
            problems.append(
                f"{where}[{index}]: {kind!r} is not a processor type this engine has; use one "
                f"of {', '.join(sorted(INGEST_PROCESSORS))}"
            )
        elif isinstance(options, Mapping) and options.get("on_failure"):
            problems.extend(
                _processor_problems(f"{where}[{index}].on_failure", options["on_failure"])
            )
    return problems


def patterns_overlap(first: str, second: str) -> bool:
    """Whether some index name could match both patterns (``logs-*`` and ``logs-app*``)."""
    if fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first):
        return True
    first_prefix, second_prefix = first.split("*", 1)[0], second.split("*", 1)[0]
    if "*" in first and "*" in second:
        return first_prefix.startswith(second_prefix) or second_prefix.startswith(first_prefix)
    return False


def _template_overlaps(
    declared: Mapping[str, Any], managed: Sequence[Mapping[str, Any]]
) -> list[str]:
    templates = [
        (name, body.get("priority", 0), list(body.get("index_patterns") or []), True)
        for name, body in declared.items()
        if isinstance(body, Mapping)
    ] + [
        (
            str(body.get("name")),
            body.get("priority", 0),
            list(body.get("index_patterns") or []),
            False,
        )
        for body in managed
    ]
    problems: list[str] = []
    for index, (name, priority, patterns, is_declared) in enumerate(templates):
        for other, other_priority, other_patterns, _other_body in templates[index + 1 :]:
            if priority != other_priority or not is_declared:
                continue
            clash = [
                f"{mine} ~ {theirs}"
                for mine in patterns
                for theirs in other_patterns
                if patterns_overlap(str(mine), str(theirs))
            ]
            if clash:
                problems.append(
                    f"{INDEX_TEMPLATES.variable}.{name}.index_patterns overlap those of index "
                    f"template {other} ({', '.join(clash)}) at the same priority {priority}; "
                    "give one of them another priority"
                )
    return problems


def _setting_problems(settings: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for key in flatten(settings):
        if key.startswith(STATIC_SETTING_PREFIXES):
            problems.append(
                f"{CLUSTER_SETTINGS.variable}.{key} is a static setting, read at start only; "
                f"set it in {EXTRA_SETTINGS_VARIABLE} (opensearch.yml) instead"
            )
    return problems


def _mapping_targets(objects: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A role mapping names a role: declared here or built in."""
    roles = set(objects.get(ROLES.variable, {})) | BUILT_IN_NAMES["role"]
    return [
        f"{ROLE_MAPPINGS.variable}.{name} maps a role no one declares; add {name} to "
        f"{ROLES.variable} or map a built-in role"
        for name in objects.get(ROLE_MAPPINGS.variable, {})
        if name not in roles
    ]


# ---------------------------------------------------------------- normalising and comparing


def toolkit_security_names() -> dict[str, list[str]]:
    """The roles and role mappings the toolkit's security files hold, by kind variable:
    the base ones and the order service's (whether delivery is on or not, so a name is
    refused or kept the same way in every inventory)."""
    return {
        ROLES.variable: sorted(
            TOOLKIT_ROLE_NAMES
            | {READER_ROLE, WRITER_ROLE, MONITOR_ROLE, SNAPSHOT_ROLE, LIFECYCLE_ROLE}
        ),
        ROLE_MAPPINGS.variable: sorted(
            TOOLKIT_ROLE_MAPPING_NAMES
            | {READER_ROLE, WRITER_ROLE, MONITOR_ROLE, SNAPSHOT_ROLE, LIFECYCLE_ROLE}
        ),
    }
