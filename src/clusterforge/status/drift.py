"""Drift for ``scripts/status``: the cluster's objects against the inventory's declarations.

The declarations are read as a playbook run reads them: the inventory's opensearch group,
with ``-e``/``--extra-vars`` on top (highest precedence, as in ansible-playbook). The
comparison is clusterforge.plan.cluster_config's, the one the playbook's apply step makes, so
what status lists as drift is exactly what the next ``site.yml`` run (or its
``--check --diff``) changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from clusterforge.client import ClusterClient
from clusterforge.errors import InventoryError
from clusterforge.inventory.reader import InventoryReader, InventoryReadError
from clusterforge.inventory.variables import model_vars
from clusterforge.plan.cluster_config import (
    KINDS,
    KINDS_BY_VARIABLE,
    PRUNE_VARIABLE,
    ClusterConfig,
    changes_for,
    plan_cluster_config,
    toolkit_security_names,
)
from clusterforge.status.target import StatusConfigError, Target

DRIFT_STATES = {"create": "missing", "update": "changed", "delete": "not declared"}


def parse_extra_vars(values: Sequence[str]) -> dict[str, Any]:
    """``-e`` values as ansible-playbook reads them: ``@FILE`` (YAML or JSON), a YAML or
    JSON mapping, or ``key=value`` words; later ones win."""
    merged: dict[str, Any] = {}
    for value in values:
        if value.startswith("@"):
            path = Path(value[1:])
            try:
                loaded = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as error:
                raise StatusConfigError(f"-e {value}: cannot read {path}: {error}") from error
        elif value.lstrip().startswith(("{", "[")):
            try:
                loaded = yaml.safe_load(value)
            except yaml.YAMLError as error:
                raise StatusConfigError(f"-e: not valid YAML or JSON: {error}") from error
        else:
            loaded = {}
            for word in value.split():
                key, separator, item = word.partition("=")
                if not separator:
                    raise StatusConfigError(
                        f"-e {word!r}: give key=value, a YAML or JSON mapping, or @FILE"
                    )
                loaded[key] = item
        if loaded is None:
            continue
        if not isinstance(loaded, Mapping):
            raise StatusConfigError(f"-e {value}: extra vars must be a mapping")
        merged.update(loaded)
    return merged


def lab_inventory_vars(
    inventory: Path, vault_password_file: Path | None, extra_vars: Mapping[str, Any]
) -> dict[str, Any]:
    """The opensearch group's variables of the inventory beside a lab.json, ``extra_vars``
    on top (an ``--inventory`` target has read them already: Target.opensearch_vars)."""
    try:
        reader = InventoryReader(
            inventory, vault_password_file=vault_password_file, extra_vars=extra_vars
        )
        nodes = model_vars(reader)
    except InventoryReadError as error:
        raise StatusConfigError(f"cannot read the inventory {inventory}: {error}") from error
    return nodes[0][1]


def declared_config(variables: Mapping[str, Any], *, secured: bool) -> ClusterConfig | None:
    """The cluster objects ``variables`` declare, validated; None when they declare none."""
    declared = {
        name: value
        for name, value in variables.items()
        if name in KINDS_BY_VARIABLE or name == PRUNE_VARIABLE
    }
    try:
        config = plan_cluster_config(
            declared, secured=secured, toolkit_names=toolkit_security_names()
        )
    except InventoryError as error:
        raise StatusConfigError(f"the declared cluster objects are not valid: {error}") from error
    return config if config.declares_anything else None


def find_drift(target: Target, config: ClusterConfig, client: ClusterClient) -> dict[str, Any]:
    """``{"drift": [{kind, name, state}], "error": str | None}`` from the first node that
    answers every read."""
    errors: list[str] = []
    for node in target.nodes:
        drift: list[dict[str, str]] = []
        for kind in KINDS:
            declared = config.objects.get(kind.variable) or {}
            if not declared and not config.prune:
                continue
            answer = client.get(node.url + kind.list_path)
            if "error" in answer or answer.get("status") not in (200, 404):
                errors.append(f"{node.name}: GET {kind.list_path}: {_reason(answer)}")
                break
            body = answer.get("body") if answer.get("status") == 200 else {}
            keep = frozenset(config.keep.get(kind.variable) or ())
            drift.extend(
                {"kind": change.kind, "name": change.name, "state": DRIFT_STATES[change.action]}
                for change in changes_for(kind, declared, body, prune=config.prune, keep=keep)
            )
        else:
            return {"drift": drift, "error": None}
    return {"drift": [], "error": "; ".join(errors) or "no node to ask"}


def _reason(answer: Mapping[str, Any]) -> str:
    if "error" in answer:
        return str(answer["error"])
    return f"HTTP {answer.get('status')} {json.dumps(answer.get('body'))[:200]}"


def drift_problems(found: Mapping[str, Any]) -> list[str]:
    if found["error"]:
        return [f"drift: could not read the cluster's objects ({found['error']})"]
    return [
        f"drift: {item['kind']} {item['name']} {item['state']} (the next site.yml run puts "
        "the declared state back)"
        for item in found["drift"]
    ]
