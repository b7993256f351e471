"""The index lifecycle's live check on a running tls lab (issue 53, docs/lifecycle.md): a
test tool.

    flock /work/lab.lock python -m clusterforge.testing.lifecycle_check \
        --lab-json inventories/lab/lab.json --repo . [--minutes 16] [--no-site] \
        [--no-stop] [--no-rule-change] [--alerts] [--keep]

What it does, in order, each step printing one ``LIFECYCLE {...}`` line:

1. ``setup``: a data stream's index template and the first index of an alias-based series
   (``lifecycle-check-ds``, ``lifecycle-check-events-000001``), through the admin.
2. ``site``: ``playbooks/site.yml`` on the lab with the issue's policy for both
   (:data:`POLICIES`, ``-e``): the timers on the cluster-manager-eligible nodes.
3. ``watch``, for ``--minutes``, under a continuous writer into both: every 10 s the state
   of both series (as a run reads it). It checks that no write is refused (0 failed),
   that the write index is never blocked nor deleted, that nothing is deleted younger
   than its delete age (but for the size cap, while the series is over it), and that each
   rollover comes within one timer period (and its jitter, and the poll) of the write
   index crossing a threshold. Once, it compares the preview (``decide()``, what
   ``scripts/lifecycle --plan`` prints) with the run that follows it: the writer pauses
   20 s before the elected manager's next run (its runs are a period apart), the preview
   is taken, and the run must do every previewed action and nothing but what the clock
   alone brought due since; the writer goes on once the run is seen.
4. ``stop`` (unless ``--no-stop``): the elected manager's engine stopped for two periods;
   another node's acting run must come, then the engine is started again.
5. ``rule-change`` (unless ``--no-rule-change``): ``site.yml`` again with
   ``replicas_after: 1m`` and ``replicas: 0`` added to the alias policy; every non-write
   index older than a minute must have 0 replicas within two periods.
6. ``alerts`` (with ``--alerts``, about 30 minutes): ``site.yml`` with the data stream's
   cap lowered to 1kb (its write index alone is over it), then, after one acting run,
   every node's runner pointed at a closed port (its config.json edited in place):
   OpenSearchLifecyclePatternOverCap, OpenSearchLifecycleRunsFailing and
   OpenSearchLifecycleIndexPastDeleteAge must arrive firing at the lab's webhook receiver;
   then ``site.yml`` restores the policies and the config.

7. ``remove`` (unless ``--keep``): ``site.yml`` with no policy; the timers, the runner and
   its settings must be gone from every node; then the check's indices, data stream and
   template are deleted.

Exit code 0 when every check held, 1 otherwise (each violation printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.host_runners.common import ApiError, Client
from clusterforge.host_runners.lifecycle import (
    Series,
    decide,
    fetch_state,
    write_index_of,
)
from clusterforge.plan.lifecycle.lifecycle import PERIOD_SECONDS, check_policies
from clusterforge.testing.drills import DrillError, Lab, wait_for_alert

ALIAS = "lifecycle-check-events"
STREAM = "lifecycle-check-ds"
POLICIES: list[dict[str, Any]] = [
    {
        "name": "check-events",
        "index_pattern": f"{ALIAS}-*",
        "alias": ALIAS,
        "rollover": {"max_docs": 1000, "max_primary_size": "1mb"},
        "read_only_after": "2m",
        "force_merge_after": "2m",
        "max_segments": 1,
        "delete_after": "5m",
        "max_total_size": "40mb",
    },
    {
        "name": "check-ds",
        "data_stream": STREAM,
        "rollover": {"max_docs": 1000, "max_primary_size": "1mb"},
        "read_only_after": "2m",
        "force_merge_after": "2m",
        "max_segments": 1,
        "delete_after": "5m",
        "max_total_size": "40mb",
    },
]
JITTER = 30
POLL = 10.0
# The writer pauses this long before the run the preview is compared with, and the
# preview is taken PAUSE_SETTLE later, once the last bulk request is answered and visible.
PREVIEW_LEAD = 20.0
PAUSE_SETTLE = 5.0
# A rollover must come within one period (plus the timer's jitter and one poll) of the
# write index crossing a threshold.
ROLLOVER_WITHIN = PERIOD_SECONDS + JITTER + 2 * POLL
ALERTS = (
    "OpenSearchLifecycleRunsFailing",
    "OpenSearchLifecyclePatternOverCap",
    "OpenSearchLifecycleIndexPastDeleteAge",
)


def say(step: str, **fields: Any) -> None:
    print("LIFECYCLE " + json.dumps({"step": step, **fields}), flush=True)


@dataclass
class Observed:
    """What the watch saw of one series."""

    crossed: dict[str, float] = field(default_factory=dict)  # write index -> first seen over
    rolled: dict[str, float] = field(default_factory=dict)  # index -> seen no longer written
    last: dict[str, Any] = field(default_factory=dict)  # index -> (age basis, was write, size)
    total: int = 0


class Writer(threading.Thread):
    """Documents into the alias and the data stream, 20 at a time, until stopped; each
    refused item counted."""

    def __init__(self, client: CheckClient) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.stop = threading.Event()
        self.written = 0
        self.failed = 0
        self.errors: list[str] = []
        # Refusals while a node is stopped on purpose are the stop's, not the lifecycle's.
        self.phase = "watch"
        self.failed_by_phase: dict[str, int] = {}
        # Set around the preview's comparison only (Check.preview_matches_next_run).
        self.paused = threading.Event()

    def run(self) -> None:
        number = 0
        while not self.stop.is_set():
            if self.paused.is_set():
                time.sleep(0.2)
                continue
            lines = []
            for target in (ALIAS, STREAM):
                for _document in range(10):
                    number += 1
                    lines.append(json.dumps({"create": {"_index": target}}))
                    lines.append(
                        json.dumps(
                            {"@timestamp": int(time.time() * 1000), "n": number, "pad": "x" * 200}
                        )
                    )
            try:
                answer = self.client.call_ndjson("/_bulk", "\n".join(lines) + "\n")
                items = answer.get("items") or []
                refused = [item for item in items if next(iter(item.values())).get("error")]
                self.failed += len(refused)
                self.failed_by_phase[self.phase] = self.failed_by_phase.get(self.phase, 0) + len(
                    refused
                )
                self.written += len(items) - len(refused)
                if refused:
                    self.errors.append(json.dumps(refused[0])[:300])
            except (ApiError, OSError, ValueError) as error:  # every refusal counts
                self.failed += 20
                self.failed_by_phase[self.phase] = self.failed_by_phase.get(self.phase, 0) + 20
                self.errors.append(str(error)[:300])
            time.sleep(0.5)


class CheckClient(Client):
    """The runner's client, with the bulk API's newline-delimited body."""

    def call_ndjson(self, path: str, text: str) -> Any:
        """POST a newline-delimited body to the first node that answers."""
        last: Exception | None = None
        for url in self._urls:
            request = urllib.request.Request(  # noqa: S310 - the lab's https URLs
                url.rstrip("/") + path, data=text.encode(), method="POST"
            )
            request.add_header("Authorization", self._authorization)
            request.add_header("Content-Type", "application/x-ndjson")
            try:
                with urllib.request.urlopen(  # noqa: S310
                    request, context=self._context, timeout=30
                ) as answer:
                    return json.loads(answer.read())
            except urllib.error.HTTPError:
                raise
            except (urllib.error.URLError, OSError) as error:
                last = error  # that node is down: the next one
        raise last or OSError("no node URL")


class Check:
    def __init__(self, facts: dict[str, Any], repo: Path) -> None:
        self.facts = facts
        self.repo = repo
        self.violations: list[str] = []
        password = Path(facts["admin_password_file"]).read_text().strip()
        self.client = CheckClient(
            urls=[node["url"] for node in facts["nodes"]],
            ca_file=str(facts["ca_cert"]),
            username=str(facts.get("admin_user") or "admin"),
            password=password,
            timeout=30,
        )
        self.policies = check_policies(POLICIES)
        self.observed = {str(policy["name"]): Observed() for policy in self.policies}

    def container(self, node: str) -> str:
        return str((self.facts.get("containers") or {}).get(node) or f"clusterforge-lab-{node}")

    def fail(self, message: str) -> None:
        self.violations.append(message)
        say("violation", message=message)

    def setup(self) -> None:
        self.client.call(
            "PUT",
            f"/_index_template/{STREAM}",
            {
                "index_patterns": [f"{STREAM}*"],
                "data_stream": {},
                "priority": 500,
                "template": {"settings": {"number_of_shards": 1, "number_of_replicas": 1}},
            },
        )
        try:
            self.client.call("PUT", f"/_data_stream/{STREAM}")
        except ApiError as error:  # already there from an earlier check
            say("setup", note=f"data stream: {error}")
        try:
            self.client.call(
                "PUT",
                f"/{ALIAS}-000001",
                {
                    "settings": {"number_of_shards": 1, "number_of_replicas": 1},
                    "aliases": {ALIAS: {"is_write_index": True}},
                },
            )
        except ApiError as error:  # already there from an earlier check
            say("setup", note=f"first index: {error}")
        say("setup", alias=ALIAS, data_stream=STREAM)

    def site(self, policies: Sequence[dict[str, Any]]) -> float:
        started = time.monotonic()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump({"opensearch_lifecycle_policies": list(policies)}, handle)
        try:
            result = subprocess.run(  # noqa: S603
                [
                    str(Path(sys.executable).parent / "ansible-playbook"),
                    "-i",
                    str(self.repo / "inventories" / "lab"),
                    str(self.repo / "playbooks" / "site.yml"),
                    "-e",
                    f"@{handle.name}",
                ],
                cwd=self.repo,
                text=True,
                capture_output=True,
                check=False,
                env={**os.environ, "ANSIBLE_CONFIG": str(self.repo / "ansible.cfg")},
            )
        finally:
            Path(handle.name).unlink(missing_ok=True)
        if result.returncode != 0:
            raise SystemExit("playbooks/site.yml failed:\n" + result.stdout[-4000:])
        seconds = time.monotonic() - started
        say("site", seconds=round(seconds, 1))
        return seconds

    def journal(self, node: str, since: float) -> list[str]:
        """The runner's journal lines on ``node`` since ``since`` (epoch seconds)."""
        return [line for _at, line in self.timed_journal(node, since)]

    def timed_journal(self, node: str, since: float) -> list[tuple[float, str]]:
        """The runner's journal lines on ``node`` since ``since``, each with its time."""
        result = subprocess.run(  # noqa: S603
            [  # noqa: S607 - docker on PATH, as the drills use it
                "docker",
                "exec",
                self.container(node),
                "journalctl",
                "-u",
                "clusterforge-lifecycle",
                "-o",
                "short-unix",
                "--no-pager",
                f"--since=@{int(since)}",
            ],
            text=True,
            capture_output=True,
            check=False,
        )
        lines = []
        for line in result.stdout.splitlines():
            at, _space, rest = line.partition(" ")
            message = rest[rest.find("clusterforge-lifecycle ") :]
            if "clusterforge-lifecycle " in rest:
                lines.append((float(at), message))
        return lines

    def acting_runs(self, since: float) -> list[tuple[float, str]]:
        """Every node's acting journal lines since ``since``, oldest first, with times."""
        return sorted(
            (at, line)
            for node in self.facts["nodes"]
            for at, line in self.timed_journal(str(node["name"]), since)
            if "role=acting" in line
        )

    def acting_lines(self, since: float) -> list[str]:
        return [
            line
            for node in self.facts["nodes"]
            for line in self.journal(str(node["name"]), since)
            if "role=acting" in line
        ]

    def poll(self, now: float) -> list[Series]:
        cluster, series = fetch_state(self.client, self.policies, ism=False)
        for one in series:
            seen = self.observed[one.name]
            write = write_index_of(one)
            conditions = one.policy.get("rollover") or {}
            for index in one.indices:
                over = index.docs >= int(conditions.get("max_docs") or 1 << 62) or (
                    index.primary_bytes >= int(conditions.get("max_primary_size_bytes") or 1 << 62)
                )
                if index.name == write:
                    if index.write_blocked:
                        self.fail(f"{one.name}: the write index {index.name} is write-blocked")
                    if over:
                        seen.crossed.setdefault(index.name, now)
                elif index.name in seen.crossed and index.name not in seen.rolled:
                    seen.rolled[index.name] = now
                    late = now - seen.crossed[index.name]
                    say("rollover", policy=one.name, index=index.name, after_s=round(late, 1))
                    if late > ROLLOVER_WITHIN:
                        self.fail(
                            f"{one.name}: {index.name} rolled over {late:.0f}s after crossing a "
                            f"threshold (allowed {ROLLOVER_WITHIN:.0f}s)"
                        )
            present = {index.name for index in one.indices}
            for name, (basis, was_write, total) in list(seen.last.items()):
                if name in present:
                    continue
                del seen.last[name]
                age = now - basis
                cap = int(one.policy.get("max_total_size_bytes") or 0)
                say("deleted", policy=one.name, index=name, age_s=round(age, 1))
                if was_write:
                    self.fail(f"{one.name}: the write index {name} was deleted")
                elif age < int(one.policy["delete_after_seconds"]) and not (cap and total > cap):
                    self.fail(
                        f"{one.name}: {name} deleted {age:.0f}s after its rollover, younger "
                        "than delete_after, with the series under its cap"
                    )
            total = sum(index.total_bytes for index in one.indices)
            for index in one.indices:
                seen.last[index.name] = (index.age_basis, index.name == write, total)
            seen.total = total
        del cluster
        return series

    def preview_matches_next_run(self, writer: Writer) -> None:
        """The preview against the run that follows it, with the run's inputs held still.

        Under the writer, a run five minutes after a preview finds write indices the
        preview never saw cross a threshold, and a preview taken right after a run finds
        nothing to do: the first clean run of the whole check compared an empty preview
        with a run of six actions, which proves nothing. So the elected manager's last
        acting run gives its next one (its timer fires at a fixed offset, a period
        apart); the writer pauses PREVIEW_LEAD seconds before it; the preview is taken;
        and the run must do every previewed action and nothing else but what the clock
        alone brought due in between (the same ``decide()`` on the preview's state, at
        each second up to the run's). The writer goes on once the run is seen."""
        since = time.time()
        runs: list[tuple[float, str]] = []
        while not runs and time.time() - since < PERIOD_SECONDS + 90:
            # Polls go on meanwhile: a deletion judged on a stale poll once took an index
            # that had rolled over since for a write index.
            self.poll(time.time())
            time.sleep(5)
            runs = self.acting_runs(since - PERIOD_SECONDS)
        if not runs:
            self.fail("no acting run came within a period: nothing to preview against")
            return
        next_run = runs[-1][0] + PERIOD_SECONDS
        while time.time() < next_run - PREVIEW_LEAD:
            self.poll(time.time())
            time.sleep(max(0.0, min(POLL, next_run - PREVIEW_LEAD - time.time())))
        writer.paused.set()
        paused = time.time()
        try:
            # The last bulk answered and refreshed (the indices refresh every second).
            time.sleep(PAUSE_SETTLE)
            cluster, series = fetch_state(self.client, self.policies, ism=False)
            previewed_at = time.time()
            previewed = {
                f"{a.action}:{a.index}" for a in decide(cluster, series, previewed_at).actions
            }
            lines: list[tuple[float, str]] = []
            while not lines and time.time() < next_run + JITTER + 60:
                time.sleep(2)
                lines = self.acting_runs(previewed_at)
        finally:
            writer.paused.clear()
        resumed = time.time()
        if not lines:
            say("preview", previewed=sorted(previewed), run=None)
            self.fail("no acting run came within a period after the preview")
            return
        ran_at, line = lines[0]
        done: set[str] = set()
        for part in line.split():
            if part.startswith("actions="):
                done = set(part.removeprefix("actions=").split(",")) - {"none"}
        # Due at some second between the two: a later phase replaces an earlier one (an
        # index due for deletion is no longer made read-only), so the run's time alone
        # would not do (the first run with this comparison saw exactly that).
        by_clock = {
            f"{a.action}:{a.index}"
            for second in range(int(ran_at - previewed_at) + 2)
            for a in decide(cluster, series, min(previewed_at + second, ran_at)).actions
        }
        say(
            "preview",
            previewed=sorted(previewed),
            run=sorted(done),
            due_by_clock_since=sorted(by_clock - previewed),
            preview_to_run_s=round(ran_at - previewed_at, 1),
            writer_paused_s=round(resumed - paused, 1),
        )
        if not previewed:
            self.fail("the preview was empty: nothing to compare (the writer wrote too little?)")
        if previewed - done:
            self.fail(f"previewed but not done by the next run: {sorted(previewed - done)}")
        if done - by_clock:
            self.fail(
                "done by the next run but neither previewed nor brought due by the clock: "
                f"{sorted(done - by_clock)}"
            )

    def watch(self, minutes: float, writer: Writer) -> None:
        started = time.time()
        end = started + minutes * 60
        previewed = False
        while time.time() < end or not previewed:
            self.poll(time.time())
            # Once there are rolled-over indices to act on (after the first run), and
            # whatever --minutes says (a 10-minute watch once ended before it).
            if not previewed and time.time() > started + PERIOD_SECONDS:
                self.preview_matches_next_run(writer)
                previewed = True
            time.sleep(POLL)
        say("watch", written=writer.written, failed=writer.failed, errors=writer.errors[:3])

    def stop_manager(self) -> None:
        manager = self.client.call("GET", "/_cat/cluster_manager?format=json")[0]["node"]
        container = self.container(manager)
        subprocess.run(["docker", "exec", container, "systemctl", "stop", "opensearch"], check=True)  # noqa: S603,S607
        stopped = time.time()
        try:
            lines: list[str] = []
            while time.time() - stopped < 2 * PERIOD_SECONDS + 120:
                self.poll(time.time())
                lines = [
                    line for line in self.acting_lines(stopped) if f"node={manager} " not in line
                ]
                if lines:
                    break
                time.sleep(POLL)
            say("stop", manager=manager, acting_after=lines[:1])
            if not lines:
                self.fail(f"with {manager} stopped, no other node's run acted within two periods")
        finally:
            subprocess.run(  # noqa: S603
                ["docker", "exec", container, "systemctl", "start", "opensearch"],  # noqa: S607
                check=True,
                timeout=300,
            )

    def rule_change(self) -> None:
        changed = [dict(POLICIES[0], replicas_after="1m", replicas=0), POLICIES[1]]
        self.site(changed)
        self.policies = check_policies(changed)
        applied = time.time()
        while time.time() - applied < 2 * PERIOD_SECONDS + 60:
            series = self.poll(time.time())
            events = next(one for one in series if one.name == "check-events")
            write = write_index_of(events)
            aged = [
                index
                for index in events.indices
                if index.name != write and time.time() - index.age_basis > 60 + POLL
            ]
            pending = [index.name for index in aged if index.replicas != 0]
            # Not done until an existing index is old enough for the new rule (an empty
            # list proved nothing on the lab's first run).
            if aged and not pending:
                say(
                    "rule-change",
                    seconds=round(time.time() - applied, 1),
                    indices=[index.name for index in aged],
                )
                return
            time.sleep(POLL)
        self.fail(f"the changed rule did not reach the existing indices: {pending}")

    def remove(self) -> None:
        """``site.yml`` with no policy: the timers and the runner's files go from every
        node; then the check's own indices, data stream and template."""
        self.site([])
        left = []
        for node in self.facts["nodes"]:
            found = subprocess.run(  # noqa: S603
                [  # noqa: S607
                    "docker",
                    "exec",
                    self.container(str(node["name"])),
                    "ls",
                    "/etc/systemd/system/clusterforge-lifecycle.timer",
                    "/etc/clusterforge/lifecycle",
                    "/usr/local/lib/clusterforge/lifecycle",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if found.stdout.strip():
                left.append(f"{node['name']}: {found.stdout.split()}")
        for path in (f"/_data_stream/{STREAM}", f"/{ALIAS}-*", f"/_index_template/{STREAM}"):
            try:
                self.client.call("DELETE", path)
            except ApiError as error:
                say("remove", note=f"DELETE {path}: {error}")
        say("remove", left=left)
        if left:
            self.fail(f"with no policy left, the timers stay: {left}")

    def alerts(self) -> None:
        """The three alerts from one break: the data stream's cap lowered under its write
        index alone (over the cap while every run succeeds), then every runner pointed at
        a closed port (runs failing; the alias series' oldest index, as the last run saw
        it, ages past its delete age)."""
        lab = Lab(facts=self.facts, repo=self.repo)
        log = lab.receiver_log
        offset = log.stat().st_size if log.exists() else 0
        lowered = [POLICIES[0], dict(POLICIES[1], max_total_size="1kb")]
        self.site(lowered)
        applied = time.time()
        while not self.acting_lines(applied) and time.time() - applied < PERIOD_SECONDS + 90:
            time.sleep(POLL)
        broke = time.time()
        for node in self.facts["nodes"]:
            subprocess.run(  # noqa: S603
                [  # noqa: S607
                    "docker",
                    "exec",
                    self.container(str(node["name"])),
                    "sed",
                    "-i",
                    's#"https://[^"]*"#"https://127.0.0.1:1"#',
                    "/etc/clusterforge/lifecycle/config.json",
                ],
                check=False,
            )
        fired = {}
        for alert in ALERTS:
            try:
                received = wait_for_alert(lab, alert, "firing", offset=offset, timeout=3000)
                fired[alert] = round(received - broke)
            except DrillError as error:  # reported; the timers are restored below
                self.fail(f"{alert} did not fire: {error}")
        say("alerts", fired_after_s=fired)
        self.site(POLICIES)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterforge.testing.lifecycle_check")
    parser.add_argument("--lab-json", type=Path, default=Path("inventories/lab/lab.json"))
    parser.add_argument("--repo", type=Path, default=Path())
    parser.add_argument("--minutes", type=float, default=16)
    parser.add_argument("--no-site", action="store_true", help="the timers are in place")
    parser.add_argument("--no-stop", action="store_true")
    parser.add_argument("--no-rule-change", action="store_true")
    parser.add_argument("--alerts", action="store_true", help="the alert drill (~30 min)")
    parser.add_argument(
        "--keep", action="store_true", help="leave the timers, indices and template in place"
    )
    args = parser.parse_args(argv)
    facts = json.loads(args.lab_json.read_text())
    if facts.get("mode") != "tls":
        print("the lifecycle check needs a tls lab (scripts/up --mode tls)", file=sys.stderr)
        return 2
    check = Check(facts, args.repo.resolve())
    check.setup()
    if not args.no_site:
        check.site(POLICIES)
    writer = Writer(check.client)
    writer.start()
    try:
        check.watch(args.minutes, writer)
        if not args.no_stop:
            writer.phase = "stop"
            check.stop_manager()
            # Until the restarted node has rejoined, its own 503s are the stop's (the lab's
            # second run counted 20 of them against the lifecycle).
            rejoined = time.time()
            while time.time() - rejoined < 300:
                health = check.client.call("GET", "/_cluster/health")
                if int(health.get("number_of_nodes", 0)) >= len(facts["nodes"]):
                    break
                time.sleep(POLL)
            time.sleep(30)
            writer.phase = "watch"
        if not args.no_rule_change:
            check.rule_change()
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    say("writes", written=writer.written, failed_by_phase=writer.failed_by_phase)
    if writer.failed_by_phase.get("watch"):
        check.fail(
            f"{writer.failed_by_phase['watch']} writes were refused with every node up: "
            f"{writer.errors[:3]}"
        )
    if args.alerts:
        check.alerts()
    if not args.keep:
        check.remove()
    say("done", violations=check.violations)
    return 1 if check.violations else 0


if __name__ == "__main__":
    sys.exit(main())
