"""scripts/render: the inventory read as Ansible reads it, rendered by the plan's function."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterforge.cli import main
from clusterforge.inventory.variables import load_inventory_nodes
from clusterforge.plan.plan import build_plan, host_files
from nodes_dn_matcher import admits

EXAMPLE = Path(__file__).resolve().parents[1] / "inventories" / "example"
ADMIN_PASSWORD = "Render-Admin-5c1e"
PASSWORDS_YAML = f"""\
opensearch_ca_passphrase: render-test-ca-Passphrase-41
opensearch_security_passwords:
  admin: {ADMIN_PASSWORD}
  kibanaserver: Render-Kibanaserver-5c1e
  logstash: Render-Logstash-5c1e
  kibana: Render-Kibana-5c1e
opensearch_security_users:
  - {{name: analyst, password: Render-Analyst-5c1e, backend_roles: [readall]}}
"""
SECRETS = [
    ADMIN_PASSWORD,
    "Render-Kibanaserver-5c1e",
    "Render-Analyst-5c1e",
    "render-test-ca-Passphrase-41",
]


def secured_inventory(root: Path, mode: str = "tls") -> Path:
    inventory = root / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(
        "all:\n  children:\n    opensearch:\n      hosts:\n"
        "        os-1: {ansible_host: 10.0.0.1}\n"
        "        os-2: {ansible_host: 10.0.0.2}\n"
        "        os-3: {ansible_host: 10.0.0.3}\n"
        "    dashboards:\n      hosts:\n"
        "        os-1: {dashboards_archive_path: /srv/osd.tar.gz}\n"
    )
    (inventory / "group_vars" / "all.yml").write_text(
        f"opensearch_security_mode: {mode}\n" + PASSWORDS_YAML
    )
    return inventory


def all_files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def subject_of(path: Path) -> str:
    return (
        subprocess.run(
            ["openssl", "x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .removeprefix("subject=")
    )


def test_render_writes_every_node_file_of_the_vaulted_tls_example(tmp_path: Path) -> None:
    # A copy: rendering a secured inventory issues its PKI into <inventory>/.pki.
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example)
    out = tmp_path / "out"
    vault_password = example / "EXAMPLE-ONLY-vault-password.txt"
    argv = ["render", "--inventory", str(example), "--out", str(out)]
    assert main([*argv, "--vault-password-file", str(vault_password)]) == 0
    for node in ("search-1", "search-2", "search-3"):
        settings = yaml.safe_load((out / node / "opensearch.yml").read_text())
        assert settings["cluster.name"] == "search-prod"
        assert settings["plugins.security.ssl.http.enabled"] is True
        # One pattern that admits every node certificate (and so nodes added later).
        assert len(settings["plugins.security.nodes_dn"]) == 1
        for i in (1, 2, 3):
            dn = subject_of(example / ".pki" / f"search-{i}.pem")
            assert admits(settings["plugins.security.nodes_dn"], dn)
        assert not admits(
            settings["plugins.security.nodes_dn"], subject_of(example / ".pki" / "admin.pem")
        )
    settings = yaml.safe_load((out / "search-2" / "opensearch.yml").read_text())
    assert settings["network.publish_host"] == "10.20.0.12"


def test_a_tls_inventory_renders_nodes_dn_from_the_certificates(tmp_path: Path) -> None:
    inventory = secured_inventory(tmp_path)
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    pki = inventory / ".pki"
    settings = yaml.safe_load((out / "os-2" / "opensearch.yml").read_text())
    assert len(settings["plugins.security.nodes_dn"]) == 1
    for i in (1, 2, 3):
        assert admits(settings["plugins.security.nodes_dn"], subject_of(pki / f"os-{i}.pem"))
    assert not admits(settings["plugins.security.nodes_dn"], subject_of(pki / "admin.pem"))
    assert settings["plugins.security.authcz.admin_dn"] == [subject_of(pki / "admin.pem")]
    assert (out / "os-2" / "certs" / "live" / "node.pem").read_bytes() == (
        pki / "os-2.pem"
    ).read_bytes()
    assert (out / "os-1" / "certs" / "admin.pem").is_file()
    assert not (out / "os-2" / "certs" / "admin.pem").exists()
    assert (out / "os-1" / "opensearch-security" / "roles_mapping.yml").is_file()
    console = yaml.safe_load((out / "os-1" / "opensearch_dashboards.yml").read_text())
    assert console["opensearch.hosts"][0].startswith("https://10.0.0.1:9200")


def test_a_second_render_is_byte_identical(tmp_path: Path) -> None:
    inventory = secured_inventory(tmp_path)
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "a")]) == 0
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "b")]) == 0
    first, second = all_files(tmp_path / "a"), all_files(tmp_path / "b")
    assert first == second
    assert len(first) > 20


def test_render_leaves_every_secret_out(tmp_path: Path) -> None:
    inventory = secured_inventory(tmp_path)
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    for name, content in all_files(out).items():
        assert "PRIVATE KEY" not in content.decode(), name
        assert b"$2y$" not in content and b"$2b$" not in content and b"$2a$" not in content, name
        for secret in SECRETS:
            assert secret.encode() not in content, name


@pytest.mark.parametrize("mode", ["tls", "basic"])
def test_render_output_equals_what_the_roles_copy(tmp_path: Path, mode: str) -> None:
    inventory = secured_inventory(tmp_path, mode)
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    # The roles copy the plan's node files and security files (roles/opensearch,
    # roles/opensearch_security); the plan is built by the same function.
    plan = build_plan(
        load_inventory_nodes(inventory, "opensearch"),
        inventory_dir=inventory,
        consoles_vars=load_inventory_nodes(inventory, "dashboards"),
        fetch=False,
    )
    for host, node in plan["nodes"].items():
        assert (out / host / "opensearch.yml").read_text() == node["files"]["opensearch.yml"]
        assert (out / host / "jvm.options.d" / "heap.options").read_text() == node["files"][
            "heap.options"
        ]
        assert (out / host / "opensearch.service").read_text() == node["files"][
            "opensearch.service"
        ]
        for name, content in plan["security"]["files"].items():
            if name != "internal_users.yml":
                assert (out / host / "opensearch-security" / name).read_text() == content
    assert host_files(plan) == {
        host: {
            str(path.relative_to(out / host)): path.read_text()
            for path in (out / host).rglob("*")
            if path.is_file()
        }
        for host in host_files(plan)
    }


def test_a_vaulted_inventory_needs_its_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ansible.parsing.vault import VaultLib, VaultSecret

    inventory = secured_inventory(tmp_path)
    vault_password = tmp_path / "vault-password"
    vault_password.write_text("render-vault-Password-9\n")
    secret = VaultSecret(b"render-vault-Password-9")
    vaulted = VaultLib([("default", secret)]).encrypt(PASSWORDS_YAML.encode(), secret)
    (inventory / "group_vars" / "all.yml").write_text("opensearch_security_mode: tls\n")
    (inventory / "group_vars" / "opensearch").mkdir()
    (inventory / "group_vars" / "opensearch" / "vault.yml").write_bytes(vaulted)
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("clusterforge: error: ")
    assert "Traceback" not in err
    assert not out.exists()
    argv = ["render", "--inventory", str(inventory), "--out", str(out)]
    assert main([*argv, "--vault-password-file", str(vault_password)]) == 0
    assert (out / "os-3" / "opensearch.yml").is_file()


def test_a_broken_inventory_reports_one_line_per_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    opensearch:\n      hosts:\n"
        "        a: {ansible_host: 10.0.0.1, opensearch_heap_size: 99g}\n"
        "        b: {ansible_host: 10.0.0.1}\n"
    )
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2
    assert all(line.startswith("clusterforge: error: ") for line in lines)
    assert "Traceback" not in "\n".join(lines)


def test_a_secured_inventory_without_a_ca_passphrase_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    inventory = secured_inventory(tmp_path)
    text = (inventory / "group_vars" / "all.yml").read_text()
    (inventory / "group_vars" / "all.yml").write_text(
        "\n".join(line for line in text.splitlines() if "ca_passphrase" not in line) + "\n"
    )
    assert main(["render", "--inventory", str(inventory), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "CLUSTERFORGE_CA_PASSPHRASE" in err
    assert "Traceback" not in err


def test_a_missing_inventory_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--inventory", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("clusterforge: error: ")


def test_render_writes_the_console_files(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n"
        "    opensearch:\n"
        "      hosts:\n"
        "        a: {ansible_host: 10.0.0.1, opensearch_security_mode: open}\n"
        "    dashboards:\n"
        "      hosts:\n"
        "        console: {ansible_host: 10.0.0.9, dashboards_archive_path: /srv/osd.tar.gz}\n"
    )
    out = tmp_path / "out"
    assert main(["render", "--inventory", str(inventory), "--out", str(out)]) == 0
    config = yaml.safe_load((out / "console" / "opensearch_dashboards.yml").read_text())
    assert config["opensearch.hosts"] == ["http://10.0.0.1:9200"]
    assert config["server.host"] == "10.0.0.9"
    assert "OSD_PATH_CONF" in (out / "console" / "opensearch-dashboards.service").read_text()
