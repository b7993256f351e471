"""ansible-doc's page of the action plugin clusterforge_certs (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_certs
short_description: Renew certificates or rotate the CA on the control node
description:
  - Day-two certificate work (docs/certificates.md). It runs before C(playbooks/plan.yml)
    in C(playbooks/rotate_certs.yml) and C(playbooks/rotate_ca.yml); the plan that follows
    finds the new files and places them.
  - The CA key never leaves the control node. Use it with C(run_once) and C(delegate_to=localhost).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.stack.opensearch_nodes.group
options:
  renew:
    description:
      - Issue every node and admin certificate again now, under the issuing CA,
        whatever their expiry.
    type: bool
    default: false
  ca_rotation_step:
    description: One step of a CA rotation.
    type: str
    choices: [trust, reissue, finish]
  wait_served:
    description:
      - Instead of the above, wait until every node serves the certificate the plan placed
        (its serial, read from a TLS handshake on the HTTP port, verified against the CA bundle).
      - Needs O(nodes), O(ca_cert) and O(http_scheme).
    type: bool
    default: false
  nodes:
    description: The plan's C(nodes), for O(wait_served).
    type: dict
  ca_cert:
    description:
      - The CA bundle on the control node (the plan's C(cluster.pki.ca_cert)), for
        O(wait_served).
    type: path
  http_scheme:
    description: The plan's C(cluster.http_scheme); anything but V(https) skips O(wait_served).
    type: str
  timeout_s:
    description: Seconds O(wait_served) may take.
    type: float
    default: 90
"""

EXAMPLES = r"""
- name: Renew every certificate now
  clusterforge.stack.clusterforge_certs:
    group: opensearch
    renew: true
  run_once: true
  delegate_to: localhost

- name: Wait until every node serves its new certificate
  clusterforge.stack.clusterforge_certs:
    wait_served: true
    nodes: "{{ __clusterforge_plan.nodes }}"
    ca_cert: "{{ __clusterforge_plan.cluster.pki.ca_cert }}"
    http_scheme: "{{ __clusterforge_plan.cluster.http_scheme }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
msg:
  description: What was issued or changed.
  returned: when certificates were renewed or a rotation step ran
  type: str
served:
  description: Per node, the serial it serves.
  returned: with O(wait_served), once every node serves its planned certificate
  type: dict
"""
