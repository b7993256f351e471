"""ansible-doc's page of the action plugin clusterforge_host_certificate (roles/postgresql)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_host_certificate
short_description: A server certificate for a host beside the cluster, from the toolkit's PKI
description:
  - Runs on the control node (delegate it to localhost; no connection to the host) through
    C(clusterforge.plan.cluster.host_certificates).
  - The CA is the one the TLS proxy's certificates come from
    (C(clusterforge.plan.cluster.host_certificates.issuing_ca_for_task)) the cluster's (the
    inventory's C(opensearch) group), or, without one, a CA of the inventory's own in its
    C(.pki), opened with C(opensearch_ca_passphrase) or C(CLUSTERFORGE_CA_PASSPHRASE).
  - Issues the task host a serverAuth certificate for I(purpose), named by its inventory
    name and I(alt_names), or reuses the one issued before while its names, CA and
    validity still fit. The result is marked no_log because it carries the key.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  purpose:
    description: What the certificate serves (its OU and file name), e.g. C(postgresql).
    type: str
    required: true
    choices: [tls_proxy, postgresql, monitoring, node_exporter]
  alt_names:
    description: DNS names and IP addresses clients use besides the inventory name.
    type: list
    elements: str
    default: []
  renew:
    description: Issue the certificate again now (C(playbooks/rotate_certs.yml)).
    type: bool
    default: false
  bundle_only:
    description:
      - Issue nothing; return only C(ca_bundle_pem), for a client host that verifies
        the server. Creates the CA only when there is none yet.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Issue the db host's certificate (control node)
  clusterforge.stack.clusterforge_host_certificate:
    purpose: postgresql
    alt_names: "{{ [ansible_host | default('')] + postgresql_listen_addresses }}"
  delegate_to: localhost
  become: false
  register: __postgresql_certificate
  no_log: true
"""

RETURN = r"""
certificate_pem:
  description: The host's certificate chain (PEM).
  returned: unless bundle_only
  type: str
key_pem:
  description: The host's private key (PEM, unencrypted); the result is no_log.
  returned: unless bundle_only
  type: str
ca_bundle_pem:
  description: The CA bundle clients verify the host with (both CAs during a rotation).
  returned: always
  type: str
serial:
  description: The certificate's serial number (hex).
  returned: unless bundle_only
  type: str
days_left:
  description: Days until the certificate expires.
  returned: unless bundle_only
  type: int
"""
