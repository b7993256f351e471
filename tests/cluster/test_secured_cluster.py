"""Secured modes (tls, basic): authentication, certificates and the security REST API."""

from __future__ import annotations

import ipaddress
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import client_for
from opensearchpy import OpenSearch
from opensearchpy.exceptions import AuthenticationException

SECURITY_API_PREFIXES = ("/_plugins/_security/api", "/_opendistro/_security/api")


@pytest.fixture(scope="module", autouse=True)
def _secured_only(cluster: dict[str, Any]) -> None:
    if cluster["mode"] == "open":
        pytest.skip("the cluster is in open mode")


def test_admin_basic_auth_works(cluster: dict[str, Any], clients: list[OpenSearch]) -> None:
    info = clients[0].transport.perform_request("GET", "/_plugins/_security/authinfo")
    assert info["user_name"] == cluster["admin_user"]
    assert "all_access" in info["roles"]


def test_a_wrong_password_gets_401(cluster: dict[str, Any]) -> None:
    client = client_for(cluster, cluster["nodes"][0]["url"], auth=("admin", "not-the-password"))
    with pytest.raises(AuthenticationException) as caught:
        client.info()
    assert caught.value.status_code == 401


def test_missing_credentials_get_401(cluster: dict[str, Any]) -> None:
    client = client_for(cluster, cluster["nodes"][0]["url"], auth=False)
    with pytest.raises(AuthenticationException) as caught:
        client.cluster.health()
    assert caught.value.status_code == 401


def test_security_health_is_up_on_every_node(cluster: dict[str, Any]) -> None:
    for node in cluster["nodes"]:
        client = client_for(cluster, node["url"], auth=False)
        health = client.transport.perform_request("GET", "/_plugins/_security/health")
        assert health["status"] == "UP"


def test_https_is_verified_against_the_generated_ca(cluster: dict[str, Any]) -> None:
    if cluster["mode"] != "tls":
        pytest.skip("HTTP TLS is off in basic mode")
    for node in cluster["nodes"]:
        assert node["url"].startswith("https://")
    untrusted = OpenSearch(
        hosts=[cluster["nodes"][0]["url"]], use_ssl=True, verify_certs=True, timeout=10
    )
    with pytest.raises(Exception, match=r"(?i)certificate"):
        untrusted.info()


def _node_certificates(cluster: dict[str, Any]) -> list[Path]:
    pki = Path(cluster["pki_dir"])
    # The CAs (and the bundle of them, docs/certificates.md) are not node certificates.
    skip = {"ca.pem", "ca-bundle.pem", "ca-next.pem", "ca-previous.pem", "admin.pem"}
    return sorted(
        path for path in pki.glob("*.pem") if path.name not in skip and "-key" not in path.name
    )


def test_openssl_verifies_every_node_certificate(cluster: dict[str, Any]) -> None:
    pki = Path(cluster["pki_dir"])
    certificates = _node_certificates(cluster)
    assert len(certificates) == len(cluster["nodes"])
    for certificate in certificates:
        result = subprocess.run(
            ["openssl", "verify", "-CAfile", str(pki / "ca.pem"), str(certificate)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_node_certificates_name_each_node_and_address(cluster: dict[str, Any]) -> None:
    sans = ""
    for certificate in _node_certificates(cluster):
        sans += subprocess.run(
            ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(certificate)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    for node in cluster["nodes"]:
        host = urlsplit(node["url"]).hostname or ""
        assert f"DNS:{node['name']}" in sans
        expected = f"IP Address:{host}" if _is_ip(host) else f"DNS:{host}"
        assert expected in sans


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("prefix", SECURITY_API_PREFIXES)
def test_users_list_under_both_prefixes(prefix: str, clients: list[OpenSearch]) -> None:
    users = clients[0].transport.perform_request("GET", f"{prefix}/internalusers")
    for name in ("admin", "kibanaserver", "logstash", "kibana"):
        assert name in users
    assert users["admin"]["reserved"] is True
    assert users["admin"]["backend_roles"] == ["admin"]
    assert users["kibana"]["reserved"] is False
    assert sorted(users["kibana"]["backend_roles"]) == ["kibanauser", "readall"]
    assert "hash" not in users["admin"] or not users["admin"]["hash"]


@pytest.mark.parametrize("prefix", SECURITY_API_PREFIXES)
def test_password_change_through_the_rest_api(
    prefix: str, cluster: dict[str, Any], clients: list[OpenSearch]
) -> None:
    name = f"api-{uuid.uuid4().hex[:8]}"
    first_password = f"First-{uuid.uuid4().hex}"
    second_password = f"Second-{uuid.uuid4().hex}"
    path = f"{prefix}/internalusers/{name}"
    created = clients[0].transport.perform_request(
        "PUT", path, body={"password": first_password, "backend_roles": ["readall"]}
    )
    assert created["status"] == "CREATED"
    url = cluster["nodes"][1]["url"]
    as_user = client_for(cluster, url, auth=(name, first_password))
    assert (
        as_user.transport.perform_request("GET", "/_plugins/_security/authinfo")["user_name"]
        == name
    )
    changed = clients[0].transport.perform_request(
        "PUT", path, body={"password": second_password, "backend_roles": ["readall"]}
    )
    assert changed["status"] == "OK"
    with pytest.raises(AuthenticationException):
        client_for(cluster, url, auth=(name, first_password)).info()
    as_new = client_for(cluster, url, auth=(name, second_password))
    assert (
        as_new.transport.perform_request("GET", "/_plugins/_security/authinfo")["user_name"] == name
    )
