"""The lab's monitoring (issue 42): the group, its variables, the webhook receiver, lab.json.

In the lab the monitoring runs on the apps container (``apps-1``), in ``tls`` mode only:
Prometheus and Alertmanager on its address (127.0.0.21 in the loopback network), with TLS
and the web password, and the exporters on that loopback address too. Alertmanager sends
every alert to a webhook receiver the lab runs on the control node
(``python -m clusterforge.testing.alert_receiver``, on loopback, behind a bearer token),
which writes each notification as one JSON line to ``inventories/lab/.monitoring/receiver.jsonl``.

The lab's thresholds and intervals are short, so the drills (clusterforge.testing.drills)
take minutes: scrapes and evaluations every 5 s, ``for:`` of 30 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from clusterforge.lab.process import say
from clusterforge.pki.generated_secrets import read_or_generate, url_safe
from clusterforge.plan.monitoring.monitoring import WEB_PASSWORD_FILE, WEB_SECRETS_DIR_NAME

RECEIVER_ADDRESS = "127.0.0.1"
RECEIVER_PORT = 9099
RECEIVER_NAME = "lab-receiver"
RECEIVER_TOKEN_VARIABLE = "lab_receiver_token"  # noqa: S105 - a variable name
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
WEB_USER = "clusterforge"

# Short intervals and durations, so a drill takes minutes (docs/lab.md, "Monitoring").
LAB_MONITORING_VARIABLES: dict[str, Any] = {
    "monitoring_scrape_interval": "5s",
    "monitoring_evaluation_interval": "5s",
    "monitoring_retention": "2d",
    "monitoring_alert_red_for": "30s",
    "monitoring_alert_yellow_for": "10m",
    "monitoring_alert_nodes_for": "30s",
    "monitoring_alert_target_down_for": "30s",
    "monitoring_alert_disk_for": "1m",
    "monitoring_alert_heap_for": "5m",
    "monitoring_alert_outbox_age_minutes": 1,
    "monitoring_alert_5xx_for": "1m",
    # No monitoring_alert_snapshot_max_age: the age alert follows the lab's snapshot
    # schedule (every 5 minutes: 11m, as scripts/status judges it), and goes with it.
    "monitoring_alertmanager_group_wait": "5s",
    "monitoring_alertmanager_group_interval": "10s",
    "monitoring_alertmanager_repeat_interval": "1h",
}


def monitoring_dir(lab_dir: Path) -> Path:
    return lab_dir / WEB_SECRETS_DIR_NAME


def receiver_log(lab_dir: Path) -> Path:
    return monitoring_dir(lab_dir) / "receiver.jsonl"


def receiver_token_file(lab_dir: Path) -> Path:
    return monitoring_dir(lab_dir) / "receiver.token"


def _pid_file(lab_dir: Path) -> Path:
    return monitoring_dir(lab_dir) / "receiver.pid"


def group_vars(address: str, lab_dir: Path) -> dict[str, Any]:
    """group_vars/monitoring.yml: everything on the apps container's own address."""
    token_file = receiver_token_file(lab_dir)
    read_or_generate(token_file, generate=url_safe(18))
    return {
        "monitoring_prometheus_listen_address": address,
        "monitoring_alertmanager_listen_address": address,
        "monitoring_exporters_listen_address": address,
        **LAB_MONITORING_VARIABLES,
        # The lab's receiver takes a bearer token, which the lab keeps in a 0600 file.
        RECEIVER_TOKEN_VARIABLE: "{{ lookup('ansible.builtin.file', '" + str(token_file) + "') }}",
        "monitoring_alertmanager_receivers": [
            {
                "name": RECEIVER_NAME,
                "webhook": {
                    "url": f"http://{RECEIVER_ADDRESS}:{RECEIVER_PORT}/alerts",
                    "bearer_token_var": RECEIVER_TOKEN_VARIABLE,
                },
                "send_resolved": True,
            }
        ],
    }


def _receiver_answers() -> bool:
    try:
        with urllib.request.urlopen(
            f"http://{RECEIVER_ADDRESS}:{RECEIVER_PORT}/healthz", timeout=2
        ) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _running_pid(lab_dir: Path) -> int | None:
    try:
        pid = int(_pid_file(lab_dir).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def ensure_receiver(lab_dir: Path) -> None:
    """Start the webhook receiver unless the lab's one runs (its pid file names it)."""
    if _running_pid(lab_dir) is not None and _receiver_answers():
        return
    directory = monitoring_dir(lab_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = receiver_log(lab_dir)
    log.touch(mode=0o600, exist_ok=True)
    read_or_generate(receiver_token_file(lab_dir), generate=url_safe(18))
    say(f"starting the lab's alert receiver on {RECEIVER_ADDRESS}:{RECEIVER_PORT} (log {log})")
    with (directory / "receiver.out").open("ab") as output:
        process = subprocess.Popen(  # noqa: S603
            [
                sys.executable,
                "-m",
                "clusterforge.testing.alert_receiver",
                "--listen",
                f"{RECEIVER_ADDRESS}:{RECEIVER_PORT}",
                "--log",
                str(log),
                "--token-file",
                str(receiver_token_file(lab_dir)),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Outlives scripts/up; scripts/down ends it by its pid.
            start_new_session=True,
        )
    _pid_file(lab_dir).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if _receiver_answers():
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"the alert receiver did not start; see {directory / 'receiver.out'}")


def stop_receiver(lab_dir: Path) -> None:
    pid = _running_pid(lab_dir)
    if pid is not None:
        say(f"stopping the lab's alert receiver (pid {pid})")
        os.kill(pid, signal.SIGTERM)
    _pid_file(lab_dir).unlink(missing_ok=True)


def stop_units(containers: list[str]) -> None:
    """``--no-monitoring`` on a lab that had it: its units stop and are disabled. The
    cluster exporters would otherwise go on signing in as a user the security files no
    longer hold, and their failures trip the cluster's lockout of the address, which the
    lab's containers share (127.0.0.1 on loopback), so the playbook's own calls fail too."""
    units = [
        "clusterforge-prometheus",
        "clusterforge-alertmanager",
        "clusterforge-blackbox-exporter",
        "clusterforge-cluster-exporter@*",
        "clusterforge-node-exporter",
    ]
    for container in containers:
        subprocess.run(  # noqa: S603
            ["docker", "exec", container, "systemctl", "disable", "--now", *units],  # noqa: S607
            capture_output=True,
            check=False,
        )


def facts(address: str, lab_dir: Path, ca_cert: Path) -> dict[str, Any]:
    """lab.json's ``monitoring`` (what scripts/status and the drills read)."""
    return {
        "prometheus": f"https://{address}:{PROMETHEUS_PORT}",
        "alertmanager": f"https://{address}:{ALERTMANAGER_PORT}",
        "user": WEB_USER,
        "password_file": str(lab_dir / WEB_SECRETS_DIR_NAME / WEB_PASSWORD_FILE),
        "ca_cert": str(ca_cert),
        "receiver_log": str(receiver_log(lab_dir)),
    }
