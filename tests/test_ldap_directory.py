"""A REAL slapd (Debian's 2.5) on loopback: the lab's tree, and the binds the nodes make.

slapd runs unprivileged from a temporary config (clusterforge.lab.directory) with LDAPS
and StartTLS on 127.0.0.1, its certificate issued by a CA made here. The tests read the
tree with ldapsearch as the plugin would (the bind account, the rendered filters) and
bind with clusterforge.ldap_check, whose messages must name the variable to fix.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterforge.lab.directory import (
    BIND_DN,
    GROUP_BASE,
    LAB_PEOPLE,
    PEOPLE_BASE,
    DirectoryFiles,
    slapd_argv,
    write_directory,
)
from clusterforge.ldap_check import DirectoryCheckError, DirectoryHost, check_bind
from clusterforge.pki.pki import SubjectFields, ensure_server_certificate, load_or_create_ca
from clusterforge.plan.security.ldap import LdapDirectory, config_domains

pytestmark = pytest.mark.skipif(
    shutil.which("slapd", path="/usr/sbin:/usr/bin") is None or shutil.which("ldapsearch") is None,
    reason="Debian's slapd and ldap-utils are not installed (.ci/run installs them)",
)

ADDRESS = "127.0.0.1"
BIND_PASSWORD = "Bind-Unit-7c1e"
PEOPLE = {name: f"Person-{name}-7c1e" for name in LAB_PEOPLE}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Directory:
    ldaps: DirectoryHost
    starttls: DirectoryHost
    ca_pem: str
    ca_path: Path
    other_ca_pem: str


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Directory]:
    root = tmp_path_factory.mktemp("slapd")
    ca = load_or_create_ca(
        root / "pki", passphrase=b"unit-ca-7c1e", subject=SubjectFields(common_name="unit ca")
    )
    issued = ensure_server_certificate(
        ca,
        directory=root / "pki",
        name="directory",
        subject=SubjectFields(common_name="directory", organizational_unit="directory"),
        alt_names=[ADDRESS, "localhost"],
    )
    other = load_or_create_ca(
        root / "other", passphrase=b"unit-ca-7c1e", subject=SubjectFields(common_name="other")
    )
    files = DirectoryFiles(
        root=root / "slapd", cert=issued.cert_path, key=issued.key_path, ca=ca.cert_path
    )
    write_directory(files, people_passwords=PEOPLE, bind_password=BIND_PASSWORD)
    ldaps, ldap = free_port(), free_port()
    process = subprocess.Popen(
        slapd_argv(files, address=ADDRESS, ldaps_port=ldaps, ldap_port=ldap),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection((ADDRESS, ldaps), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"slapd did not start: {process.stderr}") from None
                time.sleep(0.1)
        yield Directory(
            ldaps=DirectoryHost(ADDRESS, ldaps),
            starttls=DirectoryHost(ADDRESS, ldap),
            ca_pem=ca.cert_path.read_text(),
            ca_path=ca.cert_path,
            other_ca_pem=other.cert_path.read_text(),
        )
    finally:
        process.terminate()
        process.wait(timeout=10)


def ldapsearch(
    directory: Directory, base: str, search: str, *attributes: str, password: str = BIND_PASSWORD
) -> str:
    env = {**os.environ, "LDAPTLS_CACERT": str(directory.ca_path), "LDAPTLS_REQCERT": "demand"}
    # The password goes in a 0600 file (-y), never in the arguments.
    secret = directory.ca_path.parent / "bind.secret"
    secret.touch(mode=0o600)
    secret.write_text(password)
    result = subprocess.run(
        [
            "ldapsearch",
            "-LLL",
            "-x",
            "-H",
            f"ldaps://{directory.ldaps}",
            "-D",
            BIND_DN,
            "-y",
            str(secret),
            "-b",
            base,
            search,
            *attributes,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    secret.unlink()
    assert result.returncode == 0, result.stderr
    return result.stdout


def lab_ldap() -> LdapDirectory:
    return LdapDirectory(
        hosts=(f"{ADDRESS}:636",),
        tls="ldaps",
        ca_path="ca.pem",
        bind_dn=BIND_DN,
        userbase=PEOPLE_BASE,
        usersearch="(uid={0})",
        username_attribute="uid",
        rolebase=GROUP_BASE,
        rolesearch="(member={0})",
        rolename_attribute="cn",
        nested_groups=False,
        skip_users=(),
        domain_order="internal_first",
        check=True,
    )


def test_the_tree_has_two_groups_and_three_people_one_in_none(directory: Directory) -> None:
    people = ldapsearch(directory, PEOPLE_BASE, "(objectClass=inetOrgPerson)", "uid")
    assert sorted(
        line.split(": ")[1] for line in people.splitlines() if line.startswith("uid:")
    ) == [
        "alice",
        "bob",
        "carol",
    ]
    groups = ldapsearch(directory, GROUP_BASE, "(objectClass=groupOfNames)", "cn", "member")
    assert "cn: team-a" in groups and "cn: team-b" in groups
    assert "uid=carol" not in groups
    # Passwords are for binding only: the bind account cannot read them.
    assert "userPassword" not in ldapsearch(directory, PEOPLE_BASE, "(uid=alice)", "userPassword")


def test_the_rendered_searches_find_the_person_and_their_groups(directory: Directory) -> None:
    domains = config_domains(lab_ldap(), config_dir="/etc/opensearch", internal_users=["admin"])
    authc = domains["authc"]["ldap"]["authentication_backend"]["config"]
    authz = domains["authz"]["ldap_roles"]["authorization_backend"]["config"]
    found = ldapsearch(directory, authc["userbase"], authc["usersearch"].replace("{0}", "alice"))
    assert found.startswith(f"dn: uid=alice,{PEOPLE_BASE}")
    person_dn = f"uid=alice,{PEOPLE_BASE}"
    groups = ldapsearch(
        directory,
        authz["rolebase"],
        authz["rolesearch"].replace("{0}", person_dn),
        authz["rolename"],
    )
    assert "cn: team-a" in groups and "team-b" not in groups
    nobody = ldapsearch(
        directory, authz["rolebase"], authz["rolesearch"].replace("{0}", f"uid=carol,{PEOPLE_BASE}")
    )
    assert nobody.strip() == ""


@pytest.mark.parametrize("tls", ["ldaps", "starttls"])
def test_the_bind_account_and_each_person_bind_over_tls(directory: Directory, tls: str) -> None:
    host = directory.ldaps if tls == "ldaps" else directory.starttls
    check_bind(host, tls=tls, ca_pem=directory.ca_pem, bind_dn=BIND_DN, password=BIND_PASSWORD)
    for name, password in PEOPLE.items():
        check_bind(
            host,
            tls=tls,
            ca_pem=directory.ca_pem,
            bind_dn=f"uid={name},{PEOPLE_BASE}",
            password=password,
        )


def test_a_wrong_bind_password_names_the_variable(directory: Directory) -> None:
    with pytest.raises(DirectoryCheckError) as caught:
        check_bind(
            directory.ldaps,
            tls="ldaps",
            ca_pem=directory.ca_pem,
            bind_dn=BIND_DN,
            password="Wrong-7c1e",
        )
    assert "invalidCredentials (49)" in str(caught.value)
    assert "opensearch_ldap_bind_password" in str(caught.value)
    assert "Wrong-7c1e" not in str(caught.value)


def test_an_untrusted_certificate_names_the_ca_variable(directory: Directory) -> None:
    with pytest.raises(DirectoryCheckError) as caught:
        check_bind(
            directory.ldaps,
            tls="ldaps",
            ca_pem=directory.other_ca_pem,
            bind_dn=BIND_DN,
            password=BIND_PASSWORD,
        )
    assert "not trusted" in str(caught.value) and "opensearch_ldap_ca_path" in str(caught.value)


def test_the_directory_is_reached_by_any_name_its_certificate_carries(
    directory: Directory,
) -> None:
    renamed = DirectoryHost("localhost", directory.ldaps.port)
    check_bind(
        renamed, tls="ldaps", ca_pem=directory.ca_pem, bind_dn=BIND_DN, password=BIND_PASSWORD
    )


def test_an_unreachable_directory_names_the_hosts_variable(directory: Directory) -> None:
    with pytest.raises(DirectoryCheckError) as caught:
        check_bind(
            DirectoryHost("127.0.0.31", 636),
            tls="ldaps",
            ca_pem=directory.ca_pem,
            bind_dn=BIND_DN,
            password=BIND_PASSWORD,
            timeout=1,
        )
    assert "opensearch_ldap_hosts entry 127.0.0.31:636 does not answer" in str(caught.value)


def test_ldaps_spoken_to_the_starttls_port_says_which_setting(directory: Directory) -> None:
    with pytest.raises(DirectoryCheckError, match="opensearch_ldap_tls"):
        check_bind(
            directory.starttls,
            tls="ldaps",
            ca_pem=directory.ca_pem,
            bind_dn=BIND_DN,
            password=BIND_PASSWORD,
            timeout=2,
        )
