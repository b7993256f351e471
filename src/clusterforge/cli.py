"""The ``clusterforge`` command: ``render`` writes every host's files for review, and
``fetch`` fills the control node's artifact cache for an inventory
(clusterforge.inventory.fetch: the same inventory door and model, no host touched),
printing each archive's path and whether it was fetched now or already cached.

``scripts/render`` calls it. It reads the inventory through the one door
(clusterforge.inventory: Ansible's own inventory loader, group_vars, host_vars, vault and
all), so it sees exactly what a playbook run sees, and calls the same
:func:`clusterforge.plan.plan.build_plan` as the ``clusterforge_plan`` action: the
certificates are issued or reused in the inventory's PKI directory as the playbook does,
so ``plugins.security.nodes_dn`` comes from them. Secrets are left out of what it writes:
no private key, no password, no password hash. It also prints the batches a rolling
restart would take (docs/zones.md), for review without any host.

It refuses what the playbooks' first play refuses (both run
:func:`clusterforge.plan.validation.validate_inventory`), as a review: a secret published in
this repository, or an archive missing on this machine, is a warning saying a playbook
run would refuse it (docs/inventory-checks.md). What Ansible itself cannot read is said
with its file and line, and a vault without its password names --vault-password-file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from clusterforge.errors import ClusterforgeError
from clusterforge.inventory.reader import InventoryReadError
from clusterforge.inventory.variables import read_inventory


def render_to_directory(
    inventory: Path,
    out: Path,
    group: str,
    console_group: str = "dashboards",
    *,
    vault_password_file: Path | None = None,
) -> list[Path]:
    """Write every host's files under ``out/<host>/``; returns the paths written."""
    from clusterforge.inventory.reader import InventoryReader
    from clusterforge.plan.cluster.rollout import describe_rollout
    from clusterforge.plan.monitoring.monitoring import (
        monitoring_hosts_vars,
        read_monitoring_inputs,
        rendered_for_own_prometheus,
    )
    from clusterforge.plan.plan import build_plan, host_files

    read = read_inventory(
        inventory,
        vault_password_file=vault_password_file,
        group=group,
        console_group=console_group,
    )
    if not read.nodes:
        raise InventoryReadError(
            f"{inventory}: the group {group!r} has no hosts; add them, or fix the file "
            "Ansible could not parse (its warning above names it)"
        )
    reader = InventoryReader(inventory, vault_password_file=vault_password_file)
    plan = build_plan(
        read.nodes,
        inventory_dir=read.directory,
        consoles_vars=read.consoles,
        fetch=False,
        # A review may show the example inventory; the warning says why it would not deploy.
        review=True,
        services_vars=read.services,
        database_vars=read.databases,
        monitoring_vars=monitoring_hosts_vars(reader),
    )
    for warning in plan["model_warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    # The batches a rolling restart would take, for review without hosts (docs/zones.md).
    for line in describe_rollout(plan["rollout"]["batches"]):
        print(line)
    if plan["rollout"]["scale_in"]:
        for line in describe_rollout(plan["rollout"]["scale_in"], title="scale-in"):
            print(line)
    written = []
    for host, files in host_files(plan).items():
        for name, content in files.items():
            path = out / host / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            written.append(path)
    # For a Prometheus of the user's own: the scrape config, the rules, blackbox.yml
    # (docs/monitoring.md, "Using your own Prometheus").
    cluster = read.cluster()
    inputs = read_monitoring_inputs(
        reader,
        inventory_dir=read.directory,
        tls_protocols=cluster.tls_protocols,
        tls_ciphers=cluster.tls_ciphers,
    )
    if inputs is not None:
        for name, content in rendered_for_own_prometheus(inputs).items():
            path = out / "monitoring" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            written.append(path)
    return written


def _error_lines(error: ClusterforgeError) -> Sequence[str]:
    problems = getattr(error, "problems", None)
    if problems:
        return [str(problem) for problem in problems]
    return [line for line in str(error).splitlines() if line.strip()] or [type(error).__name__]


def fetch_to_cache(
    inventory: Path, group: str, *, vault_password_file: Path | None = None
) -> list[str]:
    """Fill the artifact cache for the inventory; one line per archive (its path, and
    ``fetched`` or ``cached``, or ``local file`` for a zip the inventory names on this
    machine, used where it is), printed as each lands."""
    from clusterforge.inventory.fetch import fetch_inventory_artifacts
    from clusterforge.plan.cluster.artifacts import FetchedArtifact, cache_dir

    lines: list[str] = []
    cache = cache_dir().resolve()

    def report(what: str, artifact: FetchedArtifact) -> None:
        if artifact.fetched:
            state = "fetched"
        elif artifact.path.resolve().is_relative_to(cache):
            state = "cached"
        else:
            state = "local file"
        line = f"{artifact.path}  {state}  ({what})"
        print(line, flush=True)
        lines.append(line)

    fetch_inventory_artifacts(
        inventory, group, vault_password_file=vault_password_file, report=report
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    # What both commands read the inventory with, declared once.
    inventory_arguments = argparse.ArgumentParser(add_help=False)
    inventory_arguments.add_argument(
        "--inventory", type=Path, required=True, help="inventory file or directory"
    )
    inventory_arguments.add_argument(
        "--group", default="opensearch", help="group of the OpenSearch nodes"
    )
    inventory_arguments.add_argument(
        "--vault-password-file",
        type=Path,
        default=None,
        help="file holding the password of the inventory's ansible-vault files",
    )
    parser = argparse.ArgumentParser(prog="clusterforge")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser(
        "render", parents=[inventory_arguments], help="write every host's files for review"
    )
    render.add_argument("--out", type=Path, required=True, help="directory to write into")
    render.add_argument("--console-group", default="dashboards", help="group of the console hosts")
    commands.add_parser(
        "fetch",
        parents=[inventory_arguments],
        help="fill the control node's artifact cache for an inventory (no host is touched)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            fetch_to_cache(args.inventory, args.group, vault_password_file=args.vault_password_file)
            return 0
        written = render_to_directory(
            args.inventory,
            args.out,
            args.group,
            args.console_group,
            vault_password_file=args.vault_password_file,
        )
    except ClusterforgeError as error:
        for line in _error_lines(error):
            print(f"clusterforge: error: {line}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
