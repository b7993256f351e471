"""A service's PostgreSQL database URL, planned once with its settings (issue 41, item 2).

A service host whose inventory says ``<service>_database: postgresql`` connects to the
first host of the group ``postgresql`` (roles/postgresql), as the service's own login role,
over TLS with the server's certificate and name verified against the toolkit's CA bundle
on the service host (``sslmode=verify-full``, ``sslrootcert=``). The URL is built here,
from the db host's variables, when the services' settings are planned, so the service's
settings model validates it with the rest, once per run, and the roles copy it.

The password is the one the postgresql role gives the login role: generated once on the
control node into ``<postgresql_credentials_dir or inventory/.postgresql>/<service>.password``
(clusterforge.pki.generated_secrets, the same file roles/postgresql/tasks/databases.yml
reads). An inventory check writes nothing, so it plans the URL with
:data:`~clusterforge.plan.services.orders_search.NOT_GENERATED` in the password's place, and
:func:`with_database_passwords` puts the real one in once the checks passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from clusterforge.errors import InventoryError
from clusterforge.pki.generated_secrets import GeneratedSecretError, alphanumeric, read_or_generate
from clusterforge.plan.security.tls_profile import OPENSSL_TLS12_NAMES, TlsProfile
from clusterforge.plan.services.orders_search import NOT_GENERATED
from clusterforge.schema import load_schema

DATABASE_GROUP = "postgresql"
# Where a service host keeps the CA bundle it verifies the server with: the postgresql
# role's _postgresql_client_ca_file_name, in the service's configuration directory.
CA_FILE_NAME = "postgresql-ca.pem"
PASSWORD_LENGTH = 32
CREDENTIALS_DIR_NAME = ".postgresql"
_PASSWORD_FIX = "then rerun so the server gets the new password"  # noqa: S105 - advice


@dataclass(frozen=True, kw_only=True)
class DatabaseServer:
    """The db host the services connect to: the first of the group postgresql."""

    host: str
    address: str
    port: int
    credentials_dir: Path

    def password_file(self, service: str) -> Path:
        return self.credentials_dir / f"{service}.password"


def server_tls(profile: TlsProfile) -> dict[str, str]:
    """The db server's TLS settings (postgresql.conf's names) from the cluster's one TLS
    profile (clusterforge.plan.security.tls_profile), so PostgreSQL offers what every other
    listener of the toolkit offers; roles/postgresql renders them as they are.

    ``ssl_ciphers`` is OpenSSL's cipher list, which holds TLS 1.2 (and older) only: the
    profile's TLS 1.2 suites in OpenSSL's names, in the cluster's order. PostgreSQL 15 and
    older have no setting for the TLS 1.3 suites, so on TLS 1.3 the server offers
    OpenSSL's defaults (TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256,
    TLS_AES_128_GCM_SHA256; all AEAD) whatever the profile's TLS 1.3 list says. A profile
    without TLS 1.3 caps the server at TLS 1.2 (``ssl_max_protocol_version``; empty, no
    cap). A profile of TLS 1.3 alone still needs a valid list, never used: every AEAD one.
    """
    tls12 = profile.tls12_openssl_ciphers or tuple(OPENSSL_TLS12_NAMES.values())
    return {
        "ssl_min_protocol_version": profile.oldest_protocol,
        "ssl_max_protocol_version": "" if "TLSv1.3" in profile.protocols else "TLSv1.2",
        "ssl_ciphers": ":".join(tls12),
    }


def database_server(
    database_vars: Sequence[tuple[str, Mapping[str, Any]]], *, inventory_dir: Path
) -> DatabaseServer | None:
    """The first host of the group postgresql, from its ``postgresql_*`` variables (None
    without one). An empty address is refused where a service asks for the database."""
    if not database_vars:
        return None
    host, variables = database_vars[0]
    addresses = variables.get("postgresql_listen_addresses") or []
    address = str(addresses[0]) if isinstance(addresses, Sequence) and addresses else ""
    if isinstance(addresses, str):
        address = ""
    port = variables.get("postgresql_port")
    credentials = variables.get("postgresql_credentials_dir") or ""
    return DatabaseServer(
        host=host,
        address=address,
        port=int(port if port is not None else load_schema().default_of("postgresql_port")),
        credentials_dir=Path(credentials) if credentials else inventory_dir / CREDENTIALS_DIR_NAME,
    )


def plan_database_url(
    service: str,
    variables: Mapping[str, Any],
    problems: list[str],
    *,
    host: str,
    server: DatabaseServer | None,
) -> tuple[str, Path] | None:
    """(the URL, the password file) for a host on PostgreSQL, the password still
    :data:`NOT_GENERATED`; None for one on SQLite. A refusal is added to ``problems``."""
    kind = variables.get(f"{service}_database") or "sqlite"
    if kind == "sqlite":
        return None
    name = f"{service}_database"
    if kind != DATABASE_GROUP:
        problems.append(
            f"{name} on {host} is {kind!r}; set it to sqlite (the default: a file in the data "
            f"directory, or {service}_database_url) or postgresql (the first host of the "
            "group postgresql, deployed by the postgresql role)"
        )
        return None
    before = len(problems)
    if variables.get(f"{service}_database_url"):
        problems.append(
            f"{name} is postgresql on {host} and {service}_database_url is set too; leave "
            f"{service}_database_url unset (the URL is built from the postgresql role's "
            "generated credentials)"
        )
    if server is None or not server.address:
        problems.append(
            f"{name} is postgresql on {host}: put the db host in the inventory group "
            "postgresql and set postgresql_listen_addresses on it"
        )
    if len(problems) > before or server is None:
        return None
    names = load_schema().services[service].database
    address = f"[{server.address}]" if ":" in server.address else server.address
    ca_bundle = f"{variables.get(f'{service}_config_dir')}/{CA_FILE_NAME}"
    url = (
        f"postgresql+psycopg://{names}:{NOT_GENERATED}@{address}:{server.port}/{names}"
        f"?sslmode=verify-full&sslrootcert={quote(ca_bundle, safe='/')}"
    )
    return url, server.password_file(service)


def with_database_passwords(
    section: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """A services section (with secrets) whose PostgreSQL URLs hold the generated
    passwords (each read, or generated once, from its ``database_password_file``).

    Nothing is validated again: to the settings model the password is part of a URL
    whose form it checked with the placeholder, which is letters, digits and '-' as the
    generated password is letters and digits."""
    out = {
        host: {service: dict(settings) for service, settings in by_service.items()}
        for host, by_service in section.items()
    }
    placeholder = f":{NOT_GENERATED}@"
    for by_service in out.values():
        for settings in by_service.values():
            path = settings.get("database_password_file")
            content = settings.get("content")
            if not path or not isinstance(content, str) or placeholder not in content:
                continue
            try:
                password = read_or_generate(
                    Path(path), generate=alphanumeric(PASSWORD_LENGTH), fix=_PASSWORD_FIX
                )
            except GeneratedSecretError as error:
                raise InventoryError([str(error)]) from None
            settings["content"] = content.replace(placeholder, f":{password}@")
    return out
