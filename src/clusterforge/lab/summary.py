"""What scripts/up reports of the lab it brought up: lab.json's node and service facts,
the summary it prints, and a curl line that never shows the password.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterforge.lab.lab_inventory import ORDERS_PORT, USER_DIRECTORY_PORT
from clusterforge.lab.topology import LabNode, Placement
from clusterforge.schema import load_schema


def node_facts(
    nodes: list[LabNode],
    urls: list[str],
    cat_nodes: list[dict[str, Any]],
    placements: list[Placement],
) -> list[dict[str, Any]]:
    """lab.json's ``nodes``: what ``_cat/nodes`` reports of each (its name, ``roles`` as the
    engine abbreviates them, the elected ``cluster_manager``), and where the inventory put
    it: ``zone`` (null without --zones) and ``node_roles``, the roles it was given."""
    by_ip = {entry["ip"]: entry for entry in cat_nodes}
    default_roles = list(load_schema().variables["opensearch_node_roles"].default)
    facts = []
    for node, url, placement in zip(nodes, urls, placements, strict=True):
        seen = by_ip.get(node.address, {})
        facts.append(
            {
                "name": seen.get("name", node.inventory_name),
                "url": url,
                "address": node.address,
                "roles": seen.get("node.role", ""),
                "cluster_manager": seen.get("cluster_manager") == "*",
                "zone": placement.zone,
                "node_roles": list(placement.roles)
                if placement.roles is not None
                else default_roles,
            }
        )
    return facts


def service_facts(
    apps: LabNode | None,
    *,
    ca_cert: Path,
    user_directory_token_file: Path,
    orders_token_file: Path,
) -> dict[str, Any]:
    """lab.json's ``services`` (base URLs, HTTPS through the TLS proxy), the CA bundle
    that verifies them (``services_ca_cert``), and the 0600 files of their bearer tokens
    (``user_directory_token_file``, ``orders_token_file``)."""
    if apps is None:
        return {"services": {}}
    return {
        "services": {
            "user_directory": f"https://{apps.address}:{USER_DIRECTORY_PORT}",
            "orders": f"https://{apps.address}:{ORDERS_PORT}",
        },
        "services_ca_cert": str(ca_cert),
        "user_directory_token_file": str(user_directory_token_file),
        "orders_token_file": str(orders_token_file),
    }


def curl_example(facts: dict[str, Any]) -> str:
    """How to reach the cluster, without ever printing the password or passing it in argv.

    ``curl -u user:password`` would put the password in the process list of anyone who
    copies the line, so curl reads its credentials as a config file on stdin (``-K -``),
    fed by a here-string the shell expands itself: neither curl's nor cat's argv holds it.
    """
    url = f"'{facts['nodes'][0]['url']}/_cat/nodes?v'"
    if facts["mode"] == "open":
        return f"curl {url}"
    ca = f"--cacert {facts['ca_cert']} " if facts.get("ca_cert") else ""
    credentials = f'user = \\"{facts["admin_user"]}:$(cat {facts["admin_password_file"]})\\"'
    return f'curl {ca}-K - {url} <<< "{credentials}"'


def print_summary(facts: dict[str, Any], *, elapsed: float, lab_dir: Path) -> None:
    print("\n".join(summary_lines(facts, elapsed=elapsed, lab_dir=lab_dir)))


def summary_lines(facts: dict[str, Any], *, elapsed: float, lab_dir: Path) -> list[str]:
    """What scripts/up prints at its end (the README shows a sample; a test holds it)."""
    lines = [
        "",
        f"cluster  {facts['cluster_name']}  (OpenSearch {facts['version']}, mode {facts['mode']}, "
        f"network {facts['network']})",
        f"health   {facts['health']}",
    ]
    for node in facts["nodes"]:
        manager = "  (cluster manager)" if node["cluster_manager"] else ""
        zone = f"  {node['zone']}" if node.get("zone") else ""
        lines.append(
            f"node     {node['name']:<14} {node['url']:<28} roles {node['roles']}{zone}{manager}"
        )
    if facts.get("console"):
        sign_in = "" if facts["mode"] == "open" else "; sign in as admin"
        lines.append(f"console  {facts['console']}  (Dashboards{sign_in})")
    services = facts.get("services") or {}
    if "user_directory" in services:
        lines.append(
            f"service  user directory  {services['user_directory']}/mock-api/users  "
            f"(bearer token in {facts['user_directory_token_file']})"
        )
    if "orders" in services:
        lines.append(
            f"service  orders          {services['orders']}/orders  "
            f"(bearer token in {facts['orders_token_file']})"
        )
    if services and facts.get("services_ca_cert"):
        lines.append(f"services verify with --cacert {facts['services_ca_cert']}")
    monitoring = facts.get("monitoring")
    if monitoring:
        lines += [
            f"monitor  prometheus    {monitoring['prometheus']}",
            f"monitor  alertmanager  {monitoring['alertmanager']}  (user {monitoring['user']}, "
            f"password in {monitoring['password_file']}; --cacert {monitoring['ca_cert']})",
            f"monitor  alerts received by the lab's webhook: {monitoring['receiver_log']}",
        ]
    lines += [
        f"changed  {facts['changed']} task(s) in this run; took {elapsed:.0f}s",
        f"try      {curl_example(facts)}",
        f"facts    {lab_dir / 'lab.json'}",
        "teardown scripts/down",
    ]
    return lines
