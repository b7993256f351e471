"""Module: what one OpenSearch node runs now, read on the node in one process.

The action plugin of the same name (plugins/action/clusterforge_observe.py) runs it once
per node and builds the task's ``observed`` from its answer. The look used to run four
modules per node (systemd_service, clusterforge_files and two uri GETs, four more GETs
when nodes are removed), and an idempotent rerun paid a module run for each (issue 54):
here the unit's state, the files and the node's API are read in one run.

What it answers (the action's contract; the task itself returns ``observed``, RETURN):
  active: the unit's ActiveState is ``active`` (false when systemctl cannot tell).
  enabled: the unit starts at boot (UnitFileState ``enabled`` or ``enabled-runtime``):
    with ``active``, the engine play need not start the node (roles/opensearch run.yml).
  markers: ``{name: text or None}`` for each path of ``markers`` (None: missing).
  legacy_markers: ``{name: bool}``, whether each old place holds anything, tested with
    lstat only: never opened, the service user could have left a link to any file there.
  meminfo: the text of /proc/meminfo, or None.
  opensearch_yml: the text of ``config``, or None (missing, or no path given).
  api: ``{name: JSON or None}`` for each GET of API_PATHS asked; None when the node did
    not answer 200 with JSON. Empty when the unit is not active or no URL was given (the
    action gives one only to a node of the plan), so a stopped node is asked nothing.

The URL, the CA, the timeout and the admin's basic authentication are the ones
``ApiActionBase._uri_args`` chooses from the plan, given in the hidden arguments
``_api_*`` (a task cannot give them: the action accepts only the documented options).
The password is a ``no_log`` argument: it reaches the node in the module's arguments,
never in argv, the host's journal or the returned ``invocation``.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: clusterforge_observe
short_description: Read what one OpenSearch node runs now, for the plan's rollout
description:
  - One task reads the service's state, the markers a formed cluster leaves, the version
    the node answers, the elected cluster manager, the host's memory and the node's
    opensearch.yml (with O(config)); when nodes are
    being removed, also the cluster's members and its indices' replica settings.
  - Everything is read on the node in one module run, so a rerun pays one round trip per
    node for the look.
  - Everything is a read, so it runs in check mode as well and a preview decides what
    restarts as a run would.
  - A node whose service does not run is asked nothing; a node that does not answer
    reports no version, as a new node does.
  - The API calls use the CA and the admin user from the plan (C(__clusterforge_plan)).
version_added: 1.0.0
author: clusterforge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.stack.opensearch_nodes.service
options:
  markers:
    description:
      - The marker files on the node, the paths of C(formed) and C(security_mode)
        (the plan's C(cluster.markers)).
    type: dict
    required: true
  legacy_markers:
    description:
      - The same markers where releases before issue 32 kept them (in a directory the
        service user owns). Their existence is checked, never their content, so a file
        planted there decides nothing; the role moves them to the root-owned state
        directory.
    type: dict
  config:
    description:
      - The node's opensearch.yml (the plan's C(cluster.config_dir)/opensearch.yml). Its
        text is returned as C(opensearch_yml), null when the file is missing, so the plan
        tells which changed settings need a restart (C(rollout.nodes[host].config_restart)).
      - The file holds no secret (the plan renders it without any). Without this option
        C(opensearch_yml) is null and a changed opensearch.yml restarts the node.
    type: path
  removal:
    description: Whether the plan removes nodes; then the members and replica settings are read too.
    type: bool
    default: false
seealso:
  - module: clusterforge.stack.clusterforge_plan
"""

EXAMPLES = r"""
- name: Look at each node
  clusterforge.stack.clusterforge_observe:
    service: opensearch
    markers: "{{ __clusterforge_plan.cluster.markers }}"
    config: "{{ __clusterforge_plan.cluster.config_dir }}/opensearch.yml"
    removal: "{{ __clusterforge_plan.removal.names | default([]) | length > 0 }}"
  register: __clusterforge_observation
"""

RETURN = r"""
observed:
  description:
    - What the node runs, in the shape C(clusterforge.plan.cluster.restarts.plan_rollout) and
      C(plan_removal) read (the action plugin builds it from this module's reads).
    - Version, active, enabled, formed, security_mode, cluster_manager, the host's memory and
      C(opensearch_yml) (the node's opensearch.yml text, or null); with O(removal) also
      the members and the index settings.
  returned: always
  type: dict
"""

import json
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

MEMINFO_PATH = "/proc/meminfo"
# What each GET answers in ``api``: the root (the version) and the elected cluster
# manager always; the rest only when nodes are removed (``removal``).
API_PATHS = {
    "root": "/",
    "cluster_manager": "/_cat/cluster_manager?format=json",
}
REMOVAL_API_PATHS = {
    "members": "/_nodes?filter_path=nodes.*.name,nodes.*.roles",
    "index_settings": (
        "/_settings/index.number_of_replicas,index.auto_expand_replicas"
        "?flat_settings=true&expand_wildcards=all"
    ),
    # The committed voting configuration (node ids) and the voting exclusions: a node
    # demoted by the run that began a removal still votes here
    # (clusterforge.plan.cluster.removal.counted_managers).
    "voting": (
        "/_cluster/state/metadata?filter_path=metadata.cluster_coordination.last_committed_config,"
        "metadata.cluster_coordination.voting_config_exclusions"
    ),
    # The persistent settings, for the allocation exclusion a removal's drain sets: a
    # removal an earlier run began is finished rather than judged again
    # (clusterforge.plan.cluster.removal).
    "persistent_settings": "/_cluster/settings?flat_settings=true&filter_path=persistent",
}
# The media types whose bodies ansible.builtin.uri parsed into ``json``.
JSON_SUBTYPES = frozenset({"json", "javascript"})
DEFAULT_TIMEOUT_S = 10


# What AnsibleModule puts in the echo of a no_log argument.
MASKED = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


class ObserveModule(AnsibleModule):  # type: ignore[misc]
    """AnsibleModule that masks the password in the echo of its arguments, not everywhere.

    AnsibleModule stars every occurrence of a no_log value anywhere in an answer: a short
    admin password ("admin") would star opensearch.yml's ``admin_dn`` and the node names
    the API answers, and the plan would see a changed file that is not. The password is
    logged masked by the constructor (the host's journal), as AnsibleModule does; after
    that it is taken out of the values to mask, and each answer carries its own
    ``invocation`` with the password masked. Nothing else this module returns can hold
    it: it reads no file or answer it could be in, and a failed GET reports no message.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        password = self.params.get("_api_password")
        if password:
            self.no_log_values.discard(password)

    def _echoed(self) -> dict[str, Any]:
        params = dict(self.params)
        if params.get("_api_password") is not None:
            params["_api_password"] = MASKED
        return {"module_args": params}

    def exit_json(self, **kwargs: Any) -> None:
        kwargs.setdefault("invocation", self._echoed())
        super().exit_json(**kwargs)

    def fail_json(self, msg: str, **kwargs: Any) -> None:
        kwargs.setdefault("invocation", self._echoed())
        super().fail_json(msg, **kwargs)


def unit_state(module: AnsibleModule, unit: str) -> tuple[bool, bool]:
    """(active, enabled): whether systemd says the unit is active, and whether it starts
    at boot (UnitFileState enabled or enabled-runtime); both false when it cannot tell."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return False, False
    rc, out, _errors = module.run_command(
        [systemctl, "show", "--property=ActiveState,UnitFileState", "--", unit]
    )
    if rc != 0:
        return False, False
    values = {}
    for line in str(out).splitlines():
        name, separator, value = line.partition("=")
        if separator:
            values[name.strip()] = value.strip()
    return values.get("ActiveState") == "active", values.get("UnitFileState", "").startswith(
        "enabled"
    )


def read_text(module: AnsibleModule, path: str) -> str | None:
    """A file's text, None when it is missing; any other failure fails the look, naming
    the path (a marker that cannot be read must not pass for a missing one)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        module.fail_json(msg=f"could not read {path} on the node: {error.strerror or error}")
        raise  # fail_json leaves by SystemExit; this tells the type checker so
    return data.decode("utf-8", "replace")


def left_at_old_place(path: str) -> bool:
    """Whether anything is at ``path``: lstat only, nothing there is opened or followed."""
    return os.path.lexists(path)


def get_json(module: AnsibleModule, path: str) -> Any:
    """What the node's API answers a GET of ``path``: its JSON when it answers 200 with
    a JSON body, else None (no answer, a refused password, another status)."""
    params = module.params
    url = str(params["_api_url"]) + path
    try:
        response = open_url(
            url,
            method="GET",
            timeout=params["_api_timeout"] or DEFAULT_TIMEOUT_S,
            validate_certs=True,
            ca_path=params["_api_ca_path"],
            url_username=params["_api_username"],
            url_password=params["_api_password"],
            force_basic_auth=bool(params["_api_force_basic_auth"]),
            follow_redirects="safe",
        )
        status = int(response.getcode())
        content_type = str(response.headers.get("Content-Type") or "")
        body = response.read()
    except Exception:  # refused, reset, timed out, TLS, HTTP 401/5xx: no answer to use
        return None
    if status != 200 or not _is_json(content_type):
        return None
    try:
        return json.loads(body.decode(_charset(content_type), "replace"))
    except (LookupError, ValueError):
        return None


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    subtype = media.partition("/")[2]
    return subtype.rpartition("+")[2] in JSON_SUBTYPES


def _charset(content_type: str) -> str:
    for parameter in content_type.split(";")[1:]:
        name, separator, value = parameter.partition("=")
        if separator and name.strip().lower() == "charset":
            return value.strip().strip('"') or "utf-8"
    return "utf-8"


def main() -> None:
    module = ObserveModule(
        argument_spec={
            "service": {"type": "str", "required": True},
            "markers": {"type": "dict", "required": True},
            "legacy_markers": {"type": "dict"},
            "config": {"type": "path"},
            "removal": {"type": "bool", "default": False},
            # Hidden: given by the action plugin from the plan (ApiActionBase._uri_args);
            # a task cannot give them (the action's _VALID_ARGS). No URL: ask nothing.
            "_api_url": {"type": "str"},
            "_api_ca_path": {"type": "path"},
            "_api_username": {"type": "str"},
            "_api_password": {"type": "str", "no_log": True},
            "_api_force_basic_auth": {"type": "bool"},
            "_api_timeout": {"type": "int"},
        },
        supports_check_mode=True,
    )
    params = module.params
    active, enabled = unit_state(module, params["service"])
    markers = {str(name): read_text(module, str(path)) for name, path in params["markers"].items()}
    legacy = params["legacy_markers"] or {}
    config = params["config"]
    api: dict[str, Any] = {}
    if active and params["_api_url"]:
        asked = dict(API_PATHS)
        if params["removal"]:
            asked.update(REMOVAL_API_PATHS)
        api = {name: get_json(module, path) for name, path in asked.items()}
    module.exit_json(
        changed=False,
        active=active,
        enabled=enabled,
        markers=markers,
        legacy_markers={str(name): left_at_old_place(str(path)) for name, path in legacy.items()},
        meminfo=read_text(module, MEMINFO_PATH),
        opensearch_yml=read_text(module, config) if config else None,
        api=api,
    )


if __name__ == "__main__":
    main()
