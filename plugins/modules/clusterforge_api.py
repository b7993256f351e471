"""ansible-doc's page of the action plugin clusterforge_api (docs/architecture.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_api
short_description: Call a node's HTTP API with the plan's CA and credentials
description:
  - The one way the playbooks call the cluster (and the console's status), so the CA,
    the API user and its password are chosen in one place, from the plan. It runs
    M(ansible.builtin.uri) on the host.
  - Reads (GET, HEAD) run in check mode too; writes are skipped in check mode and
    reported as changes.
  - The plan is read from the C(__clusterforge_plan) variable, the admin password from
    C(opensearch_security_passwords).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  path:
    description:
      - A path on this node's cluster URL, such as C(/_cluster/health).
      - Give this or O(url).
    type: str
  url:
    description: A full URL, for a host outside the plan's nodes such as a console.
    type: str
  method:
    description: The HTTP method.
    type: str
    default: GET
  body:
    description: A JSON body.
    type: raw
  status_code:
    description: The statuses that count as success, as for M(ansible.builtin.uri).
    type: list
    elements: int
    default: [200]
  timeout:
    description: Seconds a request may take.
    type: int
    default: 30
  auth:
    description:
      - V(admin) is the admin user in the secured modes and nobody in open mode.
      - V(cert) is the admin client certificate on the node in tls mode (the only identity
        the cluster accepts before its security index exists), the admin user in basic mode.
      - V(user) needs O(username) and O(password).
    type: str
    choices: [admin, cert, none, user]
    default: admin
  username:
    description: The user for O(auth=user).
    type: str
  password:
    description: The password for O(auth=user).
    type: str
  wait_seconds:
    description:
      - Wait (GET only) up to this many seconds until the answer is O(wait_status) and its
        JSON body holds O(wait_json). The other statuses of O(status_code), and no answer,
        mean "not yet".
      - The wait runs on the host in one run of M(clusterforge.stack.clusterforge_http_wait).
    type: float
  wait_status:
    description: The status O(wait_seconds) waits for.
    type: int
    default: 200
  wait_json:
    description: Top-level values the JSON body must hold for O(wait_seconds) to end.
    type: dict
    default: {}
seealso:
  - module: clusterforge.stack.clusterforge_http_wait
"""

EXAMPLES = r"""
- name: Wait for green
  clusterforge.stack.clusterforge_api:
    path: /_cluster/health
    wait_seconds: 120
    wait_json: {status: green}

- name: Create an index
  clusterforge.stack.clusterforge_api:
    path: /orders
    method: PUT
    body: {settings: {number_of_replicas: 1}}
    status_code: [200, 400]
"""

RETURN = r"""
status:
  description: The HTTP status, as M(ansible.builtin.uri) returns it.
  returned: when a request was sent
  type: int
json:
  description: The JSON body of the answer, as M(ansible.builtin.uri) returns it.
  returned: when the answer is JSON
  type: raw
"""
