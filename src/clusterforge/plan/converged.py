"""The digest a host's converge record is kept under (issue 54, docs/performance.md).

A play ends early for a host whose last converge still holds
(plugins/modules/clusterforge_converged.py): the record on the host was written for the
same planned inputs, and every path, unit, package and account it names is as it was.
"The same planned inputs" is this digest, put together on the control node once a run:

- the whole plan, after the look at the nodes (their files, certificates, security
  files, services' settings, the rollout decided from what the nodes run), but for the
  parts that change from run to run without changing a host (:data:`RUN_ONLY`);
- the code that turns it into hosts: the collection's roles, playbooks and plugins, the
  library and the services' sources, so a new release never skips a host.

Each play adds its hosts' own variables to it (roles/_converged), so an inventory edit
that reaches a role without passing through the plan still runs that play. With
``opensearch_converge_gate: false`` the plan carries no digest, and every play runs in
full on every host.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Keys of the plan that say what this run did or when, not what a host holds: an archive
# fetched now, a certificate issued now (the files it goes into are in the plan too), the
# days left on the CA (the certificates themselves are), the model's warnings.
RUN_ONLY: tuple[tuple[str, ...], ...] = (
    ("artifacts", "fetched"),
    ("monitoring", "issued"),
    ("cluster", "pki", "expiry_days"),
    ("cluster", "pki", "changed"),
    ("model_warnings",),
    # The digest itself, should a plan that carries one be digested again.
    ("converge_digest",),
)

# Where the code lies that turns a plan into hosts, relative to the collection's root.
CODE_DIRS = ("roles", "playbooks", "plugins", "services", "meta")
SKIPPED_PARTS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".venv", "tests"})


def without_run_only(plan: Mapping[str, Any]) -> dict[str, Any]:
    """``plan`` without the :data:`RUN_ONLY` keys (a copy; ``plan`` is left as it is)."""
    kept: dict[str, Any] = json.loads(json.dumps(plan, default=str))
    for path in RUN_ONLY:
        parent: Any = kept
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    return kept


def code_files(roots: Mapping[str, Path]) -> list[tuple[str, Path]]:
    """Every file under ``roots`` that a run executes or renders, each with a name that
    does not depend on where the checkout lies (a moved checkout skips as before)."""
    files: list[tuple[str, Path]] = []
    for label, root in roots.items():
        if not root.is_dir():
            continue
        for path in root.rglob("*"):
            relative = path.relative_to(root)
            if (
                path.is_file()
                and not SKIPPED_PARTS.intersection(relative.parts)
                and path.suffix != ".pyc"
            ):
                files.append((f"{label}/{relative.as_posix()}", path))
    return sorted(files)


def code_digest(collection_root: Path, library_root: Path) -> str:
    """SHA-256 over the names and contents of the code that converges hosts."""
    digest = hashlib.sha256()
    roots = {name: collection_root / name for name in CODE_DIRS}
    roots["library"] = library_root
    for name, path in code_files(roots):
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


GATE_VARIABLE = "opensearch_converge_gate"


def gate_enabled(nodes_vars: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether the inventory lets the gate skip hosts (``opensearch_converge_gate``, a
    cluster variable the inventory check has validated as a boolean; true by default)."""
    if not nodes_vars:
        return False
    given = nodes_vars[0][1].get(GATE_VARIABLE, True)
    return given is True or str(given).lower() in {"true", "yes", "on", "1"}


def converge_digest(plan: Mapping[str, Any], code: str) -> str:
    """The digest every play's converge record starts from: the plan and the code."""
    canonical = json.dumps(without_run_only(plan), sort_keys=True, default=str)
    return hashlib.sha256(f"{code}\0{canonical}".encode()).hexdigest()
