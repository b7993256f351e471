"""clusterforge.plan.validation.validate_inventory: the one check behind the playbooks' first play,
build_plan and scripts/render (issue 31, item 5). It writes nothing on the control node."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.pki.certificates import CA_PASSPHRASE_ENV
from clusterforge.plan.plan import build_plan
from clusterforge.plan.services.orders_search import generated_password_path
from clusterforge.plan.validation import REVIEW_WARNING_SUFFIX, validate_inventory

PASSWORDS = {
    "admin": "Check-Admin-2b7d",
    "kibanaserver": "Check-Kibanaserver-2b7d",
    "logstash": "Check-Logstash-2b7d",
    "kibana": "Check-Kibana-2b7d",
}
SMARTCN = {"name": "analysis-smartcn", "source": "build", "path": "engine-plugins/analysis-smartcn"}


@pytest.fixture(autouse=True)
def _no_passphrase_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CA_PASSPHRASE_ENV, raising=False)


def nodes(inventory: Path, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    common: dict[str, Any] = {
        "opensearch_security_mode": "tls",
        "opensearch_pki_dir": str(inventory / ".pki"),
        "opensearch_ca_passphrase": "check-ca-Passphrase-2b7d",
        "opensearch_security_passwords": PASSWORDS,
        "opensearch_plugins": [SMARTCN],
        **overrides,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{40 + i}", **common}) for i in (1, 2, 3)]


def plugin_zip(path: Path, name: str, engine: str) -> Path:
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr(
            "plugin-descriptor.properties",
            f"name={name}\nversion={engine}\nopensearch.version={engine}\n"
            "java.version=11\nclassname=org.example.Fake\ndescription=fake\n",
        )
    return path


def files_under(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def test_the_check_of_a_tls_inventory_with_order_delivery_writes_nothing(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    validated = validate_inventory(
        nodes(inventory),
        inventory_dir=inventory,
        services_vars={"order_service": [("apps-1", {"tls_proxy_listen_address": "127.0.0.1"})]},
    )
    assert validated.orders_search is not None  # delivery is on: a password to generate
    assert files_under(inventory) == [], "the check wrote on the control node"
    # The plan, after the hosts answered, issues the PKI and generates the password.
    plan = build_plan(
        nodes(inventory),
        inventory_dir=inventory,
        fetch=False,
        services_vars={"order_service": [("apps-1", {"tls_proxy_listen_address": "127.0.0.1"})]},
    )
    password_file = generated_password_path(inventory, "orders-writer")
    assert password_file.is_file()
    assert (inventory / ".pki" / "ca.pem").is_file()
    settings = plan["services"]["apps-1"]["order_service"]
    assert "not-generated" not in str(settings)


def test_a_missing_ca_passphrase_is_named(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as refused:
        validate_inventory(nodes(tmp_path, opensearch_ca_passphrase=""), inventory_dir=tmp_path)
    assert any(p.startswith("opensearch_ca_passphrase is not set") for p in refused.value.problems)
    assert not (tmp_path / ".pki").exists()


def test_a_wrong_ca_passphrase_is_refused_before_anything_is_issued(tmp_path: Path) -> None:
    build_plan(nodes(tmp_path), inventory_dir=tmp_path, fetch=False)
    before = {path: path.read_bytes() for path in (tmp_path / ".pki").rglob("*") if path.is_file()}
    with pytest.raises(InventoryError) as refused:
        build_plan(
            nodes(tmp_path, opensearch_ca_passphrase="another-Passphrase-77"),
            inventory_dir=tmp_path,
            fetch=False,
        )
    assert "opensearch_ca_passphrase" in str(refused.value)
    assert "cannot be decrypted" in str(refused.value)
    after = {path: path.read_bytes() for path in (tmp_path / ".pki").rglob("*") if path.is_file()}
    assert after == before


def test_a_file_plugin_for_another_engine_is_refused_by_a_review_too(tmp_path: Path) -> None:
    archive = plugin_zip(tmp_path / "fake.zip", "analysis-fake", "2.11.0")
    plugins = [SMARTCN, {"name": "analysis-fake", "source": "file", "path": str(archive)}]
    with pytest.raises(InventoryError) as refused:
        # fetch=False is scripts/render's plan: it reads the zip where it lies.
        build_plan(nodes(tmp_path, opensearch_plugins=plugins), inventory_dir=tmp_path, fetch=False)
    text = str(refused.value)
    assert "opensearch_plugins entry 'analysis-fake' (source: file)" in text
    assert "2.11.0" in text
    assert not (tmp_path / ".pki").exists()


def test_a_file_plugin_zip_of_another_plugin_is_refused(tmp_path: Path) -> None:
    archive = plugin_zip(tmp_path / "fake.zip", "analysis-other", "2.19.4")
    plugins = [SMARTCN, {"name": "analysis-fake", "source": "file", "path": str(archive)}]
    with pytest.raises(InventoryError) as refused:
        validate_inventory(nodes(tmp_path, opensearch_plugins=plugins), inventory_dir=tmp_path)
    assert "holds plugin 'analysis-other', not 'analysis-fake'" in str(refused.value)


def test_a_missing_local_archive_is_refused_by_a_deploy_and_a_warning_in_a_review(
    tmp_path: Path,
) -> None:
    plugins = [SMARTCN, {"name": "x", "source": "file", "path": str(tmp_path / "none.zip")}]
    with pytest.raises(InventoryError) as refused:
        validate_inventory(nodes(tmp_path, opensearch_plugins=plugins), inventory_dir=tmp_path)
    assert "is not a file on the control node" in str(refused.value)
    reviewed = validate_inventory(
        nodes(tmp_path, opensearch_plugins=plugins), inventory_dir=tmp_path, review=True
    )
    assert [w for w in reviewed.warnings if w.endswith(REVIEW_WARNING_SUFFIX)]


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as refused:
        validate_inventory(
            nodes(
                tmp_path,
                opensearch_ca_passphrase="",
                opensearch_distribution_source="file",
                opensearch_distribution_path=str(tmp_path / "none.tar.gz"),
            ),
            inventory_dir=tmp_path,
            services_vars={"user_directory": [("apps-1", {"user_directory_port": 0})]},
        )
    text = "\n".join(refused.value.problems)
    for variable in (
        "opensearch_ca_passphrase",
        "opensearch_distribution_path",
        "user_directory_port",
    ):
        assert variable in text


def test_a_services_only_inventory_is_checked_without_a_cluster(tmp_path: Path) -> None:
    validated = validate_inventory(
        [],
        inventory_dir=tmp_path,
        services_vars={"user_directory": [("apps-1", {"tls_proxy_listen_address": "127.0.0.1"})]},
    )
    assert validated.cluster is None
    with pytest.raises(InventoryError) as refused:
        validate_inventory(
            [],
            inventory_dir=tmp_path,
            services_vars={"user_directory": [("apps-1", {"user_directory_port": "x"})]},
        )
    assert "user_directory_port" in str(refused.value)
