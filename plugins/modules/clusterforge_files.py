"""Module: place a role's whole set of planned files (and their accounts) in one task.

A rerun used to cost one task per file, directory and marker, and each task costs the
controller about as much as the work it does (issue 14). This module takes every
directory, file, link and removal a step needs, compares each with what the host has,
changes only what differs, and reports which paths changed. What to write is decided by
the plan on the control node; this module decides nothing, it only places.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_files
short_description: Place a planned set of directories, files and links in one task
description:
  - Compares every entry with the host and changes only what differs (content, owner,
    group, mode, link target), writing files atomically (a temporary file in the same
    directory, then a rename).
  - Check mode reports what would change and changes nothing; with C(--diff) the content
    changes of files not marked C(secret) are shown, headed by their paths.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  accounts:
    description:
      - System accounts the entries below may name as owner, made first. Each entry
        has C(name), C(home) and C(shell) (default C(/usr/sbin/nologin)) and makes a
        system group C(name) and a system user C(name) in it, with that home (not
        created) and shell.
      - An existing user's primary group, home and shell are set to these, as
        M(ansible.builtin.user) would; its uid is kept.
    type: list
    elements: dict
    default: []
  directories:
    description: Directories to create or fix (C(path), C(owner), C(group), C(mode)).
    type: list
    elements: dict
    default: []
  files:
    description:
      - Files to place (C(path), C(owner), C(group), C(mode), and C(content) or
        C(seed_from)).
      - C(seed_from) names a file on the host that is copied only while C(path) does not
        exist; its owner, group and mode are enforced every run.
      - C(secret) (default false) keeps the content out of the diff.
    type: list
    elements: dict
    default: []
  attributes:
    description: Owner, group and mode for paths made by something else; a missing path
      is left alone (C(path), C(owner), C(group), C(mode)).
    type: list
    elements: dict
    default: []
  links:
    description: Symbolic links (C(path), C(target)), switched to a new target in one
      rename so a reader never finds the link missing.
    type: list
    elements: dict
    default: []
  prune:
    description: Directory entries to remove (C(dir), C(pattern), a glob), keeping every
      target that a link of C(links) had before this task or has after it.
    type: list
    elements: dict
    default: []
  absent:
    description: Paths to remove.
    type: list
    elements: str
    default: []
  read:
    description: Paths whose content before this task is returned in C(before) (null
      when missing). Only for files that hold no secret.
    type: list
    elements: str
    default: []
  read_matching:
    description: Glob patterns; the content before this task of every path that matches
      one is returned in C(before) as well (every installed plugin's descriptor, say).
      Only for files that hold no secret.
    type: list
    elements: str
    default: []
  exists:
    description: Paths whose existence before this task is returned in C(existed),
      without reading them (an unpacked archive's launcher, a JDK's binary), so the steps
      that make them are skipped with C(when) on a rerun rather than each costing a round
      trip and a checksum of the archive.
    type: list
    elements: str
    default: []
  defer_when_missing:
    description:
      - When true, C(accounts), C(directories), C(files) and C(attributes) are placed only
        if C(exists) names a path and every path it names existed before this task (the
        packages that make those users and paths are installed); otherwise none of them
        is placed, C(deferred) is true, and a later task (after the install) places them.
        C(links), C(prune) and C(absent) are placed either way.
      - So a rerun, where the packages are there, places everything in one round trip,
        and a first deploy still masks a package's units before its install and writes the
        files after it.
    type: bool
    default: false
  units:
    description: systemd units whose C(ActiveState) and C(UnitFileState) after this task's
      changes are returned in C(unit_states) (read with C(systemctl show), in check mode
      too); not read when the placement is C(deferred).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Place the node's files
  clusterforge.stack.clusterforge_files:
    directories:
      - {path: /etc/opensearch, owner: root, group: opensearch, mode: "0750"}
    files:
      - {path: /etc/opensearch/opensearch.yml, content: "{{ rendered }}", owner: root,
         group: opensearch, mode: "0640"}
    read: [/etc/opensearch/opensearch.yml]
  register: placed
"""

RETURN = r"""
changed_accounts:
  description: The groups and users this task made or changed (C(group NAME),
    C(user NAME)), or would, in check mode.
  type: list
  returned: always
  elements: str
changed_paths:
  description: Every path this task changed (or would change, in check mode), in order.
  type: list
  returned: always
  elements: str
changed_links:
  description: The paths of C(links) among C(changed_paths), so a caller tells a changed
    link (a unit just masked) from a changed file in one task's result.
  type: list
  returned: always
  elements: str
before:
  description: The content each path of C(read) and each match of C(read_matching) had
    before this task, or null.
  type: dict
  returned: always; empty without C(read) and C(read_matching)
existed:
  description: For each path of C(exists), whether it existed before this task.
  type: dict
  returned: always; empty without C(exists)
deferred:
  description: Whether C(defer_when_missing) left the accounts, directories, files and
    attributes unplaced because a path of C(exists) was missing (or none was named).
  type: bool
  returned: always
unit_states:
  description: For each unit of C(units), its C(ActiveState) and C(UnitFileState) (as
    C(systemctl show) prints them; empty strings for a property it did not print).
  type: dict
  returned: always; empty without C(units) or when C(deferred)
"""

import fnmatch
import glob
import grp
import os
import pwd
import shutil
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def _ids(module: AnsibleModule, entry: dict[str, Any]) -> tuple[int, int] | None:
    """uid and gid of the entry's owner and group; None when a name does not exist yet
    (possible only in check mode, before the task that creates the user has run)."""
    try:
        uid = pwd.getpwnam(str(entry.get("owner") or "root")).pw_uid
        gid = grp.getgrnam(str(entry.get("group") or "root")).gr_gid
    except KeyError as error:
        if module.check_mode:
            return None
        module.fail_json(msg=f"{entry['path']}: no such user or group on this host: {error}")
    return uid, gid


NOLOGIN = "/usr/sbin/nologin"


def _group_id(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _mode(entry: dict[str, Any]) -> int:
    return int(str(entry["mode"]), 8)


def _attributes_differ(module: AnsibleModule, path: str, entry: dict[str, Any]) -> bool:
    ids = _ids(module, entry)
    if ids is None:
        return True
    info = os.lstat(path)
    return (info.st_uid, info.st_gid) != ids or stat.S_IMODE(info.st_mode) != _mode(entry)


def _apply_attributes(module: AnsibleModule, path: str, entry: dict[str, Any]) -> None:
    ids = _ids(module, entry)
    if ids is not None:
        os.chown(path, *ids)
    os.chmod(path, _mode(entry))


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write_atomically(module: AnsibleModule, path: str, data: bytes, entry: dict[str, Any]) -> None:
    handle, scratch = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".clusterforge-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        _apply_attributes(module, scratch, entry)
        os.replace(scratch, path)
    except BaseException:
        if os.path.exists(scratch):
            os.unlink(scratch)
        raise


class Placement:
    """One run of the module: what differs, applied unless in check mode."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.check = module.check_mode
        self.changed_paths: list[str] = []
        self.changed_accounts: list[str] = []
        self.changed_links: list[str] = []
        self.diffs: list[dict[str, str]] = []

    def account(self, entry: dict[str, Any]) -> None:
        """A system group and a system user of one name; what differs is fixed."""
        name, home = str(entry["name"]), str(entry["home"])
        shell = str(entry.get("shell") or NOLOGIN)
        if _group_id(name) is None:
            self.changed_accounts.append(f"group {name}")
            self._command(["groupadd", "--system", name])
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            self.changed_accounts.append(f"user {name}")
            create = ["useradd", "--system", "--gid", name, "--home-dir", home]
            self._command([*create, "--no-create-home", "--shell", shell, name])
            return
        fixes = [] if user.pw_gid == _group_id(name) else ["--gid", name]
        fixes += [] if user.pw_dir == home else ["--home", home]
        fixes += [] if user.pw_shell == shell else ["--shell", shell]
        if fixes:
            self.changed_accounts.append(f"user {name}")
            self._command(["usermod", *fixes, name])

    def _command(self, argv: list[str]) -> None:
        if self.check:
            return
        executable = self.module.get_bin_path(argv[0], required=True)
        rc, out, err = self.module.run_command([executable, *argv[1:]])
        if rc != 0:
            self.module.fail_json(
                msg=f"{' '.join(argv)} failed with exit code {rc}: {(err or out).strip()}"
            )

    def changed(self, path: str) -> None:
        if path not in self.changed_paths:
            self.changed_paths.append(path)

    def directory(self, entry: dict[str, Any]) -> None:
        path = str(entry["path"])
        if not os.path.isdir(path):
            self.changed(path)
            if not self.check:
                os.makedirs(path, exist_ok=True)
                _apply_attributes(self.module, path, entry)
        elif _attributes_differ(self.module, path, entry):
            self.changed(path)
            if not self.check:
                _apply_attributes(self.module, path, entry)

    def file(self, entry: dict[str, Any]) -> None:
        path = str(entry["path"])
        current = _read(path)
        wanted: bytes | None
        if entry.get("seed_from"):
            if current is not None:
                self.attributes(entry)
                return
            wanted = _read(str(entry["seed_from"]))
            if wanted is None:
                if self.check:  # the step that brings the seed has not run in a preview
                    self.changed(path)
                    return
                self.module.fail_json(
                    msg=f"{path}: the file to seed it from is missing: {entry['seed_from']}"
                )
                return
        else:
            wanted = str(entry["content"]).encode("utf-8")
        if current == wanted:
            self.attributes(entry)
            return
        self.changed(path)
        if self.module._diff and not entry.get("secret"):
            self.diffs.append(
                {
                    "before_header": path,
                    "after_header": path,
                    "before": (current or b"").decode("utf-8", "replace"),
                    "after": wanted.decode("utf-8", "replace"),
                }
            )
        if not self.check:
            if not os.path.isdir(os.path.dirname(path)):
                self.module.fail_json(
                    msg=f"{path}: its directory does not exist; list it in directories"
                )
            _write_atomically(self.module, path, wanted, entry)

    def attributes(self, entry: dict[str, Any]) -> None:
        path = str(entry["path"])
        if os.path.lexists(path) and _attributes_differ(self.module, path, entry):
            self.changed(path)
            if not self.check:
                _apply_attributes(self.module, path, entry)

    def link(self, entry: dict[str, Any]) -> None:
        path, target = str(entry["path"]), str(entry["target"])
        if os.path.islink(path) and os.readlink(path) == target:
            return
        self.changed(path)
        self.changed_links.append(path)
        if not self.check:
            scratch = os.path.join(os.path.dirname(path), f".clusterforge-link-{os.getpid()}")
            if os.path.lexists(scratch):
                os.unlink(scratch)
            os.symlink(target, scratch)
            os.replace(scratch, path)

    def prune(self, entry: dict[str, Any], keep: set[str]) -> None:
        directory = str(entry["dir"])
        if not os.path.isdir(directory):
            return
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not fnmatch.fnmatch(name, str(entry["pattern"])) or os.path.normpath(path) in keep:
                continue
            self.absent(path)

    def absent(self, path: str) -> None:
        if not os.path.lexists(path):
            return
        self.changed(path)
        if not self.check:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)


class FilesModule(AnsibleModule):  # type: ignore[misc]
    """AnsibleModule whose log of its own invocation holds no file's content.

    AnsibleModule writes its arguments to the host's journal (or syslog) from its
    constructor, unless the task is no_log: adding a secret to ``no_log_values`` in
    main(), after that, left every run's settings files and passwords in the journal
    (issue 31). Here the secret contents join ``no_log_values`` before anything is
    logged, so the result's echo of the arguments masks them too, and the logged copy
    of the arguments carries every content's length instead of the content: a file
    not marked ``secret`` may still hold one, and a journal needs the paths only.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Again for a no_log task, whose invocation the constructor did not log.
        self._mask_secret_contents()

    def _mask_secret_contents(self) -> None:
        for entry in self.params.get("files") or []:
            if entry.get("secret") and entry.get("content"):
                self.no_log_values.add(str(entry["content"]))

    def _log_invocation(self) -> None:
        self._mask_secret_contents()
        files = self.params.get("files") or []
        arguments = self.params
        self.params = {**arguments, "files": [_without_content(entry) for entry in files]}
        try:
            super()._log_invocation()
        finally:
            self.params = arguments


def _without_content(entry: dict[str, Any]) -> dict[str, Any]:
    """A file entry as the invocation log shows it: its content's length, not the content."""
    if entry.get("content") is None:
        return entry
    return {**entry, "content": f"({len(str(entry['content']))} characters, not logged)"}


def _resolved(link: str, target: str) -> str:
    """The absolute path a link at ``link`` pointing at ``target`` names."""
    return os.path.normpath(os.path.join(os.path.dirname(link), target))


def _link_targets(links: list[dict[str, Any]]) -> set[str]:
    """The absolute paths the links point at now (a missing link points nowhere)."""
    targets = set()
    for entry in links:
        path = str(entry["path"])
        if os.path.islink(path):
            targets.add(_resolved(path, os.readlink(path)))
    return targets


def main() -> None:
    module = FilesModule(
        argument_spec={
            "accounts": {"type": "list", "elements": "dict", "default": []},
            "directories": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
            "attributes": {"type": "list", "elements": "dict", "default": []},
            "links": {"type": "list", "elements": "dict", "default": []},
            "prune": {"type": "list", "elements": "dict", "default": []},
            "absent": {"type": "list", "elements": "str", "default": []},
            "read": {"type": "list", "elements": "str", "default": []},
            "read_matching": {"type": "list", "elements": "str", "default": []},
            "exists": {"type": "list", "elements": "str", "default": []},
            "defer_when_missing": {"type": "bool", "default": False},
            "units": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    matches = sorted({path for pattern in params["read_matching"] for path in glob.glob(pattern)})
    before = {path: _decoded(_read(path)) for path in [*params["read"], *matches]}
    existed = {path: os.path.lexists(path) for path in params["exists"]}
    deferred = bool(params["defer_when_missing"]) and not (existed and all(existed.values()))
    placement = Placement(module)
    keep = _link_targets(params["links"])
    if not deferred:
        for entry in params["accounts"]:
            placement.account(entry)
        for entry in params["directories"]:
            placement.directory(entry)
        for entry in params["files"]:
            placement.file(entry)
        for entry in params["attributes"]:
            placement.attributes(entry)
    for entry in params["links"]:
        placement.link(entry)
        keep.add(
            os.path.normpath(
                os.path.join(os.path.dirname(str(entry["path"])), str(entry["target"]))
            )
        )
    for entry in params["prune"]:
        placement.prune(entry, keep)
    for path in params["absent"]:
        placement.absent(path)
    unit_states = {} if deferred else _unit_states(module, params["units"])
    result: dict[str, Any] = {
        "changed": bool(placement.changed_paths or placement.changed_accounts),
        "changed_accounts": placement.changed_accounts,
        "changed_paths": placement.changed_paths,
        "changed_links": placement.changed_links,
        "before": before,
        "existed": existed,
        "deferred": deferred,
        "unit_states": unit_states,
    }
    if placement.diffs:
        result["diff"] = placement.diffs
    module.exit_json(**result)


UNIT_PROPERTIES = ("ActiveState", "UnitFileState")


def _unit_states(module: AnsibleModule, units: list[str]) -> dict[str, dict[str, str]]:
    """Each unit's ActiveState and UnitFileState, from one ``systemctl show``: it prints one
    block per unit, in the order asked, a blank line between (an unknown unit too)."""
    if not units:
        return {}
    systemctl = module.get_bin_path("systemctl", required=True)
    argv = [systemctl, "show", f"--property=Id,{','.join(UNIT_PROPERTIES)}", "--", *units]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"systemctl show failed with exit code {rc}: {(err or out).strip()}")
    blocks = out.strip("\n").split("\n\n")
    if len(blocks) != len(units):
        module.fail_json(
            msg=f"systemctl show printed {len(blocks)} blocks for {len(units)} units: {out!r}"
        )
    states: dict[str, dict[str, str]] = {}
    for unit, block in zip(units, blocks, strict=True):
        values: dict[str, str] = {}
        for line in block.splitlines():
            name, _sep, value = line.partition("=")
            values[name] = value
        states[unit] = {name: values.get(name, "") for name in UNIT_PROPERTIES}
    return states


def _decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


if __name__ == "__main__":
    main()
