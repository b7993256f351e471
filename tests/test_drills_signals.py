"""The alert drills remove their iptables rules when they are stopped (SIGTERM).

Found when a CI run was cancelled during the tls scenario's drill (b): its rule (the
order service's connections to port 9200 rejected) stayed on the host, where it would cut
every later order service off from its cluster. The drill's process is the real
``python -m clusterforge.testing.drills``; the drill it runs is replaced by one that
adds a tagged RETURN rule (it changes no traffic) on an unused loopback address, says
so, and waits to be stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge.testing import faults

COMMENT = f"{faults.RULE_COMMENT} test drill stopped"
RULE = ["OUTPUT", "-d", "127.0.0.19/32", "-m", "comment", "--comment", COMMENT, "-j", "RETURN"]

SCRIPT = """
import sys, subprocess, time
from clusterforge.testing import drills

def stopped_drill(lab, names, parallel=False):
    subprocess.run(["iptables", "-w", "-I", *RULE], check=True)
    print("rule in place", flush=True)
    time.sleep(60)
    return []

drills.run_drills = stopped_drill
sys.exit(drills.main(["--lab-json", sys.argv[1], "b"]))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables"
)
def test_a_stopped_alert_drill_leaves_no_rule(tmp_path: Path) -> None:
    lab_json = tmp_path / "lab.json"
    lab_json.write_text(json.dumps({"nodes": [], "mode": "tls"}))
    process = subprocess.Popen(
        [sys.executable, "-c", f"RULE = {RULE!r}\n{SCRIPT}", str(lab_json)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.strip() == "rule in place", first + process.stdout.read()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
        saved = subprocess.run(["iptables-save"], check=True, capture_output=True, text=True)
        assert COMMENT not in saved.stdout
    finally:
        process.kill()
        subprocess.run(["iptables", "-w", "-D", *RULE], check=False, capture_output=True)
