"""``python -m clusterforge.lab up|down``: what scripts/up and scripts/down run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clusterforge.errors import ClusterforgeError
from clusterforge.lab.cluster import MAX_NODES, MAX_ZONES, MIN_NODES, NODE_COUNT, Lab
from clusterforge.plan.cluster.model import SECURITY_MODES


def _whole_number(text: str, flag: str, low: int, high: int) -> int:
    try:
        count = int(text)
    except ValueError:
        count = low - 1
    if str(count) != text.strip() or not low <= count <= high:
        raise argparse.ArgumentTypeError(
            f"{flag} takes a whole number from {low} to {high}, not {text!r}"
        )
    return count


def node_count(text: str) -> int:
    """``--nodes N``: a whole number from 1 to 9 (the lab's loopback addresses)."""
    return _whole_number(text, "--nodes", MIN_NODES, MAX_NODES)


def zone_count(text: str) -> int:
    """``--zones Z``: a whole number from 1 to 3."""
    return _whole_number(text, "--zones", 1, MAX_ZONES)


def manager_count(text: str) -> int:
    """``--managers M``: 0 (none: every node may be elected) to 8; the lab refuses what
    the plan would (2, or all of the nodes) before a container starts."""
    return _whole_number(text, "--managers", 0, MAX_NODES - 1)


def build_parser() -> argparse.ArgumentParser:
    """The lab's command line (the README lists ``up``'s options; a test holds them)."""
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
        "--zones",
        type=zone_count,
        default=0,
        metavar="Z",
        help=f"spread the nodes round-robin over Z zones (1 to {MAX_ZONES}: zone-a, zone-b, "
        "zone-c; opensearch_zone, node.attr.zone and allocation awareness); default none",
    )
    up.add_argument(
        "--managers",
        type=manager_count,
        default=0,
        metavar="M",
        help="make the first M nodes dedicated cluster managers (one per zone with --zones) "
        "and the others data nodes; default 0: every node holds every role. Fixed for the "
        "life of a lab (scripts/down to change it)",
    )
    up.add_argument(
        "--no-apps",
        dest="apps",
        action="store_false",
        help="leave out the apps container (the user directory and the order service)",
    )
    up.add_argument(
        "--no-monitoring",
        dest="monitoring",
        action="store_false",
        help="leave out the monitoring (Prometheus, Alertmanager and the exporters on the "
        "apps container, and the lab's alert receiver; tls mode with apps only)",
    )
    up.add_argument(
        "--ldap",
        action="store_true",
        help="run a directory (slapd, LDAPS on 127.0.0.25) and log people in through it "
        "(docs/ldap.md); loopback network, secured modes",
    )
    commands.add_parser("down", help="remove the lab's containers and network; keep caches")
    commands.add_parser(
        "prepare", help="start a docker engine if needed and build the lab image (for molecule)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    lab = Lab(repo=args.repo.resolve(), lab_dir=args.repo.resolve() / "inventories" / "lab")
    try:
        if args.command == "up":
            lab.up(
                network=args.network,
                mode=args.mode,
                dashboards_archive=args.dashboards_archive,
                node_count=args.nodes,
                apps=args.apps,
                monitoring=args.monitoring,
                zones=args.zones,
                managers=args.managers,
                ldap=args.ldap,
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
