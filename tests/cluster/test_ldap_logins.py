"""People of the directory log in (docs/ldap.md): a lab from `scripts/up --ldap`.

lab.json's ``ldap`` names the directory, its people, their groups and password files.
Each group maps to a role that reads and writes its own indices (``team-a-*``), through
``opensearch_security_role_mappings``. The last test stops the directory container and
starts it again. Failed logins count towards the per-address limit (docs/hardening.md):
these tests make three.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from clusterforge.plan.security.ldap import CONNECT_TIMEOUT_MS


@pytest.fixture(scope="module")
def ldap(cluster: dict[str, Any]) -> dict[str, Any]:
    directory = cluster.get("ldap")
    if not directory:
        pytest.skip("the cluster has no directory (scripts/up --ldap writes lab.json's ldap)")
    loaded: dict[str, Any] = directory
    return loaded


def call(
    cluster: dict[str, Any],
    method: str,
    path: str,
    auth: tuple[str, str],
    body: dict[str, Any] | None = None,
) -> requests.Response:
    verify: str | bool = cluster["ca_cert"] if cluster["mode"] == "tls" else False
    return requests.request(
        method,
        cluster["nodes"][0]["url"] + path,
        auth=auth,
        json=body,
        verify=verify,
        timeout=30,
    )


def person(ldap: dict[str, Any], name: str) -> tuple[str, str]:
    return name, Path(ldap["people"][name]["password_file"]).read_text().strip()


def admin(cluster: dict[str, Any]) -> tuple[str, str]:
    return cluster["admin_user"], Path(cluster["admin_password_file"]).read_text().strip()


def in_group(ldap: dict[str, Any], wanted: bool) -> str:
    return next(name for name, p in ldap["people"].items() if bool(p["groups"]) is wanted)


def test_a_person_gets_their_groups_as_backend_roles(
    cluster: dict[str, Any], ldap: dict[str, Any]
) -> None:
    name = in_group(ldap, True)
    info = call(cluster, "GET", "/_plugins/_security/authinfo", person(ldap, name))
    assert info.status_code == 200, info.text
    assert info.json()["user_name"] == name
    assert sorted(info.json()["backend_roles"]) == sorted(ldap["people"][name]["groups"])


def test_a_group_member_may_use_their_groups_indices_and_no_other(
    cluster: dict[str, Any], ldap: dict[str, Any]
) -> None:
    name = in_group(ldap, True)
    group = ldap["people"][name]["groups"][0]
    others = sorted({g for p in ldap["people"].values() for g in p["groups"]} - {group})
    own = f"{group}-{uuid.uuid4().hex[:8]}"
    auth = person(ldap, name)
    written = call(cluster, "PUT", f"/{own}/_doc/1?refresh=true", auth, {"by": name})
    assert written.status_code == 201, written.text
    assert call(cluster, "GET", f"/{own}/_doc/1", auth).status_code == 200
    foreign = f"{others[0]}-{uuid.uuid4().hex[:8]}"
    unrelated = f"ldap-unrelated-{uuid.uuid4().hex[:8]}"
    assert call(cluster, "PUT", f"/{unrelated}", admin(cluster)).status_code == 200
    for index in (foreign, unrelated):
        refused = call(cluster, "PUT", f"/{index}/_doc/1", auth, {"by": name})
        assert refused.status_code == 403, (index, refused.text)
    assert call(cluster, "GET", f"/{unrelated}/_search", auth).status_code == 403
    call(cluster, "DELETE", f"/{own},{unrelated}", admin(cluster))


def test_a_person_in_no_group_is_refused_every_index(
    cluster: dict[str, Any], ldap: dict[str, Any]
) -> None:
    name = in_group(ldap, False)
    auth = person(ldap, name)
    info = call(cluster, "GET", "/_plugins/_security/authinfo", auth)
    assert info.status_code == 200 and info.json()["backend_roles"] == []
    groups = sorted({g for p in ldap["people"].values() for g in p["groups"]})
    for index in [f"{group}-{uuid.uuid4().hex[:8]}" for group in groups] + ["*"]:
        assert call(cluster, "GET", f"/{index}/_search", auth).status_code == 403, index
    assert call(cluster, "PUT", f"/{groups[0]}-x/_doc/1", auth, {"a": 1}).status_code == 403


def test_a_wrong_password_gets_401(cluster: dict[str, Any], ldap: dict[str, Any]) -> None:
    name = in_group(ldap, True)
    refused = call(cluster, "GET", "/_plugins/_security/authinfo", (name, "not-the-password"))
    assert refused.status_code == 401


def test_the_rest_api_never_shows_the_bind_password(
    cluster: dict[str, Any], ldap: dict[str, Any]
) -> None:
    # The plugin masks every password of config.yml in this answer ("******"), the
    # placeholder included; the logins above prove each node resolved the placeholder.
    answer = call(cluster, "GET", "/_plugins/_security/api/securityconfig", admin(cluster))
    assert answer.status_code == 200, answer.text
    dynamic = answer.json()["config"]["dynamic"]
    assert dynamic["authc"]["ldap"]["authentication_backend"]["config"]["password"] == "******"
    password = Path(ldap["bind_password_file"]).read_text().strip()
    assert password not in answer.text


def wait_for(check: Any, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(1)


def test_with_the_directory_stopped_internal_users_still_log_in(
    cluster: dict[str, Any], ldap: dict[str, Any]
) -> None:
    if shutil.which("docker") is None or not ldap.get("container"):
        pytest.skip("the directory's container cannot be stopped from here")
    secrets = Path(cluster["admin_password_file"]).parent
    kibanaserver = ("kibanaserver", (secrets / "kibanaserver").read_text().strip())
    name = in_group(ldap, True)
    subprocess.run(["docker", "stop", "-t", "5", ldap["container"]], check=True)
    # The plugin keeps an authenticated user for plugins.security.cache.ttl_minutes (60):
    # without a flush, a person who logged in a moment ago would still get in.
    flushed = call(cluster, "DELETE", "/_plugins/_security/api/cache", admin(cluster))
    assert flushed.status_code == 200, flushed.text
    try:
        for auth in (admin(cluster), kibanaserver):
            started = time.monotonic()
            answer = call(cluster, "GET", "/_plugins/_security/authinfo", auth)
            assert answer.status_code == 200, (auth[0], answer.text)
            # The internal users skip the group lookup: no wait on the directory. A
            # lookup that waited would hold the call up to the plugin's connect timeout;
            # a fixed 3 s failed once at a load of 14 (3.3 s, molecule tls, 2026-11-29).
            assert time.monotonic() - started < CONNECT_TIMEOUT_MS / 1000
        refused = call(cluster, "GET", "/_plugins/_security/authinfo", person(ldap, name))
        assert refused.status_code in (401, 503), refused.text
    finally:
        subprocess.run(["docker", "start", ldap["container"]], check=True)

    # Polled on its port, not by logging in: each failed login counts towards the limit.
    where = urlsplit(ldap["url"])

    def serving() -> bool:
        try:
            socket.create_connection((where.hostname, where.port), timeout=1).close()
        except OSError:
            return False
        return True

    wait_for(serving)
    time.sleep(2)
    answer = call(cluster, "GET", "/_plugins/_security/authinfo", person(ldap, name))
    assert answer.status_code == 200, answer.text
