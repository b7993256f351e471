"""clusterforge_host_certificate (the db host's certificate for PostgreSQL over TLS) and
the CA resolution it shares with the TLS proxy's action (issue 39)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from clusterforge.plan.cluster.host_certificates import ca_bundle_pem, issuing_ca_for_task
from collection_plugins import load_plugin

host_certificate = load_plugin("action", "clusterforge_host_certificate")
PASSPHRASE = "test-passphrase-0123456789"


def _identity(value: Any) -> Any:
    return value


def services_only_vars(tmp_path: Path, host: str = "db-1", **extra: Any) -> dict[str, Any]:
    """An inventory of a db host and a service host, no opensearch group."""
    hostvars = {
        "db-1": {"inventory_dir": str(tmp_path), "postgresql_listen_addresses": ["10.0.0.5"]},
        "apps-1": {"inventory_dir": str(tmp_path)},
    }
    return {
        "inventory_hostname": host,
        "inventory_dir": str(tmp_path),
        "groups": {"postgresql": ["db-1"], "user_directory": ["apps-1"]},
        "hostvars": hostvars,
        "opensearch_ca_passphrase": PASSPHRASE,
        **extra,
    }


@pytest.fixture
def run_action(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def run(args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        module = object.__new__(host_certificate.ActionModule)
        module._task = SimpleNamespace(args=args, check_mode=False)
        module._templar = SimpleNamespace(template=_identity)
        result: dict[str, Any] = module.run(task_vars=task_vars)
        return result

    return run


def _names(certificate_pem: str) -> tuple[set[str], set[str]]:
    certificate = x509.load_pem_x509_certificate(certificate_pem.encode())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (
        {str(name) for name in names.get_values_for_type(x509.DNSName)},
        {str(address) for address in names.get_values_for_type(x509.IPAddress)},
    )


def test_the_db_host_gets_a_server_certificate_for_its_names_and_addresses(
    tmp_path: Path, run_action: Any
) -> None:
    task_vars = services_only_vars(tmp_path)
    args = {"purpose": "postgresql", "alt_names": ["", "10.0.0.5", "db.example.org", "10.0.0.5"]}
    issued = run_action(args, task_vars)
    # The key is in the result, so the result is no_log.
    assert issued["_ansible_no_log"] is True
    assert issued["changed"] is True
    assert "PRIVATE KEY" in issued["key_pem"]
    assert _names(issued["certificate_pem"]) == ({"db-1", "db.example.org"}, {"10.0.0.5"})
    certificate = x509.load_pem_x509_certificate(issued["certificate_pem"].encode())
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    unit = certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0]
    assert unit.value == "clusterforge database"
    assert f"{certificate.serial_number:x}" == issued["serial"]
    # The CA of the inventory's own .pki issued it, and its bundle verifies it.
    bundle = x509.load_pem_x509_certificates(issued["ca_bundle_pem"].encode())
    assert [ca.subject for ca in bundle] == [certificate.issuer]
    assert (tmp_path / ".pki" / "hosts" / "db-1.database.pem").is_file()
    # Reused on the next run (the rerun changes nothing); issued again on renew.
    again = run_action(args, task_vars)
    assert not again["changed"] and again["serial"] == issued["serial"]
    renewed = run_action({**args, "renew": True}, task_vars)
    assert renewed["changed"] and renewed["serial"] != issued["serial"]


def test_a_client_host_gets_the_bundle_only(tmp_path: Path, run_action: Any) -> None:
    issued = run_action({"purpose": "postgresql"}, services_only_vars(tmp_path))
    client = run_action(
        {"purpose": "postgresql", "bundle_only": True}, services_only_vars(tmp_path, "apps-1")
    )
    assert client == {"changed": False, "ca_bundle_pem": issued["ca_bundle_pem"]}
    assert not (tmp_path / ".pki" / "hosts" / "apps-1.database.pem").exists()


def test_an_existing_ca_gives_its_bundle_without_the_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    created = ca_bundle_pem(issuing_ca_for_task(services_only_vars(tmp_path), _identity).ca)
    assert "BEGIN CERTIFICATE" in created
    without = services_only_vars(tmp_path)
    del without["opensearch_ca_passphrase"]
    assert ca_bundle_pem(issuing_ca_for_task(without, _identity).ca) == created


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"purpose": "web"},
            "purpose is 'web'; set it to one of monitoring, node_exporter, postgresql, tls_proxy",
        ),
        ({"purpose": "postgresql", "alt_names": "10.0.0.5"}, "alt_names must be a list"),
    ],
)
def test_wrong_arguments_are_refused_with_the_fix(
    tmp_path: Path, run_action: Any, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(AnsibleActionFail, match=message):
        run_action(args, services_only_vars(tmp_path))


def test_a_missing_passphrase_names_what_to_set(
    tmp_path: Path, run_action: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    task_vars = services_only_vars(tmp_path)
    del task_vars["opensearch_ca_passphrase"]
    with pytest.raises(AnsibleActionFail, match="db-1: the CA key passphrase is empty"):
        run_action({"purpose": "postgresql"}, task_vars)


def test_without_a_cluster_the_profile_is_the_schemas_and_the_ca_the_inventorys(
    tmp_path: Path,
) -> None:
    found = issuing_ca_for_task(
        services_only_vars(tmp_path, opensearch_pki_dir=str(tmp_path / "elsewhere")), _identity
    )
    assert found.ca.pki_dir == tmp_path / "elsewhere"
    assert found.ca.passphrase == PASSPHRASE.encode()
    assert "TLSv1.2" in found.tls_protocols
    assert found.tls_ciphers and all("CBC" not in name for name in found.tls_ciphers)
    default = issuing_ca_for_task(services_only_vars(tmp_path), _identity)
    assert default.ca.pki_dir == tmp_path / ".pki"


def cluster_vars(tmp_path: Path) -> dict[str, Any]:
    """A db host beside a cluster: the CA and the TLS profile are the cluster's."""
    passwords = {user: f"Passw0rd-long-enough-{user}" for user in ("admin", "kibanaserver")}
    passwords |= {user: f"Passw0rd-long-enough-{user}" for user in ("logstash", "kibana")}
    node = {
        "inventory_dir": str(tmp_path / "inventory"),
        "ansible_host": "10.0.0.11",
        "opensearch_cluster_name": "prod-search",
        "opensearch_ca_passphrase": PASSPHRASE,
        "opensearch_tls_protocols": ["TLSv1.3"],
        "opensearch_security_passwords": passwords,
    }
    return {
        "inventory_hostname": "db-1",
        "inventory_dir": str(tmp_path / "elsewhere"),
        "groups": {"opensearch": ["os-1"], "postgresql": ["db-1"]},
        "hostvars": {"os-1": node, "db-1": {}},
        # The task host's own opensearch_* are not the cluster's: they are not read.
        "opensearch_ca_passphrase": "not-the-clusters-passphrase",
    }


def test_beside_a_cluster_the_clusters_ca_and_profile_serve(
    tmp_path: Path, run_action: Any
) -> None:
    found = issuing_ca_for_task(cluster_vars(tmp_path), _identity)
    assert found.ca.pki_dir == tmp_path / "inventory" / ".pki"
    assert found.ca.passphrase == PASSPHRASE.encode()
    assert found.ca.cluster_name == "prod-search"
    assert found.tls_protocols == ("TLSv1.3",)
    issued = run_action(
        {"purpose": "postgresql", "alt_names": ["10.0.0.5"]}, cluster_vars(tmp_path)
    )
    certificate = x509.load_pem_x509_certificate(issued["certificate_pem"].encode())
    common_name = certificate.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert str(common_name).startswith("prod-search")
    assert (tmp_path / "inventory" / ".pki" / "hosts" / "db-1.database.pem").is_file()
