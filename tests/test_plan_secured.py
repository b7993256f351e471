"""The plan of a secured cluster: certificates issued once, DNs read back, hashes reused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.hashing import verify_password
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster_security import SECURITY_FILES_OMITTED, render_cluster_security
from clusterforge.plan.plan import PLAN_SECTIONS, build_plan, with_observed
from nodes_dn_matcher import admits

PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}


def secured_nodes(
    pki_dir: Path, mode: str = "tls", **overrides: Any
) -> list[tuple[str, dict[str, Any]]]:
    common = {
        "opensearch_security_mode": mode,
        "opensearch_pki_dir": str(pki_dir),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
        **overrides,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **common}) for i in (1, 2, 3)]


def settings(plan: dict[str, Any], node: str, name: str = "opensearch.yml") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(plan["nodes"][node]["files"][name])
    return loaded


def subject_of(path: str) -> str:
    return (
        subprocess.run(
            ["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in", path],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .removeprefix("subject=")
    )


def test_tls_plan_writes_the_dns_the_certificates_report(tmp_path: Path) -> None:
    plan = build_plan(secured_nodes(tmp_path), fetch=False)
    node_settings = settings(plan, "os-1")
    assert node_settings["plugins.security.disabled"] is False
    assert node_settings["plugins.security.ssl.http.enabled"] is True
    assert node_settings["plugins.security.ssl.transport.pemcert_filepath"] == "certs/live/node.pem"
    expected_nodes_dn = [subject_of(str(tmp_path / f"os-{i}.pem")) for i in (1, 2, 3)]
    # One pattern (scale out: a node added later is admitted without a restart).
    assert len(node_settings["plugins.security.nodes_dn"]) == 1
    for dn in expected_nodes_dn:
        assert admits(node_settings["plugins.security.nodes_dn"], dn)
    assert not admits(
        node_settings["plugins.security.nodes_dn"], subject_of(str(tmp_path / "admin.pem"))
    )
    assert node_settings["plugins.security.authcz.admin_dn"] == [
        subject_of(str(tmp_path / "admin.pem"))
    ]
    assert expected_nodes_dn[0] == "CN=os-1,OU=clusterforge,O=clusterforge,L=Local,ST=Local,C=US"
    assert node_settings["plugins.security.restapi.roles_enabled"] == [
        "all_access",
        "security_rest_api_access",
    ]
    assert "plugins.security.allow_default_init_securityindex" not in node_settings
    assert plan["cluster"]["nodes"][0]["url"] == "https://127.0.0.61:9200"


def test_a_rerun_reuses_every_certificate(tmp_path: Path) -> None:
    first = build_plan(secured_nodes(tmp_path), fetch=False)
    mtimes = {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.pem")}
    second = build_plan(secured_nodes(tmp_path), fetch=False)
    assert first == {
        **second,
        "cluster": {**second["cluster"], "pki": {**second["cluster"]["pki"], "changed": True}},
    }
    assert second["cluster"]["pki"]["changed"] is False
    assert {path.name: path.stat().st_mtime_ns for path in tmp_path.glob("*.pem")} == mtimes


def test_a_new_address_reissues_only_that_node(tmp_path: Path) -> None:
    build_plan(secured_nodes(tmp_path), fetch=False)
    before = {path.name: path.read_bytes() for path in tmp_path.glob("os-*.pem")}
    nodes = secured_nodes(tmp_path)
    nodes[1][1]["opensearch_extra_sans"] = ["search-2.example.internal"]
    build_plan(nodes, fetch=False)
    after = {path.name: path.read_bytes() for path in tmp_path.glob("os-*.pem")}
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["os-2-key.pem", "os-2.pem"]


def test_basic_mode_lets_only_the_first_node_initialize(tmp_path: Path) -> None:
    plan = build_plan(secured_nodes(tmp_path, mode="basic"), fetch=False)
    assert settings(plan, "os-1")["plugins.security.allow_default_init_securityindex"] is True
    assert settings(plan, "os-1")["plugins.security.ssl.http.enabled"] is False
    assert "plugins.security.allow_default_init_securityindex" not in settings(plan, "os-2")
    assert plan["cluster"]["nodes"][0]["url"].startswith("http://")


def test_open_mode_disables_the_plugin(tmp_path: Path) -> None:
    plan = build_plan(
        [
            (f"os-{i}", {"ansible_host": f"127.0.0.{i}", "opensearch_security_mode": "open"})
            for i in (1, 2, 3)
        ],
        fetch=False,
    )
    assert settings(plan, "os-1")["plugins.security.disabled"] is True
    assert plan["cluster"]["pki"] is None


def test_secured_modes_need_a_ca_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    nodes = secured_nodes(tmp_path)
    for _, host_vars in nodes:
        del host_vars["opensearch_ca_passphrase"]
    with pytest.raises(Exception, match="CLUSTERFORGE_CA_PASSPHRASE"):
        build_plan(nodes, fetch=False)


@pytest.mark.parametrize(
    ("passwords", "fragment"),
    [
        ({**PASSWORDS, "admin": ""}, "opensearch_security_passwords.admin"),
        ({**PASSWORDS, "kibanaserver": "kibanaserver"}, "well-known demo"),
        ({key: value for key, value in PASSWORDS.items() if key != "logstash"}, "is not set"),
    ],
)
def test_secured_modes_refuse_bad_passwords(
    tmp_path: Path, passwords: dict[str, str], fragment: str
) -> None:
    with pytest.raises(InventoryError) as caught:
        build_cluster(secured_nodes(tmp_path, opensearch_security_passwords=passwords))
    message = str(caught.value)
    assert fragment in message
    for password in PASSWORDS.values():
        assert password not in message


def test_security_files_reuse_hashes_and_digests_only_change_with_passwords(tmp_path: Path) -> None:
    users = [{"name": "analyst", "password": "Unit-Analyst-77", "backend_roles": ["readall"]}]
    first = render_cluster_security(pki_dir=tmp_path, passwords=PASSWORDS, users=users)
    second = render_cluster_security(pki_dir=tmp_path, passwords=PASSWORDS, users=users)
    assert first == second
    document = yaml.safe_load(first["files"]["internal_users.yml"])
    assert verify_password(PASSWORDS["admin"], document["admin"]["hash"])
    assert verify_password("Unit-Analyst-77", document["analyst"]["hash"])
    assert (tmp_path / "internal_users.hashes.json").stat().st_mode & 0o777 == 0o600
    changed = render_cluster_security(
        pki_dir=tmp_path, passwords={**PASSWORDS, "kibana": "Unit-Kibana-new"}, users=users
    )
    differing = sorted(
        kind for kind in first["digests"] if first["digests"][kind] != changed["digests"][kind]
    )
    assert differing == ["internalusers"]
    for text in changed["files"].values():
        assert "Unit-Kibana-new" not in text


def test_check_records_spare_bcrypt_only_while_key_hash_and_password_all_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun keeps every hash without bcrypt; a changed password, another key (a new CA)
    or an edited hash each fall back to bcrypt for the users concerned."""
    import clusterforge.plan.cluster_security as cluster_security

    checked: list[str] = []
    real_reuse_or_hash = cluster_security.reuse_or_hash

    def counting(password: str, existing_hash: str | None) -> str:
        checked.append(password)
        return real_reuse_or_hash(password, existing_hash)

    monkeypatch.setattr(cluster_security, "reuse_or_hash", counting)
    key = b"k" * 32
    state_path = tmp_path / "internal_users.hashes.json"

    first = render_cluster_security(pki_dir=tmp_path, passwords=PASSWORDS, users=[], check_key=key)
    assert sorted(checked) == sorted(PASSWORDS.values())
    state = state_path.read_text()
    for password in PASSWORDS.values():
        assert password not in state
    assert state_path.stat().st_mode & 0o777 == 0o600

    checked.clear()
    again = render_cluster_security(pki_dir=tmp_path, passwords=PASSWORDS, users=[], check_key=key)
    assert (checked, again) == ([], first)
    assert state_path.read_text() == state  # nothing to write on a rerun

    changed = {**PASSWORDS, "kibana": "Unit-Kibana-changed"}
    checked.clear()
    render_cluster_security(pki_dir=tmp_path, passwords=changed, users=[], check_key=key)
    assert checked == ["Unit-Kibana-changed"]

    checked.clear()
    other_ca = render_cluster_security(
        pki_dir=tmp_path, passwords=changed, users=[], check_key=b"n" * 32
    )
    assert sorted(checked) == sorted(changed.values())
    # bcrypt still verified every kept hash, so the files stay the same.
    assert (
        other_ca["digests"]
        == render_cluster_security(
            pki_dir=tmp_path, passwords=changed, users=[], check_key=b"n" * 32
        )["digests"]
    )

    edited = state_path.read_text().replace('"admin": "$2', '"admin": "$2X', 1)
    state_path.write_text(edited)
    checked.clear()
    render_cluster_security(pki_dir=tmp_path, passwords=changed, users=[], check_key=b"n" * 32)
    assert checked == [PASSWORDS["admin"]]


def test_a_hash_file_from_before_the_check_records_is_reused(tmp_path: Path) -> None:
    first = render_cluster_security(pki_dir=tmp_path, passwords=PASSWORDS, users=[])
    state_path = tmp_path / "internal_users.hashes.json"
    hashes = json.loads(state_path.read_text())["hashes"]
    state_path.write_text(json.dumps(hashes))  # the old form: {user: hash}
    again = render_cluster_security(
        pki_dir=tmp_path, passwords=PASSWORDS, users=[], check_key=b"k" * 32
    )
    assert again == first
    assert json.loads(state_path.read_text())["hashes"] == hashes


def test_the_plan_keys_its_check_records_with_the_ca_key(tmp_path: Path) -> None:
    from clusterforge.plan.cluster.cluster_pki import ensure_cluster_pki

    nodes = secured_nodes(tmp_path)
    build_plan(nodes, fetch=False)
    records = json.loads((tmp_path / "internal_users.hashes.json").read_text())["checks"]
    assert sorted(records) == sorted(PASSWORDS)
    pki = ensure_cluster_pki(
        build_cluster(nodes), pki_dir=tmp_path, passphrase=b"unit-test-passphrase"
    )
    assert len(pki.hash_check_key) == 32
    assert "hash_check_key" not in repr(pki)
    assert pki.hash_check_key.hex() not in (tmp_path / "internal_users.hashes.json").read_text()


def test_the_default_pki_dir_is_hidden_from_ansibles_inventory_loader(tmp_path: Path) -> None:
    from clusterforge.plan.cluster.cluster_pki import resolve_pki_dir

    nodes = secured_nodes(tmp_path, opensearch_pki_dir="")
    assert resolve_pki_dir(build_cluster(nodes), Path("/inventory")) == Path("/inventory/.pki")


def test_the_second_plan_step_decides_only_the_rollout_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    """playbooks/plan.yml's second call (with_observed) gives the plan one full call with
    the same observations gives, while reusing the first call's files and hashes."""
    nodes = secured_nodes(tmp_path)
    observed = {
        name: {
            "active": True,
            "version": "2.19.4",
            "formed": True,
            "security_mode": "tls",
            "cluster_manager": "os-2",
        }
        for name, _ in nodes
    }
    build_plan(nodes, fetch=False)  # issues the certificates; the calls below reuse them
    first = build_plan(nodes, fetch=False)
    # A registered result carries Ansible's own keys beside the plan's sections.
    registered = {**first, "changed": False, "failed": False, "_ansible_no_log": True}
    second = with_observed(registered, nodes, observed)
    assert set(second) == set(PLAN_SECTIONS) == set(first)
    assert second == build_plan(nodes, fetch=False, observed=observed)
    assert second["rollout"] != first["rollout"]
    assert second["rollout"]["restart_order"][-1] == "os-2"


def test_a_plan_without_security_files_says_so_and_keeps_the_rest(tmp_path: Path) -> None:
    build_plan(secured_nodes(tmp_path), fetch=False)  # issues the certificates
    full = build_plan(secured_nodes(tmp_path), fetch=False)
    lean = build_plan(secured_nodes(tmp_path), fetch=False, security_files=False)
    assert lean["security"] == SECURITY_FILES_OMITTED
    assert "files" not in lean["security"]
    # Everything a rolling restart reads is the same plan.
    for section in ("cluster", "rollout", "nodes"):
        assert lean[section] == full[section]


def test_basic_mode_puts_the_users_the_plan_names_every_one_but_the_reserved(
    tmp_path: Path,
) -> None:
    user = {"name": "reader", "password": "Unit-Reader-3f9a", "backend_roles": ["readall"]}
    plan = build_plan(
        secured_nodes(tmp_path, mode="basic", opensearch_security_users=[user]), fetch=False
    )
    document = yaml.safe_load(plan["security"]["files"]["internal_users.yml"])
    reserved = {name for name, entry in document.items() if name != "_meta" and entry["reserved"]}
    assert {"admin", "kibanaserver", "logstash"} <= reserved
    api_users = plan["security"]["api_users"]
    assert set(api_users) == set(document) - reserved - {"_meta"}
    assert "reader" in api_users
    assert api_users["reader"] == {
        "hash": document["reader"]["hash"],
        "backend_roles": ["readall"],
        "attributes": document["reader"]["attributes"],
        "description": document["reader"]["description"],
    }
    assert verify_password("Unit-Reader-3f9a", api_users["reader"]["hash"])
