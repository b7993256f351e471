"""inventories/example, production-shaped: tls, CORS off, secrets in an ansible-vault file.

The inventory is read the way a playbook run reads it (Ansible's own loader, group_vars,
the vault decrypted with the example's public password) and must pass the model. No play
ever runs against it: its addresses are documentation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterforge.inventory.variables import load_inventory_nodes
from clusterforge.plan.cluster.console import build_consoles
from clusterforge.plan.cluster.model import build_cluster

EXAMPLE = Path(__file__).resolve().parents[1] / "inventories" / "example"
EXAMPLE_VAULT_PASSWORD = EXAMPLE / "EXAMPLE-ONLY-vault-password.txt"


@pytest.fixture
def vault_password(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Give Ansible's loader the vault secret, as ansible-playbook --vault-password-file does.

    load_inventory_nodes makes its own DataLoader; the subclass below hands it the secret.
    """
    from ansible.parsing import dataloader
    from ansible.parsing.vault import VaultSecret

    secret = VaultSecret(EXAMPLE_VAULT_PASSWORD.read_bytes().strip())

    class LoaderWithSecret(dataloader.DataLoader):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.set_vault_secrets([("default", secret)])

    monkeypatch.setattr(dataloader, "DataLoader", LoaderWithSecret)
    yield


def test_the_vault_file_is_encrypted() -> None:
    vault = EXAMPLE / "group_vars" / "opensearch" / "vault.yml"
    assert vault.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n")


@pytest.mark.usefixtures("vault_password")
def test_the_example_loads_and_validates_as_a_tls_cluster_without_cors() -> None:
    nodes = load_inventory_nodes(EXAMPLE, "opensearch")
    cluster = build_cluster(nodes)
    assert cluster.security_mode == "tls"
    assert cluster.cors_enabled is False
    assert [node.inventory_name for node in cluster.nodes] == ["search-1", "search-2", "search-3"]
    passwords = nodes[0][1]["opensearch_security_passwords"]
    assert sorted(passwords) == ["admin", "kibana", "kibanaserver", "logstash"]
    assert all(password.startswith("Example-Only-") for password in passwords.values())
    [console] = build_consoles(load_inventory_nodes(EXAMPLE, "dashboards"))
    assert console.inventory_name == "search-1"


def test_without_the_vault_password_the_example_does_not_load() -> None:
    with pytest.raises(Exception, match=r"(?i)vault"):
        load_inventory_nodes(EXAMPLE, "opensearch")
