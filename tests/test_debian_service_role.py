"""The one install pattern of a Debian-packaged service (issue 51, item 4): mask Debian's
units, install the packages, place the files, restart or reload on change, start. It is
written once, in roles/_debian_service, and tls_proxy, monitoring and node_exporter
import it with their plan as data; what differs between them is data, never a branch on
the caller's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_templating import trusted
from clusterforge.plan.monitoring.monitoring import debian_install as monitoring_install
from clusterforge.plan.services.tls_proxy import debian_install as proxy_install

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "roles" / "_debian_service"
CALLERS = {
    "tls_proxy": "proxy.yml",
    "monitoring": "monitoring.yml",
    "node_exporter": "node_exporter.yml",
}
# The steps of the pattern: only the shared role runs them.
PATTERN_MODULES = {"ansible.builtin.apt", "ansible.builtin.systemd_service"}


def _tasks(path: Path) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text()) or []


def _import(role: str) -> dict[str, Any]:
    imports = [
        task
        for task in _tasks(ROOT / "roles" / role / "tasks" / CALLERS[role])
        if task.get("ansible.builtin.import_role", {}).get("name")
        == "clusterforge.stack._debian_service"
    ]
    assert len(imports) == 1, f"roles/{role} imports the shared steps once"
    return imports[0]


@pytest.mark.parametrize("role", sorted(CALLERS))
def test_each_caller_imports_the_shared_steps_and_runs_none_of_its_own(role: str) -> None:
    _import(role)
    for path in (ROOT / "roles" / role / "tasks").glob("*.yml"):
        own = [task["name"] for task in _tasks(path) if PATTERN_MODULES & set(task)]
        assert own == [], f"{path.relative_to(ROOT)} runs {own} itself"


def test_the_shared_steps_name_no_caller() -> None:
    # The tasks as Ansible reads them: the comments may say who uses them.
    text = "\n".join(yaml.safe_dump(_tasks(path)) for path in (SHARED / "tasks").glob("*.yml"))
    assert not [role for role in CALLERS if role in text]


def test_every_required_input_is_given_by_every_caller() -> None:
    options = yaml.safe_load((SHARED / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"
    ]["main"]["options"]
    required = {name for name, option in options.items() if option.get("required")}
    for role in CALLERS:
        given = set(_import(role)["vars"])
        assert required <= given, f"roles/{role} misses {sorted(required - given)}"
        assert given <= set(options), f"roles/{role} gives {sorted(given - set(options))}"


def test_the_optional_inputs_defaults_are_the_specs_and_the_readme_lists_each() -> None:
    options = yaml.safe_load((SHARED / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"
    ]["main"]["options"]
    defaults = yaml.safe_load((SHARED / "defaults" / "main.yml").read_text())
    assert defaults == {
        name: option["default"] for name, option in options.items() if "default" in option
    }
    readme = (SHARED / "README.md").read_text()
    assert not [name for name in options if f"`{name}`" not in readme]


def test_the_restart_and_reload_rules_are_each_callers_as_before() -> None:
    """tls_proxy: a new unit restarts, any other change reloads, a restarted proxy is not
    reloaded too. monitoring: each unit's restart_paths restart it, any change reloads
    Prometheus, Alertmanager and the blackbox exporter, restarted or not. node_exporter:
    a new unit restarts, nothing reloads."""
    proxy, monitoring, exporter = (
        _import(role)["vars"] for role in ("tls_proxy", "monitoring", "node_exporter")
    )
    assert "__tls_proxy_plan.unit_path" in proxy["_debian_service_restart_paths"]
    assert proxy["_debian_service_reloads"] == proxy["_debian_service_units"]
    assert proxy["_debian_service_reload_restarted"] is False
    assert monitoring["_debian_service_restart_paths"] == "{{ monitoring_plan.restart_paths }}"
    assert monitoring["_debian_service_reloads"] == "{{ monitoring_plan.units }}"
    assert monitoring["_debian_service_reload_restarted"] is True
    assert "_node_exporter_unit_path" in exporter["_debian_service_restart_paths"]
    assert exporter["_debian_service_reloads"] == []


def test_the_package_and_unit_lists_come_from_python() -> None:
    """The proxy's, as the monitoring's: in the plan, in the shared role's shape; the
    proxy names no binary, so apt is asked on every run as before."""
    assert proxy_install() == {
        "packages": ["nginx"],
        "masks": [{"path": "/etc/systemd/system/nginx.service", "target": "/dev/null"}],
        "binaries": [],
    }
    assert set(monitoring_install(["prometheus"])) == set(proxy_install())


# The role's decisions as Ansible evaluates them (its templating, its tests and filters),
# task by task, with the modules' results given: which tasks run on a rerun, a first
# deploy, a preview, after a hand edit (issue 54: a rerun is one round trip per host).
MASK = "/etc/systemd/system/debian-a.service"
INPUTS = {
    "_debian_service_packages": ["pkg"],
    "_debian_service_masks": [{"path": MASK, "target": "/dev/null"}],
    "_debian_service_binaries": ["/usr/bin/a"],
    "_debian_service_files": [],
    "_debian_service_units": ["a.service", "b.service"],
    "_debian_service_restart_paths": {
        "a.service": ["/etc/systemd/system/a.service"],
        "b.service": ["/etc/systemd/system/b.service"],
    },
    "_debian_service_reloads": ["a.service"],
}
RUNNING = {"ActiveState": "active", "UnitFileState": "enabled"}
STOPPED = {"ActiveState": "inactive", "UnitFileState": ""}


def placed(
    changed_paths: list[str] | None = None,
    *,
    deferred: bool = False,
    states: dict[str, dict[str, str]] | None = None,
    accounts: list[str] | None = None,
    existed: bool = True,
) -> dict[str, Any]:
    """A clusterforge_files result as the module returns it."""
    return {
        "changed": bool(changed_paths or accounts),
        "changed_paths": changed_paths or [],
        "changed_links": [path for path in changed_paths or [] if path == MASK],
        "changed_accounts": accounts or [],
        "existed": {"/usr/bin/a": existed},
        "deferred": deferred,
        "unit_states": {}
        if deferred
        else (states or dict.fromkeys(INPUTS["_debian_service_units"], RUNNING)),
    }


def converge(
    results: dict[str, dict[str, Any]], check: bool = False, **inputs: Any
) -> tuple[dict[str, list[str] | bool], dict[str, Any]]:
    """Run the role's tasks' conditions in order. ``results`` gives each clusterforge_files
    task's result by its register name; apt and systemd_service change when they run.
    Returns, per task, whether it ran (or the items it ran for), and the final variables."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    defaults = yaml.safe_load((SHARED / "defaults" / "main.yml").read_text())
    role_vars = yaml.safe_load((SHARED / "vars" / "main.yml").read_text())
    variables: dict[str, Any] = {
        **defaults,
        **INPUTS,
        **inputs,
        **trusted(role_vars),
        "ansible_check_mode": check,
    }
    ran: dict[str, list[str] | bool] = {}
    for task in trusted(_tasks(SHARED / "tasks" / "main.yml")):
        templar = Templar(loader=DataLoader(), variables=variables)
        register = task.get("register")
        if "loop" in task:
            items = templar.template(task["loop"])
            done = []
            for item in items:
                with_item = Templar(loader=DataLoader(), variables={**variables, "item": item})
                if with_item.evaluate_conditional(task.get("when", True)):
                    done.append({"item": item, "changed": True})
                else:
                    done.append({"item": item, "changed": False, "skipped": True})
            ran[task["name"]] = [row["item"] for row in done if not row.get("skipped")]
            result: dict[str, Any] = {"changed": bool(ran[task["name"]]), "results": done}
        else:
            runs = templar.evaluate_conditional(task.get("when", True))
            ran[task["name"]] = runs
            if not runs:
                result = {"changed": False, "skipped": True}
            elif "clusterforge.stack.clusterforge_files" in task:
                result = results[register]
            else:
                result = {"changed": True}
        if register:
            variables[register] = result
    return ran, variables


MASK_TASK = "Mask Debian's units, and where the packages are installed place their files"
APT = "Install Debian's packages"
FILES = "Write the accounts, directories and files the plan holds"
RESTART = "Restart the units whose restart paths changed"
RELOAD = "Reload the units that reload their files when the files changed"
START = "Enable and start the units that do not run"
# The converge gate's two includes (roles/_converged) run in every play that gets this far:
# a host whose record held ended the play at the first, before any task above.
GATE = "End this play for a host whose service's last converge still holds"
RECORD = "Record this host's converge of the service for the next run's gate"


def _only(ran: dict[str, list[str] | bool], **expected: Any) -> None:
    """Every task but the mask task is skipped (False or no item), except those given."""
    wanted = {
        GATE: True,
        MASK_TASK: True,
        APT: False,
        FILES: False,
        RESTART: [],
        RELOAD: [],
        START: [],
        RECORD: True,
    }
    assert ran == {**wanted, **expected}


def _files_changed(variables: dict[str, Any]) -> bool:
    """As the caller's wait reads it, after the import: the role's vars and the registered
    results are there, its inputs (task vars of the imported tasks) are not."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = yaml.safe_load((SHARED / "vars" / "main.yml").read_text())
    registered = {name: variables[name] for name in variables if name not in role_vars}
    after_import = {
        **{name: value for name, value in registered.items() if not name.startswith("_debian")},
        **trusted(role_vars),
    }
    templar = Templar(loader=DataLoader(), variables=after_import)
    return bool(
        templar.evaluate_conditional(trust_as_template("__debian_service_files_changed | bool"))
    )


def test_an_idempotent_rerun_is_the_one_mask_task() -> None:
    ran, variables = converge({"__debian_service_mask": placed()})
    _only(ran)
    assert _files_changed(variables) is False


def test_a_rerun_after_a_hand_edit_reloads_or_restarts_as_before() -> None:
    edited = placed(["/etc/a.conf"])
    ran, variables = converge({"__debian_service_mask": edited})
    _only(ran, **{RELOAD: ["a.service"]})
    assert _files_changed(variables) is True
    unit = placed(["/etc/systemd/system/b.service"])
    ran, _vars = converge({"__debian_service_mask": unit})
    # b restarts; a reloads (its restart paths did not change); b, just restarted, is not
    # started again.
    _only(ran, **{RESTART: ["b.service"], RELOAD: ["a.service"]})
    accounts = placed(accounts=["user a"])
    ran, variables = converge({"__debian_service_mask": accounts})
    _only(ran, **{RELOAD: ["a.service"]})
    assert _files_changed(variables) is True


def test_a_mask_removed_by_hand_restarts_every_unit_and_reloads_none() -> None:
    ran, variables = converge({"__debian_service_mask": placed([MASK])})
    _only(ran, **{RESTART: ["a.service", "b.service"]})
    assert _files_changed(variables) is False


def test_a_unit_stopped_by_hand_is_started_and_only_it() -> None:
    states = {"a.service": RUNNING, "b.service": STOPPED}
    ran, _vars = converge({"__debian_service_mask": placed(states=states)})
    _only(ran, **{START: ["b.service"]})
    enabled_runtime = {"a.service": {"ActiveState": "active", "UnitFileState": "enabled-runtime"}}
    ran, _vars = converge(
        {
            "__debian_service_mask": placed(
                states={**states, **enabled_runtime, "b.service": RUNNING}
            )
        }
    )
    _only(ran)


def test_a_first_deploy_masks_then_installs_then_writes_the_files() -> None:
    """The mask task places only the masks (deferred), apt installs, the files task after it
    places the files and reads the states; the new mask restarts every unit, so none is
    started again, except in a preview, where the restart changed nothing."""
    results = {
        "__debian_service_mask": placed([MASK], deferred=True, existed=False),
        "__debian_service_files": placed(
            ["/etc/a.conf", "/etc/systemd/system/a.service"],
            accounts=["group a", "user a"],
            states=dict.fromkeys(INPUTS["_debian_service_units"], STOPPED),
        ),
    }
    ran, variables = converge(results)
    every = ["a.service", "b.service"]
    _only(ran, **{APT: True, FILES: True, RESTART: every})
    assert _files_changed(variables) is True
    preview, _vars = converge(results, check=True)
    _only(preview, **{APT: True, FILES: True, RESTART: every, START: every})


def test_a_package_removed_by_hand_is_installed_again_and_nothing_else_runs() -> None:
    results = {
        "__debian_service_mask": placed(deferred=True, existed=False),
        "__debian_service_files": placed(),
    }
    ran, variables = converge(results)
    _only(ran, **{APT: True, FILES: True})
    assert _files_changed(variables) is False


def test_with_no_binary_named_apt_and_the_files_task_run_every_time() -> None:
    results = {
        "__debian_service_mask": placed(deferred=True),
        "__debian_service_files": placed(),
    }
    ran, _vars = converge(results, _debian_service_binaries=[])
    _only(ran, **{APT: True, FILES: True})


def test_the_one_task_carrying_the_files_before_the_install_is_no_log_and_defers() -> None:
    tasks = _tasks(SHARED / "tasks" / "main.yml")
    names = [task["name"] for task in tasks]
    assert names.index(MASK_TASK) < names.index(APT) < names.index(FILES)
    for task in tasks:
        if "clusterforge.stack.clusterforge_files" in task:
            assert task.get("no_log") is True, task["name"]
    first = tasks[names.index(MASK_TASK)]["clusterforge.stack.clusterforge_files"]
    assert first["defer_when_missing"] is True
    assert first["links"] == "{{ _debian_service_masks }}"
    assert first["files"] == "{{ _debian_service_files }}"
    # No task of its own reads the units' states any more.
    assert not [task["name"] for task in tasks if "ansible.builtin.command" in task]
