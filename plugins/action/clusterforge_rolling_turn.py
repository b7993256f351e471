"""Action plugin: one node's turn in a rolling restart (roles/opensearch/tasks/rolling_restart.yml).

One task does what eight did (issue 14: each task costs the controller more than the
work it carries, and a rolling restart pays that once per node, in series):

0. a wait until the node answers and the cluster counts all its nodes (at once when they
   do). A run killed mid-turn leaves its node restarting: systemd finishes the restart
   the killed run asked for, and the node's port refuses connections until the engine
   has joined. The rerun's first turn is that node's again (same order), and its hold
   went to that port: it failed with "Connection refused" (issue 50, finding 1). Waiting
   also keeps a turn from taking a node down while another is still away. It prints a
   line when it has to wait, and gives up after ``timeout`` seconds naming the node;
1. allocation limited to primaries while the node is away, and a flush, so that its
   shards recover from what they hold;
2. the ``home`` symlink pointed at the planned version (the switch of an upgrade; a
   plain restart finds it in place);
3. the restart;
4. a wait until the node answers and the cluster counts all its nodes again (the node
   binds its HTTP port once it has joined or given up);
5. allocation back to the default, and a wait for green before the next node goes.

Each wait is one run of clusterforge_http_wait on the node, which asks every 0.1 s while
the port is closed and after 0.1-1 s pauses while the node refuses (503 while it reads
the security index). The health requests are held by the cluster until their condition
holds (at most 10 s), so they end the moment it does. Before, a ``wait_for`` on the port
paused whole seconds and each refused health poll cost a module run from the controller,
so the turn ended up to 1.5 s after the node was back. Each wait gives up after
``timeout`` seconds and names the host, what it waited for and where to look.

Every step runs on the node, through the same modules the tasks used (uri through
clusterforge_api's arguments, file, systemd_service), and the plan supplies the paths,
the URL and the node count. Not for check mode: the calling play skips it there.

Arguments:
  service: the systemd unit (opensearch).
  timeout: seconds each wait may take (900).
  phase: ``turn`` (the default: all of the above, one node; ``opensearch_rolling_batch:
    node``), or one part of a batch's turn (``zone``: playbooks/rolling.yml runs a batch
    as one serial step of the play, so the parts run on all its nodes at once):
    ``hold`` (1, run once per batch), ``restart`` (2 to 4, on every node of the batch
    together: each waits until it has rejoined), ``release`` (5, run once per batch, after
    every node has rejoined).
  wait_for: what ``release`` waits for, the batch's ``wait_for`` from the plan: ``green``
    (the default), or ``yellow`` between the batches of an upgrade while versions are
    mixed (the engine places no replica on a node older than its primary's).

Returns ``seconds``: how long each phase took, for the run's log.
"""

from __future__ import annotations

import time
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display
from ansible_collections.clusterforge.stack.plugins.plugin_utils.api_action import (
    ApiActionBase,
)

SETTINGS_PATH = "/_cluster/settings"
FLUSH_PATH = "/_flush"
HEALTH_HOLD = "timeout=10s"
DEFAULT_WAIT_S = 900
NOT_YET = [200, 401, 403, 408, 500, 502, 503, 504]
# How long the first look before the hold may take: a node and a cluster that are ready
# answer at once, so only a turn that has to wait prints its line and waits on.
READY_PROBE_S = 5.0
READY_PROBE_HOLD = "timeout=2s"

display = Display()


def allocation(enable: str | None) -> dict[str, Any]:
    """The settings body that limits shard allocation (None: back to the default)."""
    return {"persistent": {"cluster.routing.allocation.enable": enable}}


PHASES = ("turn", "hold", "restart", "release")
WAIT_STATUSES = ("green", "yellow")
STILL_PRIMARIES = (
    " Allocation is still limited to primaries "
    "(cluster.routing.allocation.enable); the next run's turn sets it back, or "
    'PUT /_cluster/settings {"persistent": {"cluster.routing.allocation.enable": '
    "null}} does."
)


class ActionModule(ApiActionBase):  # type: ignore[misc]
    _VALID_ARGS = frozenset({"service", "timeout", "phase", "wait_for"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        if self._task.check_mode:
            raise AnsibleActionFail(
                "clusterforge_rolling_turn restarts a node; skip it in check mode"
            )
        phase = str(self._task.args.get("phase", "turn"))
        if phase not in PHASES:
            raise AnsibleActionFail(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
        wait_for = str(self._task.args.get("wait_for", "green"))
        if wait_for not in WAIT_STATUSES:
            raise AnsibleActionFail(
                f"wait_for must be one of {', '.join(WAIT_STATUSES)}, not {wait_for!r}"
            )
        plan = task_vars.get("__clusterforge_plan") or {}
        cluster = plan.get("cluster") or {}
        host = str(task_vars.get("inventory_hostname"))
        timeout = float(self._task.args.get("timeout", DEFAULT_WAIT_S))
        service = str(self._task.args["service"])
        seconds: dict[str, float] = {}
        started = time.monotonic()

        if phase in ("turn", "hold"):
            self._ready(task_vars, cluster, host, timeout, service)
            self._hold(task_vars)
            if phase == "hold":
                seconds["held"] = time.monotonic() - started
        if phase in ("turn", "restart"):
            self._restart(task_vars, cluster, service)
            seconds["stop_and_start"] = time.monotonic() - started
            self._rejoin(task_vars, cluster, host, timeout, service)
            seconds["rejoined"] = time.monotonic() - started
        if phase in ("turn", "release"):
            what = f"{wait_for} after " + (f"{host}'s restart" if phase == "turn" else "the batch")
            self._release(task_vars, wait_for, timeout, what, service)
            seconds[wait_for] = time.monotonic() - started
        done = {
            "turn": f"{host} restarted, rejoined and green",
            "hold": "allocation held to primaries and flushed",
            "restart": f"{host} restarted and rejoined",
            "release": f"allocation released and {wait_for}",
        }[phase]
        result.update(
            changed=True,
            seconds={name: round(value, 1) for name, value in seconds.items()},
            msg=f"{done} in {seconds[list(seconds)[-1]]:.1f} s",
        )
        return result

    def _ready(
        self,
        task_vars: dict[str, Any],
        cluster: dict[str, Any],
        host: str,
        timeout: float,
        service: str,
    ) -> None:
        """Before the hold: the node answers and the cluster counts all its nodes. A short
        look first; a node still starting (a run killed mid-turn) or a node still away
        gets a progress line and a wait of at most ``timeout`` seconds."""
        node_count = int(cluster["node_count"])
        members = f"/_cluster/health?wait_for_nodes=%3E%3D{node_count}"
        probe = self._uri_args(
            {"path": f"{members}&{READY_PROBE_HOLD}", "status_code": NOT_YET}, "GET", task_vars
        )
        first = self._wait(probe, task_vars, seconds=READY_PROBE_S)
        if not first.get("failed"):
            return
        display.display(
            f"{host}: before its turn, waiting up to {timeout:.0f} s for it to answer and "
            f"for the cluster to count its {node_count} nodes ({first.get('msg', 'no answer')}"
            "; a node still starting, e.g. after a run killed mid-turn, answers once it "
            "has joined)"
        )
        answer = self._wait(
            self._uri_args(
                {"path": f"{members}&{HEALTH_HOLD}", "status_code": NOT_YET}, "GET", task_vars
            ),
            task_vars,
            seconds=timeout,
        )
        if answer.get("failed"):
            raise AnsibleActionFail(
                f"{host} did not answer with all {node_count} nodes in the cluster within "
                f"{timeout:.0f} s, so its turn did not start and nothing was changed "
                f"({answer.get('msg', 'no message')}): start the node that is missing "
                f"(systemctl start {service}; journalctl -u {service} says why it stopped), "
                f"check GET /_cluster/health on {host}, then rerun the playbook"
            )

    def _hold(self, task_vars: dict[str, Any]) -> None:
        """Allocation limited to primaries and a flush: the shards of the nodes about to go
        down recover from what they hold instead of being copied elsewhere meanwhile."""
        self._call(task_vars, SETTINGS_PATH, "PUT", body=allocation("primaries"))
        self._call(task_vars, FLUSH_PATH, "POST", status_code=[200, 409])

    def _restart(self, task_vars: dict[str, Any], cluster: dict[str, Any], service: str) -> None:
        self._run_module(
            "ansible.builtin.file",
            {
                "src": cluster["install_dir"],
                "dest": cluster["home"],
                "state": "link",
                "owner": "root",
                "group": "root",
            },
            task_vars,
            failure="point the current symlink at the planned version",
        )
        self._run_module(
            "ansible.builtin.systemd_service",
            {"name": service, "state": "restarted", "daemon_reload": True},
            task_vars,
            failure=f"restart {service}",
        )

    def _rejoin(
        self,
        task_vars: dict[str, Any],
        cluster: dict[str, Any],
        host: str,
        timeout: float,
        service: str,
    ) -> None:
        # At least: while a node marked absent still runs (scale in), the cluster has one more.
        node_count = int(cluster["node_count"])
        members = f"/_cluster/health?wait_for_nodes=%3E%3D{node_count}&{HEALTH_HOLD}"
        try:
            self._wait_for(task_vars, members, timeout, f"{host} to rejoin the cluster", service)
        except AnsibleActionFail as failure:
            raise AnsibleActionFail(f"{failure.message}{STILL_PRIMARIES}") from None

    def _release(
        self, task_vars: dict[str, Any], wait_for: str, timeout: float, what: str, service: str
    ) -> None:
        self._call(task_vars, SETTINGS_PATH, "PUT", body=allocation(None))
        self._wait_for(
            task_vars,
            f"/_cluster/health?wait_for_status={wait_for}&{HEALTH_HOLD}",
            timeout,
            what,
            service,
        )

    def _call(
        self,
        task_vars: dict[str, Any],
        path: str,
        method: str,
        *,
        body: dict[str, Any] | None = None,
        status_code: list[int] | None = None,
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"path": path, "status_code": status_code or [200]}
        if body is not None:
            args["body"] = body
        module_args = self._uri_args(args, method, task_vars)
        return self._run_module(
            "ansible.builtin.uri", module_args, task_vars, failure=f"{method} {path}"
        )

    def _wait_for(
        self, task_vars: dict[str, Any], path: str, timeout: float, what: str, service: str
    ) -> None:
        """Wait on the node until GET ``path`` answers 200. Anything else is "not yet": no
        answer (the port still closed), 408 (the hold ran out), 503 (the security index not
        read yet), and even a refusal of the admin, whose password the calls before the
        restart have just proved."""
        uri_args = self._uri_args({"path": path, "status_code": NOT_YET}, "GET", task_vars)
        answer = self._wait(uri_args, task_vars, seconds=timeout)
        if answer.get("failed"):
            raise AnsibleActionFail(
                f"gave up waiting for {what} after {timeout:.0f} s "
                f"({answer.get('msg', 'no message')}); look at the node's log "
                f"(journalctl -u {service}) and at GET /_cluster/health, then rerun"
            )
