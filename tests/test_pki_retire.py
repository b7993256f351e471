"""A node that left the inventory loses its key from the PKI directory (issue 31).

Scale 4 -> 3 as the lab does it: first the fourth node is marked
``opensearch_node_state: absent`` (decommission.yml still runs against it), then the
inventory no longer lists it. Real files and real cryptography throughout.
"""

from __future__ import annotations

import datetime as dt
import stat
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from clusterforge.lab.cluster import Lab, LabNode
from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.ca_rotation import CA_RETIRED_DIR, retire_node_certificates
from clusterforge.pki.certificates import SubjectFields, load_certificate
from clusterforge.pki.issuing import ensure_node_certificate
from clusterforge.plan.cluster.cluster_pki import ensure_cluster_pki
from clusterforge.plan.cluster.model import build_cluster

PASSPHRASE = "unit-test-passphrase"
PASSWORDS = {
    "admin": "Unit-Admin-7d2b",
    "kibanaserver": "Unit-Kibanaserver-7d2b",
    "logstash": "Unit-Logstash-7d2b",
    "kibana": "Unit-Kibana-7d2b",
}


def nodes(pki_dir: Path, count: int, absent: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    common = {
        "opensearch_security_mode": "tls",
        "opensearch_pki_dir": str(pki_dir),
        "opensearch_ca_passphrase": PASSPHRASE,
        "opensearch_security_passwords": PASSWORDS,
    }
    result = []
    for index in range(1, count + 1):
        name = f"opensearch-{index}"
        state = {"opensearch_node_state": "absent"} if name in absent else {}
        result.append((name, {"ansible_host": f"127.0.0.{10 + index}", **common, **state}))
    return result


def plan_pki(pki_dir: Path, count: int, absent: tuple[str, ...] = ()) -> Any:
    return ensure_cluster_pki(
        build_cluster(nodes(pki_dir, count, absent)),
        pki_dir=pki_dir,
        passphrase=PASSPHRASE.encode(),
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_scale_in_keeps_the_key_while_decommissioning_then_retires_it(tmp_path: Path) -> None:
    pki_dir = tmp_path / ".pki"
    plan_pki(pki_dir, 4)
    key = pki_dir / "opensearch-4-key.pem"
    cert = pki_dir / "opensearch-4.pem"
    serial = load_certificate(cert).serial_number

    # Marked absent: decommission.yml still drains the node, its files stay.
    marked = plan_pki(pki_dir, 4, absent=("opensearch-4",))
    assert marked.retired == ()
    assert key.exists() and cert.exists()

    before = snapshot(pki_dir)
    gone = plan_pki(pki_dir, 3)
    assert gone.retired == ("opensearch-4",)
    assert not key.exists()
    assert not cert.exists()
    retired_dir = pki_dir / CA_RETIRED_DIR
    assert stat.S_IMODE(retired_dir.stat().st_mode) == 0o700
    kept = list(retired_dir.glob("opensearch-4-*.pem"))
    assert len(kept) == 1
    # Only the certificate, the public part, is kept; it is the one the node had.
    assert load_certificate(kept[0]).serial_number == serial
    assert b"PRIVATE KEY" not in kept[0].read_bytes()
    assert not any(b"PRIVATE KEY" in path.read_bytes() for path in retired_dir.iterdir())
    # Everything else is untouched: the CA, the bundle, the admin and the other nodes.
    after = snapshot(pki_dir)
    departed = {"opensearch-4-key.pem", "opensearch-4.pem"}
    assert {name: data for name, data in before.items() if name not in departed} == {
        name: data for name, data in after.items() if not name.startswith(CA_RETIRED_DIR)
    }

    # A rerun retires nothing more.
    again = plan_pki(pki_dir, 3)
    assert again.retired == ()
    assert snapshot(pki_dir) == after


def test_a_node_that_returns_gets_a_new_key(tmp_path: Path) -> None:
    pki_dir = tmp_path / ".pki"
    plan_pki(pki_dir, 4)
    old_key = (pki_dir / "opensearch-4-key.pem").read_bytes()
    plan_pki(pki_dir, 3)
    back = plan_pki(pki_dir, 4)
    assert back.nodes["opensearch-4"].changed
    assert (pki_dir / "opensearch-4-key.pem").read_bytes() != old_key


def test_only_node_certificates_of_this_pki_are_retired(tmp_path: Path) -> None:
    pki_dir = tmp_path / ".pki"
    plan_pki(pki_dir, 3)
    # A server certificate from another CA, e.g. one the operator keeps here for a proxy.
    other_ca = load_or_create_ca(
        tmp_path / "other-ca", passphrase=b"other", subject=SubjectFields(common_name="other CA")
    )
    foreign = ensure_node_certificate(
        other_ca,
        directory=tmp_path / "other-ca",
        name="proxy",
        subject=SubjectFields(common_name="proxy"),
        dns_names=("proxy",),
    )
    (pki_dir / "proxy.pem").write_bytes(foreign.cert_path.read_bytes())
    (pki_dir / "proxy-key.pem").write_bytes(foreign.key_path.read_bytes())
    # A key whose certificate is missing (a run stopped between the two) is not judged.
    (pki_dir / "half-key.pem").write_bytes(b"not a key")
    # Garbage where a certificate should be.
    (pki_dir / "junk.pem").write_text("not a certificate\n")
    (pki_dir / "junk-key.pem").write_text("not a key\n")
    before = snapshot(pki_dir)

    assert plan_pki(pki_dir, 3).retired == ()
    assert snapshot(pki_dir) == before
    # The admin certificate is no node's: clientAuth only, never retired.
    admin = load_certificate(pki_dir / "admin.pem")
    usages = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH not in usages


def test_a_users_own_ca_is_named_as_issuer(tmp_path: Path) -> None:
    # With opensearch_ca_cert_path the CA lives outside the PKI directory.
    user_ca = load_or_create_ca(
        tmp_path / "user-ca", passphrase=b"user", subject=SubjectFields(common_name="user CA")
    )
    pki_dir = tmp_path / ".pki"
    pki_dir.mkdir(mode=0o700)
    ensure_node_certificate(
        user_ca,
        directory=pki_dir,
        name="gone-1",
        subject=SubjectFields(common_name="gone-1"),
        dns_names=("gone-1",),
    )
    assert retire_node_certificates(pki_dir, keep=set()) == []
    when = dt.datetime(2026, 11, 25, 13, 45, 7, tzinfo=dt.UTC)
    assert retire_node_certificates(
        pki_dir, keep=set(), issuers=[user_ca.certificate], now=when
    ) == ["gone-1"]
    assert not (pki_dir / "gone-1-key.pem").exists()
    assert (pki_dir / CA_RETIRED_DIR / "gone-1-20261125T134507Z.pem").is_file()


def test_the_lab_retires_the_removed_nodes_right_after_a_shrink(tmp_path: Path) -> None:
    lab = Lab(repo=tmp_path, lab_dir=tmp_path / "inventories" / "lab")
    plan_pki(lab.pki_dir, 4)
    kept = [LabNode(f"opensearch-{index}", f"127.0.0.{10 + index}", 2222) for index in (1, 2, 3)]
    lab.retire_certificates(kept)
    assert not (lab.pki_dir / "opensearch-4-key.pem").exists()
    assert len(list((lab.pki_dir / CA_RETIRED_DIR).glob("opensearch-4-*.pem"))) == 1
    for node in kept:
        assert (lab.pki_dir / f"{node.inventory_name}-key.pem").is_file()


def test_an_open_lab_has_nothing_to_retire(tmp_path: Path) -> None:
    lab = Lab(repo=tmp_path, lab_dir=tmp_path / "inventories" / "lab")
    lab.retire_certificates([])
    assert not lab.pki_dir.exists()
