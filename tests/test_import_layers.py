"""The library's import layers (issue 51, item 6): five floors, each importing only from
its own floor and those below, so no arrow runs back up and there is no import circle.
Imports inside functions count too. A new module or package must be given a floor here;
docs/architecture.md's module map lists them in the same order."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "src" / "clusterforge"

FLOORS: tuple[frozenset[str], ...] = (
    # 1. The ground: no other part of the library, or only one another of this floor.
    frozenset(
        {
            "errors",
            "durations",
            "addresses",
            "schema",
            "client",
            "ldap_check",
            # The code that runs on the hosts: the standard library and itself only.
            "host_runners",
        }
    ),
    # 2. Certificates, keys, hashes and the security files' shapes.
    frozenset({"pki"}),
    # 3. The plan: the model, its checks and every file a host gets.
    frozenset({"plan"}),
    # 4. The inventory's door: reading an inventory into the plan's inputs.
    frozenset({"inventory"}),
    # 5. What people and tests run: the command line, the lab, status, the test tools.
    frozenset({"cli", "lab", "status", "testing", "__init__", "__main__"}),
)


def _floor(unit: str) -> int:
    for number, floor in enumerate(FLOORS, 1):
        if unit in floor:
            return number
    raise AssertionError(f"{unit} has no floor in tests/test_import_layers.py; give it one")


def _unit(path: Path) -> str:
    parts = path.relative_to(LIBRARY).parts
    return parts[0].removesuffix(".py")


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("clusterforge."):
                yield name.split(".")[1]


def test_every_module_has_a_floor() -> None:
    for path in LIBRARY.rglob("*.py"):
        _floor(_unit(path))


def test_nothing_imports_from_a_floor_above_its_own() -> None:
    upward = [
        f"{path.relative_to(LIBRARY)} (floor {_floor(_unit(path))}) imports clusterforge.{target} "
        f"(floor {_floor(target)})"
        for path in sorted(LIBRARY.rglob("*.py"))
        for target in _imports(path)
        if _floor(target) > _floor(_unit(path))
    ]
    assert upward == []


def test_there_are_five_floors() -> None:
    assert len(FLOORS) == 5
    assert not set.intersection(*map(set, FLOORS))


ACTIONS = LIBRARY.parents[1] / "plugins" / "action"
# What each action plugin may take from the plan's package (issue 51: each concern
# planned once, in the plan; the actions only copy). clusterforge_plan is the plan's one
# door and the only action that reaches a planner. The others take only what plans
# nothing: certificate issuing (cluster_pki, host_certificates), the comparison of a
# declaration with the cluster's answer (cluster_config), a parser
# (restarts.memory_megabytes), the wheelhouse build, and plain_data.
NOT_PLANNERS = frozenset(
    {"model", "cluster_pki", "host_certificates", "cluster_config", "restarts", "wheelhouse"}
)
ACTION_PLAN_IMPORTS = {
    "clusterforge_plan": {
        "converged",
        "model",
        "monitoring",
        "orders_search",
        "plan",
        "services_plan",
        "validation",
    },
    "clusterforge_certs": {"cluster_pki", "model"},
    "clusterforge_cluster_config": {"cluster_config"},
    "clusterforge_host_certificate": {"host_certificates"},
    "clusterforge_observe": {"restarts"},
    "clusterforge_service_settings": {"model"},
    "clusterforge_tls_proxy": {"host_certificates"},
    "clusterforge_wheelhouse": {"wheelhouse"},
}


def _plan_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "clusterforge.plan."
        ):
            found.add(str(node.module).split(".")[-1])
    return found


def test_no_action_plans_the_monitoring_or_the_proxy_again() -> None:
    """No action but clusterforge_plan imports a planner: any module of the plan's package
    that is not in NOT_PLANNERS (a new module is a planner until it is listed there). The
    monitoring, the proxy and the services' settings are planned once, in the plan or the
    inventory check; the other actions copy what it returns. No action takes more of the
    plan than ACTION_PLAN_IMPORTS says."""
    imports = {
        path.stem: _plan_imports(path)
        for path in sorted(ACTIONS.glob("*.py"))
        if _plan_imports(path)
    }
    planning = {
        action: sorted(used - NOT_PLANNERS)
        for action, used in imports.items()
        if action != "clusterforge_plan" and used - NOT_PLANNERS
    }
    assert planning == {}
    assert imports == ACTION_PLAN_IMPORTS
    modules = {path.stem for path in (LIBRARY / "plan").rglob("*.py")}
    assert modules >= NOT_PLANNERS


PLAN = LIBRARY / "plan"
# The plan's packages, one per concern (issue 51, item 3), floors inside the plan's floor,
# bottom first: a package imports only from itself and the packages before it.
PLAN_PACKAGES = ("security", "cluster", "services", "snapshots", "lifecycle", "monitoring")
# The plan's entry points, the only modules flat in plan/: each gathers every concern (the
# plan, the inventory check, the security files with every concern's user, the cluster's
# objects with every concern's role, the converge gate's digest of the whole plan), so no
# package imports them.
PLAN_ENTRY_POINTS = frozenset(
    {"plan", "validation", "cluster_security", "cluster_config", "converged"}
)


def _plan_targets(path: Path) -> Iterator[str]:
    """The parts of plan/ a module imports: a package's name or an entry point's."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "clusterforge.plan":
                yield from (alias.name for alias in node.names)
            elif node.module.startswith("clusterforge.plan."):
                yield node.module.split(".")[2]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("clusterforge.plan."):
                    yield alias.name.split(".")[2]


def test_plan_holds_its_concerns_packages_and_its_entry_points_only() -> None:
    flat = {path.stem for path in PLAN.glob("*.py")} - {"__init__"}
    packages = {path.name for path in PLAN.iterdir() if (path / "__init__.py").is_file()}
    assert flat == PLAN_ENTRY_POINTS, "a module of plan/ belongs in its concern's package"
    assert packages == set(PLAN_PACKAGES)
    assert not [path for path in PLAN.glob("*/*/*.py") if "templates" not in path.parts]


def test_no_package_of_the_plan_imports_an_entry_point_or_a_package_above_it() -> None:
    upward = [
        f"{path.relative_to(PLAN)} imports clusterforge.plan.{target}"
        for package in PLAN_PACKAGES
        for path in sorted((PLAN / package).glob("*.py"))
        for target in _plan_targets(path)
        if target in PLAN_ENTRY_POINTS or PLAN_PACKAGES.index(target) > PLAN_PACKAGES.index(package)
    ]
    assert upward == []
