"""``scripts/lifecycle --plan`` and the lifecycle section of ``scripts/status``
(clusterforge.status.lifecycle), against a real HTTPS server on loopback that answers as
the engine does (tests/test_lifecycle_runner.py's FakeEngine) and a lab.json with an
inventory beside it: the preview prints what the next run would do, index by index, with
the reason, and changes nothing; the status lists each policy's indices, size, oldest age
and says when one is over its cap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterforge.status import command as status_command
from clusterforge.status import lifecycle as preview
from loopback_pki import loopback_server_certificate
from test_lifecycle_runner import NOW, FakeEngine, _serve

POLICIES = """opensearch_lifecycle_policies:
  - name: events
    index_pattern: "events-*"
    alias: events
    rollover: {max_docs: 1000, max_primary_size: 1mb}
    delete_after: 5m
    max_total_size: 150b
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[FakeEngine, Path]]:
    ca, cert, key = loopback_server_certificate(tmp_path / "pki", "lifecycle-test")
    fake = FakeEngine(manager="os-1")
    server, url = _serve(fake, cert, key)
    root = tmp_path / "lab"
    (root / "group_vars" / "opensearch").mkdir(parents=True)
    (root / "hosts.yml").write_text(
        "all:\n  children:\n    opensearch:\n      hosts:\n"
        "        os-1: {ansible_host: 127.0.0.1}\n"
    )
    (root / "group_vars" / "opensearch" / "vars.yml").write_text(
        "opensearch_security_mode: tls\nopensearch_distribution_source: maven\n" + POLICIES
    )
    password = tmp_path / "admin.password"
    password.write_text("admin-pw\n")
    lab_json = root / "lab.json"
    lab_json.write_text(
        json.dumps(
            {
                "mode": "tls",
                "cluster_name": "lab",
                "nodes": [{"name": "os-1", "url": url}],
                "ca_cert": str(ca),
                "admin_password_file": str(password),
            }
        )
    )
    yield fake, lab_json
    server.shutdown()
    server.server_close()


def test_the_preview_prints_each_action_with_its_reason_and_changes_nothing(
    lab: tuple[FakeEngine, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, lab_json = lab
    monkeypatch.setattr(preview.time, "time", lambda: NOW)
    assert preview.main(["--plan", "--lab-json", str(lab_json)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "the next lifecycle run on a yellow cluster would:"
    assert out[1].split() == [
        "events", "rollover", "events-000002", "(events):",
        "1500", "docs", ">=", "max_docs", "1000",
    ]  # fmt: skip
    assert out[2].split() == [
        "events", "delete", "events-000001:", "rolled", "over", "6m", "ago", ">=",
        "delete_after", "5m",
    ]  # fmt: skip
    # Reads only, but for the write index's refresh, which changes no document or
    # setting: the preview must count what the run will count (a search-idle shard's
    # stats stand still until a refresh).
    changing = [(method, path) for method, path, _ in fake.calls if method != "GET"]
    assert changing == [("POST", "/events-000002/_refresh")]


def test_the_preview_as_json(
    lab: tuple[FakeEngine, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, lab_json = lab
    monkeypatch.setattr(preview.time, "time", lambda: NOW)
    assert preview.main(["--plan", "--lab-json", str(lab_json), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(a["action"], a["index"]) for a in document["actions"]] == [
        ("rollover", "events-000002"),
        ("delete", "events-000001"),
    ]


def test_credentials_come_from_a_file_never_argv(
    lab: tuple[FakeEngine, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lab_json = lab
    bad = tmp_path / "creds.json"
    bad.write_text("not json")
    assert preview.main(["--plan", "--lab-json", str(lab_json), "--credentials", str(bad)]) == 2
    assert "it must be a JSON file" in capsys.readouterr().err


def test_status_has_a_lifecycle_section_per_policy(
    lab: tuple[FakeEngine, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, lab_json = lab
    monkeypatch.setattr(preview.time, "time", lambda: NOW)
    status_command.main(["--lab-json", str(lab_json), "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    (policy,) = report["lifecycle"]["policies"]
    assert policy["policy"] == "events" and policy["pattern"] == "events-*"
    assert policy["indices"] == ["events-000001", "events-000002"]
    assert policy["total_bytes"] == 200
    assert policy["oldest_age_seconds"] >= 400
    # 200 bytes over a 150-byte cap: a problem.
    assert any("over its max_total_size" in problem for problem in report["problems"])
    lines = preview.status_lines(report["lifecycle"], NOW)
    assert lines[0].startswith("lifecycle last run: not known here")
    assert lines[1].startswith("lifecycle events  events-*  2 indices  200b of 150b  oldest ")
