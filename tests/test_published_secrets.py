"""Secrets published in this repository are refused by a deploy (issue 31, item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.cli import main
from clusterforge.errors import InventoryError
from clusterforge.inventory.variables import load_inventory_nodes, read_inventory
from clusterforge.pki.hashing import DEMO_USER_PASSWORDS
from clusterforge.pki.published_secrets import (
    PUBLISHED_SECRET_SHA256,
    is_published,
    published_secret_findings,
)
from clusterforge.plan.validation import REVIEW_WARNING_SUFFIX, validate_inventory

EXAMPLE = Path(__file__).resolve().parents[1] / "inventories" / "example"
EXAMPLE_VAULT_PASSWORD = EXAMPLE / "EXAMPLE-ONLY-vault-password.txt"


def example_vault_values() -> dict[str, str]:
    """Every value of the example's vault files, decrypted with the example's password."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    vault = VaultLib([("default", VaultSecret(EXAMPLE_VAULT_PASSWORD.read_bytes().strip()))])
    values: dict[str, str] = {}
    vault_files = sorted(EXAMPLE.rglob("vault.yml"))
    assert vault_files, "the example inventory has no vault file any more"
    for path in vault_files:
        data = yaml.safe_load(vault.decrypt(path.read_bytes()))
        values.update({f"{path.relative_to(EXAMPLE)}:{key}": str(v) for key, v in data.items()})
    return values


def test_every_value_of_the_example_vault_is_listed() -> None:
    values = example_vault_values()
    assert len(values) >= 7
    unlisted = [name for name, value in values.items() if not is_published(value)]
    assert unlisted == [], f"add their sha256 to PUBLISHED_SECRET_SHA256: {unlisted}"


def test_the_example_vault_password_itself_is_listed() -> None:
    assert is_published(EXAMPLE_VAULT_PASSWORD.read_text().strip())


def test_no_plaintext_of_a_published_secret_is_in_the_package() -> None:
    package = Path(__file__).resolve().parents[1] / "src" / "clusterforge"
    text = "\n".join(path.read_text() for path in package.rglob("*.py"))
    for value in example_vault_values().values():
        assert value not in text
    assert len(PUBLISHED_SECRET_SHA256) == len(example_vault_values()) + 1


def test_findings_name_the_variable_never_the_value() -> None:
    token = next(v for k, v in example_vault_values().items() if "user_directory" in k)
    findings = published_secret_findings(
        [
            ("app-1", {"user_directory_auth_tokens": ["fine-token-0123456789", token]}),
            ("app-2", {"user_directory_auth_tokens": [token]}),
        ]
    )
    assert len(findings) == 2
    assert findings[0].startswith("user_directory_auth_tokens[0] (on app-2)")
    assert findings[1].startswith("user_directory_auth_tokens[1] (on app-1)")
    assert all(token not in finding for finding in findings)


@pytest.mark.parametrize("demo", [*DEMO_USER_PASSWORDS.values(), "changeme", "Password"])
def test_demo_passwords_are_refused_in_secret_variables_only(demo: str) -> None:
    findings = published_secret_findings(
        [
            (
                "n1",
                {
                    "opensearch_ca_passphrase": demo,
                    "order_service_search_password": demo,
                    "opensearch_cluster_name": demo,
                },
            )
        ]
    )
    assert [finding.split(" ", 1)[0] for finding in findings] == [
        "opensearch_ca_passphrase",
        "order_service_search_password",
    ]


def _example_copy(tmp_path: Path) -> Path:
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example)
    return example


def _inventory_vars(
    inventory: Path,
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    read = read_inventory(inventory, vault_password_file=EXAMPLE_VAULT_PASSWORD)
    return read.nodes, read.services


def test_a_deploy_of_the_example_secrets_is_refused_naming_each_variable(tmp_path: Path) -> None:
    example = _example_copy(tmp_path)
    nodes, services = _inventory_vars(example)
    with pytest.raises(InventoryError) as refused:
        validate_inventory(nodes, inventory_dir=example, services_vars=services)
    text = str(refused.value)
    for variable in (
        "opensearch_ca_passphrase",
        "opensearch_security_passwords.admin",
        "opensearch_security_passwords.kibanaserver",
        "opensearch_security_passwords.logstash",
        "opensearch_security_passwords.kibana",
        "opensearch_security_users[0].password",
        "user_directory_auth_tokens[0]",
    ):
        assert f"{variable} (on " in text, variable
    for value in example_vault_values().values():
        assert value not in text
    assert not (example / ".pki").exists(), "the check wrote a PKI"


def test_render_of_the_example_renders_and_warns_why_it_would_not_deploy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _example_copy(tmp_path)
    out = tmp_path / "out"
    argv = ["render", "--inventory", str(example), "--out", str(out)]
    assert main([*argv, "--vault-password-file", str(EXAMPLE_VAULT_PASSWORD)]) == 0
    warnings = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")
    ]
    published = [line for line in warnings if "published in this repository" in line]
    # Six in the opensearch vault, one token in each service's vault.
    assert len(published) == 8, warnings
    assert all(line.endswith(REVIEW_WARNING_SUFFIX) for line in published)
    assert (out / "search-1" / "opensearch.yml").is_file()


def test_render_of_a_vaulted_inventory_without_its_password_says_which_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _example_copy(tmp_path)
    assert main(["render", "--inventory", str(example), "--out", str(tmp_path / "out")]) == 1
    assert "pass --vault-password-file" in capsys.readouterr().err


def test_a_yaml_error_names_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _example_copy(tmp_path)
    bad = example / "group_vars" / "opensearch" / "vars.yml"
    bad.write_text("opensearch_heap_size: 1g\nopensearch_port: : 9200\n")
    argv = ["render", "--inventory", str(example), "--out", str(tmp_path / "out")]
    assert main([*argv, "--vault-password-file", str(EXAMPLE_VAULT_PASSWORD)]) == 1
    assert f"{bad}:2:" in capsys.readouterr().err


def test_loading_nodes_alone_still_works_for_the_example() -> None:
    nodes = load_inventory_nodes(EXAMPLE, "opensearch", vault_password_file=EXAMPLE_VAULT_PASSWORD)
    assert [name for name, _ in nodes] == ["search-1", "search-2", "search-3"]
