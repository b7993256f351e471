"""Look for the deployment's secrets in everything a run leaves readable (issue 31).

    python tests/secret_leaks.py [--inventory inventories/lab] [--runs 2] [--check]

Runs playbooks/site.yml against the inventory ``--runs`` times (a deploy, then reruns)
at -vvv with --diff, optionally a preview (--check --diff -vvv) after them, then fetches
every host's journal since the check started (``journalctl -o verbose --all``: every
field AnsibleModule logs, not only the message; ``--whole-journal`` for all of it) and
its text logs under /var/log, and counts, per secret and per place,
how often each secret appears in the controller's output of each run, in the journals
and in the logs. It also lists any super-admin key a host keeps (``admin-key.pem``) and
any scratch directory that should have gone (``clusterforge-security-*``,
``clusterforge-key-*``).

The secrets are read on the control node, from the inventory directory the way the lab
and the roles keep them: every file of ``.secrets/``, ``.opensearch/*.password``,
``.postgresql/*.password``, and every line of a key's body in the PKI directory
(``.pki/*key*.pem``: the admin key, the CA key, the nodes' keys), plus the bcrypt hashes
of the password-hash state. No secret is ever printed or put in a command line: the
report names each secret by its file. Exit status 1 when anything was found.

Run it only against a lab or a molecule cluster on this machine (it deploys).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Shorter lines of a PEM body (its last one) are too short to tell apart from chance.
MIN_KEY_LINE = 40
BCRYPT = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")

COLLECT = """
- name: Gather every host's journal and text logs for the secret check
  hosts: all
  gather_facts: false
  tasks:
    - name: Pack the journal (every field), the logs, and what must not be on the host
      ansible.builtin.shell:
        cmd: |
          set -u
          out=$(mktemp -d /root/.clusterforge-leakcheck-XXXXXX)
          journalctl --no-pager -o verbose --all {{ leakcheck_since }} \\
            > "$out/journal.txt" 2>&1 || true
          find / -xdev \\( -name admin-key.pem -o -name 'clusterforge-security-*' \\
            -o -name 'clusterforge-key-*' \\) -print > "$out/left-behind.txt" 2>/dev/null || true
          find /var/log -xdev -type f -size -64M -print0 2>/dev/null \\
            | tar -czf "$out/logs.tgz" --null -T - --ignore-failed-read 2>/dev/null || true
          tar -C "$out" -czf /root/.clusterforge-leakcheck.tgz journal.txt left-behind.txt logs.tgz
          rm -rf "$out"
      changed_when: false
    - name: Bring the archive to the control node
      ansible.builtin.fetch:
        src: /root/.clusterforge-leakcheck.tgz
        dest: "{{ leakcheck_dir }}/{{ inventory_hostname }}.tgz"
        flat: true
    - name: Remove the archive from the host
      ansible.builtin.file:
        path: /root/.clusterforge-leakcheck.tgz
        state: absent
"""


def read_secrets(inventory: Path) -> dict[str, set[str]]:
    """Each secret's name (its file) and the strings to look for."""
    found: dict[str, set[str]] = {}
    for pattern in (".secrets/*", ".opensearch/*.password", ".postgresql/*.password"):
        for path in sorted(inventory.glob(pattern)):
            value = path.read_text().strip()
            if path.is_file() and len(value) >= 8:
                found[str(path.relative_to(inventory))] = {value}
    pki = inventory / ".pki"
    for path in sorted(pki.rglob("*key*.pem")):
        lines = {
            line.strip()
            for line in path.read_text().splitlines()
            if len(line.strip()) >= MIN_KEY_LINE and not line.startswith("-----")
        }
        if lines:
            found[str(path.relative_to(inventory))] = lines
    for path in sorted(pki.rglob("*.json")):
        hashes = set(BCRYPT.findall(path.read_text()))
        if hashes:
            found[f"{path.relative_to(inventory)} (bcrypt hashes)"] = hashes
    return found


def count(text: str, secrets: dict[str, set[str]]) -> Counter[str]:
    hits: Counter[str] = Counter()
    for name, values in secrets.items():
        total = sum(text.count(value) for value in values)
        if total:
            hits[name] = total
    return hits


def playbook(inventory: Path, *extra: str) -> tuple[int, str]:
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            "playbooks/site.yml",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"},
    )
    return done.returncode, done.stdout + done.stderr


def recap_changed(output: str) -> int:
    return sum(int(n) for n in re.findall(r"\bchanged=(\d+)", output.split("PLAY RECAP")[-1]))


def collect(inventory: Path, into: Path, since: str) -> dict[str, dict[str, str]]:
    """Per host: its journal, every log file, and the paths that should not exist."""
    play = into / "collect.yml"
    play.write_text(COLLECT)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            str(play),
            "-e",
            json.dumps({"leakcheck_dir": str(into), "leakcheck_since": since}),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"collecting the hosts' logs failed:\n{done.stdout[-3000:]}")
    hosts: dict[str, dict[str, str]] = {}
    for archive in sorted(into.glob("*.tgz")):
        texts: dict[str, str] = {}
        with tarfile.open(archive) as outer:
            for member in outer.getmembers():
                data = outer.extractfile(member)
                if data is None:
                    continue
                raw = data.read()
                if member.name == "logs.tgz":
                    with tarfile.open(fileobj=io.BytesIO(raw)) as logs:
                        for log in logs.getmembers():
                            log_data = logs.extractfile(log)
                            if log_data is not None:
                                texts[log.name] = log_data.read().decode("utf-8", "replace")
                else:
                    texts[member.name] = raw.decode("utf-8", "replace")
        hosts[archive.stem] = texts
    return hosts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", type=Path, default=REPO / "inventories" / "lab")
    parser.add_argument("--runs", type=int, default=2, help="site.yml runs (deploy, reruns)")
    parser.add_argument("--check", action="store_true", help="then a preview at -vvv --diff")
    parser.add_argument(
        "--whole-journal",
        action="store_true",
        help="read the whole journal, not only what the runs of this check wrote",
    )
    args = parser.parse_args()
    # The hosts' clocks are taken to be the control node's (a lab, a molecule cluster).
    since = "" if args.whole_journal else f"--since @{int(time.time())}"
    inventory = args.inventory.resolve()
    secrets = read_secrets(inventory)
    print(f"secrets looked for: {len(secrets)} ({', '.join(sorted(secrets))})")
    leaks = 0
    runs = [("run", ["-vvv", "--diff"])] * args.runs
    if args.check:
        runs.append(("check", ["-vvv", "--diff", "--check"]))
    for number, (kind, extra) in enumerate(runs, start=1):
        status, output = playbook(inventory, *extra)
        hits = count(output, secrets)
        leaks += sum(hits.values())
        print(
            f"{kind} {number}: exit {status}, changed={recap_changed(output)}, "
            f"{len(output.splitlines())} lines of output, secret hits {sum(hits.values())}"
            + "".join(f"\n  {name}: {n}" for name, n in sorted(hits.items()))
        )
        if status != 0:
            print(output[-4000:])
            return 2
    with tempfile.TemporaryDirectory(prefix="clusterforge-leakcheck-") as scratch:
        for host, texts in collect(inventory, Path(scratch), since).items():
            journal = count(texts.get("journal.txt", ""), secrets)
            logs: Counter[str] = Counter()
            for name, text in texts.items():
                if name not in ("journal.txt", "left-behind.txt"):
                    logs += count(text, secrets)
            left = texts.get("left-behind.txt", "").split()
            leaks += sum(journal.values()) + sum(logs.values()) + len(left)
            print(
                f"{host}: journal {len(texts.get('journal.txt', '').splitlines())} lines, "
                f"secret hits {sum(journal.values())}; logs {len(texts) - 2} files, "
                f"secret hits {sum(logs.values())}; left behind: {left or 'nothing'}"
                + "".join(f"\n  journal {name}: {n}" for name, n in sorted(journal.items()))
                + "".join(f"\n  logs {name}: {n}" for name, n in sorted(logs.items()))
            )
    print(f"total: {leaks}")
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
