"""The plan's monitoring section (issue 42, the rerun's cost; issue 51, planned once in the
plan): build_plan plans the monitoring host and issues or reuses every host's node
exporter certificate, with the cluster model it validated.

- every host of the node exporters' groups gets its certificate and key in the plan,
  named for its ansible_host (as the per-host action named it before), under the CA that
  issued the monitoring host's own, for serverAuth;
- a second plan reuses every certificate and says nothing was issued (the rerun changes
  nothing); renew_node_exporters issues them again;
- the monitoring builds no cluster model of its own, and unlocks the CA's key once;
- the web password's hash is checked with bcrypt once: a keyed record (0600) spares the
  check on a rerun, and a replaced password still gets a new hash;
- a certificate the per-host action (clusterforge_host_certificate, as the node exporter
  role called it before) issued is reused as it is: an upgraded toolkit's first rerun
  changes no node exporter's files;
- the monitoring user is planned once: the security files hash the password the
  exporters' environment files hold.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.plugins.action import ActionBase
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import clusterforge.inventory.variables as inventory_variables
import clusterforge.plan.cluster.host_certificates as host_certificates
import clusterforge.plan.cluster.host_variables as host_variables
import clusterforge.plan.monitoring.monitoring_host as monitoring_host
from clusterforge.pki.hashing import verify_password
from clusterforge.plan.cluster.host_variables import TaskHosts, model_vars
from clusterforge.plan.monitoring.monitoring import monitoring_hosts_vars
from clusterforge.plan.plan import build_plan
from collection_plugins import load_plugin

host_certificate = load_plugin("action", "clusterforge_host_certificate")
PASSWORDS = {
    "admin": "Unit-Admin-7c1e",
    "kibanaserver": "Unit-Kibanaserver-7c1e",
    "logstash": "Unit-Logstash-7c1e",
    "kibana": "Unit-Kibana-7c1e",
}
NODES = {f"os-{i}": f"127.0.0.{70 + i}" for i in (1, 2, 3)}


def _identity(value: Any) -> Any:
    return value


def task_vars(inventory: Path) -> dict[str, Any]:
    common: dict[str, Any] = {
        "inventory_dir": str(inventory),
        "opensearch_security_mode": "tls",
        "opensearch_pki_dir": str(inventory / ".pki"),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
    }
    hostvars: dict[str, dict[str, Any]] = {
        name: {"ansible_host": address, **common} for name, address in NODES.items()
    }
    # The monitoring host has no ansible_host: its inventory name is its address.
    hostvars["mon-1"] = {
        "inventory_dir": str(inventory),
        "monitoring_cluster_password": "Unit-Monitor-Password-7c1e",
    }
    return {
        **hostvars["mon-1"],
        "inventory_hostname": "mon-1",
        "groups": {"opensearch": list(NODES), "monitoring": ["mon-1"]},
        "hostvars": hostvars,
    }


def plan_of(variables: dict[str, Any], **renew: bool) -> dict[str, Any]:
    """The whole plan, as the clusterforge_plan action asks for it (without fetching
    archives), from a task's variables."""
    hosts = TaskHosts(variables, _identity)
    return build_plan(
        model_vars(hosts, "opensearch"),
        inventory_dir=Path(variables["inventory_dir"]),
        fetch=False,
        monitoring_vars=monitoring_hosts_vars(hosts),
        monitoring_source=hosts,
        **renew,
    )


def run_monitoring(variables: dict[str, Any], **renew: bool) -> dict[str, Any]:
    """The plan's monitoring section."""
    monitoring: dict[str, Any] = plan_of(variables, **renew)["monitoring"]
    return monitoring


@pytest.fixture
def run_action(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def run(args: dict[str, Any], variables: dict[str, Any], plugin: Any) -> dict[str, Any]:
        module = object.__new__(plugin.ActionModule)
        module._task = SimpleNamespace(args=args, check_mode=False)
        module._templar = SimpleNamespace(template=_identity)
        result: dict[str, Any] = module.run(task_vars=variables)
        return result

    return run


def _certificate(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def _names(certificate: x509.Certificate) -> set[str]:
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(name) for name in names.get_values_for_type(x509.DNSName)} | {
        str(address) for address in names.get_values_for_type(x509.IPAddress)
    }


def test_one_plan_gives_every_node_exporter_its_certificate_and_reuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    build_model = inventory_variables.build_model

    def counting(source: Any, group: str = "opensearch") -> Any:
        built.append(group)
        return build_model(source, group)

    # Every name it is reached by: the plan's module and the inventory's re-export.
    monkeypatch.setattr(host_variables, "build_model", counting)
    monkeypatch.setattr(inventory_variables, "build_model", counting)
    variables = task_vars(tmp_path)
    plan = run_monitoring(variables)
    # The model the plan validated, not one of the monitoring's own.
    assert built == []
    assert plan["host"] == "mon-1"
    assert plan["issued"] is True
    certificates = plan["node_exporter"]["certificates"]
    assert set(certificates) == {*NODES, "mon-1"} == set(plan["node_exporter"]["units"])
    monitoring_ca = _certificate(plan["files"][-3]["content"]).subject
    for host, issued in certificates.items():
        certificate = _certificate(issued["certificate_pem"])
        assert "PRIVATE KEY" in issued["key_pem"]
        assert _names(certificate) == {host, NODES.get(host, host)}
        assert certificate.issuer == monitoring_ca
        usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
        unit = certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0]
        assert unit.value == "clusterforge node-exporter"
    # The rerun: the same certificates, nothing issued.
    again = run_monitoring(variables)
    assert again["issued"] is False
    assert again["node_exporter"]["certificates"] == certificates
    assert again["files"] == plan["files"]
    renewed = run_monitoring(variables, renew_node_exporters=True)
    assert renewed["issued"] is True
    for host, issued in renewed["node_exporter"]["certificates"].items():
        assert issued["certificate_pem"] != certificates[host]["certificate_pem"]
    # The monitoring host's own certificate is not renewed with them.
    assert renewed["certificate"]["serial"] == plan["certificate"]["serial"]


def test_a_certificate_the_per_host_action_issued_is_reused(
    tmp_path: Path, run_action: Any
) -> None:
    variables = task_vars(tmp_path)
    before = {}
    for host in [*NODES, "mon-1"]:
        # What roles/node_exporter asked for each host before: its ansible_host, else its
        # inventory name.
        address = variables["hostvars"][host].get("ansible_host", host)
        before[host] = run_action(
            {"purpose": "node_exporter", "alt_names": [address]},
            {**variables, "inventory_hostname": host},
            host_certificate,
        )
        assert before[host]["changed"] is True
    plan = run_monitoring(variables)
    for host, issued in plan["node_exporter"]["certificates"].items():
        assert issued["certificate_pem"] == before[host]["certificate_pem"]
        assert issued["key_pem"] == before[host]["key_pem"]


def test_the_ca_is_unlocked_once_and_bcrypt_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Path] = []
    load = host_certificates.load_or_create_ca

    def counting_load(directory: Path, **kwargs: Any) -> Any:
        loads.append(directory)
        return load(directory, **kwargs)

    checks: list[str] = []

    def counting_verify(password: str, password_hash: str) -> bool:
        checks.append(password_hash)
        return verify_password(password, password_hash)

    monkeypatch.setattr(host_certificates, "load_or_create_ca", counting_load)
    monkeypatch.setattr(monitoring_host, "verify_password", counting_verify)
    variables = task_vars(tmp_path)
    first = run_monitoring(variables)
    assert len(loads) == 1
    assert len(checks) == 1
    record = tmp_path / ".monitoring" / "web.password.check"
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    password = (tmp_path / ".monitoring" / "web.password").read_text().strip()
    assert password not in record.read_text()
    again = run_monitoring(variables)
    assert len(loads) == 2
    assert len(checks) == 1, "the rerun checked the hash with bcrypt again"
    assert again["files"] == first["files"]
    # A password replaced by hand: the record no longer matches, bcrypt says the hash is
    # stale, and a new hash (so new web configs) follows.
    (tmp_path / ".monitoring" / "web.password").write_text("Unit-New-Web-Password-0123\n")
    replaced = run_monitoring(variables)
    assert len(checks) == 2
    new_hash = (tmp_path / ".monitoring" / "web.password.bcrypt").read_text().strip()
    assert verify_password("Unit-New-Web-Password-0123", new_hash)
    assert replaced["node_exporter"]["web_config"] != first["node_exporter"]["web_config"]
    assert len(run_monitoring(variables)["files"]) == len(first["files"])
    assert len(checks) == 2


def test_the_monitoring_user_is_planned_once_for_the_security_files_and_the_exporters(
    tmp_path: Path,
) -> None:
    """The exporters' environment files hold the password whose hash the security files
    hold, and no second password file appears (the user was planned twice before: once
    for the security files, once by the monitoring's action)."""
    variables = task_vars(tmp_path)
    variables["hostvars"]["mon-1"].pop("monitoring_cluster_password")
    plan = plan_of(variables)
    monitoring = plan["monitoring"]
    password_file = Path(monitoring["cluster_password_file"])
    password = password_file.read_text().strip()
    environments = [
        entry["content"] for entry in monitoring["files"] if entry["path"].endswith(".env")
    ]
    assert len(environments) == len(NODES)
    assert all(f"ES_PASSWORD={password}" in content for content in environments)
    users = plan["security"]["files"]["internal_users.yml"]
    assert "clusterforge-monitor:" in users
    assert sorted(p.name for p in password_file.parent.iterdir()) == [password_file.name]


def test_without_a_monitoring_host_the_plan_has_no_monitoring(tmp_path: Path) -> None:
    variables = task_vars(tmp_path)
    variables["groups"] = {"opensearch": list(NODES)}
    assert plan_of(variables)["monitoring"] is None
