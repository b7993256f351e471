"""Action plugin: the plan (clusterforge.plan.plan.build_plan), computed on the control node.

The one place the playbooks get what the hosts must hold: the validated model, every
node's files, the certificates (created or reused), the security files (bcrypt hashes,
never passwords), the archives fetched and checked, the console, and the rollout
decided from what the nodes report (``observed``). ``scripts/render`` calls the same
function. Use it once per play with ``run_once: true`` and ``delegate_to: localhost``.

Its result holds password hashes, so a successful result is censored in the output
(``_ansible_no_log``); a refusal (bad inventory, downgrade, bad archive) is shown in full.

Arguments:
  group: the inventory group of the OpenSearch nodes (default: opensearch).
  console_group: the group of the console hosts (default: dashboards; none plans none).
  security_files: false leaves the security files out of the plan (default true), for a
    playbook that places none: their bcrypt checks are most of a plan's time.
  observed: per inventory name, what playbooks/plan.yml's read-only look found on the
    node (version, active, formed, security_mode, cluster_manager); default: nothing,
    every node is new.
  planned: the result of an earlier call in the same run: with it, the rollout, the
    removal and the groups are decided again from ``observed``; the rest is kept, and
    ``converge_digest`` is added: the digest the converge gate keeps every host's records
    under (clusterforge.plan.converged; roles/_converged), empty with
    ``opensearch_converge_gate: false``.
  changes: with ``planned``, the run's recorded changes of every host ({host, reason,
    restart}, playbooks/rolling.yml gathers each host's __clusterforge_changes): the
    plan comes back with the restart decision added to its rollout (``rollout.restarts``,
    ``{node: reasons}`` for the nodes that restart, and ``rollout.restart_batches``, zone
    mode's batches; clusterforge.plan.plan.with_restarts) and nothing decided again.
  hosts: with ``changes``, the play's hosts: a zone-mode batch keeps only those.
  restore: with ``planned``, {snapshot, snapshot_indices, requested} (the snapshot's name
    and indices as the cluster reports them, and restore_indices): the plan comes back
    with ``snapshots.restore.indices``, the indices the restore touches
    (clusterforge.plan.plan.with_restore), or the refusal of an index the snapshot lacks.
  restore_snapshot: with ``planned``, {requested, snapshots} (snapshot_name, and the
    repository's snapshots as the cluster lists them): the plan comes back with
    ``snapshots.restore.snapshot``, the snapshot the restore reads, ``latest`` resolved to
    the newest successful one (clusterforge.plan.plan.with_restore_snapshot).
  validate_only: true checks the whole inventory (clusterforge.plan.validation.validate_inventory)
    and stops there: no certificate, no secret, no download, nothing written. The first
    play of every playbook (playbooks/check_inventory.yml) runs it on localhost, before
    any connection; its result holds ``checked``, ``model_warnings``, ``services``
    (each service host's settings as the services' models validated them, settings file
    included: the result is no_log, as the plan's is), ``postgresql_tls`` (the db
    server's TLS settings from the cluster's TLS profile, for roles/postgresql) and
    ``tls_proxies`` (each service host's TLS proxy, planned: what roles/tls_proxy copies).
  checked_services: the ``services`` of that check, in the same run (check_inventory.yml
    keeps them as __clusterforge_checked_services): the plan takes the services' settings
    from it rather than validating them again, and adds the delivery's real password.
  services_only: true plans the services' part of the plan alone, for a run without
    playbooks/plan.yml (playbooks/services_plan.yml, imported by services.yml): the
    same check as ``validate_only``, then the passwords ``build_plan`` would read or
    generate (the order delivery's, the services' PostgreSQL ones) put into the
    ``checked_services`` settings. Its result holds ``services`` (no_log) and
    ``orders_search`` (public), the two keys of the plan the services' roles copy.
  renew_monitoring: issue the monitoring host's certificate again now (the plan's
    ``monitoring`` section; playbooks/rotate_certs.yml).
  renew_node_exporters: issue every host's node exporter certificate again now.

The services' hosts (the groups named like their roles, user_directory and
order_service) are planned too: their settings are validated by the services' own
settings models here, before any host changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: Ansible imports plugins to list and document them, where the
# library need not be installed; a run without it fails with the fix (require_library).
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    import clusterforge
    from clusterforge.errors import ClusterforgeError, InventoryError
    from clusterforge.inventory.reader import inventory_read_problem
    from clusterforge.inventory.variables import (
        TaskHosts,
        database_vars,
        model_vars,
        service_addresses,
        services_vars,
    )
    from clusterforge.plan.cluster.model import plain_data
    from clusterforge.plan.converged import code_digest, converge_digest, gate_enabled
    from clusterforge.plan.monitoring.monitoring import monitoring_hosts_vars
    from clusterforge.plan.plan import (
        build_plan,
        with_observed,
        with_restarts,
        with_restore,
        with_restore_snapshot,
    )
    from clusterforge.plan.services.orders_search import DISABLED
    from clusterforge.plan.services.services_plan import SERVICES
    from clusterforge.plan.validation import validate_inventory

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error

# Plugins built from this project's folders (source: build) are found relative to the
# checkout this action belongs to, whichever playbook (site.yml, a molecule verify) runs it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        {
            "group",
            "console_group",
            "observed",
            "planned",
            "changes",
            "hosts",
            "restore",
            "restore_snapshot",
            "security_files",
            "validate_only",
            "services_only",
            "checked_services",
            "renew_monitoring",
            "renew_node_exporters",
        }
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleActionFail)
        result: dict[str, Any] = super().run(tmp, task_vars)
        try:
            return self._plan(result, task_vars or {})
        except AnsibleActionFail:
            raise
        except AnsibleError as error:
            # Reading a host's variables is where Ansible meets a vault without its
            # password or a group_vars file it cannot parse: say which file and what to do.
            raise AnsibleActionFail(inventory_read_problem(error)) from None

    def _plan(self, result: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if "changes" in self._task.args:
            return self._restarts(result)
        if "restore" in self._task.args:
            return self._restore(result)
        if "restore_snapshot" in self._task.args:
            return self._restore_snapshot(result)
        group = self._task.args.get("group", "opensearch")
        hosts = TaskHosts(task_vars, self._templar.template)
        # The inventory's directory, from any host of the groups planned (a services-only
        # inventory has no OpenSearch host).
        inventory_dir = hosts.directory([group, *SERVICES])
        planned = self._task.args.get("planned")
        if planned:
            nodes_vars = model_vars(hosts, group)
            try:
                plan = with_observed(
                    plain_data(planned),
                    nodes_vars,
                    plain_data(self._task.args.get("observed") or {}),
                    preview=bool(self._task.check_mode),
                )
            except ClusterforgeError as error:
                raise AnsibleActionFail(str(error)) from None
            # What every play's converge record is kept under (roles/_converged): only
            # this call has looked at the nodes, so only its plan holds their rollout.
            plan["converge_digest"] = (
                converge_digest(plan, code_digest(PROJECT_ROOT, Path(clusterforge.__file__).parent))
                if gate_enabled(nodes_vars)
                else ""
            )
            result.update(changed=False, _ansible_no_log=True, **plan)
            return result
        nodes_vars = model_vars(hosts, group)
        consoles_vars = model_vars(hosts, self._task.args.get("console_group", "dashboards"))
        services = services_vars(hosts)
        services_only = boolean(self._task.args.get("services_only", False))
        checked_services = self._task.args.get("checked_services")
        try:
            if services_only or boolean(self._task.args.get("validate_only", False)):
                if not nodes_vars and not any(services.values()):
                    raise InventoryError(
                        [
                            "the inventory has no host in the group 'opensearch' nor in a "
                            f"service's group ({', '.join(SERVICES)}); check -i and the "
                            "inventory's files (a file Ansible could not parse is skipped "
                            "with a warning above)"
                        ]
                    )
                validated = validate_inventory(
                    nodes_vars,
                    inventory_dir=inventory_dir,
                    consoles_vars=consoles_vars,
                    project_root=PROJECT_ROOT,
                    services_vars=services,
                    database_vars=database_vars(hosts),
                    monitoring_vars=monitoring_hosts_vars(hosts),
                    service_addresses=service_addresses(hosts),
                    # The services' part of the plan: their settings as the check of this
                    # run validated them, with the passwords read or generated now.
                    generate=services_only,
                    checked_services=(
                        plain_data(checked_services) if services_only and checked_services else None
                    ),
                )
                if services_only:
                    result.update(
                        changed=False,
                        services=validated.services,
                        orders_search=(
                            validated.orders_search.public()
                            if validated.orders_search
                            else dict(DISABLED)
                        ),
                        _ansible_no_log=True,
                    )
                    return result
                result.update(
                    changed=False,
                    checked=True,
                    model_warnings=list(validated.warnings),
                    services=validated.services,
                    # roles/postgresql's TLS settings when no plan runs (services.yml).
                    postgresql_tls=validated.postgresql_tls,
                    # Each service host's TLS proxy, planned by the check (roles/tls_proxy).
                    tls_proxies=validated.tls_proxies,
                    # The services' settings files hold their secrets.
                    _ansible_no_log=True,
                )
                return result
            plan = build_plan(
                nodes_vars,
                inventory_dir=inventory_dir,
                consoles_vars=consoles_vars,
                observed=plain_data(self._task.args.get("observed") or {}),
                project_root=PROJECT_ROOT,
                services_vars=services,
                security_files=boolean(self._task.args.get("security_files", True)),
                preview=bool(self._task.check_mode),
                monitoring_vars=monitoring_hosts_vars(hosts),
                checked_services=plain_data(checked_services) if checked_services else None,
                database_vars=database_vars(hosts),
                # The monitoring reads every host's address and the services' proxies.
                monitoring_source=hosts,
                renew_monitoring=boolean(self._task.args.get("renew_monitoring", False)),
                renew_node_exporters=boolean(self._task.args.get("renew_node_exporters", False)),
            )
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None
        # Fetched archives, or a monitoring certificate issued now.
        monitoring = plan.get("monitoring") or {}
        changed = bool(plan["artifacts"] and plan["artifacts"]["fetched"]) or bool(
            monitoring.get("issued")
        )
        result.update(changed=changed, _ansible_no_log=True, **plan)
        return result

    def _restore(self, result: dict[str, Any]) -> dict[str, Any]:
        """The restore's indices, added to ``planned``'s snapshots section."""
        planned, restore = self._planned_and("restore", "{snapshot, snapshot_indices, requested}")
        return self._refined(
            result,
            lambda: with_restore(
                planned,
                str(restore.get("snapshot") or ""),
                [str(index) for index in restore.get("snapshot_indices") or []],
                plain_data(restore.get("requested")),
            ),
        )

    def _restore_snapshot(self, result: dict[str, Any]) -> dict[str, Any]:
        """The snapshot the restore reads, added to ``planned``'s snapshots section."""
        planned, asked = self._planned_and("restore_snapshot", "{requested, snapshots}")
        snapshots = plain_data(asked.get("snapshots") or [])
        if not isinstance(snapshots, list) or not all(
            isinstance(entry, Mapping) for entry in snapshots
        ):
            raise AnsibleActionFail(
                "restore_snapshot.snapshots must be the repository's list of snapshots "
                "(GET _snapshot/<repository>/_all: its snapshots)"
            )
        return self._refined(
            result,
            lambda: with_restore_snapshot(planned, str(asked.get("requested") or ""), snapshots),
        )

    def _planned_and(self, argument: str, shape: str) -> tuple[Any, Mapping[str, Any]]:
        """``planned`` (plain data) and the mapping ``argument`` of a step that refines the
        plan; either missing is refused, naming both."""
        planned = self._task.args.get("planned")
        value = self._task.args.get(argument)
        if not planned or not isinstance(value, Mapping):
            raise AnsibleActionFail(
                f"{argument} needs planned (register: __clusterforge_plan) and a mapping {shape}"
            )
        return plain_data(planned), value

    @staticmethod
    def _refined(result: dict[str, Any], refine: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        """``result`` with the plan ``refine`` returns (it changes nothing on a host); a
        refusal names every problem."""
        try:
            plan = refine()
        except InventoryError as error:
            raise AnsibleActionFail("\n".join(error.problems)) from None
        result.update(changed=False, _ansible_no_log=True, **plan)
        return result

    def _restarts(self, result: dict[str, Any]) -> dict[str, Any]:
        """The restart decision of the rolling play, added to ``planned``'s rollout: it reads
        the plan and the recorded changes only, so no inventory is read again."""
        args = self._task.args
        planned = args.get("planned")
        if not planned:
            raise AnsibleActionFail(
                "changes needs planned: the plan this run decided (register: __clusterforge_plan)"
            )
        changes = args.get("changes") or []
        hosts = args.get("hosts")
        if not isinstance(changes, list) or not all(isinstance(c, Mapping) for c in changes):
            raise AnsibleActionFail("changes must be a list of {host, reason, restart}")
        if hosts is not None and not isinstance(hosts, list):
            raise AnsibleActionFail("hosts must be a list of inventory names")
        try:
            plan = with_restarts(
                plain_data(planned),
                plain_data(changes),
                None if hosts is None else [str(host) for host in hosts],
            )
        except KeyError as error:
            raise AnsibleActionFail(
                f"planned is not a plan of this run (it has no {error}): pass the registered "
                "__clusterforge_plan"
            ) from None
        result.update(changed=False, _ansible_no_log=True, **plan)
        return result
