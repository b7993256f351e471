"""roles/postgresql's TLS (issue 39): the server's settings and pg_hba.conf as the role's
templates render them. The server itself is tested in the services molecule scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

from clusterforge.plan.services_database import database_server, plan_database_url

ROLE = Path(__file__).resolve().parents[1] / "roles" / "postgresql"


def render(template: str, **variables: Any) -> str:
    environment = jinja2.Environment(  # noqa: S701 (configuration files, not HTML)
        loader=jinja2.FileSystemLoader(ROLE / "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters["comment"] = lambda text: f"# {text}"
    return environment.get_template(template).render(ansible_managed="managed", **variables)


def role_vars() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    return values


def test_the_server_speaks_tls_12_or_newer_with_ecdhe_and_aead_only() -> None:
    internal = role_vars()
    config_dir = "/etc/postgresql/15/main"
    conf = render(
        "clusterforge.conf.j2",
        postgresql_listen_addresses=["10.0.0.5"],
        postgresql_port=5432,
        _postgresql_tls_cert_path=f"{config_dir}/clusterforge-server.crt",
        _postgresql_tls_key_path=f"{config_dir}/clusterforge-server.key",
        _postgresql_tls12_ciphers=internal["_postgresql_tls12_ciphers"],
    )
    settings = dict(
        line.split(" = ", 1) for line in conf.splitlines() if line and not line.startswith("#")
    )
    assert settings["ssl"] == "on"
    assert settings["ssl_cert_file"] == f"'{config_dir}/clusterforge-server.crt'"
    assert settings["ssl_key_file"] == f"'{config_dir}/clusterforge-server.key'"
    assert settings["ssl_min_protocol_version"] == "'TLSv1.2'"
    assert settings["ssl_ca_file"] == "''"
    ciphers = settings["ssl_ciphers"].strip("'").split(":")
    assert ciphers == ["ECDHE+AESGCM", "ECDHE+CHACHA20"]
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
    """The URL the plan builds (clusterforge.plan.services_database) asks for verify-full
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
