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

from clusterforge.errors import ClusterforgeError
from clusterforge.model import build_cluster
from clusterforge.render import render_node_files

_READ_PREFIXES = ("opensearch_",)
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


def render_to_directory(inventory: Path, out: Path, group: str) -> list[Path]:
    cluster = build_cluster(load_inventory_nodes(inventory, group))
    for warning in cluster.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    written = []
    for node in cluster.nodes:
        node_dir = out / node.inventory_name
        node_dir.mkdir(parents=True, exist_ok=True)
        for name, content in render_node_files(cluster, node).items():
            path = node_dir / name
            path.write_text(content)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="write every node's files for review")
    render.add_argument("--inventory", type=Path, required=True, help="inventory file or directory")
    render.add_argument("--out", type=Path, required=True, help="directory to write into")
    render.add_argument("--group", default="opensearch", help="group of the OpenSearch nodes")
    args = parser.parse_args(argv)
    try:
        written = render_to_directory(args.inventory, args.out, args.group)
    except ClusterforgeError as error:
        print(f"clusterforge: error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
