"""The lab's apps container: its inventory groups, its token file, and lab.json's fields."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from clusterforge.lab.cluster import (
    APPS_HOST,
    ORDER_SERVICE_TOKEN,
    ORDERS_PORT,
    USER_DIRECTORY_PORT,
    USER_DIRECTORY_TOKEN,
    Lab,
    LabNode,
)
from clusterforge.lab.summary import service_facts

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


def test_the_order_service_reads_its_own_token_from_a_0600_file(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=APPS)

    orders = yaml.safe_load((lab.lab_dir / "group_vars" / "order_service.yml").read_text())
    token_file = lab.secret_file(ORDER_SERVICE_TOKEN)
    assert token_file == lab.lab_dir / ".secrets" / "order_service_auth_token"
    token = token_file.read_text().strip()
    assert len(token) >= 16
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    # A token of its own: knowing the user directory's gives no access to the orders.
    assert token != lab.secret_file(USER_DIRECTORY_TOKEN).read_text().strip()
    assert orders["order_service_auth_tokens"] == [
        "{{ lookup('ansible.builtin.file', '" + str(token_file) + "') }}"
    ]
    for written in lab.lab_dir.rglob("*.yml"):
        assert token not in written.read_text(), written

    # A second scripts/up keeps the token the running service already has.
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=APPS)
    assert token_file.read_text().strip() == token


def test_no_apps_leaves_the_service_groups_and_their_variables_out(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=APPS)
    lab.write_inventory(NODES, network="loopback", mode="tls", apps=None)

    children = yaml.safe_load((lab.lab_dir / "hosts.yml").read_text())["all"]["children"]
    assert set(children) == {"opensearch"}
    assert not (lab.lab_dir / "group_vars" / "user_directory.yml").exists()
    assert not (lab.lab_dir / "group_vars" / "order_service.yml").exists()


def test_lab_json_gives_base_urls_and_the_token_files(tmp_path: Path) -> None:
    user_directory_token = tmp_path / USER_DIRECTORY_TOKEN
    orders_token = tmp_path / ORDER_SERVICE_TOKEN
    files = {
        "ca_cert": tmp_path / "ca-bundle.pem",
        "user_directory_token_file": user_directory_token,
        "orders_token_file": orders_token,
    }
    assert service_facts(APPS, **files) == {
        "services": {
            "user_directory": f"https://127.0.0.21:{USER_DIRECTORY_PORT}",
            "orders": f"https://127.0.0.21:{ORDERS_PORT}",
        },
        "services_ca_cert": str(tmp_path / "ca-bundle.pem"),
        "user_directory_token_file": str(user_directory_token),
        "orders_token_file": str(orders_token),
    }
    assert service_facts(None, **files) == {"services": {}}
