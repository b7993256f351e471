"""ansible-doc's page of the action plugin clusterforge_observe (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_observe
short_description: Read what one OpenSearch node runs now, for the plan's rollout
description:
  - One task reads the service's state, the markers a formed cluster leaves, the version
    the node answers, the elected cluster manager, the host's memory and the node's
    opensearch.yml (with O(config)); when nodes are
    being removed, also the cluster's members and its indices' replica settings.
  - Everything is a read, so it runs in check mode as well and a preview decides what
    restarts as a run would.
  - A node whose service does not run is asked nothing; a node that does not answer
    reports no version, as a new node does.
  - The API calls use the CA and the admin user from the plan (C(__clusterforge_plan)).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.stack.opensearch_nodes.service
options:
  markers:
    description:
      - The marker files on the node, the paths of C(formed) and C(security_mode)
        (the plan's C(cluster.markers)).
    type: dict
    required: true
  legacy_markers:
    description:
      - The same markers where releases before issue 32 kept them (in a directory the
        service user owns). Their existence is checked, never their content, so a file
        planted there decides nothing; the role moves them to the root-owned state
        directory.
    type: dict
  config:
    description:
      - The node's opensearch.yml (the plan's C(cluster.config_dir)/opensearch.yml). Its
        text is returned as C(opensearch_yml), null when the file is missing, so the plan
        tells which changed settings need a restart (C(rollout.nodes[host].config_restart)).
      - The file holds no secret (the plan renders it without any). Without this option
        C(opensearch_yml) is null and a changed opensearch.yml restarts the node.
    type: path
  removal:
    description: Whether the plan removes nodes; then the members and replica settings are read too.
    type: bool
    default: false
seealso:
  - module: clusterforge.stack.clusterforge_plan
"""

EXAMPLES = r"""
- name: Look at each node
  clusterforge.stack.clusterforge_observe:
    service: opensearch
    markers: "{{ __clusterforge_plan.cluster.markers }}"
    config: "{{ __clusterforge_plan.cluster.config_dir }}/opensearch.yml"
    removal: "{{ __clusterforge_plan.removal.names | default([]) | length > 0 }}"
  register: __clusterforge_observation
"""

RETURN = r"""
observed:
  description:
    - What the node runs, in the shape C(clusterforge.plan.cluster.restarts.plan_rollout) and
      C(plan_removal) read.
    - Version, active, formed, security_mode, cluster_manager, the host's memory and
      C(opensearch_yml) (the node's opensearch.yml text, or null); with O(removal) also
      the members and the index settings.
  returned: always
  type: dict
"""
