"""ansible-doc's page of the action plugin clusterforge_cluster_config (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_cluster_config
short_description: Make the cluster's own objects match the inventory
description:
  - Security roles, role mappings, action groups and tenants, index and component
    templates, ingest pipelines and persistent cluster settings, as the plan's
    C(cluster_config) section declares them (docs/cluster-config.md).
  - Reads each kind once, compares it with the declarations normalised as the engine
    answers (key order and the defaults the engine adds are no difference), and writes
    only the objects that differ, in an order where what an object names exists first.
  - With C(prune) in the plan it also deletes objects of the visited kinds the inventory
    does not name, never built-in, reserved, hidden or static ones, the toolkit's own, or
    an index template a data stream uses.
  - In check mode it reads and reports, writing nothing; with C(--diff) each object's
    change shows as JSON, before (cluster) and after (inventory).
  - The calls run on the node through M(clusterforge.stack.clusterforge_api)'s arguments
    (the CA, the admin user).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  config:
    description: The plan's C(cluster_config) section.
    type: dict
    required: true
  kinds:
    description:
      - The kind variables to visit (C(opensearch_security_roles), ...); default the
        plan's C(kinds). C(site.yml) visits one kind per task, so the recap counts each
        kind changed.
    type: list
    elements: str
notes:
  - Needs the C(__clusterforge_plan) variable (playbooks/plan.yml) for the node's URL and
    the C(clusterforge) Python package on the control node.
seealso:
  - module: clusterforge.stack.clusterforge_api
"""

EXAMPLES = r"""
- name: Make the declared roles match the cluster
  clusterforge.stack.clusterforge_cluster_config:
    config: "{{ __clusterforge_plan.cluster_config }}"
    kinds: [opensearch_security_roles]
  run_once: true
"""

RETURN = r"""
changes:
  description: Each object created, updated or deleted (or, in check mode, that would be).
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: The kind, as reported (C(role), C(index template), ...).
      type: str
    name:
      description: The object's name (a setting's key for settings).
      type: str
    action:
      description: C(create), C(update) or C(delete).
      type: str
"""
