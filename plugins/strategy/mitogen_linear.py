"""Strategy plugin: Mitogen's linear strategy, the default of the checkout and of molecule.

Mitogen (the ``mitogen`` distribution, pinned in pyproject.toml) keeps one Python
interpreter per host for the whole run and sends modules to it over that channel, so a
task costs a message instead of a round trip that copies and starts a module. Plays run
as with ``linear``. ansible.cfg and .config/molecule/config.yml name this plugin as
``clusterforge.stack.mitogen_linear``, so nothing depends on where the virtualenv is.

Plays on the control node alone (``hosts: localhost``) run as plain ``linear``: they have
no connection for Mitogen to save, and molecule's docker driver creates its containers
there with asynchronous ``docker_container`` tasks whose jobs die without a result under
Mitogen 0.3.54 (the create step then waits forever).

Mitogen 0.3.54 lists every installed collection's directory again for each task that
runs a collection's module (ansible_mitogen.planner._load_collections), in the task's
worker process: with the ``ansible`` package's hundred collections that cost 0.5 s per
task, so a module of this collection was slower than a builtin one. This wrapper lists
them once per run, in the controller before any worker forks, and hands every task the
same list.

Mitogen 0.3.54 also pins processes to CPUs (ansible_mitogen.affinity): on a machine with
fewer than 4 CPUs the connection multiplexer gets CPU 0 and the controller and every
task's worker share CPU 1, so the forked workers of one task, the controller and a plan
action's threads queue on one core while the other idles. Measured on 2 cores, 100
skipped tasks on 4 hosts took 6.6 s pinned and 4.3 s unpinned (3.5 s with plain
``linear``), and the tls lab's idempotent rerun 16.5-17.8 s pinned and 13.4-14.3 s
unpinned. This wrapper puts Mitogen's no-op base policy in place, so the scheduler
places every process.

Mitogen 0.3.54 also turns on SSH compression unless a host sets
``mitogen_ssh_compression``; plain Ansible and OpenSSH leave it off. zlib on the engine
archive and the security plugin zip (already compressed, 100 MB per node) held a cold
bootstrap's copies to the compressor's speed: 56 MB to 3 lab hosts took 3.8 s with it
and 1.5 s without (their ping subtracted). This wrapper makes the unset default "off";
a host on a slow link can still set ``mitogen_ssh_compression: true``.

Mitogen 0.3.54 also works out, in each run, which module_utils files each module
imports (ansible_mitogen.module_finder.scan): it compiles the module and every file it
imports, about 46 files for ``ping``. On the tls lab that was 11 modules and 1.1 s of
every run, each scan holding up the first task that runs its module. This wrapper keeps
each scan's answer on disk (``$XDG_CACHE_HOME/clusterforge/mitogen-scan``, else
``~/.cache/...``) with the size and modification time of every file it names and of the
search path's directories, and the Ansible, Mitogen and Python versions in its key; a
change to any of them scans again.

Turn Mitogen off with ``ANSIBLE_STRATEGY=linear`` (docs/performance.md). Without Mitogen
installed this plugin is plain ``linear`` and says so once.
"""

from __future__ import annotations

# Read by ansible-doc (ansible-doc -t strategy clusterforge.stack.mitogen_linear); the
# docstring above keeps the measurements behind each choice.
DOCUMENTATION = r"""
name: mitogen_linear
short_description: Mitogen's linear strategy, tuned for this collection
description:
  - Runs plays as C(linear) does, with the same tasks, results and changed counts, but
    keeps one Python interpreter per host for the whole run (Mitogen), so a task costs a
    message instead of copying and starting a module.
  - The default of the checkout's C(ansible.cfg) and of the molecule scenarios.
  - Plays on the control node alone (C(localhost)) run as plain C(linear).
  - Lists the installed collections once per run instead of in every task that runs a
    collection's module, and leaves processes unpinned so the scheduler places them on
    any CPU.
  - Mitogen's SSH compression is off unless a host sets C(mitogen_ssh_compression=true)
    (useful on a slow link).
  - Keeps Mitogen's scan of the module_utils each module imports on disk across runs
    (C($XDG_CACHE_HOME/clusterforge/mitogen-scan), else C(~/.cache/clusterforge/mitogen-scan)),
    checked against the size and modification time of every file it names.
  - Without Mitogen installed it runs as C(linear) and warns once. Turn it off with
    C(ANSIBLE_STRATEGY=linear).
notes:
  - Mitogen connects with its own SSH code, which does not honour
    C(StrictHostKeyChecking=no) from C(ansible_ssh_common_args); put the hosts' keys in
    C(known_hosts) before the first run.
  - Needs the C(mitogen) distribution pinned in the project's C(pyproject.toml).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
"""

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule
from ansible.utils.display import Display

# Mitogen missing: run as linear rather than not at all, and say so when a run uses this
# strategy (StrategyModule below), not when the plugin is merely imported: ansible-doc,
# ansible-test's import check and plugin listings load it without running a play.
MITOGEN_IMPORT_ERROR: ImportError | None
try:
    from ansible_mitogen.plugins.strategy.mitogen_linear import (
        StrategyModule as MitogenStrategyModule,
    )

    MITOGEN_IMPORT_ERROR = None
except ImportError as error:
    MITOGEN_IMPORT_ERROR = error
    MitogenStrategyModule = LinearStrategyModule

CONTROL_NODE_NAMES = frozenset({"localhost", "127.0.0.1"})


def _list_collections_once() -> None:
    """Replace Mitogen's per-task listing of the collection directories with one listing
    made now, in the controller; the workers forked later inherit it."""
    try:
        import ansible.collections.list
        from ansible_mitogen import planner
    except ImportError:
        return
    if getattr(planner, "_clusterforge_collection_dirs", None) is not None:
        return
    directories = [
        path.decode("utf-8") if isinstance(path, bytes) else str(path)
        for path in ansible.collections.list.list_collection_dirs()
    ]
    planner._clusterforge_collection_dirs = directories

    def load_collections(invocation: Any) -> None:
        invocation._extra_sys_paths.update(directories)

    planner._load_collections = load_collections


def _leave_cpus_to_the_scheduler() -> None:
    """Replace Mitogen's CPU pinning with its no-op base policy, once, before any process
    is pinned."""
    try:
        from ansible_mitogen import affinity
    except ImportError:
        return
    # Exactly the base policy: its subclasses are the pinning ones this replaces.
    if affinity.policy.__class__ is not affinity.Policy:
        affinity.policy = affinity.Policy()


def _compress_only_when_asked() -> None:
    """Make SSH compression off unless ``mitogen_ssh_compression`` says otherwise, in
    both of Mitogen's readings of a host's settings (the task's, and ``mitogen_via``'s)."""
    try:
        from ansible_mitogen import transport_config
    except ImportError:
        return
    for spec in (transport_config.PlayContextSpec, transport_config.MitogenViaSpec):
        asked = spec.mitogen_ssh_compression
        if getattr(asked, "clusterforge_default_off", False):
            continue

        def compression(self: Any, _asked: Any = asked) -> Any:
            value = _asked(self)
            return False if value is None else value

        compression.clusterforge_default_off = True  # type: ignore[attr-defined]
        spec.mitogen_ssh_compression = compression


# Bump when the entries' shape changes; older entries then miss.
SCAN_CACHE_FORMAT = 1


def scan_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "clusterforge" / "mitogen-scan"


def _stamp(path: str) -> list[int] | None:
    try:
        status = os.stat(path)
    except (OSError, TypeError, ValueError):  # gone, or no file path at all
        return None
    return [status.st_mtime_ns, status.st_size]


def cached_scan(scan: Callable[..., Any], versions: Sequence[str]) -> Callable[..., Any]:
    """Mitogen's ``scan(module_name, module_path, search_path)``, answered from the disk
    while every file the answer names (and the search path's directories) is unchanged."""

    def remembered(module_name: str, module_path: str, search_path: Sequence[str]) -> Any:
        key = json.dumps(
            [SCAN_CACHE_FORMAT, list(versions), module_name, module_path, list(search_path)]
        )
        entry_path = scan_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
        try:
            entry = json.loads(entry_path.read_text())
            if entry["key"] == key and all(_stamp(path) == kept for path, kept in entry["stamps"]):
                return [tuple(item) for item in entry["result"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no entry yet, or an unreadable one: scan
        result = scan(module_name=module_name, module_path=module_path, search_path=search_path)
        watched = dict.fromkeys([module_path, *search_path, *(item[1] for item in result)])
        entry = {
            "key": key,
            "stamps": [[path, _stamp(path)] for path in watched],
            "result": [list(item) for item in result],
        }
        # Not clusterforge.pki.certificates.write_file_atomically: this plugin loads in every
        # ansible run, ad-hoc pings included, and that module imports the cryptography package.
        try:  # the cache only saves time: a directory that cannot be written is no error
            entry_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with tempfile.NamedTemporaryFile(
                "w", dir=entry_path.parent, suffix=".tmp", delete=False
            ) as handle:
                json.dump(entry, handle)
            os.replace(handle.name, entry_path)
        except OSError:
            pass
        return result

    remembered.clusterforge_cached = True  # type: ignore[attr-defined]
    return remembered


def _remember_module_scans() -> None:
    """Keep Mitogen's module_utils scans across runs, once, before its multiplexer (which
    runs them) forks from the controller."""
    try:
        import mitogen
        from ansible.release import __version__ as ansible_version
        from ansible_mitogen import module_finder
    except ImportError:
        return
    if getattr(module_finder.scan, "clusterforge_cached", False):
        return
    versions = [ansible_version, str(mitogen.__version__), sys.version]
    module_finder.scan = cached_scan(module_finder.scan, versions)


class StrategyModule(MitogenStrategyModule):  # type: ignore[misc,valid-type]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if MITOGEN_IMPORT_ERROR is not None:
            Display().warning(
                f"Mitogen is not importable ({MITOGEN_IMPORT_ERROR}); running with the linear "
                "strategy. Install the pinned mitogen (scripts/lib/venv.sh does) or set "
                "ANSIBLE_STRATEGY=linear.",
            )

    def run(self, iterator: Any, play_context: Any, *args: Any, **kwargs: Any) -> Any:
        _list_collections_once()
        _leave_cpus_to_the_scheduler()
        _compress_only_when_asked()
        _remember_module_scans()
        hosts = self._inventory.get_hosts(iterator._play.hosts)
        if hosts and all(host.name in CONTROL_NODE_NAMES for host in hosts):
            return LinearStrategyModule.run(self, iterator, play_context, *args, **kwargs)
        return super().run(iterator, play_context, *args, **kwargs)
