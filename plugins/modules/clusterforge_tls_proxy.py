"""ansible-doc's page of the action plugin clusterforge_tls_proxy (docs/services.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_tls_proxy
short_description: A service host's TLS proxy as the inventory check planned it, and its certificate
description:
  - Runs on the control node (no connection to the host). The proxy was planned by the
    inventory check (C(clusterforge.plan.services.tls_proxy.plan_tls_proxies), through
    C(playbooks/check_inventory.yml), which keeps it as
    C(__clusterforge_checked_tls_proxies)); this copies the host's entry.
  - The cluster's CA (the inventory's C(opensearch) group; otherwise a CA of its own in
    the inventory's C(.pki)) issues the host a serverAuth certificate, or the host's
    own C(tls_proxy_cert_path) and C(tls_proxy_key_path) are checked and used.
  - A proxied service that binds off loopback or shares a port was refused by the check,
    naming the variable, before any host was contacted. The result is marked no_log
    because C(files) holds the key.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  planned:
    description:
      - Every service host's proxy as the inventory check planned it
        (C(__clusterforge_checked_tls_proxies)); a host without an entry has no proxy.
      - Without it the action fails, naming the playbooks that check first.
    type: dict
    required: true
  renew:
    description: Issue the host's certificate again now (C(playbooks/rotate_certs.yml)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Take this host's proxy from the inventory check and issue its certificate
  clusterforge.stack.clusterforge_tls_proxy:
    planned: "{{ __clusterforge_checked_tls_proxies }}"
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
install:
  description:
    - Debian's package (C(packages)), its unit to mask first (C(masks)) and the binaries
      whose presence spares apt (C(binaries), none), for roles/_debian_service.
  returned: when enabled
  type: dict
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
