"""ansible-doc's page of the action plugin clusterforge_tls_proxy (docs/services.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_tls_proxy
short_description: One service host's TLS proxy, planned, with the host's certificate
description:
  - Runs on the control node (no connection to the host) through
    C(clusterforge.plan.tls_proxy.plan_tls_proxy), with the host's C(tls_proxy_*) and
    services' variables as the task sees them, templated.
  - The cluster's CA (the inventory's C(opensearch) group; otherwise a CA of its own in
    the inventory's C(.pki)) issues the host a serverAuth certificate, or the host's
    own C(tls_proxy_cert_path) and C(tls_proxy_key_path) are checked and used.
  - Fails, naming the variable, when a proxied service binds off loopback or shares a
    port. The result is marked no_log because C(files) holds the key.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  renew:
    description: Issue the host's certificate again now (C(playbooks/rotate_certs.yml)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan this host's proxy
  clusterforge.stack.clusterforge_tls_proxy:
  delegate_to: localhost
  any_errors_fatal: true
  register: __tls_proxy_plan
"""

RETURN = r"""
enabled:
  description: Whether a service of this host is served through the proxy.
  returned: always
  type: bool
files:
  description: The files to place (C(clusterforge_files) entries; the key is marked secret).
  returned: when enabled
  type: list
  elements: dict
urls:
  description: Each proxied service's base URL (https).
  returned: when enabled
  type: dict
health:
  description: Each proxied service's health URL through the proxy, from the host itself.
  returned: when enabled
  type: dict
certificate:
  description: The host certificate's serial, days left, and whether it is the user's own.
  returned: when enabled
  type: dict
"""
