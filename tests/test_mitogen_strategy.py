"""The Mitogen strategy wrapper's corrections, read back through Mitogen's own code."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from collection_plugins import load_plugin

transport_config = pytest.importorskip("ansible_mitogen.transport_config")
mitogen_connection = pytest.importorskip("ansible_mitogen.connection")


def load_wrapper() -> ModuleType:
    return load_plugin("strategy", "mitogen_linear")


class HostSettings:
    """What a task's connection answers for one variable; nothing else is set."""

    def __init__(self, compression: bool | None) -> None:
        self.compression = compression

    def get_task_var(self, name: str, default: Any = None) -> Any:
        return self.compression if name == "mitogen_ssh_compression" else default


def ssh_arguments(compression: bool | None) -> dict[str, Any]:
    """The arguments Mitogen builds for an SSH connection from a host's settings."""

    class Spec(transport_config.PlayContextSpec):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:  # the rest of a real spec is not needed here
            self._connection = HostSettings(compression)

    for name in (
        "host_key_checking",
        "private_key_file",
        "remote_addr",
        "remote_user",
        "password",
        "port",
        "python_path",
        "ssh_executable",
        "timeout",
        "ssh_args",
        "verbosity",
        "mitogen_ssh_keepalive_count",
        "mitogen_ssh_keepalive_interval",
        "mitogen_mask_remote_name",
        "inventory_name",
    ):
        setattr(Spec, name, lambda self: None)
    arguments: dict[str, Any] = mitogen_connection._connect_ssh(Spec())["kwargs"]
    return arguments


def test_ssh_compression_is_off_unless_a_host_asks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Put back what the wrapper replaces once this test ends.
    for spec in (transport_config.PlayContextSpec, transport_config.MitogenViaSpec):
        monkeypatch.setattr(spec, "mitogen_ssh_compression", spec.mitogen_ssh_compression)
    assert ssh_arguments(None)["compression"] is True  # Mitogen's own default
    load_wrapper()._compress_only_when_asked()
    assert ssh_arguments(None)["compression"] is False
    assert ssh_arguments(True)["compression"] is True
    assert ssh_arguments(False)["compression"] is False


def test_processes_are_left_to_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    affinity = pytest.importorskip("ansible_mitogen.affinity")
    monkeypatch.setattr(affinity, "policy", affinity.policy)
    load_wrapper()._leave_cpus_to_the_scheduler()
    assert type(affinity.policy) is affinity.Policy


def test_module_scans_are_kept_on_disk_until_a_file_they_name_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wrapper answers Mitogen's module_utils scan from its disk cache, and scans
    again when the module, a file it imports, or the search path's directory changes."""
    module_finder = pytest.importorskip("ansible_mitogen.module_finder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    utils = tmp_path / "module_utils"
    utils.mkdir()
    (utils / "helper.py").write_text("VALUE = 1\n")
    # An old time on the directory, so the file added below changes it whatever the
    # clock's resolution.
    os.utime(utils, (1_000_000, 1_000_000))
    module = tmp_path / "probe.py"
    module.write_text("from ansible.module_utils.helper import VALUE\n")
    scans: list[str] = []

    def counted(**arguments: Any) -> Any:
        scans.append(arguments["module_name"])
        return module_finder.scan(**arguments)

    scan = load_wrapper().cached_scan(counted, ["versions"])
    arguments = {"module_name": "probe", "module_path": str(module), "search_path": [str(utils)]}

    first = scan(**arguments)
    assert ("ansible.module_utils.helper", str(utils / "helper.py"), False) in first
    assert scan(**arguments) == first
    assert len(scans) == 1
    assert list((tmp_path / "cache" / "clusterforge" / "mitogen-scan").glob("*.json"))

    (utils / "helper.py").write_text("VALUE = 22\n")  # an imported file changes
    scan(**arguments)
    (utils / "other.py").write_text("")  # the search path's directory changes
    scan(**arguments)
    module.write_text("from ansible.module_utils.other import *\n")  # the module changes
    assert ("ansible.module_utils.other", str(utils / "other.py"), False) in scan(**arguments)
    assert len(scans) == 4
    assert scan(**arguments) and len(scans) == 4
