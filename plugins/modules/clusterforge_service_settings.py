"""ansible-doc's page of the action plugin clusterforge_service_settings (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_service_settings
short_description: One host's settings of one service, validated by the service's own model
description:
  - Runs on the control node (no connection to the host) through
    C(clusterforge.plan.services_plan.plan_services), with the host's C(<service>_*) variables
    as the task sees them, templated.
  - Fails, naming every variable at fault, when the service would refuse its settings.
    Run it before any task that changes the host, with C(any_errors_fatal), so one bad
    host stops every host.
  - The result is marked no_log because C(content) holds the secrets; a failure's message
    holds none and is shown.
  - For the order service it also decides delivery into the inventory's cluster exactly
    as the plan does, so C(playbooks/services.yml) alone writes what C(site.yml) planned.
version_added: 1.0.0
author: clusterforge developers
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
"""

EXAMPLES = r"""
- name: Validate this host's settings
  clusterforge.stack.clusterforge_service_settings:
    service: order_service
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
arguments:
  description: The unit's command-line options.
  returned: success
  type: list
  elements: str
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
