"""The lab's apps container: its inventory groups, its token file, and lab.json's fields."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from clusterforge.lab.cluster import (
    APPS_HOST,
    ORDERS_PORT,
    USER_DIRECTORY_PORT,
    USER_DIRECTORY_TOKEN,
    Lab,
    LabNode,
    _service_facts,
)

NODES = [LabNode(f"opensearch-{index}", f"127.0.0.{10 + index}", 2222) for index in (1, 2, 3)]
APPS = LabNode(APPS_HOST, "127.0.0.21", 2222)


def _lab(tmp_path: Path) -> Lab:
    lab_dir = tmp_path / "inventories" / "lab"
    lab_dir.mkdir(parents=True)
    return Lab(repo=tmp_path, lab_dir=lab_dir)


def test_the_apps_host_carries_both_services_and_a_token_it_reads_from_a_0600_file(
    tmp_path: Path,
) -> None:
    lab = _lab(tmp_path)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=APPS)

    hosts = yaml.safe_load((lab.lab_dir / "hosts.yml").read_text())
    children = hosts["all"]["children"]
    assert list(children["opensearch"]["hosts"]) == [node.inventory_name for node in NODES]
    assert children["user_directory"]["hosts"][APPS_HOST]["ansible_host"] == "127.0.0.21"
    assert APPS_HOST in children["order_service"]["hosts"]

    user_directory = yaml.safe_load((lab.lab_dir / "group_vars" / "user_directory.yml").read_text())
    orders = yaml.safe_load((lab.lab_dir / "group_vars" / "order_service.yml").read_text())
    assert user_directory["user_directory_host"] == "127.0.0.21"
    assert user_directory["user_directory_port"] == USER_DIRECTORY_PORT
    assert orders["order_service_port"] == ORDERS_PORT

    token_file = lab.secret_file(USER_DIRECTORY_TOKEN)
    token = token_file.read_text()
    assert len(token) >= 16  # the role's minimum
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    # The inventory names the file; the token itself is in no inventory file.
    assert user_directory["user_directory_auth_tokens"] == [
        "{{ lookup('ansible.builtin.file', '" + str(token_file) + "') }}"
    ]
    for written in lab.lab_dir.rglob("*.yml"):
        assert token not in written.read_text(), written


def test_no_apps_leaves_the_service_groups_and_their_variables_out(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=APPS)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=None)

    children = yaml.safe_load((lab.lab_dir / "hosts.yml").read_text())["all"]["children"]
    assert set(children) == {"opensearch"}
    assert not (lab.lab_dir / "group_vars" / "user_directory.yml").exists()
    assert not (lab.lab_dir / "group_vars" / "order_service.yml").exists()


def test_lab_json_gives_base_urls_and_the_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / USER_DIRECTORY_TOKEN
    assert _service_facts(APPS, token_file) == {
        "services": {
            "user_directory": f"http://127.0.0.21:{USER_DIRECTORY_PORT}",
            "orders": f"http://127.0.0.21:{ORDERS_PORT}",
        },
        "user_directory_token_file": str(token_file),
    }
    assert _service_facts(None, token_file) == {"services": {}}
