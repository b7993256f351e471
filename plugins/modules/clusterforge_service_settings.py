"""ansible-doc's page of the action plugin clusterforge_service_settings (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_service_settings
short_description: One host's settings of one service, as the run planned them
description:
  - Runs on the control node (no connection to the host). The host's settings come from
    O(planned) (the plan's C(services) section, C(site.yml)), else from O(checked) (the
    inventory check's, with the order delivery's real password put in, for C(services.yml)
    alone); neither is validated again, so a run validates each service host's settings
    once.
  - A host that neither holds (the role in a playbook of one's own), or whose
    C(<service>_database) is not C(sqlite) (the postgresql role's client step sets its
    URL during the run), is planned here through
    C(clusterforge.plan.services_plan.plan_services), with its C(<service>_*) variables as
    the task sees them, templated; it fails, naming every variable at fault, when the
    service would refuse its settings. Run it before any task that changes the host,
    with C(any_errors_fatal), so one bad host stops every host.
  - The result is marked no_log because C(content) holds the secrets; a failure's message
    holds none and is shown.
  - For the order service it also decides delivery into the inventory's cluster exactly
    as the plan does, so C(playbooks/services.yml) alone writes what C(site.yml) planned.
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
    description: The plan's C(services) section, C(host -> service -> settings).
    type: dict
  checked:
    description:
      - The C(services) the inventory check of this run returned
        (C(__clusterforge_checked_services), kept by C(playbooks/check_inventory.yml)).
    type: dict
"""

EXAMPLES = r"""
- name: Take this host's settings from the inventory check
  clusterforge.stack.clusterforge_service_settings:
    service: order_service
    checked: "{{ __clusterforge_checked_services | default({}) }}"
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
