"""The inventory groups whose hosts the toolkit deploys, named once.

The playbooks reach them (site.yml, rotate_certs.yml: through the collection's filter
``clusterforge_host_groups``), the node exporter runs on each of their hosts
(monitoring.yml, and clusterforge.plan.monitoring.monitoring_inputs for the scrape targets), all
from this tuple: a new group is one name here.
"""

from __future__ import annotations

from collections.abc import Container

# The cluster's nodes first: a pattern of these starts with the group every run needs.
HOST_GROUPS = (
    "opensearch",
    "dashboards",
    "postgresql",
    "user_directory",
    "order_service",
    "monitoring",
)


def present_host_groups(inventory_groups: Container[str]) -> list[str]:
    """HOST_GROUPS in their order: ``opensearch`` always (an inventory without it was
    refused by the check, and a pattern naming it is no warning then), every other one
    only when the inventory has it (a pattern naming a missing group prints a warning)."""
    return [group for group in HOST_GROUPS if group == HOST_GROUPS[0] or group in inventory_groups]
