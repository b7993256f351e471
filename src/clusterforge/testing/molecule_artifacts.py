"""The archives a molecule scenario's converge fetches, fetched before the scenario runs.

On a fresh machine each converge fetched the engine (the Maven zip with its modules
assembled: 23 s), the security plugin (5 s) and built the Chinese analyzer with Maven
(10 s) on its critical path, the two molecule lanes taking turns on the cache's lock.
``scripts/test`` runs this module in a lane of its own while the lab image builds, so
the converges find them cached.

One source of truth: each scenario's inventory is what molecule gives its playbooks,
``.config/molecule/config.yml`` with ``molecule/<scenario>/molecule.yml`` merged on top
(the platforms' ``groups``, the provisioner's ``group_vars`` and ``host_vars``, ``${VAR}``
and ``${VAR:-default}`` replaced from the environment as molecule does). It is written
as a temporary inventory directory and fetched through the same function as
``clusterforge fetch`` (clusterforge.inventory.fetch). No version lives here.

    python -m clusterforge.testing.molecule_artifacts --repo . tls upgrade
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from clusterforge.errors import ClusterforgeError
from clusterforge.inventory.fetch import fetch_inventory_artifacts, inventory_cluster
from clusterforge.inventory.variables import CLUSTER_GROUP
from clusterforge.plan.cluster.artifacts import FetchedArtifact
from clusterforge.plan.cluster.model import Cluster

SHARED_CONFIG = Path(".config/molecule/config.yml")
# ${NAME}, ${NAME:-default} (or ${NAME-default}) and $NAME, as molecule interpolates
# its config files; $$ is a literal $.
_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
)
# A value Ansible templates from what the scenario's prepare makes (the directory's bind
# password, read from a file prepare writes) is not there before prepare runs. The
# archives depend on none of them (the engine's version and source, the plugins), so
# such a value is given this stand-in.
PREPARED_LATER = "written-by-the-scenario-prepare"


class ScenarioError(ClusterforgeError):
    """A scenario's molecule files cannot be read into an inventory."""


def interpolate(text: str, environment: Mapping[str, str]) -> str:
    """``text`` with molecule's ``${VAR}`` forms replaced (unset and no default: empty)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("braced") or match.group("plain")
        value = environment.get(name)
        if value is None or (value == "" and ":-" in match.group(0)):
            return match.group("default") or ""
        return value

    return _VARIABLE.sub(replace, text)


def _merged(base: Any, override: Any) -> Any:
    """Molecule's merge of a scenario over the shared config: dicts deep, the rest replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merged(base.get(key), value) if key in base else value
        return merged
    return override


def _read_yaml(path: Path, environment: Mapping[str, str]) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(interpolate(path.read_text(encoding="utf-8"), environment))
    except OSError as error:
        raise ScenarioError(f"{path}: {error.strerror}; is the scenario's name right?") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not YAML ({error})") from None
    if not isinstance(loaded, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top")
    return loaded


def scenario_config(
    repo: Path, scenario: str, *, ephemeral_dir: Path, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The scenario's molecule config as molecule reads it, with ``ephemeral_dir`` as its
    ``MOLECULE_EPHEMERAL_DIRECTORY``."""
    scenario_dir = repo / "molecule" / scenario
    environment = {
        **(os.environ if environ is None else environ),
        "MOLECULE_PROJECT_DIRECTORY": str(repo),
        "MOLECULE_SCENARIO_NAME": scenario,
        "MOLECULE_SCENARIO_DIRECTORY": str(scenario_dir),
        "MOLECULE_EPHEMERAL_DIRECTORY": str(ephemeral_dir),
    }
    shared = repo / SHARED_CONFIG
    base = _read_yaml(shared, environment) if shared.is_file() else {}
    merged = _merged(base, _read_yaml(scenario_dir / "molecule.yml", environment))
    return merged if isinstance(merged, dict) else {}


def _without_templates(value: Any) -> Any:
    if isinstance(value, str) and "{{" in value:
        return PREPARED_LATER
    if isinstance(value, dict):
        return {key: _without_templates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_templates(item) for item in value]
    return value


def write_inventory(config: Mapping[str, Any], directory: Path) -> Path:
    """The scenario's inventory (platforms and their groups, group_vars, host_vars) as an
    inventory directory under ``directory``; returns it."""
    groups: dict[str, dict[str, Any]] = {}
    ungrouped: dict[str, Any] = {}
    for platform in config.get("platforms") or []:
        name = str(platform["name"])
        ungrouped[name] = None
        for group in platform.get("groups") or []:
            groups.setdefault(str(group), {"hosts": {}})["hosts"][name] = None
    inventory = (config.get("provisioner") or {}).get("inventory") or {}
    unread = sorted(set(inventory) - {"group_vars", "host_vars"})
    if unread:
        # Read no inventory but the one molecule gives: refuse what this does not read.
        raise ScenarioError(
            f"provisioner.inventory.{unread[0]} is not read by the prefetch; give the "
            "scenario's variables as provisioner.inventory.group_vars and host_vars"
        )
    directory.mkdir(parents=True, exist_ok=True)
    hosts = {"all": {"hosts": ungrouped, "children": groups}}
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    for kind in ("group_vars", "host_vars"):
        for name, variables in (inventory.get(kind) or {}).items():
            path = directory / kind / f"{name}.yml"
            path.parent.mkdir(exist_ok=True)
            path.write_text(yaml.safe_dump(_without_templates(variables or {}), sort_keys=False))
    return directory


@contextmanager
def scenario_inventory(repo: Path, scenario: str) -> Iterator[Path | None]:
    """A temporary inventory of the scenario; None when it has no OpenSearch node."""
    with tempfile.TemporaryDirectory(prefix=f"clusterforge-prefetch-{scenario}-") as work:
        config = scenario_config(repo, scenario, ephemeral_dir=Path(work) / "ephemeral")
        inventory = write_inventory(config, Path(work) / "inventory")
        hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
        yield inventory if CLUSTER_GROUP in hosts["all"]["children"] else None


def scenario_cluster(repo: Path, scenario: str) -> Cluster | None:
    """The cluster model a scenario's converge deploys; None without OpenSearch nodes."""
    with scenario_inventory(repo, scenario) as inventory:
        return None if inventory is None else inventory_cluster(inventory)


def prefetch(repo: Path, scenarios: Sequence[str]) -> None:
    """Fetch every archive the scenarios' converges need, one line per archive."""
    for scenario in scenarios:
        started = time.monotonic()
        try:
            _prefetch_scenario(repo, scenario)
        except ClusterforgeError as error:
            raise ScenarioError(f"scenario {scenario}: {error}") from error
        print(f"{scenario}: done in {time.monotonic() - started:.0f}s", flush=True)


def _prefetch_scenario(repo: Path, scenario: str) -> None:
    def report(what: str, artifact: FetchedArtifact) -> None:
        state = "fetched" if artifact.fetched else "cached"
        print(f"{scenario}: {what}: {state} {artifact.path}", flush=True)

    with scenario_inventory(repo, scenario) as inventory:
        if inventory is None:
            print(f"{scenario}: no OpenSearch node, nothing to fetch", flush=True)
            return
        fetch_inventory_artifacts(inventory, project_root=repo, report=report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clusterforge.testing.molecule_artifacts",
        description="fetch the archives molecule scenarios' converges need",
    )
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the checkout")
    parser.add_argument("scenarios", nargs="+", help="scenario names (name@release: name)")
    args = parser.parse_args(argv)
    # scripts/test names a scenario on another ansible-core as name@release.
    names = [scenario.split("@", 1)[0] for scenario in args.scenarios]
    try:
        prefetch(args.repo.resolve(), names)
    except ClusterforgeError as error:
        print(f"clusterforge: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
