"""Module: ask an HTTP endpoint again, on the host, until it answers as wanted.

Waits used to be ``until``/``retries``/``delay`` loops around ``uri`` (or a ``wait_for``
on the port first): every try cost the controller a module run, and both paused whole
seconds, so each wait ended up to a second after its condition held, once per wait and
per node in a rolling restart (issue 14). This module loops on the host instead: a
refused connection is tried again every 0.1 s, a not-ready answer after a pause that
starts at 0.1 s and doubles up to 1 s. clusterforge_api runs it when a task gives
``wait_seconds``; clusterforge_rolling_turn runs it for its waits.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_http_wait
short_description: Wait on the host until an HTTP endpoint gives the wanted answer
description:
  - GETs C(url) until it answers C(ready_status) (and, with C(ready_json), a JSON body
    holding those top-level values), or fails after C(timeout) seconds with the last
    answer it saw.
  - No answer (refused, reset, timed out) and an answer in C(retry_status) are asked
    again; any other status fails at once (a wrong password will not get better).
  - Reads only, so it runs in check mode as well.
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
options:
  url:
    description: The URL to GET.
    type: str
    required: true
  ready_status:
    description: The status that ends the wait.
    type: int
    default: 200
  ready_json:
    description: Top-level keys and values the JSON body must hold as well.
    type: dict
    default: {}
  retry_status:
    description: Statuses that mean "not yet" (a health hold that ran out, a node whose
      security index is not read yet).
    type: list
    elements: int
    default: [408, 502, 503, 504]
  timeout:
    description: Seconds the whole wait may take.
    type: float
    default: 900
  request_timeout:
    description: Seconds one request may take (a held health request takes its hold).
    type: float
    default: 30
  ca_path:
    description: The CA bundle that verifies the server (hostname verification stays on).
    type: path
  client_cert:
    description: A client certificate to present.
    type: path
  client_key:
    description: The client certificate's key, a file on the host.
    type: path
  client_key_content:
    description:
      - The client certificate's key itself, instead of C(client_key), for a key the host
        must not keep (the cluster's super-admin key). It is written to a file only the
        module's user can read, for this run alone, and removed when the module ends,
        whatever the outcome. Never logged.
    type: str
  url_username:
    description: The user of HTTP basic authentication.
    type: str
  url_password:
    description: Its password.
    type: str
  force_basic_auth:
    description: Send the credentials with the first request.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Wait until every node has joined
  clusterforge.stack.clusterforge_http_wait:
    url: https://127.0.0.11:9200/_cluster/health?wait_for_nodes=3&timeout=10s
    ca_path: /etc/opensearch/certs/live/ca.pem
    url_username: admin
    url_password: "{{ password }}"
    force_basic_auth: true
    timeout: 600
  no_log: true
"""

RETURN = r"""
status:
  description: The status of the answer that ended the wait.
  type: int
  returned: always
json:
  description: That answer's body, when it is JSON.
  type: raw
  returned: always; null when the body is not JSON
waited:
  description: Seconds the wait took.
  type: float
  returned: success
attempts:
  description: Requests sent.
  type: int
  returned: always
"""

import json
import os
import shutil
import tempfile
import time
from typing import Any
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

REFUSED_PAUSE_S = 0.1
FIRST_PAUSE_S = 0.1
LONGEST_PAUSE_S = 1.0


def _answer(
    module: AnsibleModule, remaining: float, client_key: str | None
) -> tuple[int | None, Any, str]:
    """One GET: (status or None, parsed JSON body or None, what to report)."""
    params = module.params
    try:
        response = open_url(
            params["url"],
            method="GET",
            timeout=max(1.0, min(params["request_timeout"], remaining)),
            validate_certs=True,
            ca_path=params["ca_path"],
            client_cert=params["client_cert"],
            client_key=client_key,
            url_username=params["url_username"],
            url_password=params["url_password"],
            force_basic_auth=params["force_basic_auth"],
            follow_redirects="none",
        )
        status, body = int(response.status), response.read()
    except HTTPError as error:
        status, body = int(error.code), error.read() if error.fp else b""
    except Exception as error:  # refused, reset, timed out, TLS: not up yet
        return None, None, f"no answer ({error})"
    try:
        document = json.loads(body) if body else None
    except ValueError:
        document = None
    return status, document, f"HTTP {status}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "ready_status": {"type": "int", "default": 200},
            "ready_json": {"type": "dict", "default": {}},
            "retry_status": {"type": "list", "elements": "int", "default": [408, 502, 503, 504]},
            "timeout": {"type": "float", "default": 900.0},
            "request_timeout": {"type": "float", "default": 30.0},
            "ca_path": {"type": "path"},
            "client_cert": {"type": "path"},
            "client_key": {"type": "path", "no_log": False},
            "client_key_content": {"type": "str", "no_log": True},
            "url_username": {"type": "str"},
            "url_password": {"type": "str", "no_log": True},
            "force_basic_auth": {"type": "bool", "default": False},
        },
        mutually_exclusive=[("client_key", "client_key_content")],
        supports_check_mode=True,
    )
    if module.params["client_key_content"] is None:
        _wait(module, module.params["client_key"])
        return
    # exit_json and fail_json leave by SystemExit, so the key goes on every way out.
    scratch = tempfile.mkdtemp(prefix="clusterforge-key-")  # 0700
    try:
        key_path = os.path.join(scratch, "client-key.pem")
        descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as key_file:
            key_file.write(module.params["client_key_content"])
        _wait(module, key_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _wait(module: AnsibleModule, client_key: str | None) -> None:
    """Ask until the answer is the wanted one (exit_json) or the time is up (fail_json)."""
    params = module.params
    started = time.monotonic()
    deadline = started + params["timeout"]
    pause = FIRST_PAUSE_S
    attempts = 0
    while True:
        attempts += 1
        status, document, last = _answer(module, deadline - time.monotonic(), client_key)
        if status == params["ready_status"]:
            wanted = params["ready_json"]
            if all(isinstance(document, dict) and document.get(k) == v for k, v in wanted.items()):
                module.exit_json(
                    changed=False,
                    status=status,
                    json=document,
                    waited=round(time.monotonic() - started, 2),
                    attempts=attempts,
                )
            last = f"HTTP {status} without {wanted}"
        elif status is not None and status not in params["retry_status"]:
            module.fail_json(
                msg=f"{params['url']} answered HTTP {status}, which waiting will not change",
                status=status,
                json=document,
                attempts=attempts,
            )
        delay = REFUSED_PAUSE_S if status is None else pause
        if time.monotonic() + delay > deadline:
            module.fail_json(
                msg=(
                    f"gave up waiting for {params['url']} after {params['timeout']:.0f} s "
                    f"(last: {last})"
                ),
                status=status or -1,
                json=document,
                attempts=attempts,
            )
        time.sleep(delay)
        if status is not None:
            pause = min(LONGEST_PAUSE_S, pause * 2)


if __name__ == "__main__":
    main()
