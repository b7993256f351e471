"""scripts/render: the inventory read as Ansible reads it, rendered by the same code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from clusterforge.cli import load_inventory_nodes, main
from clusterforge.plan import plan_cluster

EXAMPLE = Path(__file__).resolve().parents[1] / "inventories" / "example"
SECRET_VARIABLES = ("opensearch_ca_passphrase", "opensearch_security_passwords")


@pytest.fixture
def open_example(tmp_path: Path) -> Path:
    """The example inventory in open mode and without its vault.

    The example itself is tls with vaulted secrets (tests/test_schema_example.py loads it
    with its vault password); these cases check what render writes, which needs no PKI.
    """
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy)
    (copy / "group_vars" / "opensearch" / "vault.yml").unlink()
    vars_file = copy / "group_vars" / "opensearch" / "vars.yml"
    settings = yaml.safe_load(vars_file.read_text())
    for key in (*SECRET_VARIABLES, "opensearch_security_users"):
        settings.pop(key, None)
    settings["opensearch_security_mode"] = "open"
    vars_file.write_text(yaml.safe_dump(settings))
    return copy


def test_render_writes_every_node_file_of_the_example(tmp_path: Path, open_example: Path) -> None:
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(open_example), "--out", str(out)]) == 0
    nodes = sorted(path.name for path in out.iterdir())
    assert nodes == ["search-1", "search-2", "search-3"]
    settings = yaml.safe_load((out / "search-2" / "opensearch.yml").read_text())
    assert settings["cluster.name"] == "search-prod"
    assert settings["network.publish_host"] == "10.20.0.12"


def test_render_output_equals_the_plan_the_role_gets(tmp_path: Path, open_example: Path) -> None:
    out = tmp_path / "out"
    main(["render", "--inventory", str(open_example), "--out", str(out)])
    plan = plan_cluster(load_inventory_nodes(open_example, "opensearch"))
    for inventory_name, node in plan["nodes"].items():
        for name, content in node["files"].items():
            assert (out / inventory_name / name).read_text() == content


def test_a_broken_inventory_reports_and_exits_1(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    opensearch:\n      hosts:\n"
        "        a: {ansible_host: 10.0.0.1, opensearch_heap_size: 99g}\n"
        "        b: {ansible_host: 10.0.0.1}\n"
    )
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()


def test_render_writes_the_console_files(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n"
        "    opensearch:\n"
        "      hosts:\n"
        "        a: {ansible_host: 10.0.0.1, opensearch_security_mode: open}\n"
        "    dashboards:\n"
        "      hosts:\n"
        "        console: {ansible_host: 10.0.0.9, dashboards_archive_path: /srv/osd.tar.gz}\n"
    )
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    config = yaml.safe_load((out / "console" / "opensearch_dashboards.yml").read_text())
    assert config["opensearch.hosts"] == ["http://10.0.0.1:9200"]
    assert config["server.host"] == "10.0.0.9"
    assert "OSD_PATH_CONF" in (out / "console" / "opensearch-dashboards.service").read_text()
