"""ansible-doc's page of the action plugin clusterforge_service_settings (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_service_settings
short_description: The settings of one service's hosts in the play, as the run planned them
description:
  - Runs once per play on the control node (C(run_once), C(delegate_to=localhost); no
    connection to the hosts). Each host's settings come from O(planned) (the plan's
    C(services) section, C(site.yml)), else from O(checked) (the inventory check's, with
    the order delivery's real password put in: C(services.yml) alone); neither is
    validated again, so a run validates each service host's settings once.
  - A host that neither holds (the role in a playbook of one's own) is planned here,
    all such hosts together, through C(clusterforge.plan.services_plan.plan_services_section),
    with the hosts' C(<service>_*) variables over the role's defaults; it fails, naming
    every variable at fault, when the service would refuse its settings. Run it before
    any task that changes the hosts, with C(any_errors_fatal).
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
  planned:
    description: The plan's C(services) section, C({host: {service: settings}}).
    type: dict
  checked:
    description:
      - The C(services) the inventory check of this run returned
        (C(__clusterforge_checked_services), kept by C(playbooks/check-inventory.yml)).
    type: dict
"""

EXAMPLES = r"""
- name: Take the play's settings from the plan or the inventory check
  clusterforge.stack.clusterforge_service_settings:
    service: order_service
    checked: "{{ __clusterforge_checked_services | default({}) }}"
  run_once: true
  delegate_to: localhost
  any_errors_fatal: true
  register: __python_service_planned
"""

RETURN = r"""
hosts:
  description:
    - Per host of the play, its settings - C(file_name), the settings file's name;
      C(public), the settings with secrets replaced by a mark, and C(public_content);
      C(arguments), the unit's command-line options; C(content), the settings file,
      secrets included (the result is no_log).
    - For the order service also C(orders_search), the public part of its delivery
      into the cluster (never the password).
  returned: success
  type: dict
"""
