"""Every unit the toolkit writes names its documentation as systemd accepts it: an
absolute URI (http:, https:, file:/, info:, man:). A relative one, as the snapshot units
had, put a warning in the journal on every daemon-reload (issue 51)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VALID = re.compile(r"(https?://\S+|file:/\S+|info:\S+|man:\S+)")


def _unit_templates() -> list[Path]:
    found = [*ROOT.glob("src/clusterforge/**/*.service.j2"), *ROOT.glob("roles/**/*.service*")]
    found += [*ROOT.glob("src/clusterforge/**/*.timer.j2"), *ROOT.glob("roles/**/*.timer*")]
    return sorted(set(found))


def test_there_are_unit_templates_to_check() -> None:
    assert len(_unit_templates()) >= 5


def test_every_documentation_line_is_an_absolute_uri() -> None:
    bad = []
    for path in _unit_templates():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("Documentation="):
                uris = line.removeprefix("Documentation=").split()
                bad += [
                    f"{path.relative_to(ROOT)}:{number}: {uri}"
                    for uri in uris
                    if not VALID.fullmatch(uri)
                ]
    assert bad == []
