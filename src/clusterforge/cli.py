"""The ``clusterforge`` command: ``render`` writes every node's files for review.

``scripts/render`` calls it. It reads the inventory with Ansible's own inventory loader
(group_vars, host_vars, vault and all), so it sees exactly what a playbook run sees, and
renders with the same library functions the roles' plan uses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterforge.console import (
    CONFIG_FILE,
    UNIT_NAME,
    build_consoles,
    console_settings,
    render_console_config,
    render_console_unit,
)
from clusterforge.errors import ClusterforgeError
from clusterforge.model import build_cluster
from clusterforge.render import render_node_files

_READ_PREFIXES = ("opensearch_", "dashboards_")
_READ_KEYS = ("ansible_host",)


def select_model_vars(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The host variables the model reads; the action plugin uses the same selection."""
    return {
        key: value
        for key, value in host_vars.items()
        if key.startswith(_READ_PREFIXES) or key in _READ_KEYS
    }


def load_inventory_nodes(inventory: Path, group: str) -> list[tuple[str, dict[str, Any]]]:
    """(inventory name, model variables) for every host of ``group``, as Ansible sees them."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=manager)
    nodes = []
    for host in manager.get_hosts(pattern=group):
        host_vars = variables.get_vars(host=host)
        templar = Templar(loader=loader, variables=host_vars)
        selected = {
            key: templar.template(value) for key, value in select_model_vars(host_vars).items()
        }
        nodes.append((host.name, selected))
    return nodes


def render_to_directory(
    inventory: Path, out: Path, group: str, console_group: str = "dashboards"
) -> list[Path]:
    cluster = build_cluster(load_inventory_nodes(inventory, group))
    for warning in cluster.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    files: dict[Path, str] = {}
    for node in cluster.nodes:
        for name, content in render_node_files(cluster, node).items():
            files[out / node.inventory_name / name] = content
    for console in build_consoles(load_inventory_nodes(inventory, console_group)):
        console_dir = out / console.inventory_name
        # Without opensearch.password: the role adds it, the review copy never has it.
        files[console_dir / CONFIG_FILE] = render_console_config(
            console_settings(cluster, console), None
        )
        files[console_dir / UNIT_NAME] = render_console_unit(cluster, console)
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="write every node's files for review")
    render.add_argument("--inventory", type=Path, required=True, help="inventory file or directory")
    render.add_argument("--out", type=Path, required=True, help="directory to write into")
    render.add_argument("--group", default="opensearch", help="group of the OpenSearch nodes")
    render.add_argument("--console-group", default="dashboards", help="group of the console hosts")
    args = parser.parse_args(argv)
    try:
        written = render_to_directory(args.inventory, args.out, args.group, args.console_group)
    except ClusterforgeError as error:
        print(f"clusterforge: error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
