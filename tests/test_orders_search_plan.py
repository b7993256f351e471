"""Orders in the cluster: the plan wires the order service's delivery from the one inventory.

A tls cluster plus hosts in order_service: the service's orders.search gets every node's
https URL, the CA bundle the role places, and an internal user whose password is vaulted
or generated once (0600) on the control node; internal_users.yml gets that user with a
bcrypt hash and the two roles; the index template comes from the plan. The password
appears in the settings file's content and nowhere else.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.hashing import verify_password
from clusterforge.plan.plan import build_plan, host_files
from clusterforge.plan.services.orders_search import (
    READER_ROLE,
    WRITER_ROLE,
    generated_password_path,
    index_template,
    plan_orders_search,
    read_or_generate_password,
)
from clusterforge.plan.services.services_plan import (
    DEFAULT_PROJECT_ROOT,
    plan_services,
    service_hosts_variables,
    settings_module,
)

PASSWORDS = {
    "admin": "Unit-Admin-7c1e",
    "kibanaserver": "Unit-Kibanaserver-7c1e",
    "logstash": "Unit-Logstash-7c1e",
    "kibana": "Unit-Kibana-7c1e",
}
SMARTCN = {"name": "analysis-smartcn", "source": "build", "path": "engine-plugins/analysis-smartcn"}
VAULTED = "Unit-Vaulted-Orders-Writer-7c1e"


def cluster_nodes(
    inventory: Path, mode: str = "tls", *, plugins: list[Any] | None = None, **overrides: Any
) -> list[tuple[str, dict[str, Any]]]:
    common: dict[str, Any] = {
        "opensearch_security_mode": mode,
        "opensearch_plugins": [SMARTCN] if plugins is None else plugins,
        **overrides,
    }
    if mode != "open":
        common.update(
            opensearch_pki_dir=str(inventory / ".pki"),
            opensearch_ca_passphrase="unit-test-passphrase",
            opensearch_security_passwords=PASSWORDS,
        )
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{70 + i}", **common}) for i in (1, 2, 3)]


# The order service reached on loopback alone (its TLS proxy there): it may run without
# a token, which these tests of delivery do not care about.
LOOPBACK_PROXY = {"tls_proxy_listen_address": "127.0.0.1"}


def plan_with_orders(
    inventory: Path, mode: str = "tls", *, service: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    return build_plan(
        cluster_nodes(inventory, mode, **kwargs),
        inventory_dir=inventory,
        fetch=False,
        services_vars={"order_service": [("apps-1", {**LOOPBACK_PROXY, **(service or {})})]},
    )


def problems(error: pytest.ExceptionInfo[InventoryError]) -> str:
    return "\n".join(error.value.problems)


@pytest.fixture(scope="module")
def tls_inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inventory")


@pytest.fixture(scope="module")
def tls_plan(tls_inventory: Path) -> dict[str, Any]:
    return plan_with_orders(tls_inventory)


def test_a_tls_cluster_turns_delivery_on_with_every_nodes_url(tls_plan: dict[str, Any]) -> None:
    search = tls_plan["services"]["apps-1"]["order_service"]["public"]["orders"]["search"]
    assert search["urls"] == [f"https://127.0.0.{70 + i}:9200" for i in (1, 2, 3)]
    assert search["urls"] == [node["url"] for node in tls_plan["cluster"]["nodes"]]
    # Where the order_service role copies the cluster's CA bundle.
    assert search["ca-file"] == "/etc/clusterforge-orders/ca-bundle.pem"
    assert search["username"] == "orders-writer"
    assert search["index"] == "orders"
    assert tls_plan["orders_search"]["enabled"] is True
    assert tls_plan["orders_search"]["ca_bundle"] == tls_plan["cluster"]["pki"]["ca_cert"]


def test_the_password_is_generated_once_0600_and_reused(tls_inventory: Path) -> None:
    path = tls_inventory / ".opensearch" / "orders-writer.password"
    assert path == generated_password_path(tls_inventory, "orders-writer")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    first = path.read_text()
    assert len(first.strip()) >= 40
    before = path.stat().st_mtime_ns
    assert read_or_generate_password(path) == first.strip()
    assert path.stat().st_mtime_ns == before
    assert [entry.name for entry in path.parent.iterdir()] == ["orders-writer.password"]


def test_a_loosened_password_file_is_made_0600_again(tmp_path: Path) -> None:
    path = generated_password_path(tmp_path, "orders-writer")
    password = read_or_generate_password(path)
    path.chmod(0o644)
    path.parent.chmod(0o755)
    assert read_or_generate_password(path) == password
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_rerun_renders_identical_files_with_the_same_password(
    tls_inventory: Path, tls_plan: dict[str, Any]
) -> None:
    again = plan_with_orders(tls_inventory)
    assert again["security"]["files"] == tls_plan["security"]["files"]
    assert again["orders_search"] == tls_plan["orders_search"]


def test_internal_users_holds_the_user_with_a_bcrypt_hash_of_the_password(
    tls_inventory: Path, tls_plan: dict[str, Any]
) -> None:
    users = yaml.safe_load(tls_plan["security"]["files"]["internal_users.yml"])
    writer = users["orders-writer"]
    assert re.fullmatch(r"\$2[aby]\$12\$[./A-Za-z0-9]{53}", writer["hash"])
    password = (tls_inventory / ".opensearch" / "orders-writer.password").read_text().strip()
    assert verify_password(password, writer["hash"])
    assert writer["backend_roles"] == []
    assert writer["reserved"] is False


def test_the_two_roles_have_exactly_their_permissions(tls_plan: dict[str, Any]) -> None:
    roles = yaml.safe_load(tls_plan["security"]["files"]["roles.yml"])
    assert roles[WRITER_ROLE]["cluster_permissions"] == ["indices:data/write/bulk"]
    assert roles[WRITER_ROLE]["index_permissions"] == [
        {
            "index_patterns": ["orders*"],
            "allowed_actions": [
                "indices:admin/create",
                "indices:data/write/bulk*",
                "indices:data/write/index",
            ],
        }
    ]
    assert roles[READER_ROLE]["cluster_permissions"] == ["cluster_composite_ops_ro"]
    assert roles[READER_ROLE]["index_permissions"] == [
        {"index_patterns": ["orders*"], "allowed_actions": ["read"]}
    ]
    for role in (WRITER_ROLE, READER_ROLE):
        assert set(roles[role]) == {"description", "cluster_permissions", "index_permissions"}


def test_only_the_orders_user_gets_the_writer_and_nobody_the_reader(
    tls_plan: dict[str, Any],
) -> None:
    mappings = yaml.safe_load(tls_plan["security"]["files"]["roles_mapping.yml"])
    assert mappings[WRITER_ROLE]["users"] == ["orders-writer"]
    assert "backend_roles" not in mappings[WRITER_ROLE]
    # The backend role nobody holds until the inventory gives it to a user.
    assert mappings[READER_ROLE]["backend_roles"] == [READER_ROLE]
    assert "users" not in mappings[READER_ROLE]
    users = yaml.safe_load(tls_plan["security"]["files"]["internal_users.yml"])
    holders = [
        name
        for name, user in users.items()
        if name != "_meta" and READER_ROLE in user.get("backend_roles", [])
    ]
    assert holders == []


def without_settings_files(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` without its services' settings files (``content``), the one place of the
    plan that holds their secrets."""
    return {
        **plan,
        "services": {
            host: {
                service: {key: value for key, value in settings.items() if key != "content"}
                for service, settings in by_service.items()
            }
            for host, by_service in plan["services"].items()
        },
    }


def test_no_public_part_holds_the_password(tls_inventory: Path, tls_plan: dict[str, Any]) -> None:
    """The password is in one place of the plan: the order service host's settings file
    (``services[host].order_service.content``), which its role copies (issue 41); the
    files a review writes (host_files) and every other section hold none."""
    password = (tls_inventory / ".opensearch" / "orders-writer.password").read_text().strip()
    planned = tls_plan["services"]["apps-1"]["order_service"]
    assert yaml.safe_load(planned["content"])["orders"]["search"]["password"] == password
    assert password not in json.dumps(without_settings_files(tls_plan), default=repr)
    assert password not in json.dumps(host_files(tls_plan))
    assert planned["public"]["orders"]["search"]["password"] == "<secret: left out>"
    assert password not in planned["public_content"]


def test_the_settings_files_content_has_the_password_and_the_service_accepts_it(
    tls_inventory: Path,
) -> None:
    from clusterforge.plan.cluster.model import build_cluster
    from clusterforge.plan.services.orders_search import plan_for_cluster

    hosts = service_hosts_variables("order_service", [("apps-1", {})])
    search = plan_for_cluster(
        build_cluster(cluster_nodes(tls_inventory)), hosts, inventory_dir=tls_inventory
    )
    assert search is not None
    password = (tls_inventory / ".opensearch" / "orders-writer.password").read_text().strip()
    assert password not in repr(search)
    planned = plan_services(
        {"order_service": ["apps-1"]}, {"apps-1": LOOPBACK_PROXY}, orders_search=search
    )
    settings = planned["apps-1"]["order_service"]
    assert password not in repr(settings)
    assert password not in json.dumps(settings.as_dict())
    content = yaml.safe_load(settings.content)
    assert content["orders"]["search"]["password"] == password
    model = settings_module("order_service")
    loaded = model.OrderServiceSettings.model_validate(content)
    assert loaded.orders.search.enabled
    assert loaded.orders.search.ca_file == "/etc/clusterforge-orders/ca-bundle.pem"
    assert loaded.orders.search.username == "orders-writer"
    assert password not in repr(loaded)


def test_a_vaulted_password_is_used_and_nothing_is_generated(tmp_path: Path) -> None:
    plan = plan_with_orders(tmp_path, service={"order_service_search_password": VAULTED})
    assert not (tmp_path / ".opensearch").exists()
    assert plan["orders_search"]["password_file"] is None
    users = yaml.safe_load(plan["security"]["files"]["internal_users.yml"])
    assert verify_password(VAULTED, users["orders-writer"]["hash"])
    assert VAULTED not in json.dumps(without_settings_files(plan), default=repr)


def test_forced_on_with_an_open_or_basic_cluster_is_refused(tmp_path: Path) -> None:
    for mode in ("open", "basic"):
        with pytest.raises(InventoryError) as error:
            plan_with_orders(tmp_path, mode, service={"order_service_search_enabled": True})
        message = problems(error)
        assert "order_service_search_enabled is true" in message
        assert f"opensearch_security_mode is {mode}" in message
        assert "refuses plain http" in message
        assert "order_service_search_enabled: false" in message


def test_auto_leaves_delivery_off_for_open_and_basic_clusters(tmp_path: Path) -> None:
    plan = plan_with_orders(tmp_path, "open")
    assert plan["orders_search"] == {"enabled": False}
    search = plan["services"]["apps-1"]["order_service"]["public"]["orders"]["search"]
    assert search["urls"] == []
    assert not (tmp_path / ".opensearch").exists()


def test_turned_off_there_is_no_user_no_role_and_no_urls(tmp_path: Path) -> None:
    plan = plan_with_orders(tmp_path, service={"order_service_search_enabled": False})
    assert plan["orders_search"] == {"enabled": False}
    assert "orders-writer" not in plan["security"]["files"]["internal_users.yml"]
    assert WRITER_ROLE not in plan["security"]["files"]["roles.yml"]
    search = plan["services"]["apps-1"]["order_service"]["public"]["orders"]["search"]
    assert search["urls"] == []
    assert not (tmp_path / ".opensearch").exists()


def test_delivery_without_smartcn_is_refused_naming_the_variable_and_the_fix(
    tmp_path: Path,
) -> None:
    with pytest.raises(InventoryError) as error:
        plan_with_orders(tmp_path, plugins=[])
    message = problems(error)
    assert "opensearch_plugins has no analysis-smartcn" in message
    assert "engine-plugins/analysis-smartcn" in message
    assert "order_service_search_enabled: false" in message
    assert not (tmp_path / ".opensearch").exists()


def test_forced_on_without_a_cluster_is_refused() -> None:
    with pytest.raises(InventoryError) as error:
        plan_orders_search(
            security_mode=None,
            node_urls=(),
            plugin_names=(),
            ca_bundle=None,
            service_hosts=[("apps-1", {"order_service_search_enabled": "true"})],
            inventory_dir=Path("/nonexistent"),
        )
    assert "the inventory has no opensearch group" in problems(error)


def test_hosts_that_disagree_on_the_user_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as error:
        plan_orders_search(
            security_mode="tls",
            node_urls=["https://127.0.0.71:9200"],
            plugin_names=["analysis-smartcn"],
            ca_bundle=str(tmp_path / "ca-bundle.pem"),
            service_hosts=[
                ("apps-1", {"order_service_search_username": "orders-a"}),
                ("apps-2", {"order_service_search_username": "orders-b"}),
            ],
            inventory_dir=tmp_path,
        )
    assert "order_service_search_username differs" in problems(error)


def test_a_bad_enabled_value_and_a_demo_password_are_refused(tmp_path: Path) -> None:
    def refused(variables: dict[str, Any]) -> str:
        with pytest.raises(InventoryError) as error:
            plan_orders_search(
                security_mode="tls",
                node_urls=["https://127.0.0.71:9200"],
                plugin_names=["analysis-smartcn"],
                ca_bundle=None,
                service_hosts=[("apps-1", variables)],
                inventory_dir=tmp_path,
            )
        return problems(error)

    assert "set it to auto" in refused({"order_service_search_enabled": "maybe"})
    message = refused({"order_service_search_password": "admin"})
    assert "order_service_search_password" in message
    assert "admin" not in message.replace("set order_service_search_password", "")
    assert "order_service_search_password is empty" in refused(
        {"order_service_search_password": ""}
    )


def test_a_user_name_the_inventory_already_uses_is_refused(tmp_path: Path) -> None:
    users = [{"name": "orders-writer", "password": "Unit-Other-7c1e"}]
    with pytest.raises(InventoryError) as error:
        plan_with_orders(tmp_path, opensearch_security_users=users)
    assert "set order_service_search_username to another name" in problems(error)


def test_the_index_template_types_the_five_fields() -> None:
    template = index_template()
    assert template["index_patterns"] == ["orders*"]
    mappings = template["template"]["mappings"]
    properties = mappings["properties"]
    assert set(properties) == {"orderId", "userId", "productName", "amount", "createTime"}
    assert properties["productName"]["type"] == "text"
    assert properties["productName"]["analyzer"] == "smartcn"
    assert properties["productName"]["fields"]["keyword"]["type"] == "keyword"
    assert properties["orderId"] == {"type": "keyword"}
    assert properties["userId"] == {"type": "keyword"}
    # In cents: every engine source carries mapper-extras
    # (clusterforge.plan.cluster.engine_modules).
    assert properties["amount"] == {"type": "scaled_float", "scaling_factor": 100}
    assert properties["createTime"]["type"] == "date"
    assert mappings["dynamic"] == "strict"
    # The same body, the same digest: the role writes it only when the digest differs.
    assert index_template() == template
    assert len(template["_meta"]["clusterforge_digest"]) == 64


def test_create_time_as_the_service_writes_it_fits_the_date_format() -> None:
    # models.format_create_time writes CREATE_TIME_FORMAT; OpenSearch's
    # strict_date_hour_minute_second is yyyy-MM-dd'T'HH:mm:ss.
    models = DEFAULT_PROJECT_ROOT / "services/orders/src/clusterforge_orders/models.py"
    match = re.search(r'^CREATE_TIME_FORMAT = "([^"]+)"$', models.read_text(), re.MULTILINE)
    assert match is not None and match.group(1) == "%Y-%m-%dT%H:%M:%S"
    date_format = index_template()["template"]["mappings"]["properties"]["createTime"]["format"]
    assert date_format.split("||")[0] == "strict_date_hour_minute_second"


def test_the_role_creates_template_and_index_through_the_api_action_once() -> None:
    tasks = yaml.safe_load(
        (DEFAULT_PROJECT_ROOT / "roles/order_service/tasks/orders_index.yml").read_text()
    )
    api_tasks = [task for task in tasks if "clusterforge.stack.clusterforge_api" in task]
    assert len(api_tasks) == len(tasks) == 4
    assert all(task.get("run_once") is True for task in api_tasks)
    writes = [
        task
        for task in api_tasks
        if task["clusterforge.stack.clusterforge_api"].get("method") in ("PUT",)
    ]
    # Both writes are conditional: an unchanged template and an existing index change nothing.
    assert len(writes) == 2 and all("when" in task for task in writes)
    assert "__clusterforge_plan.orders_search.template" in json.dumps(writes[0])


def test_generation_races_keep_the_first_password(tmp_path: Path) -> None:
    path = generated_password_path(tmp_path, "orders-writer")
    path.parent.mkdir(mode=0o700)
    path.write_text("made-by-the-other-run\n")
    os.chmod(path, 0o600)
    assert read_or_generate_password(path) == "made-by-the-other-run"
