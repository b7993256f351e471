"""bench/rerun --monitoring-ab: the idempotent ``site.yml`` rerun of the lab with its
monitoring, against the rerun without it, on the same lab in alternating rounds (issue 42).

"Without monitoring" is not made by switching the lab (``scripts/up --no-monitoring``):
that changes the security files (the monitoring user goes), so neither rerun would be
idempotent, and a lab switched off monitoring once left exporters running without their
user, whose failed sign-ins locked the admin out. The lab keeps its monitoring host, its
monitoring user and every file; each round runs three variants of the same rerun:

``with``
    ``playbooks/site.yml`` as it is: the monitoring plays included, the monitoring's
    processes running.
``skip``
    ``site.yml --skip-tags monitoring,node_exporter``: the monitoring plays' tasks left
    out, the monitoring's processes still running (what the plays cost).
``off``
    the same skipped rerun with the monitoring's processes (Prometheus, Alertmanager, the
    exporters, every host's node exporter) stopped first, and started again afterwards,
    before the next ``with``: the lab as it runs without monitoring, but for what the plan
    keeps of it (the monitoring user in the security files, a few milliseconds of the
    control node's plan). The ratio of the issue is ``with`` / ``off``; ``with`` /
    ``skip`` says what the plays alone cost, ``skip`` / ``off`` what the running
    monitoring costs the rest of the rerun on this machine.

Every run's recap must say changed=0 (otherwise it was no idempotent rerun, and the
benchmark says so and exits 1). ``--checkout NAME=PATH`` (repeatable) runs the playbooks
of other checkouts against the same lab in the same rounds (``before=`` a worktree of
main, say): each takes its turn in every round, so before and after meet the same
machine. The order alternates from round to round. The 1-minute load average is
recorded at every run's start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchlib import REPO, load_average, wait_until_quiet, write_section

from clusterforge.lab.cluster import CONTAINER_PREFIX
from clusterforge.plan.monitoring.monitoring import UNITS

LAB_DIR = REPO / "inventories" / "lab"
HEADING = "## rerun with and without monitoring (bench/rerun --monitoring-ab)"
BEFORE_HEADING = "## rolling (bench/rolling)"
VARIANTS = ("with", "skip", "off")
SKIP_TAGS = "monitoring,node_exporter"
# The monitoring's units on every host: the monitoring host's and each node exporter.
MONITORING_UNITS = tuple(
    f"{name}*.service" if name.endswith("@") else f"{name}.service" for name in UNITS.values()
)
GOAL = 1.25


def say(message: str) -> None:
    print(f"bench/rerun --monitoring-ab: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Run:
    checkout: str
    variant: str
    round: int
    seconds: float
    changed: int
    load: float  # the 1-minute load average when the run started


def variant_args(variant: str) -> list[str]:
    """ansible-playbook's extra arguments for a variant."""
    if variant not in VARIANTS:
        raise ValueError(f"no variant {variant!r}; one of {VARIANTS}")
    return [] if variant == "with" else ["--skip-tags", SKIP_TAGS]


def order_of_round(index: int, checkouts: Sequence[str]) -> list[tuple[str, str]]:
    """The (checkout, variant) runs of round ``index`` (from 0), in their order.

    The ``off`` runs come last, together (the processes are stopped once a round and
    started again, and left to settle, before the next round); the checkouts' order and
    the order of ``with`` and ``skip`` turn round every other round, so that neither
    always follows the restart nor the other.
    """
    names = list(checkouts) if index % 2 == 0 else list(reversed(checkouts))
    pair = ["with", "skip"] if index % 2 == 0 else ["skip", "with"]
    return [(name, variant) for name in names for variant in pair] + [
        (name, "off") for name in names
    ]


def changed_in_recap(output: str) -> int:
    """The total of changed= over the PLAY RECAP's lines."""
    recap = output.split("PLAY RECAP", 1)
    if len(recap) < 2:
        raise ValueError("the playbook printed no PLAY RECAP")
    return sum(int(found) for found in re.findall(r"\bchanged=(\d+)", recap[1]))


def parse_checkouts(values: Sequence[str]) -> dict[str, Path]:
    """``NAME=PATH`` options; this checkout is ``branch`` unless named otherwise."""
    checkouts: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--checkout {value!r}: give NAME=PATH")
        if not (Path(path) / "playbooks" / "site.yml").is_file():
            raise ValueError(f"--checkout {value!r}: {path} has no playbooks/site.yml")
        checkouts[name] = Path(path).resolve()
    if REPO.resolve() not in checkouts.values():
        checkouts["branch"] = REPO.resolve()
    return checkouts


def run_site(checkout: Path, variant: str) -> tuple[float, int, str]:
    """Seconds, changed tasks and output of one ``site.yml`` run of ``checkout``'s
    playbooks against this checkout's lab, with this checkout's virtualenv.

    Another checkout's own Python package goes first on the path (its plugins import
    ``clusterforge`` from its ``src``); its collection is its own ``.collections``.
    """
    env = {**os.environ, "ANSIBLE_CONFIG": str(checkout / "ansible.cfg")}
    if checkout != REPO.resolve():
        env["PYTHONPATH"] = os.pathsep.join(
            [str(checkout / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    command = [
        str(REPO / ".venv" / "bin" / "ansible-playbook"),
        "-i",
        str(LAB_DIR),
        str(checkout / "playbooks" / "site.yml"),
        *variant_args(variant),
    ]
    started = time.monotonic()
    result = subprocess.run(
        command, cwd=checkout, capture_output=True, text=True, check=False, env=env
    )
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"site.yml ({checkout}, {variant}) failed:\n{output[-3000:]}")
    return seconds, changed_in_recap(result.stdout), output


# -- the monitoring's processes ---------------------------------------------------------


def docker(*args: str, check: bool = True) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise SystemExit(f"docker {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def lab_containers() -> list[str]:
    names = docker("ps", "--format", "{{.Names}}", "--filter", f"name=^{CONTAINER_PREFIX}")
    return sorted(name for name in names.split() if name.startswith(CONTAINER_PREFIX))


def active_monitoring_units() -> dict[str, list[str]]:
    """Each lab container's running monitoring units (empty containers left out)."""
    found: dict[str, list[str]] = {}
    for container in lab_containers():
        listed = docker(
            "exec", container, "systemctl", "list-units", "--plain", "--no-legend",
            "--state=active", "--", *MONITORING_UNITS,
            check=False,
        )  # fmt: skip
        units = [line.split()[0] for line in listed.splitlines() if line.strip()]
        if units:
            found[container] = units
    return found


def stop_units(units: dict[str, list[str]]) -> None:
    for container, names in units.items():
        docker("exec", container, "systemctl", "stop", "--", *names)


def start_units(units: dict[str, list[str]], *, settle_s: float, timeout_s: float = 90) -> None:
    """Start them again and wait until every one is active, then ``settle_s`` more (a
    starting Prometheus reads its WAL, the exporters their first scrape)."""
    for container, names in units.items():
        docker("exec", container, "systemctl", "start", "--", *names)
    deadline = time.monotonic() + timeout_s
    for container, names in units.items():
        while True:
            states = docker("exec", container, "systemctl", "is-active", "--", *names, check=False)
            if all(state == "active" for state in states.split()):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{container}: {names} not active again: {states.split()}")
            time.sleep(1)
    time.sleep(settle_s)


# -- the record ------------------------------------------------------------------------


def medians(runs: Sequence[Run]) -> dict[tuple[str, str], float]:
    by: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        by.setdefault((run.checkout, run.variant), []).append(run.seconds)
    return {key: statistics.median(values) for key, values in by.items()}


def paired_medians(runs: Sequence[Run], checkout: str) -> dict[str, float]:
    """Round by round: with / off, with - skip and skip - off, each's median over the
    rounds that ran all three (a round's runs met the same load)."""
    by = {(run.round, run.variant): run.seconds for run in runs if run.checkout == checkout}
    rounds = sorted({number for number, _ in by if all((number, v) in by for v in VARIANTS)})
    if not rounds:
        return {"ratio": float("nan"), "plays": float("nan"), "running": float("nan")}
    return {
        "ratio": statistics.median(by[(n, "with")] / by[(n, "off")] for n in rounds),
        "plays": statistics.median(by[(n, "with")] - by[(n, "skip")] for n in rounds),
        "running": statistics.median(by[(n, "skip")] - by[(n, "off")] for n in rounds),
    }


def summarize(
    runs: Sequence[Run],
    checkouts: dict[str, Path],
    *,
    commits: dict[str, str],
    loads: tuple[str, str],
    facts: dict[str, object],
    started: str,
) -> str:
    names = list(checkouts)
    rounds = max((run.round for run in runs), default=0)
    table = [
        "| round | checkout | with s | skip s | off s | with / off | with / skip "
        "| 1-min load at the starts (with, skip, off) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for number in range(1, rounds + 1):
        for name in names:
            of = {run.variant: run for run in runs if run.round == number and run.checkout == name}
            if set(of) != set(VARIANTS):
                continue
            table.append(
                f"| {number} | {name} | {of['with'].seconds:.2f} | {of['skip'].seconds:.2f} "
                f"| {of['off'].seconds:.2f} | {of['with'].seconds / of['off'].seconds:.2f}x "
                f"| {of['with'].seconds / of['skip'].seconds:.2f}x "
                f"| {of['with'].load:.2f}, {of['skip'].load:.2f}, {of['off'].load:.2f} |"
            )
    middle = medians(runs)
    lines = []
    for name in names:
        if not all((name, variant) in middle for variant in VARIANTS):
            continue
        with_, skip, off = (middle[(name, variant)] for variant in VARIANTS)
        count = len([run for run in runs if run.checkout == name and run.variant == "with"])
        table.append(
            f"| median of {count} | {name} | {with_:.2f} | {skip:.2f} | {off:.2f} "
            f"| {with_ / off:.2f}x | {with_ / skip:.2f}x | |"
        )
        paired = paired_medians(runs, name)
        met = "met" if with_ / off <= GOAL else "not met"
        lines.append(
            f"- **{name}** ({commits.get(name, '?')}): with monitoring {with_:.2f} s, without "
            f"{off:.2f} s: **{with_ / off:.2f}x** (the medians' ratio; goal at most {GOAL}x: "
            f"{met}). Round by round (each with against the same round's without, the "
            f"medians of those): with / off {paired['ratio']:.2f}x, the monitoring plays "
            f"(with - skip) {paired['plays']:+.2f} s, the running monitoring (skip - off) "
            f"{paired['running']:+.2f} s."
        )
    nodes = facts.get("nodes")
    count_nodes = len(nodes) if isinstance(nodes, list) else 0
    return (
        f"Run `bench/rerun/run --monitoring-ab --rounds {rounds}"
        + "".join(
            f" --checkout {name}=..." for name, path in checkouts.items() if path != REPO.resolve()
        )
        + f"` against the lab from `scripts/up` ({started}; {facts.get('mode')} mode, "
        f"{count_nodes} nodes and the apps host, which is the monitoring host; a machine "
        f"with 2 cores; load average (1, 5, 15 min) {loads[0]} before and {loads[1]} after, "
        "as /proc/loadavg read them). Each round runs, per checkout: `with` "
        "(`playbooks/site.yml`), `skip` (`--skip-tags monitoring,node_exporter`, the "
        "monitoring's processes running) and `off` (the same, with Prometheus, "
        "Alertmanager and every exporter stopped on every host, started again after the "
        "round's `off` runs, every unit active and a settling pause before the next run). "
        + (
            "Every recap said changed=0. "
            if runs and not any(run.changed for run in runs)
            else "**Some recap said changed>0: no idempotent rerun, no ratio holds.** "
        )
        + "The order alternates from round to round.\n\n"
        + "\n".join(table)
        + "\n\n"
        + "\n".join(lines)
        + "\n"
    )


def git_commit(checkout: Path) -> str:
    result = subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%h"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/rerun/run --monitoring-ab", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--monitoring-ab", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--checkout",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another checkout whose playbooks take a turn in every round (repeatable)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=0,
        metavar="EPOCH",
        help="start no round that is not expected to end before this time (seconds since "
        "the epoch; 0: none)",
    )
    parser.add_argument("--settle", type=float, default=15, help="seconds after the restart")
    parser.add_argument("--quiet-load", type=float, default=0, help="wait below this load")
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument(
        "--from-json",
        type=Path,
        help="record the runs a --json file holds (a run cut short) instead of running",
    )
    parser.add_argument("--no-record", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds: give at least 1")
    try:
        checkouts = parse_checkouts(args.checkout)
    except ValueError as error:
        parser.error(str(error))
    lab_json = LAB_DIR / "lab.json"
    if args.from_json:
        runs = [Run(**item) for item in json.loads(args.from_json.read_text())]
        facts = json.loads(lab_json.read_text()) if lab_json.exists() else {}
        return _record(runs, checkouts, facts, args, started="(from --json)", loads=("?", "?"))
    if not lab_json.exists():
        raise SystemExit(f"{lab_json} does not exist: start the lab with scripts/up first")
    facts = json.loads(lab_json.read_text())
    units = active_monitoring_units()
    if not units:
        raise SystemExit("no monitoring unit runs on the lab: start it with its monitoring")
    say(f"monitoring units: {json.dumps(units)}")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = load_average()
    # The first run of each checkout may still have work to do: not measured. A checkout
    # whose run fails is left out (and said), so the others are still measured.
    for name, path in list(checkouts.items()):
        try:
            seconds, changed, _ = run_site(path, "with")
        except SystemExit as error:
            say(f"warm-up {name} failed, leaving it out: {error}")
            del checkouts[name]
            continue
        say(f"warm-up {name}: {seconds:.2f} s, changed={changed} (not measured)")
    if not checkouts:
        raise SystemExit("every checkout's site.yml failed")
    runs: list[Run] = []
    round_started = time.monotonic()
    round_seconds = 0.0
    for index in range(args.rounds):
        if args.deadline and time.time() + round_seconds * 1.1 > args.deadline:
            say(f"stopping after {index} rounds: the next would end after the deadline")
            break
        round_started = time.monotonic()
        stopped = False
        failed = False
        try:
            for name, variant in order_of_round(index, list(checkouts)):
                if variant == "off" and not stopped:
                    stop_units(units)
                    stopped = True
                load = wait_until_quiet(args.quiet_load, what=f"{name} {variant}")
                seconds, changed, output = run_site(checkouts[name], variant)
                runs.append(Run(name, variant, index + 1, seconds, changed, load))
                say(
                    f"round {index + 1} {name} {variant}: {seconds:.2f} s, "
                    f"changed={changed}, load {load:.2f}"
                )
                if changed:
                    say(f"not idempotent: {name} {variant} changed {changed}:\n{output[-3000:]}")
                if args.json:
                    args.json.write_text(json.dumps([run.__dict__ for run in runs], indent=1))
        except SystemExit as error:
            # A failed run ends the rounds; what was measured is still recorded.
            say(f"round {index + 1}: {error}")
            failed = True
        finally:
            # Never leave the lab without its monitoring, even when a run failed.
            if stopped:
                start_units(units, settle_s=args.settle)
        round_seconds = time.monotonic() - round_started
        if failed:
            break
    return _record(
        runs,
        checkouts,
        facts,
        args,
        started=started,
        loads=(load_before, load_average()),
    )


def _record(
    runs: list[Run],
    checkouts: dict[str, Path],
    facts: dict[str, object],
    args: argparse.Namespace,
    *,
    started: str,
    loads: tuple[str, str],
) -> int:
    commits = {name: git_commit(path) for name, path in checkouts.items()}
    summary = summarize(runs, checkouts, commits=commits, loads=loads, facts=facts, started=started)
    print(summary)
    if not runs:
        return 1
    if any(run.changed for run in runs):
        say("a rerun changed something: not idempotent, so no ratio holds")
        return 1
    if not args.no_record:
        write_section(HEADING, summary, before=BEFORE_HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
