"""The services' TLS proxy as the plan decides it: binds, ports, edges, TLS profile, and
the host certificates the cluster's CA issues for it (clusterforge.plan.services.tls_proxy,
clusterforge.plan.cluster.host_certificates). nginx itself is tested in the services and tls
molecule scenarios; here, `nginx -t` checks the rendered file where nginx is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from clusterforge.errors import ClusterforgeError, InventoryError
from clusterforge.pki.certificates import PkiError, SubjectFields
from clusterforge.plan.cluster.cluster_pki import nodes_dn_pattern
from clusterforge.plan.cluster.host_certificates import (
    HostCertificate,
    ensure_host_certificate,
    issuing_ca_without_cluster,
    own_host_certificate,
)
from clusterforge.plan.services.services_plan import plan_services
from clusterforge.plan.services.tls_proxy import plan_tls_proxy, render_nginx_conf, render_unit
from clusterforge.schema import load_schema

SCHEMA = load_schema()
PROTOCOLS = tuple(SCHEMA.default_of("opensearch_tls_protocols"))
CIPHERS = tuple(SCHEMA.default_of("opensearch_tls_ciphers"))
BOTH = ["user_directory", "order_service"]


def _plan(variables: dict[str, object], services: list[str] = BOTH):  # type: ignore[no-untyped-def]
    return plan_tls_proxy(
        "apps-1", variables, services, tls_protocols=PROTOCOLS, tls_ciphers=CIPHERS
    )


def test_both_services_are_served_on_their_ports_and_forwarded_to_loopback() -> None:
    plan = _plan({"tls_proxy_listen_address": "10.20.0.21"})
    assert plan is not None
    assert [(e.service, e.public_port, e.upstream) for e in plan.services] == [
        ("user_directory", 8081, "127.0.0.1:18081"),
        ("order_service", 8082, "127.0.0.1:18082"),
    ]
    conf = render_nginx_conf(plan)
    assert "listen 10.20.0.21:8081 ssl;" in conf
    assert "listen 10.20.0.21:8082 ssl;" in conf
    assert "server 127.0.0.1:18081;" in conf
    # Upstream keep-alive, let go before uvicorn's 5 s.
    assert "keepalive 64;" in conf and "keepalive_timeout 4s;" in conf
    assert 'proxy_set_header Connection "";' in conf
    assert plan.urls("ignored") == {
        "user_directory": "https://10.20.0.21:8081",
        "order_service": "https://10.20.0.21:8082",
    }


def test_the_tls_profile_is_the_clusters_aead_suites_only() -> None:
    plan = _plan({})
    assert plan is not None
    conf = render_nginx_conf(plan)
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in conf
    ciphers = next(line for line in conf.splitlines() if "ssl_ciphers" in line)
    assert "ECDHE-RSA-AES256-GCM-SHA384" in ciphers
    assert (
        "CBC" not in ciphers
        and "SHA1" not in ciphers
        and "DHE-RSA" not in ciphers.replace("ECDHE-RSA", "")
    )
    assert all(part.startswith("ECDHE-") for part in ciphers.split()[1].rstrip(";").split(":"))
    assert "ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384" in conf
    # Only TLS 1.3 kept: nginx is told so.
    only13 = plan_tls_proxy("apps-1", {}, BOTH, tls_protocols=("TLSv1.3",), tls_ciphers=CIPHERS)
    assert only13 is not None
    assert "ssl_protocols TLSv1.3;" in render_nginx_conf(only13)


def test_the_edges_and_a_log_without_query_strings_or_tokens() -> None:
    plan = _plan(
        {
            "tls_proxy_header_timeout": 7,
            "tls_proxy_max_header_bytes": 4096,
            "user_directory_max_request_body_bytes": 1000,
        }
    )
    assert plan is not None
    conf = render_nginx_conf(plan)
    assert "client_header_timeout 7s;" in conf
    assert "large_client_header_buffers 4 4096;" in conf
    assert "client_max_body_size 2000;" in conf  # twice the service's own cap
    assert f"client_max_body_size {2 * 64 * 1024};" in conf
    assert "limit_conn per_client 256;" in conf
    log_format = conf[conf.index("log_format") : conf.index("access_log")]
    assert "$request_method $uri" in log_format
    for leak in ("$request ", "$request_uri", "$args", "$query_string", "authorization"):
        assert leak not in log_format.lower(), leak


def test_a_service_off_loopback_behind_the_proxy_is_refused_naming_the_fix() -> None:
    with pytest.raises(InventoryError) as refused:
        _plan({"user_directory_host": "0.0.0.0", "order_service_app_port": 8082})  # noqa: S104
    message = str(refused.value)
    assert "user_directory_host is '0.0.0.0'" in message
    assert "user_directory_tls_proxy: false" in message
    assert "order_service_app_port equals order_service_port (8082)" in message


def test_a_proxy_of_the_users_own_lets_the_service_bind_anywhere_and_has_no_nginx() -> None:
    variables = {
        "user_directory_tls_proxy": False,
        "order_service_tls_proxy": False,
        "user_directory_host": "0.0.0.0",  # noqa: S104 (a bind allowed behind a proxy of one's own)
    }
    assert _plan(variables) is None
    only_orders = _plan({"user_directory_tls_proxy": False})
    assert only_orders is not None
    assert [entry.service for entry in only_orders.services] == ["order_service"]


def test_the_unit_runs_nginx_unprivileged_and_confined() -> None:
    plan = _plan({})
    assert plan is not None
    unit = render_unit(plan)
    assert "User=clusterforge-proxy" in unit
    assert "CapabilityBoundingSet=\n" in unit
    assert "NoNewPrivileges=true" in unit
    assert "ProtectSystem=strict" in unit
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed here")
def test_nginx_accepts_the_rendered_configuration(tmp_path: Path) -> None:
    plan = _plan({"tls_proxy_config_dir": str(tmp_path)})
    assert plan is not None
    # nginx checks the certificate files too: give it a real pair.
    ca = issuing_ca_without_cluster(
        {"opensearch_ca_passphrase": "test-passphrase-0123456789"}, inventory_dir=tmp_path
    )
    issued = ensure_host_certificate(ca, host="apps-1", purpose="tls_proxy", alt_names=[])
    (tmp_path / "tls").mkdir()
    Path(plan.cert_path).write_text(issued.certificate_pem)
    Path(plan.key_path).write_text(issued.key_pem)
    conf = render_nginx_conf(plan).replace(plan.runtime_dir, str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    Path(plan.config_path).write_text(conf)
    checked = subprocess.run(
        ["nginx", "-t", "-c", plan.config_path, "-g", f"error_log {tmp_path}/e.log;"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_token_check_follows_the_proxys_listen_address() -> None:
    hosts = {"user_directory": ["apps-1"]}
    base = {"user_directory_host": "127.0.0.1", "user_directory_auth_tokens": []}
    # Behind a proxy on every address, the loopback bind no longer protects it.
    with pytest.raises(InventoryError) as refused:
        plan_services(hosts, {"apps-1": {**base, "tls_proxy_listen_address": ""}})
    assert "tls_proxy_listen_address is '(empty: every address)'" in str(refused.value)
    planned = plan_services(hosts, {"apps-1": {**base, "tls_proxy_listen_address": "127.0.0.61"}})
    # The application listens on its own port behind the proxy.
    assert planned["apps-1"]["user_directory"].arguments["port"] == 18081


# --- the host certificates ---------------------------------------------------------------


def test_a_proxy_certificate_is_server_only_and_can_never_pass_as_a_node(tmp_path: Path) -> None:
    ca = issuing_ca_without_cluster(
        {"opensearch_ca_passphrase": "test-passphrase-0123456789"}, inventory_dir=tmp_path
    )
    issued = ensure_host_certificate(
        ca, host="apps-1", purpose="tls_proxy", alt_names=["10.20.0.21", "apps.example.org"]
    )
    assert issued.changed and not issued.own
    certificate = x509.load_pem_x509_certificate(issued.certificate_pem.encode())
    usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n) for n in names.get_values_for_type(x509.DNSName)} == {
        "apps-1",
        "apps.example.org",
    }
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["10.20.0.21"]
    # The nodes' DN pattern does not admit it, although its other subject fields match.
    pattern = nodes_dn_pattern(SubjectFields(common_name="admin"), "admin").strip("/")
    assert not re.match(pattern, certificate.subject.rfc4514_string())
    node_like = SubjectFields(common_name="apps-1").to_name().rfc4514_string()
    assert re.match(pattern, node_like)  # the same CN with the nodes' OU would pass
    unit = certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0]
    assert unit.value == "clusterforge services-proxy"
    # Out of the nodes' directory, where retirement reads.
    assert (tmp_path / ".pki" / "hosts" / "apps-1.services-proxy.pem").is_file()
    # Reused while nothing changes; issued again when asked (rotate_certs.yml).
    again = ensure_host_certificate(
        ca, host="apps-1", purpose="tls_proxy", alt_names=["10.20.0.21", "apps.example.org"]
    )
    assert not again.changed and again.serial == issued.serial
    renewed = ensure_host_certificate(
        ca,
        host="apps-1",
        purpose="tls_proxy",
        alt_names=["10.20.0.21", "apps.example.org"],
        renew=True,
    )
    assert renewed.changed and renewed.serial != issued.serial


def test_a_services_only_inventory_without_a_passphrase_is_told_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTERFORGE_CA_PASSPHRASE", raising=False)
    ca = issuing_ca_without_cluster({}, inventory_dir=tmp_path)
    with pytest.raises(PkiError, match="passphrase is empty"):
        ensure_host_certificate(ca, host="apps-1", purpose="tls_proxy", alt_names=[])


def test_an_own_certificate_is_checked_and_used_as_it_is(tmp_path: Path) -> None:
    ca = issuing_ca_without_cluster(
        {"opensearch_ca_passphrase": "test-passphrase-0123456789"}, inventory_dir=tmp_path
    )
    issued = ensure_host_certificate(ca, host="web-1", purpose="tls_proxy", alt_names=["10.0.0.5"])
    cert, key = tmp_path / "own.pem", tmp_path / "own-key.pem"
    cert.write_text(issued.certificate_pem)
    key.write_text(issued.key_pem)

    def own(host: str, key_path: str, alt_names: list[str]) -> HostCertificate:
        return own_host_certificate(
            host=host,
            purpose="tls_proxy",
            cert_path=str(cert),
            key_path=key_path,
            alt_names=alt_names,
            ca_bundle_pem="",
            variable_prefix="tls_proxy",
        )

    used = own("web-1", str(key), ["10.0.0.5"])
    assert used.own and used.serial == issued.serial and not used.changed
    other = ensure_host_certificate(ca, host="web-2", purpose="tls_proxy", alt_names=[])
    mismatched = tmp_path / "other-key.pem"
    mismatched.write_text(other.key_pem)
    with pytest.raises(ClusterforgeError, match="does not belong to the first certificate"):
        own("web-1", str(mismatched), [])
    with pytest.raises(ClusterforgeError, match="names none of"):
        own("web-9", str(key), ["10.9.9.9"])
    with pytest.raises(ClusterforgeError, match="give both tls_proxy_cert_path"):
        own("web-1", "", [])


def test_the_proxy_flag_is_read_as_ansible_reads_a_boolean() -> None:
    # -e user_directory_tls_proxy=false arrives as a string.
    only_orders = _plan({"user_directory_tls_proxy": "false", "user_directory_host": "10.0.0.1"})
    assert only_orders is not None
    assert [entry.service for entry in only_orders.services] == ["order_service"]
    with pytest.raises(InventoryError, match=r"user_directory_tls_proxy .* not a boolean"):
        _plan({"user_directory_tls_proxy": "maybe"})


def test_the_inventory_check_finds_a_proxy_port_clash_before_any_host() -> None:
    """The proxy's port clash, found by validate_inventory (the first play of every
    playbook) rather than by the proxy's action once the run reached the host."""
    from clusterforge.plan.validation import validate_inventory

    clash = {
        "order_service_host": "127.0.0.1",
        "order_service_port": 8082,
        "order_service_app_port": 8082,
        "order_service_auth_tokens": ["proxy-clash-token-0123456789abcdef"],
    }
    with pytest.raises(InventoryError) as refused:
        validate_inventory([], services_vars={"order_service": [("apps-1", clash)]})
    assert any("share a port" in problem for problem in refused.value.problems), (
        refused.value.problems
    )


def test_the_inventory_check_plans_the_proxy_the_role_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is planned once, by the inventory check (a services-only inventory has no
    build_plan): its files, URLs, health URLs and certificate names come with the check's
    result, and the role's action copies them, adding only the host's certificate."""
    from types import SimpleNamespace

    from ansible.errors import AnsibleActionFail
    from ansible.plugins.action import ActionBase

    from clusterforge.plan.services.tls_proxy import planned_files
    from clusterforge.plan.validation import validate_inventory
    from collection_plugins import load_plugin

    variables = {
        "user_directory_host": "127.0.0.1",
        "user_directory_auth_tokens": ["proxy-plan-token-0123456789abcdef"],
        "tls_proxy_extra_sans": ["apps.example.org"],
    }
    validated = validate_inventory(
        [],
        inventory_dir=tmp_path,
        services_vars={"user_directory": [("apps-1", variables)]},
        service_addresses={"apps-1": "10.20.0.21"},
    )
    planned = validated.tls_proxies["apps-1"]
    expected = _plan(variables, ["user_directory"])
    assert expected is not None
    assert {entry["path"]: entry["content"] for entry in planned["files"]} == planned_files(
        expected
    )
    assert planned["urls"] == {"user_directory": "https://10.20.0.21:8081"}
    assert planned["health"] == {"user_directory": "https://127.0.0.1:8081/mock-api/health"}
    assert planned["alt_names"] == ["10.20.0.21", "apps.example.org"]
    # The action: no plan of its own; the check's entry, the certificate and the key.
    action_plugin = load_plugin("action", "clusterforge_tls_proxy")
    assert not hasattr(action_plugin, "plan_tls_proxy")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    action = object.__new__(action_plugin.ActionModule)
    action._task = SimpleNamespace(args={"planned": validated.tls_proxies}, check_mode=False)
    action._templar = SimpleNamespace(template=lambda value: value)
    task_vars = {
        "inventory_hostname": "apps-1",
        "inventory_dir": str(tmp_path),
        "opensearch_ca_passphrase": "test-passphrase-0123456789",
        "groups": {"user_directory": ["apps-1"]},
        "hostvars": {},
    }
    result = action.run(task_vars=task_vars)
    assert result["enabled"] and result["_ansible_no_log"]
    assert result["files"][:2] == planned["files"]
    # What roles/_debian_service installs and masks, copied from the check's plan.
    assert result["install"] == planned["install"]
    assert result["install"]["masks"] == [
        {"path": "/etc/systemd/system/nginx.service", "target": "/dev/null"}
    ]
    paths = [entry["path"] for entry in result["files"][2:]]
    assert paths == [planned["cert_path"], planned["ca_bundle_path"], planned["key_path"]]
    assert result["files"][-1]["secret"] and result["files"][-1]["mode"] == "0600"
    certificate = x509.load_pem_x509_certificate(result["files"][2]["content"].encode())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "apps.example.org" in {str(n) for n in names.get_values_for_type(x509.DNSName)}
    # A host the check planned no proxy for has none; a play without the check is told.
    action._task = SimpleNamespace(args={"planned": {}}, check_mode=False)
    assert action.run(task_vars=task_vars)["enabled"] is False
    action._task = SimpleNamespace(args={}, check_mode=False)
    with pytest.raises(AnsibleActionFail, match=r"check_inventory\.yml"):
        action.run(task_vars=task_vars)
