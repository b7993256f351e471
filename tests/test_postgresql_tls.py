"""roles/postgresql's TLS (issue 39): the server's settings and pg_hba.conf as the role's
templates render them. The TLS settings come from the cluster's one TLS profile (issue
51; clusterforge.plan.services.services_database.server_tls), and a real PostgreSQL started with
the rendered settings offers that profile and nothing else. The deployed server is tested
in the services molecule scenario."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from clusterforge.plan.security.tls_profile import default_profile
from clusterforge.plan.services.services_database import (
    database_server,
    plan_database_url,
    server_tls,
)
from clusterforge.plan.validation import validate_inventory
from loopback_pki import loopback_server_certificate
from test_lifecycle_plan import nodes

ROLE = Path(__file__).resolve().parents[1] / "roles" / "postgresql"


def render(template: str, **variables: Any) -> str:
    environment = jinja2.Environment(  # noqa: S701 (configuration files, not HTML)
        loader=jinja2.FileSystemLoader(ROLE / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        # Ansible's template module's defaults.
        trim_blocks=True,
    )
    environment.filters["comment"] = lambda text: f"# {text}"
    return environment.get_template(template).render(ansible_managed="managed", **variables)


def role_vars() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    return values


def render_conf(tls: dict[str, str], **overrides: Any) -> str:
    config_dir = "/etc/postgresql/15/main"
    variables: dict[str, Any] = {
        "postgresql_listen_addresses": ["10.0.0.5"],
        "postgresql_port": 5432,
        "_postgresql_tls_cert_path": f"{config_dir}/clusterforge-server.crt",
        "_postgresql_tls_key_path": f"{config_dir}/clusterforge-server.key",
        "_postgresql_tls": tls,
    }
    return render("clusterforge.conf.j2", **(variables | overrides))


def settings_of(conf: str) -> dict[str, str]:
    return dict(
        line.split(" = ", 1) for line in conf.splitlines() if line and not line.startswith("#")
    )


# What the role rendered before the profile reached PostgreSQL (issue 51).
OLD_CIPHER_LIST = "ECDHE+AESGCM:ECDHE+CHACHA20"


def tls12_suites(cipher_list: str) -> set[str]:
    """The TLS 1.2 suites an OpenSSL cipher list selects, as this Python's OpenSSL reads it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.set_ciphers(cipher_list)
    return {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.2"}


def test_the_server_speaks_tls_12_or_newer_with_ecdhe_and_aead_only() -> None:
    internal = role_vars()
    config_dir = "/etc/postgresql/15/main"
    conf = render_conf(server_tls(default_profile()))
    settings = settings_of(conf)
    assert settings["ssl"] == "on"
    assert settings["ssl_cert_file"] == f"'{config_dir}/clusterforge-server.crt'"
    assert settings["ssl_key_file"] == f"'{config_dir}/clusterforge-server.key'"
    assert settings["ssl_min_protocol_version"] == "'TLSv1.2'"
    assert settings["ssl_ca_file"] == "''"
    assert "ssl_max_protocol_version" not in settings
    # The default profile's TLS 1.2 suites, by name in the cluster's order: the same six
    # suites the role's own list selected before.
    ciphers = settings["ssl_ciphers"].strip("'").split(":")
    assert ciphers == [
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
    ]
    assert tls12_suites(":".join(ciphers)) == tls12_suites(OLD_CIPHER_LIST)
    assert settings["password_encryption"] == "'scram-sha-256'"
    # Under the server's own config directory, as the role's vars name them.
    assert internal["_postgresql_tls_cert_path"].startswith("{{ _postgresql_config_dir }}/")
    assert internal["_postgresql_tls_key_path"].startswith("{{ _postgresql_config_dir }}/")


def test_pg_hba_admits_the_services_over_tls_only() -> None:
    internal = role_vars()
    clients = [
        {"service": "user_directory", "host": "apps-1", "address": "10.0.0.21"},
        {"service": "order_service", "host": "apps-2", "address": "fd00::22"},
        {"service": "order_service", "host": "apps-3", "address": "10.0.1.0/24"},
    ]
    hba = render(
        "pg_hba.conf.j2",
        _postgresql_clients=clients,
        _postgresql_services=internal["_postgresql_services"],
    )
    rules = [line.split() for line in hba.splitlines() if line and not line.startswith("#")]
    assert rules == [
        ["local", "all", "postgres", "peer"],
        [
            "hostssl",
            "clusterforge_userdir",
            "clusterforge_userdir",
            "10.0.0.21/32",
            "scram-sha-256",
        ],
        ["hostssl", "clusterforge_orders", "clusterforge_orders", "fd00::22/128", "scram-sha-256"],
        ["hostssl", "clusterforge_orders", "clusterforge_orders", "10.0.1.0/24", "scram-sha-256"],
    ]


def test_the_services_database_url_verifies_the_server(tmp_path: Path) -> None:
    """The URL the plan builds (clusterforge.plan.services.services_database) asks for verify-full
    against the bundle client_url.yml has the service's role place on the host."""
    server = database_server(
        [("db-1", {"postgresql_listen_addresses": ["fd00::5"], "postgresql_port": 5432})],
        inventory_dir=tmp_path,
    )
    problems: list[str] = []
    planned = plan_database_url(
        "order_service",
        {"order_service_database": "postgresql", "order_service_config_dir": "/etc/orders x"},
        problems,
        host="apps-1",
        server=server,
    )
    assert not problems and planned is not None
    url, password_file = planned
    assert url.startswith("postgresql+psycopg://clusterforge_orders:")
    assert "@[fd00::5]:5432/clusterforge_orders?" in url
    assert url.endswith("?sslmode=verify-full&sslrootcert=/etc/orders%20x/postgresql-ca.pem")
    assert password_file == tmp_path / ".postgresql" / "order_service.password"
    tasks = yaml.safe_load((ROLE / "tasks" / "client_url.yml").read_text())
    # The role sets no URL of its own: the plan's is the one the service gets.
    assert not [task for task in tasks if "database_url" in task.get("name", "")]
    bundle_task = next(
        task for task in tasks if "clusterforge.stack.clusterforge_host_certificate" in task
    )
    assert bundle_task["clusterforge.stack.clusterforge_host_certificate"] == {
        "purpose": "postgresql",
        "bundle_only": True,
    }


def planned_tls(inventory_dir: Path, protocols: list[str], ciphers: list[str]) -> dict[str, str]:
    """The db server's TLS settings the inventory check plans for an inventory whose
    cluster names these protocols and suites."""
    inventory = nodes(
        inventory_dir, opensearch_tls_protocols=protocols, opensearch_tls_ciphers=ciphers
    )
    return validate_inventory(inventory, inventory_dir=inventory_dir).postgresql_tls


NARROW = (["TLSv1.2"], ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"])


def test_a_narrower_profile_in_the_inventory_reaches_postgresql_conf(tmp_path: Path) -> None:
    settings = settings_of(render_conf(planned_tls(tmp_path, *NARROW)))
    assert settings["ssl_min_protocol_version"] == "'TLSv1.2'"
    assert settings["ssl_max_protocol_version"] == "'TLSv1.2'"
    assert settings["ssl_ciphers"] == "'ECDHE-RSA-AES256-GCM-SHA384'"
    # TLS 1.3 alone: the floor rises; the TLS 1.2 list stays a valid one (PostgreSQL
    # refuses to start on an empty list), never offered below the floor.
    modern = planned_tls(tmp_path, ["TLSv1.3"], ["TLS_AES_256_GCM_SHA384"])
    settings = settings_of(render_conf(modern))
    assert settings["ssl_min_protocol_version"] == "'TLSv1.3'"
    assert "ssl_max_protocol_version" not in settings
    assert tls12_suites(settings["ssl_ciphers"].strip("'")) == tls12_suites(OLD_CIPHER_LIST)


def test_the_role_takes_the_settings_from_the_plan_else_the_inventory_check() -> None:
    internal = (ROLE / "vars" / "main.yml").read_text()
    assert "__clusterforge_plan" in internal and ".postgresql_tls" in internal
    assert "__clusterforge_checked_postgresql_tls" in internal
    check = yaml.safe_load((ROLE.parents[1] / "playbooks" / "check_inventory.yml").read_text())
    facts: dict[str, str] = {}
    for task in check[0]["tasks"]:
        facts.update(task.get("ansible.builtin.set_fact") or {})
    assert facts["__clusterforge_checked_postgresql_tls"] == (
        "{{ __clusterforge_inventory_check.postgresql_tls | default(none) }}"
    )


# A real server: PostgreSQL's own binaries, started on loopback with the rendered settings.
POSTGRES_BIN = (
    next((path.parent for path in sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))), None)
    if Path("/usr/lib/postgresql").is_dir()
    else None
)
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


def _as_server_user() -> list[str]:
    """initdb refuses root: as root, run the server as Debian's postgres user."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("root without a postgres user to run the server as")
    if shutil.which("runuser") is None:
        pytest.skip("root without runuser to run the server as postgres")
    return ["runuser", "-u", "postgres", "--"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def narrow_server() -> Iterator[int]:
    """PostgreSQL with the role's settings for a TLS 1.2-only, one-suite profile; its port."""
    if POSTGRES_BIN is None:
        pytest.skip("needs PostgreSQL's server binaries (Debian's postgresql package)")
    runas = _as_server_user()
    # Under /tmp (1777), so the server's user reaches it whoever runs the test.
    base = Path(tempfile.mkdtemp(prefix="cf-pg-tls-"))
    pg_ctl = [
        *runas,
        str(POSTGRES_BIN / "pg_ctl"),
        "-D",
        str(base / "data"),
        "-l",
        str(base / "log"),
    ]
    try:
        yield _start_server(base, runas, pg_ctl)
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _start_server(base: Path, runas: list[str], pg_ctl: list[str]) -> int:
    """initdb in ``base``, the role's conf for the narrow profile included, started; its
    port."""
    assert POSTGRES_BIN is not None
    base.chmod(0o755)
    _, issued_cert, issued_key = loopback_server_certificate(base / "pki", "lifecycle-test")
    data = base / "data"
    cert, key = base / "server.crt", base / "server.key"
    shutil.copyfile(issued_cert, cert)
    shutil.copyfile(issued_key, key)
    key.chmod(0o600)  # PostgreSQL refuses a key others may read
    if runas:
        owner = pwd.getpwnam("postgres")
        for path in (base, cert, key):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    initdb = [*runas, str(POSTGRES_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "test"]
    subprocess.run(initdb, check=True, capture_output=True, timeout=120)
    port = _free_port()
    conf = render_conf(
        planned_tls(base / "inventory", *NARROW),
        postgresql_listen_addresses=["127.0.0.1"],
        postgresql_port=port,
        _postgresql_tls_cert_path=str(cert),
        _postgresql_tls_key_path=str(key),
    )
    (data / "clusterforge.conf").write_text(conf)
    with (data / "postgresql.conf").open("a") as main_conf:
        main_conf.write(f"include 'clusterforge.conf'\nunix_socket_directories = '{data}'\n")
    if runas:
        subprocess.run(["chown", "-R", "postgres:postgres", str(data)], check=True)
    started = subprocess.run([*pg_ctl, "-w", "start"], capture_output=True, timeout=120)
    assert started.returncode == 0, (base / "log").read_text()
    return port


def _handshake(port: int, *, version: ssl.TLSVersion, ciphers: str | None = None) -> str:
    """PostgreSQL's SSLRequest, then a TLS handshake at ``version`` offering ``ciphers``;
    the suite agreed. Raises ssl.SSLError when the server refuses."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # what is graded here is what the server offers
    context.minimum_version = context.maximum_version = version
    if ciphers:
        context.set_ciphers(ciphers)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(SSL_REQUEST)
        assert raw.recv(1) == b"S"  # the server goes on in TLS
        with context.wrap_socket(raw) as tls:
            agreed = tls.cipher()
            assert agreed is not None
            return agreed[0]


def test_a_real_server_offers_the_narrow_profile_and_nothing_else(narrow_server: int) -> None:
    port = narrow_server
    assert _handshake(port, version=ssl.TLSVersion.TLSv1_2) == "ECDHE-RSA-AES256-GCM-SHA384"
    # Another AEAD suite the default profile has, and a CBC one: both refused.
    for refused in ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-SHA384"):
        with pytest.raises(ssl.SSLError):
            _handshake(port, version=ssl.TLSVersion.TLSv1_2, ciphers=refused)
    # The profile has no TLS 1.3: ssl_max_protocol_version holds the server to TLS 1.2.
    with pytest.raises(ssl.SSLError):
        _handshake(port, version=ssl.TLSVersion.TLSv1_3)
