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
