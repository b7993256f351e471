"""The clusterforge_files module, run as Ansible runs it (its arguments in a JSON file),
on real files in a temporary directory."""

from __future__ import annotations

import json
import os
import pwd
import stat
from pathlib import Path
from typing import Any

import pytest

from module_runner import run_module

MODULE = Path(__file__).resolve().parents[1] / "plugins" / "modules" / "clusterforge_files.py"
USER = "root" if os.geteuid() == 0 else None


def run(
    tmp_path: Path,
    check: bool = False,
    diff: bool = False,
    env: dict[str, str] | None = None,
    **args: Any,
) -> dict[str, Any]:
    return run_module(
        MODULE, tmp_path, {**args, "_ansible_check_mode": check, "_ansible_diff": diff}, env
    )


def owned(path: Path, mode: str, **extra: Any) -> dict[str, Any]:
    user = USER or Path.home().owner()
    return {"path": str(path), "owner": user, "group": user, "mode": mode, **extra}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    return root


def test_places_once_then_reports_nothing_changed(tmp_path: Path, tree: Path) -> None:
    args = {
        "directories": [owned(tree / "conf", "0750")],
        "files": [owned(tree / "conf" / "a.yml", "0640", content="a: 1\n")],
        "read": [str(tree / "conf" / "a.yml")],
    }
    first = run(tmp_path, **args)
    assert first["changed"] is True
    assert first["changed_paths"] == [str(tree / "conf"), str(tree / "conf" / "a.yml")]
    assert first["before"] == {str(tree / "conf" / "a.yml"): None}
    assert (tree / "conf" / "a.yml").read_text() == "a: 1\n"
    assert mode_of(tree / "conf") == 0o750
    assert mode_of(tree / "conf" / "a.yml") == 0o640
    second = run(tmp_path, **args)
    assert second["changed"] is False
    assert second["changed_paths"] == []
    assert second["before"] == {str(tree / "conf" / "a.yml"): "a: 1\n"}


def test_check_mode_reports_and_writes_nothing_and_diffs_only_what_is_not_secret(
    tmp_path: Path, tree: Path
) -> None:
    (tree / "a.yml").write_text("a: 1\n")
    (tree / "a.yml").chmod(0o640)
    args = {
        "files": [
            owned(tree / "a.yml", "0640", content="a: 2\n"),
            owned(tree / "key.pem", "0600", content="SECRET\n", secret=True),
        ]
    }
    preview = run(tmp_path, check=True, diff=True, **args)
    assert preview["changed_paths"] == [str(tree / "a.yml"), str(tree / "key.pem")]
    assert preview["diff"] == [
        {
            "before_header": str(tree / "a.yml"),
            "after_header": str(tree / "a.yml"),
            "before": "a: 1\n",
            "after": "a: 2\n",
        }
    ]
    assert "SECRET" not in json.dumps(preview)
    assert (tree / "a.yml").read_text() == "a: 1\n"
    assert not (tree / "key.pem").exists()


def test_a_mode_alone_is_fixed_without_rewriting(tmp_path: Path, tree: Path) -> None:
    target = tree / "a.yml"
    target.write_text("a: 1\n")
    target.chmod(0o644)
    inode = target.stat().st_ino
    result = run(tmp_path, files=[owned(target, "0640", content="a: 1\n")])
    assert result["changed_paths"] == [str(target)]
    assert mode_of(target) == 0o640
    assert target.stat().st_ino == inode


def test_a_seeded_file_is_copied_once_and_never_overwritten(tmp_path: Path, tree: Path) -> None:
    seed = tree / "shipped.options"
    seed.write_text("-Xss1m\n")
    target = tree / "jvm.options"
    args = {"files": [owned(target, "0640", seed_from=str(seed))]}
    assert run(tmp_path, **args)["changed_paths"] == [str(target)]
    target.write_text("-Xss2m\n")  # the operator's own edit
    target.chmod(0o640)
    assert run(tmp_path, **args)["changed"] is False
    assert target.read_text() == "-Xss2m\n"


def test_a_link_switch_keeps_the_generation_it_replaced_and_prunes_older(
    tmp_path: Path, tree: Path
) -> None:
    for name in ("gen-old", "gen-live", "gen-new"):
        (tree / name).mkdir()
    (tree / "live").symlink_to("gen-live")
    result = run(
        tmp_path,
        links=[{"path": str(tree / "live"), "target": "gen-new"}],
        prune=[{"dir": str(tree), "pattern": "gen-*"}],
    )
    assert result["changed_paths"] == [str(tree / "live"), str(tree / "gen-old")]
    assert os.readlink(tree / "live") == "gen-new"
    assert sorted(path.name for path in tree.iterdir()) == ["gen-live", "gen-new", "live"]


def test_absent_paths_are_removed_and_missing_ones_change_nothing(
    tmp_path: Path, tree: Path
) -> None:
    (tree / "demo.yml").write_text("admin: admin\n")
    args = {"absent": [str(tree / "demo.yml"), str(tree / "never.yml")]}
    assert run(tmp_path, **args)["changed_paths"] == [str(tree / "demo.yml")]
    assert run(tmp_path, **args)["changed"] is False


def test_a_file_whose_directory_is_missing_is_refused_by_name(tmp_path: Path, tree: Path) -> None:
    result = run(tmp_path, files=[owned(tree / "nowhere" / "a.yml", "0640", content="a\n")])
    assert result["failed"] is True
    assert "list it in directories" in result["msg"]


def test_read_matching_returns_every_match_and_changes_nothing(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    for name, version in (("opensearch-security", "2.19.4.0"), ("analysis-smartcn", "2.19.4")):
        (plugins / name).mkdir(parents=True)
        (plugins / name / "plugin-descriptor.properties").write_text(f"version={version}\n")
    (plugins / "no-descriptor").mkdir()
    result = run(tmp_path, read_matching=[f"{plugins}/*/plugin-descriptor.properties"])
    assert result["changed"] is False
    assert result["before"] == {
        f"{plugins}/analysis-smartcn/plugin-descriptor.properties": "version=2.19.4\n",
        f"{plugins}/opensearch-security/plugin-descriptor.properties": "version=2.19.4.0\n",
    }
    assert run(tmp_path, read_matching=[f"{tmp_path}/none/*/x"])["before"] == {}


def test_exists_reports_each_path_before_the_task_without_reading_it(tmp_path: Path) -> None:
    directory = tmp_path / "made"
    (tmp_path / "launcher").write_text("#!/bin/sh\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    result = run(
        tmp_path,
        directories=[owned(directory, "0755")],
        exists=[str(tmp_path / "launcher"), str(tmp_path / "dangling"), str(directory)],
    )
    assert result["changed"] is True
    # The directory this task made did not exist before it; a dangling link does.
    assert result["existed"] == {
        str(tmp_path / "launcher"): True,
        str(tmp_path / "dangling"): True,
        str(directory): False,
    }
    assert "before" in result and result["before"] == {}


def test_accounts_are_made_or_fixed_with_the_system_tools_and_left_when_right(
    tmp_path: Path,
) -> None:
    """The account tools here are recording stand-ins on PATH (the test must not add users
    to the machine it runs on); the lookups are the machine's own, so root is an account
    that exists and a random name one that does not. Molecule's scenarios make the real
    accounts in containers, and their idempotence checks hold every rerun to changed=0."""
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    for tool in ("groupadd", "useradd", "usermod"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\n')
        (tools / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    absent = f"cf-absent-{os.getpid()}"
    new = {"name": absent, "home": "/var/lib/example"}

    preview = run(tmp_path, check=True, env=env, accounts=[new])
    assert preview["changed_accounts"] == [f"group {absent}", f"user {absent}"]
    assert preview["changed"] and not calls.exists()

    made = run(tmp_path, env=env, accounts=[new])
    assert made["changed_accounts"] == [f"group {absent}", f"user {absent}"]
    assert calls.read_text().splitlines() == [
        f"groupadd --system {absent}",
        f"useradd --system --gid {absent} --home-dir /var/lib/example --no-create-home "
        f"--shell /usr/sbin/nologin {absent}",
    ]

    calls.unlink()
    root = pwd.getpwnam("root")
    same = run(
        tmp_path, env=env, accounts=[{"name": "root", "home": root.pw_dir, "shell": root.pw_shell}]
    )
    assert (same["changed"], same["changed_accounts"], calls.exists()) == (False, [], False)

    moved = run(
        tmp_path, env=env, accounts=[{"name": "root", "home": "/elsewhere", "shell": root.pw_shell}]
    )
    assert moved["changed_accounts"] == ["user root"]
    assert calls.read_text().splitlines() == ["usermod --home /elsewhere root"]


def test_a_failing_account_tool_fails_the_task_with_its_message(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "groupadd").write_text(
        '#!/bin/sh\necho "groupadd: cannot lock /etc/group" >&2\nexit 10\n'
    )
    (tools / "groupadd").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    result = run(tmp_path, env=env, accounts=[{"name": f"cf-absent-{os.getpid()}", "home": "/x"}])
    assert result["failed"]
    assert "exit code 10" in result["msg"] and "cannot lock /etc/group" in result["msg"]


def fake_systemctl(tmp_path: Path, output: str, rc: int = 0) -> dict[str, str]:
    """A stand-in systemctl on PATH that records its arguments and prints ``output``: the
    machine the tests run on may have no systemd; the real one runs in molecule's hosts."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tmp_path / "out").write_text(output)
    (tools / "systemctl").write_text(
        f'#!/bin/sh\necho "$*" >> "{tmp_path / "calls"}"\ncat "{tmp_path / "out"}"\nexit {rc}\n'
    )
    (tools / "systemctl").chmod(0o755)
    return {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}


SHOW = (
    "Id=a.service\nActiveState=active\nUnitFileState=enabled\n\n"
    "Id=b.service\nActiveState=inactive\nUnitFileState=\n"
)


def test_defer_when_missing_places_only_the_links_until_every_path_exists(
    tmp_path: Path, tree: Path
) -> None:
    """A first deploy: a binary is missing, so only the mask is placed (before the
    package's install could start its unit); the files, which the package's users own,
    wait for the task after the install, and no unit state is read."""
    env = fake_systemctl(tmp_path, SHOW)
    binary = tree / "binary"
    args = {
        "links": [{"path": str(tree / "debian.service"), "target": "/dev/null"}],
        "exists": [str(binary), str(tree)],
        "defer_when_missing": True,
        "directories": [owned(tree / "conf", "0750")],
        "files": [owned(tree / "conf" / "a.yml", "0640", content="a: 1\n")],
        "units": ["a.service", "b.service"],
    }
    first = run(tmp_path, env=env, **args)
    assert (first["deferred"], first["changed_paths"]) == (True, [str(tree / "debian.service")])
    assert first["changed_links"] == [str(tree / "debian.service")]
    assert first["unit_states"] == {}
    assert os.readlink(tree / "debian.service") == "/dev/null"
    assert not (tree / "conf").exists() and not (tmp_path / "calls").exists()

    binary.write_text("")  # the package is installed: the rerun places everything at once
    rerun = run(tmp_path, env=env, **args)
    assert rerun["deferred"] is False
    assert rerun["changed_paths"] == [str(tree / "conf"), str(tree / "conf" / "a.yml")]
    assert rerun["changed_links"] == []
    assert (tree / "conf" / "a.yml").read_text() == "a: 1\n"
    assert rerun["unit_states"] == {
        "a.service": {"ActiveState": "active", "UnitFileState": "enabled"},
        "b.service": {"ActiveState": "inactive", "UnitFileState": ""},
    }
    assert (tmp_path / "calls").read_text().splitlines() == [
        "show --property=Id,ActiveState,UnitFileState -- a.service b.service"
    ]
    settled = run(tmp_path, env=env, **args)
    assert (settled["changed"], settled["deferred"], settled["changed_paths"]) == (False, False, [])


def test_defer_when_missing_with_no_path_named_always_defers(tmp_path: Path, tree: Path) -> None:
    """Nothing tells the packages are installed (apt is asked every run), so the files
    always wait for the install."""
    result = run(
        tmp_path,
        defer_when_missing=True,
        files=[owned(tree / "a.yml", "0640", content="a: 1\n")],
    )
    assert (result["deferred"], result["changed"]) == (True, False)
    assert not (tree / "a.yml").exists()
    # Without defer_when_missing nothing is deferred, as before.
    placed = run(tmp_path, files=[owned(tree / "a.yml", "0640", content="a: 1\n")])
    assert (placed["deferred"], placed["changed_paths"]) == (False, [str(tree / "a.yml")])


def test_a_preview_of_a_hand_edited_file_in_the_one_task_diffs_it_and_changes_nothing(
    tmp_path: Path, tree: Path
) -> None:
    env = fake_systemctl(tmp_path, SHOW)
    (tree / "binary").write_text("")
    (tree / "a.yml").write_text("a: edited\n")
    (tree / "a.yml").chmod(0o640)
    args = {
        "links": [{"path": str(tree / "debian.service"), "target": "/dev/null"}],
        "exists": [str(tree / "binary")],
        "defer_when_missing": True,
        "files": [
            owned(tree / "a.yml", "0640", content="a: 1\n"),
            owned(tree / "key", "0600", content="s3cret\n", secret=True),
        ],
        "units": ["a.service", "b.service"],
    }
    preview = run(tmp_path, check=True, diff=True, env=env, **args)
    assert preview["deferred"] is False
    assert preview["changed_paths"] == [
        str(tree / "a.yml"),
        str(tree / "key"),
        str(tree / "debian.service"),
    ]
    assert [(d["before_header"], d["before"], d["after"]) for d in preview["diff"]] == [
        (str(tree / "a.yml"), "a: edited\n", "a: 1\n")
    ]
    assert "s3cret" not in json.dumps(preview)
    assert preview["unit_states"]["b.service"]["ActiveState"] == "inactive"
    assert (tree / "a.yml").read_text() == "a: edited\n"
    assert not (tree / "key").exists() and not (tree / "debian.service").is_symlink()


def test_a_failing_or_short_systemctl_show_fails_the_task_by_name(
    tmp_path: Path, tree: Path
) -> None:
    env = fake_systemctl(tmp_path, "Failed to connect to bus\n", rc=1)
    failed = run(tmp_path, env=env, units=["a.service"])
    assert failed["failed"] and "systemctl show failed with exit code 1" in failed["msg"]
    env = fake_systemctl(tmp_path, SHOW)
    short = run(tmp_path, env=env, units=["a.service", "b.service", "c.service"])
    assert short["failed"] and "printed 2 blocks for 3 units" in short["msg"]
