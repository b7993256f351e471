"""Action plugin: build one service's wheelhouse on the control node, once per key.

Arguments:
  service: ``user_directory`` or ``order_service`` (the schema's services,
    clusterforge.schema):
    builds that service's project (``services/userdir``, ``services/orders`` in the
    checkout this plugin belongs to) with the extras its hosts need.
  project_root: another project folder to build instead (tests; the default comes from
    ``service``).
Returns ``path`` (the wheelhouse directory in the control node's cache), ``key`` (hashes
that service's ``pyproject.toml`` and ``src/``, and those of the checkout's projects it
depends on, the kit ``services/kit``, whose wheel the wheelhouse holds too), ``digest``
(hosts record it to know what they installed), ``distribution``, ``extras``,
``project_wheel``, ``requirement`` (what hosts pass to pip: the wheel with its extras),
``project_version``, ``python_version`` and ``machine`` (of the interpreter that built
the wheels; hosts must match both), ``wheels``, and ``local_wheels`` (the kit's wheel,
which hosts reinstall like the project's own); changed only when it was built now.
Run it with ``run_once: true`` and ``delegate_to: localhost``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.errors import ClusterforgeError
    from clusterforge.plan.services.wheelhouse import build_wheelhouse
    from clusterforge.schema import load_schema

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

DEFAULT_CHECKOUT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"service", "project_root"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        service = self._task.args.get("service")
        services = load_schema().services
        if service not in services:
            raise AnsibleActionFail(
                f"clusterforge_wheelhouse: service is {service!r}; set it to one of "
                f"{', '.join(sorted(services))}"
            )
        definition = services[service]
        project_root = Path(
            self._task.args.get("project_root") or definition.project_root(DEFAULT_CHECKOUT)
        )
        try:
            wheelhouse = build_wheelhouse(
                project_root,
                extras=definition.extras,
                local_requirements=definition.local_requirement_roots(DEFAULT_CHECKOUT),
            )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        result.update(
            changed=wheelhouse.built,
            path=str(wheelhouse.path),
            key=wheelhouse.key,
            digest=wheelhouse.digest,
            distribution=wheelhouse.distribution,
            extras=list(wheelhouse.extras),
            project_wheel=wheelhouse.project_wheel,
            requirement=wheelhouse.requirement,
            project_version=wheelhouse.project_version,
            python_version=wheelhouse.python_version,
            machine=wheelhouse.machine,
            wheels=list(wheelhouse.wheels),
            local_wheels=list(wheelhouse.local_wheels),
        )
        return result
