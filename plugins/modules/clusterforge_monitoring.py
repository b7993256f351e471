"""ansible-doc's page of the action plugin clusterforge_monitoring (docs/monitoring.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_monitoring
short_description: The monitoring host's plan, with its certificate and secrets
description:
  - Runs on the control node (no connection to the host) through
    C(clusterforge.plan.monitoring.plan_monitoring), for the one host of the group
    C(monitoring), with the inventory as the task sees it.
  - Scrape targets, the number of nodes, the CA and the credentials come from the
    inventory and the cluster's plan; the cluster's CA issues the host a serverAuth
    certificate for Prometheus and Alertmanager, and issues (or reuses) every host's node
    exporter certificate in the same call, building the cluster model once.
  - The result is marked no_log because C(files) holds the key, the tokens and passwords,
    and C(node_exporter) every host's exporter key. C(changed) says whether a certificate
    was issued now.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  renew:
    description: Issue the host's certificate again now (C(playbooks/rotate_certs.yml)).
    type: bool
    default: false
  renew_node_exporters:
    description: Issue every host's node exporter certificate again now.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the monitoring host
  clusterforge.stack.clusterforge_monitoring:
  delegate_to: localhost
  any_errors_fatal: true
  register: __monitoring_plan
"""

RETURN = r"""
files:
  description: The files to place (C(clusterforge_files) entries; secrets marked).
  returned: always
  type: list
  elements: dict
units:
  description: The units of Prometheus, Alertmanager and the blackbox exporter.
  returned: always
  type: list
  elements: str
cluster_exporters:
  description: One exporter unit instance per node of the cluster.
  returned: always
  type: list
  elements: str
prometheus_url:
  description: Prometheus' URL (https, basic auth).
  returned: always
  type: str
alertmanager_url:
  description: Alertmanager's URL (https, basic auth).
  returned: always
  type: str
node_exporter:
  description: What every host's node exporter gets (web config, units by host, paths,
    and C(certificates), each host's certificate and key by host).
  returned: always
  type: dict
"""
