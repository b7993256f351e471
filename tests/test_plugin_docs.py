"""Every plugin of the collection is documented where ansible-doc looks, and the
documentation parses and matches the code.

ansible-doc runs as users run it, from the checkout (ansible.cfg's collections path
.collections links the checkout as clusterforge.stack), one call per plugin type with all
the type's names. The names come from the files, not from ansible-doc's own listing, so a
plugin that ansible-doc cannot find fails here as well:
- an action plugin is documented by the module file of the same name (documentation
  only, as ansible-core documents its own action plugins), and that file documents
  exactly the arguments the plugin accepts (its ``_VALID_ARGS``);
- each filter by a sidecar plugins/filter/<name>.yml whose options are the function's
  parameters (the piped value is ``_input``);
- the strategy by the DOCUMENTATION string of its file.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from collection_plugins import load_plugin

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
COLLECTION = "clusterforge.stack"


def stems(kind: str) -> list[str]:
    return sorted(path.stem for path in (PLUGINS / kind).glob("*.py") if path.stem != "__init__")


def filter_functions() -> dict[str, Any]:
    # Through the collection's name: the filter imports plugin_utils by it.
    functions: dict[str, Any] = load_plugin("filter", "clusterforge").FilterModule().filters()
    return functions


NAMES = {
    "module": stems("modules"),
    "filter": sorted(filter_functions()),
    "strategy": stems("strategy"),
}


@cache
def ansible_doc(plugin_type: str) -> dict[str, Any]:
    """ansible-doc's JSON for every plugin of this type, by short name."""
    names = [f"{COLLECTION}.{name}" for name in NAMES[plugin_type]]
    # Only the checkout's ansible.cfg decides where collections are; a caller's setting
    # would document another copy of the collection.
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    answer = subprocess.run(
        [str(ANSIBLE_DOC), "--json", "-t", plugin_type, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    assert "[ERROR]" not in answer.stderr, answer.stderr
    assert "[WARNING]" not in answer.stderr.replace("[WARNING]: Deprecation", ""), answer.stderr
    documented: dict[str, Any] = json.loads(answer.stdout)
    return {name.removeprefix(f"{COLLECTION}."): doc for name, doc in documented.items()}


def valid_args(action: Path) -> set[str]:
    """The ``_VALID_ARGS`` of an action plugin, read from its source."""
    for node in ast.walk(ast.parse(action.read_text())):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "_VALID_ARGS"
        ):
            call = node.value
            assert isinstance(call, ast.Call)
            return set(ast.literal_eval(call.args[0]))
    raise AssertionError(f"{action} has no _VALID_ARGS")


def test_every_plugin_type_has_plugins() -> None:
    assert len(NAMES["module"]) >= 9
    assert len(NAMES["filter"]) >= 7
    # What restarts is the plan's decision (clusterforge_plan with changes:, and
    # rollout.nodes[host].config_restart from its look), no filter's.
    assert not {
        "clusterforge_restart_reasons",
        "clusterforge_rolling_batches",
        "clusterforge_settings_needing_restart",
    } & set(NAMES["filter"])
    assert NAMES["strategy"] == ["mitogen_linear"]


@pytest.mark.parametrize("plugin_type", sorted(NAMES))
def test_ansible_doc_documents_every_plugin(plugin_type: str) -> None:
    documented = ansible_doc(plugin_type)
    assert sorted(documented) == NAMES[plugin_type]
    for name, entry in documented.items():
        doc = entry["doc"]
        assert doc, f"{name}: no DOCUMENTATION"
        assert doc.get("module", doc.get("name")) == name
        assert doc["short_description"].strip(), name
        assert doc["description"] and all(line.strip() for line in doc["description"]), name
        for option, spec in (doc.get("options") or {}).items():
            assert spec.get("description"), f"{name}: option {option} has no description"
            assert spec.get("type"), f"{name}: option {option} has no type"
        if plugin_type != "strategy":
            assert entry["examples"] and yaml.safe_load(entry["examples"]), name
            assert entry["return"], f"{name}: no RETURN"


def test_every_action_plugin_has_its_documentation_module() -> None:
    assert set(stems("action")) <= set(NAMES["module"])


@pytest.mark.parametrize("action", stems("action"))
def test_an_action_plugin_documents_exactly_the_arguments_it_accepts(action: str) -> None:
    options = set(ansible_doc("module")[action]["doc"].get("options") or {})
    assert options == valid_args(PLUGINS / "action" / f"{action}.py")


# Action plugins that run the module file of their own name on the host, in one module
# run (clusterforge_observe: issue 54); the module's hidden ``_*`` arguments are given by
# the action, never by a task, so its documentation stays the task's (_VALID_ARGS).
RUN_BY_THEIR_ACTION = frozenset({"clusterforge_observe"})


def test_a_documentation_module_holds_no_code() -> None:
    """A module file beside an action plugin only documents it: a task runs the action.
    Unless the action runs that module itself (RUN_BY_THEIR_ACTION)."""
    for action in sorted(set(stems("action")) - RUN_BY_THEIR_ACTION):
        tree = ast.parse((PLUGINS / "modules" / f"{action}.py").read_text())
        names = [
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        ]
        code = [
            node
            for node in tree.body
            if not isinstance(node, ast.Assign | ast.ImportFrom | ast.Expr)
        ]
        assert names == ["DOCUMENTATION", "EXAMPLES", "RETURN"] and not code, action


@pytest.mark.parametrize("action", sorted(RUN_BY_THEIR_ACTION))
def test_a_module_its_action_runs_takes_only_hidden_arguments_beyond_the_tasks(
    action: str,
) -> None:
    assert f'"{COLLECTION}.{action}"' in (PLUGINS / "action" / f"{action}.py").read_text()
    module = (PLUGINS / "modules" / f"{action}.py").read_text()
    spec: dict[str, Any] = {}
    for node in ast.walk(ast.parse(module)):
        if isinstance(node, ast.keyword) and node.arg == "argument_spec":
            spec = ast.literal_eval(node.value)
    task_arguments = valid_args(PLUGINS / "action" / f"{action}.py")
    assert task_arguments <= set(spec)
    assert all(name.startswith("_") for name in set(spec) - task_arguments), spec


@pytest.mark.parametrize("name", NAMES["filter"])
def test_a_filter_documents_exactly_its_parameters(name: str) -> None:
    doc = ansible_doc("filter")[name]["doc"]
    parameters = list(inspect.signature(filter_functions()[name]).parameters)
    assert set(doc["options"]) == {"_input", *parameters[1:]}
    positional = [part.strip() for part in doc["positional"].split(",")]
    assert positional == ["_input", *positional[1:]]
    assert set(positional) <= set(doc["options"])
