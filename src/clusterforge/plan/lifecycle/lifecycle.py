"""Data that ages out by itself (issue 53, docs/lifecycle.md): rollover, replicas,
force-merge, read-only, delete and a size cap per index pattern, on any engine.

``opensearch_lifecycle_policies`` is checked here, on the control node, before any host is
contacted (clusterforge.plan.validation), every problem at once, each naming the
variable's path and the fix. A checked policy is turned into numbers (seconds, bytes) for
the runner, so the nodes parse no duration and no size.

The runner (clusterforge.host_runners.lifecycle, stdlib only, shipped in this plan with
its package's shared files: clusterforge.plan.cluster.host_runners)
runs from a systemd timer on every cluster-manager-eligible node, every 5 minutes with a
fixed per-host jitter. Only the node that is the elected cluster manager acts; the others
record a standby run. So one run at a time across the nodes, and a stopped node leaves
the runs to whichever node is elected next. The service runs as the system user
:data:`SYSTEM_USER` (no login, no home) and talks to the cluster as the engine user
:data:`LIFECYCLE_USER`, whose role may read and manage the policies' indices and nothing
else. Its password is generated once on the control node into
``<inventory>/.opensearch/<user>.password`` (0600) and only written to the nodes'
credentials file, 0600 and owned by the system user (root and that user alone read it);
the plan's entry for that file holds it, marked ``secret``, in the no_log plan result,
and no other part of the plan does.
The settings are root's, readable by the user's group; the CA is a copy of the node's
(whose certificate directory only the engine's group may read).

Where the index-management plugin runs (the tarball bundles it), ISM stays the
alternative: which patterns an ISM policy manages is cluster state the inventory does not
declare, so the runner asks ISM before acting and leaves a pattern alone, saying why, when
ISM manages any of its indices (docs/lifecycle.md, "Next to ISM").
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.durations import FORMS as DURATION_FORMS
from clusterforge.durations import duration_seconds
from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.host_runners import (
    RETIRED_RUNNER_PATHS,
    UNIT_DIR,
    config_json,
    credentials_json,
    runner_files,
    runner_placement,
    unit_files,
)
from clusterforge.plan.security.toolkit_users import (
    ToolkitUser,
    generated_password,
    generated_password_path,
)
from clusterforge.schema import as_int

if TYPE_CHECKING:
    from clusterforge.plan.cluster.model import Cluster

VARIABLE = "opensearch_lifecycle_policies"

LIFECYCLE_USER = "clusterforge-lifecycle"
LIFECYCLE_ROLE = "clusterforge_lifecycle"
SYSTEM_USER = "clusterforge-lifecycle"

UNIT_NAME = "clusterforge-lifecycle"
CONFIG_DIR = "/etc/clusterforge/lifecycle"
# The runner's own directory: the package clusterforge.host_runners goes below it.
RUNNER_DIR = "/usr/local/lib/clusterforge/lifecycle"
RUNNER_NAME = "lifecycle"
# The runner writes its metric in its own state directory; the node exporter's textfile
# directory holds a link to it (the directory is root's, shared with the snapshot timer).
STATE_DIR = "/var/lib/clusterforge-lifecycle"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
METRIC_FILE = "clusterforge_lifecycle.prom"
CREDENTIALS_FILE = f"{CONFIG_DIR}/credentials.json"
# A copy of the node's CA certificate (public): the engine's certificate directory is
# readable by the engine's group only. (systemd's LoadCredential= would hand root's
# files to the unit instead, but on the lab's containers the user could not read them.)
CA_COPY = f"{CONFIG_DIR}/ca.pem"
# The timer: every 5 minutes, each host at its own fixed offset within the jitter.
PERIOD_SECONDS = 300
JITTER_SECONDS = 30

POLICY_KEYS = (
    "name",
    "index_pattern",
    "alias",
    "data_stream",
    "rollover",
    "replicas_after",
    "replicas",
    "force_merge_after",
    "max_segments",
    "read_only_after",
    "delete_after",
    "max_total_size",
)
ROLLOVER_KEYS = ("max_docs", "max_primary_size", "max_age")
# The phases, in the order a run applies them to one index.
PHASES = ("replicas_after", "read_only_after", "force_merge_after", "delete_after")

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# An index or alias name with '*' wildcards: lower case, none of the characters the engine
# refuses in a name (\ / ? " < > | space , #), not starting with - _ +.
_PATTERN = re.compile(r"^[a-z0-9.*][a-z0-9._*-]{0,254}$")
_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,254}$")
_SIZE = re.compile(r"^(\d+)(b|kb|mb|gb|tb)$")
SIZE_FACTORS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4}
SIZE_FORMS = "a whole number with a unit (b, kb, mb, gb, tb), e.g. 1mb or 50gb"
# Indices no lifecycle policy may reach: the security plugin's, the engine's and the
# plugins' own (dot-prefixed), and the toolkit's business data, the orders.
RESERVED_PREFIXES = (".",)


def size_bytes(text: str) -> int | None:
    """Bytes of a size like ``1mb`` or ``50gb`` (units of 1024, as the engine reads them)."""
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None:
        return None
    return int(match.group(1)) * SIZE_FACTORS[match.group(2)]


def lifecycle_password(inventory_dir: Path) -> str:
    """The lifecycle user's password, generated once into its 0600 file. Never printed."""
    return generated_password(inventory_dir, LIFECYCLE_USER)


def _duration(where: str, value: Any, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        problems.append(f"{where} {value!r} is not a duration; write {DURATION_FORMS}")
        return None
    seconds = duration_seconds(str(value))
    if seconds is None:
        problems.append(f"{where} {value!r} is not a duration; write {DURATION_FORMS}")
        return None
    if seconds < 1:
        problems.append(f"{where} {value!r} is below its range (at least 1s); set a longer one")
        return None
    return int(seconds)


def _size(where: str, value: Any, problems: list[str]) -> int | None:
    number = size_bytes(str(value)) if isinstance(value, str) else None
    if number is None or number < 1:
        problems.append(f"{where} {value!r} is not a size; write {SIZE_FORMS}")
        return None
    return number


def _count(where: str, value: Any, minimum: int, problems: list[str]) -> int | None:
    number = None if isinstance(value, bool) else as_int(value)
    if number is None or number < minimum:
        problems.append(f"{where} {value!r} is not a whole number of {minimum} or more")
        return None
    return number


def _target(where: str, raw: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    """What the policy manages: an alias-based series or a data stream."""
    pattern, alias, stream = raw.get("index_pattern"), raw.get("alias"), raw.get("data_stream")
    if stream is not None and (pattern is not None or alias is not None):
        problems.append(
            f"{where} names both data_stream and index_pattern/alias; a policy manages one "
            "series: keep data_stream, or index_pattern with alias"
        )
        return {}
    if stream is not None:
        if not isinstance(stream, str) or not _INDEX_NAME.fullmatch(stream):
            problems.append(
                f"{where}.data_stream {stream!r} is not a data stream name; write its name "
                "without wildcards, lower case, e.g. logs-app"
            )
            return {}
        return {"kind": "data_stream", "data_stream": stream, "index_pattern": f".ds-{stream}-*"}
    if pattern is None:
        problems.append(
            f"{where} names no index: set data_stream (e.g. logs-app), or index_pattern "
            "(e.g. 'events-*') with alias (e.g. events) for an alias-based series"
        )
        return {}
    found: dict[str, Any] = {"kind": "alias", "alias": None}
    if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern) or pattern.strip("*") == "":
        problems.append(
            f"{where}.index_pattern {pattern!r} is not an index pattern; write lower-case "
            "names with '*' wildcards, e.g. 'events-*' (not '*' alone)"
        )
    elif pattern.startswith(RESERVED_PREFIXES):
        problems.append(
            f"{where}.index_pattern {pattern!r} reaches the engine's and the plugins' own "
            "indices (their names start with '.'); name your own indices, e.g. 'events-*'"
        )
    else:
        found["index_pattern"] = pattern
    if alias is not None:
        if not isinstance(alias, str) or not _INDEX_NAME.fullmatch(alias):
            problems.append(
                f"{where}.alias {alias!r} is not an alias name; write it without wildcards, "
                "e.g. events"
            )
        else:
            found["alias"] = alias
    return found


def _policy(index: int, raw: Any, problems: list[str]) -> dict[str, Any] | None:
    where = f"{VARIABLE}[{index}]"
    if not isinstance(raw, Mapping):
        problems.append(
            f"{where} is not a mapping; write e.g. {{name: events, index_pattern: 'events-*', "
            "alias: events, delete_after: 30d}"
        )
        return None
    before = len(problems)
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problems.append(
            f"{where}.name {name!r} is missing or malformed; write a lower-case name, e.g. events"
        )
    else:
        where = f"{VARIABLE}[{index}] ({name})"
    unknown = sorted(str(key) for key in raw if key not in POLICY_KEYS)
    if unknown:
        problems.append(
            f"{where} has unknown keys {', '.join(unknown)}; the keys are {', '.join(POLICY_KEYS)}"
        )
    policy: dict[str, Any] = {"name": name, **_target(where, raw, problems)}
    rollover = raw.get("rollover")
    conditions: dict[str, int] = {}
    if rollover is not None:
        if not isinstance(rollover, Mapping) or not rollover:
            problems.append(
                f"{where}.rollover must be a mapping of one or more of "
                f"{', '.join(ROLLOVER_KEYS)}; e.g. {{max_primary_size: 50gb, max_age: 1d}}"
            )
        else:
            extra = sorted(str(key) for key in rollover if key not in ROLLOVER_KEYS)
            if extra:
                problems.append(
                    f"{where}.rollover has unknown keys {', '.join(extra)}; the conditions "
                    f"are {', '.join(ROLLOVER_KEYS)}"
                )
            if "max_docs" in rollover:
                docs = _count(f"{where}.rollover.max_docs", rollover["max_docs"], 1, problems)
                if docs is not None:
                    conditions["max_docs"] = docs
            if "max_primary_size" in rollover:
                size = _size(
                    f"{where}.rollover.max_primary_size", rollover["max_primary_size"], problems
                )
                if size is not None:
                    conditions["max_primary_size_bytes"] = size
            if "max_age" in rollover:
                age = _duration(f"{where}.rollover.max_age", rollover["max_age"], problems)
                if age is not None:
                    conditions["max_age_seconds"] = age
        if policy.get("kind") == "alias" and raw.get("alias") is None:
            problems.append(
                f"{where}.rollover needs alias: a rollover moves the alias to a new index; set "
                "alias (the name writers write to), or remove rollover"
            )
    policy["rollover"] = conditions or None
    ages: dict[str, int | None] = {}
    for phase in PHASES:
        value = raw.get(phase)
        if isinstance(value, Mapping):
            parameter = {"replicas_after": "replicas", "force_merge_after": "max_segments"}.get(
                phase
            )
            fix = f" and put the count in the policy's {parameter}" if parameter else ""
            problems.append(f"{where}.{phase} is an age since rollover, a duration (e.g. 7d){fix}")
            ages[phase] = None
            continue
        ages[phase] = None if value is None else _duration(f"{where}.{phase}", value, problems)
    policy.update({f"{phase}_seconds": ages[phase] for phase in PHASES})
    replicas = raw.get("replicas")
    policy["replicas"] = None
    if raw.get("replicas_after") is not None and replicas is None:
        problems.append(
            f"{where}.replicas_after is set but replicas is not: set replicas, the number of "
            "replicas an index keeps from that age on (e.g. 0)"
        )
    elif replicas is not None:
        if raw.get("replicas_after") is None:
            problems.append(
                f"{where}.replicas is set but replicas_after is not: set replicas_after, the "
                "age since rollover from which an index keeps that many replicas (e.g. 1d)"
            )
        policy["replicas"] = _count(f"{where}.replicas", replicas, 0, problems)
    segments = raw.get("max_segments")
    policy["max_segments"] = None
    if segments is not None and raw.get("force_merge_after") is None:
        problems.append(
            f"{where}.max_segments is set but force_merge_after is not: set force_merge_after "
            "(e.g. 2d), or remove max_segments"
        )
    elif raw.get("force_merge_after") is not None:
        # One segment per shard unless told: what a force-merge of data no longer written is for.
        policy["max_segments"] = _count(
            f"{where}.max_segments", 1 if segments is None else segments, 1, problems
        )
    cap = raw.get("max_total_size")
    policy["max_total_size_bytes"] = (
        None if cap is None else _size(f"{where}.max_total_size", cap, problems)
    )
    if (
        rollover is None
        and all(raw.get(phase) is None for phase in PHASES)
        and cap is None
        and len(problems) == before
    ):
        problems.append(
            f"{where} does nothing: give it rollover, an age (replicas_after, "
            "force_merge_after, read_only_after, delete_after) or max_total_size"
        )
    delete = ages.get("delete_after")
    if delete is not None:
        later = [
            phase
            for phase in ("replicas_after", "read_only_after", "force_merge_after")
            if ages.get(phase) is not None and int(ages[phase] or 0) >= delete
        ]
        if later:
            problems.append(
                f"{where}: {', '.join(later)} is not before delete_after, so an index would "
                "be deleted first; shorten it or lengthen delete_after"
            )
    return policy if len(problems) == before else None


def _overlap(first: str, second: str) -> bool:
    """Whether two wildcard patterns may match one index name (a conservative guess:
    either matches the other read as a name, or their fixed prefixes nest)."""
    if fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first):
        return True
    head_first, head_second = first.split("*")[0], second.split("*")[0]
    if "*" in first and "*" in second:
        return head_first.startswith(head_second) or head_second.startswith(head_first)
    return False


def check_policies(raw: Any) -> list[dict[str, Any]]:
    """The checked policies (numbers for the runner), or InventoryError naming every
    problem at once."""
    if raw in (None, "", []):
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise InventoryError(
            [f"{VARIABLE} must be a list of policies, each a mapping with a name; or []"]
        )
    problems: list[str] = []
    policies = [_policy(index, item, problems) for index, item in enumerate(raw)]
    checked = [policy for policy in policies if policy is not None]
    names = [str(policy["name"]) for policy in checked]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"{VARIABLE} has two policies named {name!r}; give each its own name")
    for position, policy in enumerate(checked):
        for other in checked[position + 1 :]:
            mine, theirs = policy.get("index_pattern"), other.get("index_pattern")
            if mine and theirs and _overlap(str(mine), str(theirs)):
                problems.append(
                    f"{VARIABLE}: policies {policy['name']!r} ({mine}) and {other['name']!r} "
                    f"({theirs}) may both match one index, and two policies would act on it; "
                    "make the patterns disjoint"
                )
    if problems:
        raise InventoryError(problems)
    return checked


def plan_lifecycle(
    cluster: Cluster, variables: Mapping[str, Any], *, inventory_dir: Path | None = None
) -> dict[str, Any] | None:
    """The lifecycle's part of the plan, or None without policies. Raises InventoryError
    naming every problem and its variable."""
    raw = variables.get(VARIABLE)
    problems: list[str] = []
    try:
        policies = check_policies(raw)
    except InventoryError as error:
        problems.extend(str(problem) for problem in error.problems)
        policies = []
    if raw not in (None, "", []) and not cluster.secured:
        problems.append(
            f"{VARIABLE} needs a secured cluster (opensearch_security_mode: tls): the runner "
            "authenticates as its own user and verifies the cluster's CA"
        )
    users = variables.get("opensearch_security_users") or []
    if any(isinstance(user, Mapping) and user.get("name") == LIFECYCLE_USER for user in users):
        problems.append(
            f"opensearch_security_users has a user {LIFECYCLE_USER!r}, the name of the "
            f"lifecycle runner's own user ({VARIABLE}); rename that user"
        )
    if problems:
        raise InventoryError(problems)
    if not policies:
        return None
    from clusterforge.plan.snapshots.snapshots import sm_available

    password_file = (
        generated_password_path(inventory_dir.resolve(), LIFECYCLE_USER) if inventory_dir else None
    )
    return {
        "policies": policies,
        "hosts": [node.inventory_name for node in cluster.nodes if node.cluster_manager_eligible],
        # Index management installed: the runner asks ISM which indices it manages.
        "ism_installed": sm_available(cluster),
        "username": LIFECYCLE_USER,
        "system_user": SYSTEM_USER,
        "password_file": str(password_file) if password_file else None,
        "unit": UNIT_NAME,
        "config_dir": CONFIG_DIR,
        "config_file": f"{CONFIG_DIR}/config.json",
        "credentials_file": CREDENTIALS_FILE,
        "ca_copy": CA_COPY,
        **runner_placement(RUNNER_NAME, RUNNER_DIR),
        "state_dir": STATE_DIR,
        "state_directory_name": STATE_DIR.rsplit("/", 1)[-1],
        "textfile_dir": TEXTFILE_DIR,
        "metric_file": METRIC_FILE,
        "period_seconds": PERIOD_SECONDS,
        "jitter_seconds": JITTER_SECONDS,
    }


def role_body(policies: Sequence[Mapping[str, Any]], *, ism_installed: bool) -> dict[str, Any]:
    """The engine role of the runner: read the cluster's health and state (the elected
    manager, the shard limit), and on the policies' indices alone what a run does: read
    their stats and settings (the write index refreshed first), roll over, set replicas
    and the write block, force-merge, delete. No document read or write (no indices:data/*)."""
    patterns: list[str] = []
    for policy in policies:
        if policy.get("kind") == "data_stream":
            patterns += [str(policy["data_stream"]), str(policy["index_pattern"])]
        else:
            patterns.append(str(policy["index_pattern"]))
            if policy.get("alias"):
                patterns.append(str(policy["alias"]))
    cluster_permissions = ["cluster:monitor/health", "cluster:monitor/state"]
    if ism_installed:
        # ISM's explain, to leave alone what ISM manages (docs/lifecycle.md).
        cluster_permissions.append("cluster:admin/opendistro/ism/managedindex/explain")
    return {
        "description": "Index lifecycle: roll over, shrink replicas, block writes, "
        "force-merge and delete the policies' indices only (clusterforge)",
        "cluster_permissions": cluster_permissions,
        "index_permissions": [
            {
                "index_patterns": sorted(dict.fromkeys(patterns)),
                "allowed_actions": [
                    "indices:monitor/stats",
                    # The write index, before its stats are read (host_runners.lifecycle).
                    "indices:admin/refresh*",
                    "indices:monitor/settings/get",
                    "indices:admin/get",
                    "indices:admin/aliases/get",
                    "indices:admin/data_stream/get",
                    "indices:admin/rollover",
                    "indices:admin/create",
                    "indices:admin/aliases",
                    "indices:admin/settings/update",
                    "indices:admin/forcemerge",
                    "indices:admin/delete",
                ],
            }
        ],
    }


def toolkit_user(
    lifecycle: Mapping[str, Any], password: str, password_file: str | None = None
) -> ToolkitUser:
    """The lifecycle runner as a row of the toolkit's users."""
    return ToolkitUser(
        name=LIFECYCLE_USER,
        description="Index lifecycle runner (clusterforge)",
        mapping_description="The index lifecycle runner's user",
        password=password,
        password_file=password_file,
        permissions={
            LIFECYCLE_ROLE: role_body(
                lifecycle["policies"], ism_installed=bool(lifecycle["ism_installed"])
            )
        },
    )


def runner_config(
    lifecycle: Mapping[str, Any],
    *,
    cluster_name: str,
    node: str,
    node_name: str,
    urls: Sequence[str],
    ca_file: str,
) -> dict[str, Any]:
    """config.json of one node (no secret): its own URL first, then the others."""
    return {
        "cluster": cluster_name,
        "node": node,
        "node_name": node_name,
        "policies": list(lifecycle["policies"]),
        "ism_installed": lifecycle["ism_installed"],
        "urls": list(urls),
        "ca_file": ca_file,
        "credentials_file": lifecycle["credentials_file"],
        "state_dir": lifecycle["state_dir"],
        "metric_file": lifecycle["metric_file"],
        "period_seconds": lifecycle["period_seconds"],
    }


def lifecycle_removal() -> dict[str, Any]:
    """What a node that does not run the lifecycle has removed (roles/opensearch_lifecycle,
    tasks/remove.yml): the unit to stop, the timer whose presence says anything is there,
    and every path the lifecycle ever placed."""
    timer = f"{UNIT_DIR}/{UNIT_NAME}.timer"
    return {
        "unit": UNIT_NAME,
        "timer": timer,
        "paths": [
            timer,
            f"{UNIT_DIR}/{UNIT_NAME}.service",
            CONFIG_DIR,
            RUNNER_DIR,
            RETIRED_RUNNER_PATHS[RUNNER_NAME],
            f"{TEXTFILE_DIR}/{METRIC_FILE}",
            STATE_DIR,
        ],
    }


def complete_lifecycle(
    lifecycle: Mapping[str, Any], cluster: Cluster, *, ca_file: str, password: str
) -> dict[str, Any]:
    """The checked lifecycle with what the nodes get: each node's config.json, the timer
    and service units, the runner package's files, and per node the directories, files
    (the credentials marked ``secret``) and retired paths that
    roles/opensearch_lifecycle/tasks/install.yml copies as they are."""
    from clusterforge.plan.cluster.render import render_template

    urls = {node.inventory_name: cluster.http_url(node) for node in cluster.nodes}
    names = {node.inventory_name: node.name for node in cluster.nodes}
    # The role copies the node's CA (``ca_source``) to ``ca_copy``, which the runner reads.
    lifecycle = {**lifecycle, "ca_source": ca_file}
    context = {"lifecycle": lifecycle, "cluster_name": cluster.name}
    configs = {
        host: runner_config(
            lifecycle,
            cluster_name=cluster.name,
            node=host,
            node_name=names[host],
            urls=[urls[host], *(url for name, url in urls.items() if name != host)],
            ca_file=str(lifecycle["ca_copy"]),
        )
        for host in lifecycle["hosts"]
    }
    timer_unit = render_template("clusterforge-lifecycle.timer.j2", **context)
    service_unit = render_template("clusterforge-lifecycle.service.j2", **context)
    package_files = runner_files(RUNNER_NAME, RUNNER_DIR)
    system_user = str(lifecycle["system_user"])
    config_dir = str(lifecycle["config_dir"])
    # The runner runs as its own system user: the settings parent stays traversable (the
    # lab's first run found it 0700, as another role had created it, and every run failed
    # with Permission denied), the settings directory its group may enter, its state
    # directory its own.
    directories = [
        *lifecycle["runner_directories"],
        {"path": lifecycle["textfile_dir"], "owner": "root", "group": "root", "mode": "0755"},
        {"path": config_dir.rsplit("/", 1)[0], "owner": "root", "group": "root", "mode": "0755"},
        {"path": config_dir, "owner": "root", "group": system_user, "mode": "0750"},
        {
            "path": lifecycle["state_dir"],
            "owner": system_user,
            "group": system_user,
            "mode": "0755",
        },
    ]
    credentials = {
        "path": lifecycle["credentials_file"],
        "owner": system_user,
        "group": system_user,
        "mode": "0600",
        "secret": True,
        "content": credentials_json(str(lifecycle["username"]), password),
    }
    units = unit_files(str(lifecycle["unit"]), service_unit=service_unit, timer_unit=timer_unit)
    return {
        **lifecycle,
        "configs": configs,
        "timer_unit": timer_unit,
        "service_unit": service_unit,
        "runner_files": package_files,
        "unit_dir": UNIT_DIR,
        "directories": {host: directories for host in lifecycle["hosts"]},
        "files": {
            host: [
                *package_files,
                {
                    "path": lifecycle["config_file"],
                    "owner": "root",
                    "group": system_user,
                    "mode": "0640",
                    "content": config_json(configs[host]),
                },
                credentials,
                *units,
            ]
            for host in lifecycle["hosts"]
        },
        "absent": {host: list(lifecycle["retired_runner_paths"]) for host in lifecycle["hosts"]},
    }
