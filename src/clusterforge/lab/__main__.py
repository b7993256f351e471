"""``python -m clusterforge.lab up|down``: what scripts/up and scripts/down run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusterforge.errors import ClusterforgeError
from clusterforge.lab.cluster import MAX_NODES, MIN_NODES, NODE_COUNT, Lab
from clusterforge.plan.model import SECURITY_MODES


def node_count(text: str) -> int:
    """``--nodes N``: a whole number from 1 to 5 (the lab's loopback addresses)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if str(count) != text.strip() or not MIN_NODES <= count <= MAX_NODES:
        raise argparse.ArgumentTypeError(
            f"--nodes takes a whole number from {MIN_NODES} to {MAX_NODES}, not {text!r}"
        )
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge-lab", description=__doc__)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the project checkout")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="build and start the lab (three nodes unless --nodes)")
    up.add_argument(
        "--network",
        choices=("bridge", "loopback"),
        default=None,
        help="override the network mode chosen from the open-file limit",
    )
    up.add_argument(
        "--mode",
        choices=SECURITY_MODES,
        default="tls",
        help="security mode of the cluster (default: tls)",
    )
    up.add_argument(
        "--dashboards-archive",
        type=Path,
        default=None,
        help="a Dashboards release tar.gz to install beside the first node (port 5601)",
    )
    up.add_argument(
        "--nodes",
        type=node_count,
        default=NODE_COUNT,
        metavar="N",
        help=f"how many nodes the lab has ({MIN_NODES} to {MAX_NODES}, default {NODE_COUNT}); "
        "growing adds containers, shrinking drains and removes the extra nodes first",
    )
    up.add_argument(
        "--no-apps",
        dest="apps",
        action="store_false",
        help="leave out the apps container (the user directory and the order service)",
    )
    commands.add_parser("down", help="remove the lab's containers and network; keep caches")
    commands.add_parser(
        "prepare", help="start a docker engine if needed and build the lab image (for molecule)"
    )
    args = parser.parse_args(argv)
    lab = Lab(repo=args.repo.resolve(), lab_dir=args.repo.resolve() / "inventories" / "lab")
    try:
        if args.command == "up":
            lab.up(
                network=args.network,
                mode=args.mode,
                dashboards_archive=args.dashboards_archive,
                node_count=args.nodes,
                apps=args.apps,
            )
        elif args.command == "prepare":
            lab.prepare()
        else:
            lab.down()
    except ClusterforgeError as error:
        print(f"clusterforge: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
