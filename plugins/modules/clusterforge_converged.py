"""Module: whether a host still holds what a play last converged it to, in one round trip.

An idempotent rerun used to run every task of every play on every host only to find
nothing to do: about 150 task headers, each a fraction of a second (issue 54). This module
lets a play skip a host whose converge still holds, and says why when it does not:

- ``state: record`` (the play's last task, after its handlers, in a run that ran every
  task: no ``--tags``, ``--skip-tags`` or check mode) writes what the host holds now:
  the digest of the play's planned inputs, a fingerprint of every path under the play's
  ``trees``, which ``units`` run and start at boot, which ``packages`` are installed,
  which ``accounts`` exist (with their uid) and the text of the ``values`` files (a
  kernel setting under /proc/sys).
- ``state: check`` (the play's first task, in check mode too) reads the same and answers
  ``holds``: true only when the record is there, its digest is the one given and every
  part matches. The play then ends for that host (``meta: end_host``); anything else
  runs the play as before, so a preview still shows a hand-made change as a diff and a
  run still puts it back.

A path's fingerprint is its type, mode, owner, group and, for a file, its size, its
modification time in nanoseconds and, up to ``hash_limit`` bytes, its SHA-256 (a file
edited by hand changes its time; one edited and given its old time back still changes
its content). A link's is its target. ``exclude`` names paths under a tree that the
service itself writes (logs, data) by ``fnmatch`` pattern on the path relative to the
tree. The record is ``<record_dir>/<name>.json``, 0600, in a 0700 directory, owned by
root: it holds digests of the files, some of them secret, never their content.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_converged
short_description: Tell whether a host still holds what a play last converged it to
description:
  - With O(state=check), reads the host's record of its last converge and answers whether
    the planned inputs are the same and every tree, unit, package, account and value the
    record names is as it was. Nothing is written, so it runs in check mode too.
  - With O(state=record), writes that record from what the host holds now.
  - With O(state=read), reads every record on the host and answers, for each, whether the
    host still holds what it names and the digest it was written under; the reach at the
    start of a run (playbooks/reach.yml) asks this once, and each gated play compares the
    digest it works out with the recorded one without a round trip of its own.
  - A play checks first and ends for a host whose converge holds; it records last.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  name:
    description: The record's name, one per play (C(opensearch), C(node_exporter)); required
      but with O(state=read).
    type: str
  digest:
    description: The digest of what the play plans for this host (its inputs); required but
      with O(state=read).
    type: str
  state:
    description: C(check) answers RV(holds); C(record) writes the record; C(read) answers
      RV(records).
    type: str
    choices: [check, record, read]
    default: check
  trees:
    description:
      - Paths the play owns, each fingerprinted with everything under it (a file or a
        link alone when it is one). A path that does not exist is recorded as missing.
      - Each is a path, or a dict with C(path) and the keys below.
      - C(exclude) lists fnmatch patterns of paths relative to the tree to leave out
        (what the service writes itself); C(recurse=false) fingerprints the directory
        alone; C(hash_limit) sets O(hash_limit) for this tree (0 for an install tree of
        thousands of files, whose sizes and times are enough).
    type: list
    elements: raw
    default: []
  units:
    description: Systemd units that must be active and enabled.
    type: list
    elements: str
    default: []
  packages:
    description: Debian packages that must be installed.
    type: list
    elements: str
    default: []
  accounts:
    description: System users that must exist, with the uid they had.
    type: list
    elements: str
    default: []
  values:
    description: Files whose text must stay the same (a kernel setting under /proc/sys).
    type: list
    elements: path
    default: []
  hash_limit:
    description: Files up to this size (bytes) are fingerprinted with their SHA-256 too.
    type: int
    default: 1048576
  record_dir:
    description: Where the records are kept.
    type: path
    default: /var/lib/clusterforge/converged
"""

EXAMPLES = r"""
- name: Skip this host when its last converge still holds
  clusterforge.stack.clusterforge_converged:
    name: node_exporter
    digest: "{{ inputs | to_json | hash('sha256') }}"
    trees: [{path: /etc/prometheus-node-exporter}]
    units: [prometheus-node-exporter]
    packages: [prometheus-node-exporter]
  register: converged

- name: End the play for this host
  ansible.builtin.meta: end_host
  when: converged.holds
"""

RETURN = r"""
holds:
  description: Whether the record is there, for the same digest, and everything it names
    is as it was (always false with O(state=record)).
  type: bool
  returned: with O(state=check) and O(state=record)
reason:
  description: Why it does not hold (the first difference found), empty when it does.
  type: str
  returned: with O(state=check) and O(state=record)
name:
  description: The record's name, as given.
  type: str
  returned: with O(state=check) and O(state=record)
digest:
  description: The digest, as given (the play's record step writes the record under it).
  type: str
  returned: with O(state=check) and O(state=record)
records:
  description: Per record name, C(holds) (the host still holds what it names), C(reason)
    (the first difference) and C(digest) (the one it was written under).
  type: dict
  returned: with O(state=read)
"""

import fnmatch
import hashlib
import json
import os
import pwd
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

RECORD_VERSION = 1
DEFAULT_HASH_LIMIT = 1048576
# systemctl is-enabled answers these for a unit that starts at boot (or is another's alias).
STARTS_AT_BOOT = ("enabled", "enabled-runtime", "alias", "static", "indirect")


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(path: str, hash_limit: int) -> str:
    """One path's fingerprint (module docstring); ``missing`` when nothing is there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    owner = f"{stat.S_IMODE(info.st_mode):o}:{info.st_uid}:{info.st_gid}"
    if stat.S_ISLNK(info.st_mode):
        return f"link:{owner}:{os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        # A directory's time changes with what the service writes in it; what it holds
        # is fingerprinted entry by entry, so an added or removed entry still shows.
        return f"dir:{owner}"
    if stat.S_ISREG(info.st_mode):
        content = _file_sha256(path) if info.st_size <= hash_limit else ""
        return f"file:{owner}:{info.st_size}:{info.st_mtime_ns}:{content}"
    return f"other:{owner}:{stat.S_IFMT(info.st_mode)}"


def tree_fingerprints(tree: dict[str, Any] | str, hash_limit: int) -> dict[str, str]:
    """Every path under ``tree['path']`` with its fingerprint, but the excluded ones."""
    if not isinstance(tree, dict):
        tree = {"path": tree}
    root = os.path.normpath(str(tree["path"]))
    hash_limit = int(tree.get("hash_limit", hash_limit))
    patterns = [str(pattern) for pattern in tree.get("exclude") or []]
    prints = {root: fingerprint(root, hash_limit)}
    if tree.get("recurse", True) is False or not prints[root].startswith("dir:"):
        return prints
    for directory, subdirectories, files in os.walk(root):
        kept = []
        for name in sorted(subdirectories):
            path = os.path.join(directory, name)
            if _excluded(root, path, patterns):
                continue
            prints[path] = fingerprint(path, hash_limit)
            # os.walk does not follow links to directories; only real ones are walked.
            if prints[path].startswith("dir:"):
                kept.append(name)
        subdirectories[:] = kept
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not _excluded(root, path, patterns):
                prints[path] = fingerprint(path, hash_limit)
    return prints


def _excluded(root: str, path: str, patterns: list[str]) -> bool:
    relative = os.path.relpath(path, root)
    return any(fnmatch.fnmatchcase(relative, pattern) for pattern in patterns)


def _unit_lines(module: AnsibleModule, verb: str, units: list[str]) -> list[str]:
    """``systemctl <verb>``'s answer, one line per unit in the order asked."""
    systemctl = module.get_bin_path("systemctl", required=True)
    _rc, out, _err = module.run_command([systemctl, verb, "--", *units])
    # Non-zero when a unit is not active or not enabled: the lines still say which.
    lines = [line.strip() for line in str(out).splitlines()]
    return lines if len(lines) == len(units) else ["unknown"] * len(units)


def unit_problem(unit: str, answers: dict[str, tuple[str, str]]) -> str:
    """Why ``unit`` does not run and start at boot, from :func:`ask_units`; empty if it does."""
    active, enabled = answers.get(unit, ("unknown", "unknown"))
    if active != "active":
        return f"unit {unit} is {active}, not active"
    if enabled not in STARTS_AT_BOOT:
        return f"unit {unit} is {enabled}, not enabled"
    return ""


def installed_packages(status_path: str = "/var/lib/dpkg/status") -> set[str]:
    """The packages dpkg lists as installed, read from its status file in one pass."""
    installed: set[str] = set()
    try:
        with open(status_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        return installed
    for paragraph in text.split("\n\n"):
        fields = {}
        for line in paragraph.splitlines():
            if line and not line[0].isspace():
                key, _sep, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Status") == "install ok installed" and "Package" in fields:
            installed.add(fields["Package"])
    return installed


def account_uids(accounts: list[str]) -> dict[str, int | None]:
    uids: dict[str, int | None] = {}
    for name in accounts:
        try:
            uids[name] = pwd.getpwnam(name).pw_uid
        except KeyError:
            uids[name] = None
    return uids


def read_values(paths: list[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                values[path] = handle.read().strip()
        except FileNotFoundError:
            values[path] = None
    return values


def host_state(params: dict[str, Any]) -> dict[str, Any]:
    """What the record keeps: everything but the units, which are checked live."""
    prints: dict[str, str] = {}
    for tree in params["trees"]:
        prints.update(tree_fingerprints(tree, int(params["hash_limit"])))
    return {
        "accounts": account_uids(list(params["accounts"])),
        "values": read_values(list(params["values"])),
        "paths": prints,
    }


def first_difference(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    for kind in ("accounts", "values"):
        if recorded.get(kind) != now[kind]:
            return f"{kind} changed: {sorted(_changed(recorded.get(kind) or {}, now[kind]))}"
    changed = _changed(recorded.get("paths") or {}, now["paths"])
    if changed:
        listed = sorted(changed)
        more = f" and {len(listed) - 3} more" if len(listed) > 3 else ""
        return f"changed since the last converge: {', '.join(listed[:3])}{more}"
    return ""


def _changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def record_path(params: dict[str, Any]) -> str:
    name = str(params["name"])
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"name {name!r} must be a plain file name")
    return os.path.join(str(params["record_dir"]), f"{name}.json")


def read_record(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_record(path: str, record: dict[str, Any]) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    handle, temporary = tempfile.mkstemp(prefix=".converged-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(record, out, sort_keys=True)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


SPEC_KINDS = ("trees", "units", "packages", "accounts", "values")


def spec_of(source: dict[str, Any]) -> dict[str, Any]:
    """What a play says it owns (the task's arguments, or a record's copy of them)."""
    spec: dict[str, Any] = {kind: list(source.get(kind) or []) for kind in SPEC_KINDS}
    limit = source.get("hash_limit")
    spec["hash_limit"] = DEFAULT_HASH_LIMIT if limit is None else int(limit)
    return spec


def still_as_recorded(
    record: dict[str, Any], unit_lines: dict[str, tuple[str, str]], installed: set[str]
) -> str:
    """Why the host no longer holds what ``record`` names; empty when it does.
    ``unit_lines``: each unit's (is-active, is-enabled) answer, asked once for all;
    ``installed``: dpkg's installed packages, read once for all."""
    spec = spec_of(record)
    for unit in spec["units"]:
        problem = unit_problem(unit, unit_lines)
        if problem:
            return problem
    missing = sorted(set(spec["packages"]) - installed)
    if missing:
        return f"packages not installed: {', '.join(missing)}"
    return first_difference(record.get("state") or {}, host_state(spec))


def ask_units(module: AnsibleModule, units: list[str]) -> dict[str, tuple[str, str]]:
    """Each unit's (is-active, is-enabled) answer, from one call of each for all units."""
    asked = sorted(set(units))
    if not asked:
        return {}
    active = _unit_lines(module, "is-active", asked)
    enabled = _unit_lines(module, "is-enabled", asked)
    return {unit: (a, e) for unit, a, e in zip(asked, active, enabled, strict=True)}


def check(module: AnsibleModule, path: str) -> tuple[bool, str]:
    params = module.params
    record = read_record(path)
    if record is None or record.get("version") != RECORD_VERSION:
        return False, "no record of an earlier converge"
    if record.get("digest") != params["digest"]:
        return False, "the planned inputs changed"
    if spec_of(record) != spec_of(params):
        return False, "the play's trees, units, packages, accounts or values changed"
    installed = installed_packages() if params["packages"] else set()
    reason = still_as_recorded(record, ask_units(module, list(params["units"])), installed)
    return not reason, reason


def read_all(module: AnsibleModule) -> dict[str, dict[str, Any]]:
    """Every record in ``record_dir``, each with whether the host still holds it: the
    reach at the start of a run asks this once per host, and each gated play compares the
    digest it works out with the recorded one, without a round trip of its own."""
    directory = str(module.params["record_dir"])
    try:
        names = sorted(name for name in os.listdir(directory) if name.endswith(".json"))
    except FileNotFoundError:
        return {}
    records = {}
    for file_name in names:
        record = read_record(os.path.join(directory, file_name))
        if record is not None and record.get("version") == RECORD_VERSION:
            records[file_name[: -len(".json")]] = record
    units = ask_units(
        module, [unit for record in records.values() for unit in spec_of(record)["units"]]
    )
    # dpkg's status file (about a megabyte) is read once for every record, not per record.
    wanted = any(spec_of(record)["packages"] for record in records.values())
    installed = installed_packages() if wanted else set()
    answers = {}
    for name, record in records.items():
        try:
            reason = still_as_recorded(record, units, installed)
        except OSError as error:  # a path that cannot be read holds nothing
            reason = (
                f"could not read {getattr(error, 'filename', '') or 'a path'}: {error.strerror}"
            )
        answers[name] = {
            "holds": not reason,
            "reason": reason,
            "digest": str(record.get("digest") or ""),
        }
    return answers


def record(module: AnsibleModule, path: str) -> None:
    params = module.params
    spec = spec_of(params)
    # A converge whose units do not run, or whose packages are gone, is not one to keep.
    answers = ask_units(module, spec["units"])
    problems = [
        problem for problem in (unit_problem(unit, answers) for unit in spec["units"]) if problem
    ]
    missing = sorted(set(spec["packages"]) - installed_packages())
    if problems or missing:
        module.fail_json(
            msg="not recording a converge that does not hold: "
            + "; ".join([*problems, *(f"package {name} is not installed" for name in missing)])
        )
    write_record(
        path,
        {"version": RECORD_VERSION, "digest": params["digest"], **spec, "state": host_state(spec)},
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "digest": {"type": "str"},
            "state": {"type": "str", "choices": ["check", "record", "read"], "default": "check"},
            "trees": {"type": "list", "elements": "raw", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "packages": {"type": "list", "elements": "str", "default": []},
            "accounts": {"type": "list", "elements": "str", "default": []},
            "values": {"type": "list", "elements": "path", "default": []},
            "hash_limit": {"type": "int", "default": DEFAULT_HASH_LIMIT},
            "record_dir": {"type": "path", "default": "/var/lib/clusterforge/converged"},
        },
        required_if=[
            ("state", "check", ("name", "digest")),
            ("state", "record", ("name", "digest")),
        ],
        supports_check_mode=True,
    )
    if module.params["state"] == "read":
        module.exit_json(changed=False, records=read_all(module))
    name = str(module.params["name"])
    digest = str(module.params["digest"])
    try:
        path = record_path(module.params)
    except ValueError as error:
        module.fail_json(msg=str(error))
        raise
    if module.params["state"] == "record":
        if module.check_mode:
            module.exit_json(
                changed=False,
                holds=False,
                reason="check mode records nothing",
                name=name,
                digest=digest,
            )
        record(module, path)
        # The record is bookkeeping, not a change to the host's service.
        module.exit_json(changed=False, holds=False, reason="", name=name, digest=digest)
    holds, reason = check(module, path)
    module.exit_json(changed=False, holds=holds, reason=reason, name=name, digest=digest)


if __name__ == "__main__":
    main()
