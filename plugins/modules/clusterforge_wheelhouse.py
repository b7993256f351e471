"""ansible-doc's page of the action plugin clusterforge_wheelhouse (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_wheelhouse
short_description: Build one service's wheelhouse on the control node, once per key
description:
  - Builds the service's project (C(services/userdir), C(services/orders)) with
    C(pip wheel) into the control node's cache, keyed on that service's own
    C(pyproject.toml) and C(src/) only, so an edit elsewhere rebuilds nothing.
  - Changed only when it was built now. Run it with C(run_once) and C(delegate_to=localhost).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  service:
    description: The service whose project is built.
    type: str
    choices:
      # BEGIN GENERATED: by `python -m clusterforge.schema generate`
      - user_directory
      - order_service
      # END GENERATED
    required: true
  project_root:
    description: Another project folder to build instead (tests); the default comes from O(service).
    type: path
"""

EXAMPLES = r"""
- name: Build the order service's wheelhouse
  clusterforge.stack.clusterforge_wheelhouse:
    service: order_service
  run_once: true
  delegate_to: localhost
  register: __python_service_wheelhouse
"""

RETURN = r"""
path:
  description: The wheelhouse directory in the control node's cache.
  returned: success
  type: str
key:
  description: The hash of the service's C(pyproject.toml) and C(src/).
  returned: success
  type: str
digest:
  description: What hosts record to know what they installed.
  returned: success
  type: str
requirement:
  description: What hosts pass to pip, the project's wheel with its extras.
  returned: success
  type: str
python_version:
  description: The minor version of the Python that built the wheels; hosts must match it.
  returned: success
  type: str
machine:
  description: The machine of the Python that built the wheels; hosts must match it.
  returned: success
  type: str
wheels:
  description: The wheel files.
  returned: success
  type: list
  elements: str
"""
