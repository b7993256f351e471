"""ansible-doc's page of the action plugin clusterforge_service_settings (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_service_settings
short_description: One host's settings of one service, as the run planned them
description:
  - Runs on the control node (no connection to the host) and copies the host's settings
    from O(planned), the services' part of this run's plan, which is the plan's
    (C(site.yml), C(playbooks/plan.yml)) or C(playbooks/services_plan.yml)'s
    (C(services.yml) alone, the inventory check's settings with the run's passwords put
    in). Nothing is planned
    or validated here, so a run plans and validates each service host's settings once.
  - A host the plan does not hold (the role in a playbook of one's own, without the
    inventory check and the plan) is refused, naming C(playbooks/services.yml) and
    C(playbooks/site.yml). Run it before any task that changes the host, with
    C(any_errors_fatal), so one such host stops every host.
  - The result is marked no_log because C(content) holds the secrets; a failure's message
    holds none and is shown.
  - For the order service it also returns the plan's C(orders_search), the public part
    of its delivery into the cluster.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  service:
    description: The service.
    type: str
    choices:
      # BEGIN GENERATED: by `python -m clusterforge.schema generate`
      - user_directory
      - order_service
      # END GENERATED
    required: true
  planned:
    description:
      - The services' part of this run's plan, C(services) (C(host -> service ->
        settings)) and C(orders_search), from C(__clusterforge_plan) or
        C(__clusterforge_services_plan).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Copy this host's settings from the run's plan (services.yml alone)
  clusterforge.stack.clusterforge_service_settings:
    service: order_service
    planned:
      services: "{{ __clusterforge_services_plan.services }}"
      orders_search: "{{ __clusterforge_services_plan.orders_search }}"
  delegate_to: localhost
  any_errors_fatal: true
  register: __python_service_settings
"""

RETURN = r"""
file_name:
  description: The settings file's name.
  returned: success
  type: str
public:
  description: The settings, secrets replaced by a mark.
  returned: success
  type: dict
public_content:
  description: The settings file as it would be written from RV(public).
  returned: success
  type: str
arguments:
  description: The unit's command-line options.
  returned: success
  type: dict
content:
  description: The settings file, secrets included (the result is no_log).
  returned: success
  type: str
orders_search:
  description:
    - The public part of the order service's delivery into the cluster (never the
      password).
  returned: for order_service
  type: dict
"""
