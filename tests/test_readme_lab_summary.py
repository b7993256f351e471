"""The README's `scripts/up` part is held to the code (issue 51, item 6): its list of
options is `up --help`'s, and its sample summary has the lines the summary code prints
for the lab it describes (tls, three nodes, the services and the monitoring)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from clusterforge.lab.__main__ import build_parser
from clusterforge.lab.summary import summary_lines

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _up_options() -> set[str]:
    parser = build_parser()
    commands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    up = commands.choices["up"]
    return {option for action in up._actions for option in action.option_strings} - {
        "-h",
        "--help",
    }


def _readme_options_paragraph() -> str:
    match = re.search(r"Options of `scripts/up`:(.*?)\n\n", README, re.S)
    assert match, "the README lost its 'Options of `scripts/up`:' paragraph"
    return match.group(1)


def test_the_readme_lists_every_option_of_scripts_up_and_no_other() -> None:
    listed = set(re.findall(r"`(--[a-z-]+)", _readme_options_paragraph()))
    assert listed == _up_options()


def _labels(lines: list[str]) -> list[str]:
    """Each line's label: its first word, and the second for the service and monitor lines."""
    labels = []
    for line in lines:
        words = line.split()
        if not words:
            continue
        labels.append(" ".join(words[:2]) if words[0] in ("service", "monitor") else words[0])
    return labels


def test_the_readmes_sample_summary_has_the_lines_the_summary_prints() -> None:
    match = re.search(r"`scripts/up` ends with a summary.*?```\n(.*?)```", README, re.S)
    assert match, "the README lost its sample summary"
    node = {"roles": "dim", "cluster_manager": False}
    facts = {
        "cluster_name": "clusterforge-lab",
        "version": "2.19.4",
        "mode": "tls",
        "network": "loopback",
        "health": "green",
        "nodes": [
            {**node, "name": f"opensearch-{i}", "url": f"https://127.0.0.1{i}:9200"}
            for i in (1, 2, 3)
        ],
        "services": {"user_directory": "https://x:8081", "orders": "https://x:8082"},
        "user_directory_token_file": "t",
        "orders_token_file": "t",
        "services_ca_cert": "ca",
        "monitoring": {
            "prometheus": "p",
            "alertmanager": "a",
            "user": "u",
            "password_file": "f",
            "ca_cert": "c",
            "receiver_log": "r",
        },
        "changed": 0,
        "admin_user": "admin",
        "admin_password_file": "f",
        "ca_cert": "ca",
    }
    printed = summary_lines(facts, elapsed=1.0, lab_dir=ROOT / "inventories" / "lab")
    assert _labels(match.group(1).splitlines()) == _labels(printed)
