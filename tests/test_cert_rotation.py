"""Day-two certificates (issue 12, item 2): renewal by window and on demand, the CA
rotation's bundle in each step and its order, and that renewed certificates are no
reason to restart a node with hot reload on.

Real files and real cryptography throughout; openssl (the real binary) checks chains.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.ca_rotation import (
    CA_BUNDLE_FILE,
    CaRotationOrderError,
    ca_rotation_state,
    rotate_ca,
)
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    PkiError,
    SubjectFields,
    load_certificate,
)
from clusterforge.pki.issuing import ensure_node_certificate
from clusterforge.plan.cluster.cluster_pki import ensure_cluster_pki, rotate_cluster_ca
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.cluster.render import HOT_RELOAD_SETTING
from clusterforge.plan.cluster.restarts import plan_rollout, restart_reasons
from clusterforge.plan.plan import build_plan

PASSPHRASE = "unit-test-passphrase"
PASSWORDS = {
    "admin": "Unit-Admin-3f9a",
    "kibanaserver": "Unit-Kibanaserver-3f9a",
    "logstash": "Unit-Logstash-3f9a",
    "kibana": "Unit-Kibana-3f9a",
}


def nodes(pki_dir: Path, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    common = {
        "opensearch_security_mode": "tls",
        "opensearch_pki_dir": str(pki_dir),
        "opensearch_ca_passphrase": PASSPHRASE,
        "opensearch_security_passwords": PASSWORDS,
        **overrides,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{60 + i}", **common}) for i in (1, 2, 3)]


def serial(path: Path | str) -> int:
    return load_certificate(Path(path)).serial_number


def bundle(pki_dir: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates((pki_dir / CA_BUNDLE_FILE).read_bytes())


def openssl_verifies(ca_file: Path, certificate: Path) -> bool:
    completed = subprocess.run(
        ["openssl", "verify", "-CAfile", str(ca_file), str(certificate)],
        capture_output=True,
        text=True,
        check=False,
    )
    return completed.returncode == 0


# --- renewal ------------------------------------------------------------------------------


def test_renewal_window_reissues_only_certificates_inside_it(tmp_path: Path) -> None:
    ca = load_or_create_ca(
        tmp_path, passphrase=PASSPHRASE.encode(), subject=SubjectFields(common_name="t CA")
    )
    subject = SubjectFields(common_name="node-1")

    def issue(validity_days: int = 3650, window: int = 30) -> Any:
        return ensure_node_certificate(
            ca,
            directory=tmp_path,
            name="node-1",
            subject=subject,
            dns_names=["node-1"],
            validity_days=validity_days,
            renew_within_days=window,
        )

    first = issue(validity_days=20)
    assert first.changed
    # 20 days left: outside a 10-day window, inside a 30-day one.
    assert not issue(window=10).changed
    renewed = issue(window=30)
    assert renewed.changed
    assert any("renewal window" in reason for reason in renewed.reasons)
    assert renewed.not_valid_after - first.not_valid_after > dt.timedelta(days=3000)
    assert not issue(window=30).changed


def test_cluster_renewal_window_comes_from_the_inventory(tmp_path: Path) -> None:
    cluster = build_cluster(nodes(tmp_path, opensearch_cert_renew_within_days=3650))
    first = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=PASSPHRASE.encode())
    # Every certificate lives 3650 days (capped by the CA): inside a 3650-day window, but
    # the CA cannot give a longer life, so the window alone does not reissue forever.
    again = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=PASSPHRASE.encode())
    assert not any(node.changed for node in again.nodes.values())
    assert {n: c.serial for n, c in again.nodes.items()} == {
        n: c.serial for n, c in first.nodes.items()
    }


def test_forced_renewal_issues_every_certificate_again_under_the_same_ca(tmp_path: Path) -> None:
    cluster = build_cluster(nodes(tmp_path))
    before = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=PASSPHRASE.encode())
    ca_before = (tmp_path / CA_CERT_FILE).read_bytes()
    after = ensure_cluster_pki(
        cluster, pki_dir=tmp_path, passphrase=PASSPHRASE.encode(), renew_all=True
    )
    assert (tmp_path / CA_CERT_FILE).read_bytes() == ca_before
    for name, node in after.nodes.items():
        assert node.changed
        assert node.serial != before.nodes[name].serial
        assert node.subject_dn == before.nodes[name].subject_dn
        assert openssl_verifies(tmp_path / CA_BUNDLE_FILE, Path(node.cert_path))
    assert after.admin.changed and after.admin.serial != before.admin.serial
    # A node's generation (what the role places as one directory) changes with it.
    assert after.generations != before.generations
    # And a plain run afterwards changes nothing.
    plain = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=PASSPHRASE.encode())
    assert not any(node.changed for node in plain.nodes.values()) and not plain.admin.changed
    assert plain.generations == after.generations


# --- CA rotation --------------------------------------------------------------------------


def test_ca_rotation_bundle_and_certificates_in_each_step(tmp_path: Path) -> None:
    cluster = build_cluster(nodes(tmp_path))
    passphrase = PASSPHRASE.encode()
    pki = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=passphrase)
    old_ca = load_certificate(tmp_path / CA_CERT_FILE)
    old_serials = {name: node.serial for name, node in pki.nodes.items()}
    assert [c.serial_number for c in bundle(tmp_path)] == [old_ca.serial_number]

    # (a) trust: both CAs in the bundle, certificates untouched.
    rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="trust")
    pki = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=passphrase)
    trusted = bundle(tmp_path)
    assert len(trusted) == 2 and trusted[0].serial_number == old_ca.serial_number
    new_ca = trusted[1]
    assert new_ca.subject != old_ca.subject
    assert {name: node.serial for name, node in pki.nodes.items()} == old_serials
    assert ca_rotation_state(tmp_path) == "trust"

    # (b) reissue: the new CA issues; every node and admin certificate is issued again
    # under it; the bundle still holds the old CA for nodes not yet reloaded.
    rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="reissue")
    pki = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=passphrase)
    assert load_certificate(tmp_path / CA_CERT_FILE).serial_number == new_ca.serial_number
    assert [c.serial_number for c in bundle(tmp_path)] == [
        new_ca.serial_number,
        old_ca.serial_number,
    ]
    for name, node in pki.nodes.items():
        assert node.changed and node.serial != old_serials[name]
        assert load_certificate(Path(node.cert_path)).issuer == new_ca.subject
        assert openssl_verifies(tmp_path / CA_BUNDLE_FILE, Path(node.cert_path))
    assert load_certificate(Path(pki.admin.cert_path)).issuer == new_ca.subject
    # The old CA's key is still on the control node until finish.
    assert (tmp_path / "ca-previous-key.pem").exists()

    # (c) finish: the old CA leaves the bundle; its key is gone, its certificate retired.
    rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="finish")
    pki = ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=passphrase)
    assert [c.serial_number for c in bundle(tmp_path)] == [new_ca.serial_number]
    assert not (tmp_path / "ca-previous-key.pem").exists()
    assert (tmp_path / "retired" / f"ca-{old_ca.serial_number:x}.pem").exists()
    assert not any(node.changed for node in pki.nodes.values())
    for node in pki.nodes.values():
        assert openssl_verifies(tmp_path / CA_BUNDLE_FILE, Path(node.cert_path))
    # The new CA's key stays encrypted under the same passphrase.
    assert b"ENCRYPTED" in (tmp_path / CA_KEY_FILE).read_bytes()
    # A new rotation can start afterwards.
    assert ca_rotation_state(tmp_path) == "finished"


@pytest.mark.parametrize(
    ("done", "step", "next_step"),
    [
        ([], "reissue", "trust"),
        ([], "finish", "trust"),
        (["trust"], "finish", "reissue"),
        (["trust", "reissue"], "trust", "finish"),
        (["trust", "reissue", "finish"], "reissue", "trust"),
    ],
)
def test_a_step_out_of_order_is_refused_naming_the_variable_and_the_next_step(
    tmp_path: Path, done: list[str], step: str, next_step: str
) -> None:
    subject = SubjectFields(common_name="t CA")
    load_or_create_ca(tmp_path, passphrase=PASSPHRASE.encode(), subject=subject)
    for earlier in done:
        rotate_ca(tmp_path, earlier, passphrase=PASSPHRASE.encode(), subject=subject)
    files_before = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    with pytest.raises(CaRotationOrderError) as caught:
        rotate_ca(tmp_path, step, passphrase=PASSPHRASE.encode(), subject=subject)
    message = str(caught.value)
    assert f"clusterforge_ca_rotation_step={step}" in message
    assert f"clusterforge_ca_rotation_step={next_step}" in message
    assert "playbooks/rotate_ca.yml" in message
    files_after = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    assert files_after == files_before


def test_a_step_repeated_changes_nothing(tmp_path: Path) -> None:
    subject = SubjectFields(common_name="t CA")
    load_or_create_ca(tmp_path, passphrase=PASSPHRASE.encode(), subject=subject)
    rotate_ca(tmp_path, "trust", passphrase=PASSPHRASE.encode(), subject=subject)
    next_ca = (tmp_path / "ca-next.pem").read_bytes()
    message = rotate_ca(tmp_path, "trust", passphrase=PASSPHRASE.encode(), subject=subject)
    assert "already done" in message
    assert (tmp_path / "ca-next.pem").read_bytes() == next_ca


def test_an_unknown_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CaRotationOrderError, match="clusterforge_ca_rotation_step='begin'"):
        rotate_ca(
            tmp_path,
            "begin",
            passphrase=PASSPHRASE.encode(),
            subject=SubjectFields(common_name="t CA"),
        )


def test_finish_is_refused_while_a_certificate_is_signed_by_the_old_ca(tmp_path: Path) -> None:
    cluster = build_cluster(nodes(tmp_path))
    passphrase = PASSPHRASE.encode()
    ensure_cluster_pki(cluster, pki_dir=tmp_path, passphrase=passphrase)
    rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="trust")
    rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="reissue")
    # The reissue step's certificates were never issued (the playbook stopped early).
    with pytest.raises(CaRotationOrderError, match="still signed by the old CA") as caught:
        rotate_cluster_ca(cluster, pki_dir=tmp_path, passphrase=passphrase, step="finish")
    assert "os-1" in str(caught.value) and "admin" in str(caught.value)
    assert len(bundle(tmp_path)) == 2


def test_a_users_own_ca_is_not_rotated(tmp_path: Path) -> None:
    own = tmp_path / "own"
    load_or_create_ca(own, passphrase=b"x" * 12, subject=SubjectFields(common_name="own CA"))
    cluster = build_cluster(
        nodes(
            tmp_path / "pki",
            opensearch_ca_cert_path=str(own / CA_CERT_FILE),
            opensearch_ca_key_path=str(own / CA_KEY_FILE),
            opensearch_ca_passphrase="x" * 12,
        )
    )
    with pytest.raises(PkiError, match="opensearch_ca_cert_path"):
        rotate_cluster_ca(cluster, pki_dir=tmp_path / "pki", passphrase=b"x" * 12, step="trust")


# --- the plan: hot reload, and no restart for certificates ----------------------------------


def test_nodes_get_hot_reload_and_their_files_behind_one_link(tmp_path: Path) -> None:
    plan = build_plan(nodes(tmp_path), fetch=False)
    settings = yaml.safe_load(plan["nodes"]["os-1"]["files"]["opensearch.yml"])
    assert settings[HOT_RELOAD_SETTING] is True
    # Never both mechanisms: the plugin refuses to start with both set.
    assert "plugins.security.ssl_cert_reload_enabled" not in settings
    for layer in ("transport", "http"):
        assert settings[f"plugins.security.ssl.{layer}.pemcert_filepath"] == "certs/live/node.pem"
        assert (
            settings[f"plugins.security.ssl.{layer}.pemkey_filepath"] == "certs/live/node-key.pem"
        )
        assert settings[f"plugins.security.ssl.{layer}.pemtrustedcas_filepath"] == (
            "certs/live/ca.pem"
        )
        assert (
            settings[f"plugins.security.ssl.{layer}.enforce_cert_reload_dn_verification"] is False
        )
    assert plan["cluster"]["pki"]["hot_reload"] is True
    assert plan["cluster"]["pki"]["ca_cert"].endswith(CA_BUNDLE_FILE)
    assert len(plan["nodes"]["os-1"]["tls"]["generation"]) == 16


def test_a_certificate_only_change_is_no_restart_reason_with_hot_reload(tmp_path: Path) -> None:
    plan = build_plan(nodes(tmp_path), fetch=False)
    observed = {
        name: {
            "active": True,
            "version": plan["cluster"]["version"],
            "formed": True,
            "security_mode": "tls",
        }
        for name in ("os-1", "os-2", "os-3")
    }
    plan["rollout"] = plan_rollout(build_cluster(nodes(tmp_path)), observed)
    certificates = [{"host": host, "reason": "certificates"} for host in ("os-1", "os-2", "os-3")]
    for host in ("os-1", "os-2", "os-3"):
        assert restart_reasons(plan, host, certificates) == []
    # Any other change still restarts the node, once.
    changes = [*certificates, {"host": "os-2", "reason": "opensearch.yml"}]
    assert restart_reasons(plan, "os-2", changes) == ["opensearch.yml"]
    # Without hot reload (a plan from before it), certificates still restart.
    plan["cluster"]["pki"]["hot_reload"] = False
    assert restart_reasons(plan, "os-1", certificates) == ["certificates"]


def test_rotation_state_file_is_json(tmp_path: Path) -> None:
    subject = SubjectFields(common_name="t CA")
    load_or_create_ca(tmp_path, passphrase=PASSPHRASE.encode(), subject=subject)
    rotate_ca(tmp_path, "trust", passphrase=PASSPHRASE.encode(), subject=subject)
    assert json.loads((tmp_path / "ca-rotation.json").read_text())["step"] == "trust"
