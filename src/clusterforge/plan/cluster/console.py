"""The console (OpenSearch Dashboards): its inventory validated, its archive checked, its
``opensearch_dashboards.yml`` rendered from the cluster model.

No registry this toolkit reaches carries Dashboards, so the archive always comes from the
operator: a tar.gz on the control node or a URL with its sha512. The version its
``package.json`` names is read on the control node before any host changes, and must be
the engine's major.minor: Dashboards refuses an engine of another minor version.

Nothing secret is in the plan. The settings rendered here carry the user name the console
signs in with (``kibanaserver``, one of the predefined users); the role adds that user's
password when it writes the file, which is 0600 and readable by the service alone.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.errors import ArtifactError, InventoryError
from clusterforge.plan.cluster.artifacts import FetchedArtifact, cache_dir, fetch_url
from clusterforge.plan.cluster.model import Cluster, plain_data, with_booleans
from clusterforge.plan.cluster.render import CA_CERT_FILE, render_settings_yaml, render_template
from clusterforge.schema import as_int, check_value, load_schema, unknown_variables

CONFIG_FILE = "opensearch_dashboards.yml"
UNIT_NAME = "opensearch-dashboards.service"
# The predefined user whose role (kibana_server) grants what the console's own index needs.
CONSOLE_BACKEND_USER = "kibanaserver"
# The console's security plugin; it cannot start against an engine whose security is off.
SECURITY_PLUGIN_DIR = "plugins/securityDashboards"


def console_defaults() -> dict[str, Any]:
    """The console's defaults, from the schema (one source)."""
    return load_schema().defaults("console")


@dataclass(frozen=True)
class Console:
    """One console host, validated."""

    inventory_name: str
    host: str
    port: int
    install_root: str
    config_dir: str
    data_path: str
    service_user: str
    start_timeout_s: int
    archive_path: str | None
    archive_url: str | None
    archive_sha512: str | None
    extra_settings: Mapping[str, Any]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def home(self) -> str:
        """The `current` symlink to the unpacked version the unit runs."""
        return f"{self.install_root}/current"


@dataclass(frozen=True)
class ConsoleArchive:
    """What the archive says of itself: its version and the directory it unpacks to."""

    path: Path
    version: str
    top_dir: str


def _build_console(
    inventory_name: str, host_vars: Mapping[str, Any], problems: list[str]
) -> Console:
    defaults = console_defaults()
    bad: set[str] = set()
    for var in load_schema().of_scope("console"):
        given = host_vars.get(var.name)
        problem = None if given is None else check_value(var, given)
        if problem:
            problems.append(f"{inventory_name}: {problem}")
            bad.add(var.name)

    def value(key: str) -> Any:
        """The checked value; a bad one (already reported) falls back to the default."""
        given = host_vars.get(key)
        return defaults[key] if given is None or key in bad else given

    host = value("dashboards_host") or host_vars.get("opensearch_network_host")
    host = host or host_vars.get("ansible_host")
    if not host:
        problems.append(
            f"{inventory_name}: no address for the console; set dashboards_host (or "
            "ansible_host) to the address it listens on"
        )
    path, url, sha512 = (
        str(value(key) or "") or None
        for key in (
            "dashboards_archive_path",
            "dashboards_archive_url",
            "dashboards_archive_sha512",
        )
    )
    if bool(path) == bool(url):
        problems.append(
            f"{inventory_name}: set exactly one of dashboards_archive_path (a tar.gz on the "
            "control node) and dashboards_archive_url (with dashboards_archive_sha512); "
            "Dashboards cannot be fetched from any registry, so the archive is yours to give"
        )
    if url and not sha512:
        problems.append(
            f"{inventory_name}: dashboards_archive_url needs dashboards_archive_sha512, the "
            "archive's published sha512, so that a corrupt download is refused"
        )
    extra = value("dashboards_extra_settings")
    return Console(
        inventory_name=inventory_name,
        host=str(host or ""),
        port=as_int(value("dashboards_port")) or 0,
        install_root=str(value("dashboards_install_root")),
        config_dir=str(value("dashboards_config_dir")),
        data_path=str(value("dashboards_data_path")),
        service_user=str(value("dashboards_service_user")),
        start_timeout_s=as_int(value("dashboards_start_timeout_s")) or 0,
        archive_path=path,
        archive_url=url,
        archive_sha512=sha512.lower() if sha512 else None,
        extra_settings=dict(extra),
    )


def build_consoles(hosts_vars: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[Console, ...]:
    """Validate every console host at once; InventoryError lists every problem."""
    plain = [(str(name), with_booleans(plain_data(host_vars))) for name, host_vars in hosts_vars]
    problems: list[str] = unknown_variables(plain)
    consoles = tuple(_build_console(name, host_vars, problems) for name, host_vars in plain)
    if problems:
        raise InventoryError(problems)
    return consoles


def read_console_archive(path: Path) -> ConsoleArchive:
    """Read ``<top dir>/package.json`` from a Dashboards tar.gz without unpacking it."""
    try:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive:
                parts = member.name.strip("./").split("/")
                if len(parts) == 2 and parts[1] == "package.json" and member.isfile():
                    stream = archive.extractfile(member)
                    if stream is None:
                        break
                    package = json.load(stream)
                    return ConsoleArchive(path, str(package["version"]), parts[0])
    except (OSError, tarfile.TarError, ValueError, KeyError) as error:
        raise ArtifactError(
            f"{path} is not a readable Dashboards archive ({error}); give the "
            "opensearch-dashboards-<version>-linux-x64.tar.gz release archive"
        ) from error
    raise ArtifactError(f"{path} has no <dir>/package.json; it is not a Dashboards release archive")


def check_console_version(archive: ConsoleArchive, engine_version: str) -> None:
    """Dashboards runs only against an engine of its own major.minor version."""
    if archive.version.split(".")[:2] != engine_version.split(".")[:2]:
        raise ArtifactError(
            f"the Dashboards archive {archive.path.name} is version {archive.version}, but the "
            f"engine is {engine_version}; give a Dashboards {engine_version} archive "
            "(its major.minor must match the engine's)"
        )


def fetch_console_archive(console: Console) -> FetchedArtifact:
    """The archive on the control node: the operator's file as it is, or a verified download."""
    if console.archive_path:
        source = Path(console.archive_path)
        if not source.is_file():
            raise ArtifactError(
                f"{console.inventory_name}: dashboards_archive_path {console.archive_path!r} "
                "is not a file on the control node"
            )
        return FetchedArtifact(source, fetched=False)
    url = console.archive_url or ""
    name = url.rstrip("/").rsplit("/", 1)[-1] or "opensearch-dashboards.tar.gz"
    return fetch_url(url, console.archive_sha512, cache_dir() / name)


def console_settings(cluster: Cluster, console: Console) -> dict[str, Any]:
    """``opensearch_dashboards.yml`` as data, without the backend user's password."""
    settings: dict[str, Any] = {
        "server.name": console.inventory_name,
        "server.host": console.host,
        "server.port": console.port,
        "path.data": console.data_path,
        "opensearch.hosts": [cluster.http_url(node) for node in cluster.nodes],
    }
    if cluster.secured:
        settings.update(
            {
                "opensearch.username": CONSOLE_BACKEND_USER,
                "opensearch.requestHeadersAllowlist": ["authorization", "securitytenant"],
                # The console itself is served over plain HTTP here; a secure-only cookie
                # would never come back from the browser.
                "opensearch_security.cookie.secure": False,
            }
        )
    if cluster.security_mode == "tls":
        settings.update(
            {
                "opensearch.ssl.verificationMode": "full",
                "opensearch.ssl.certificateAuthorities": [f"{console.config_dir}/{CA_CERT_FILE}"],
            }
        )
    settings.update(console.extra_settings)
    return settings


def render_console_config(settings: Mapping[str, Any], backend_password: str | None) -> str:
    """The file the console host gets: the planned settings plus the backend user's
    password (secured modes), which only the role holds."""
    # plain_data: Ansible hands over its own tagged containers, which YAML cannot dump.
    complete: dict[str, Any] = plain_data(dict(settings))
    if backend_password is not None:
        complete["opensearch.password"] = plain_data(backend_password)
    return render_settings_yaml(complete)


def render_console_unit(cluster: Cluster, console: Console) -> str:
    """The console's systemd unit."""
    return render_template(f"{UNIT_NAME}.j2", cluster=cluster, console=console, home=console.home)


def plan_consoles(
    cluster: Cluster, hosts_vars: Sequence[tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """Per console host: its settings, paths and the checked archive on the control node."""
    planned: dict[str, Any] = {}
    archives: dict[Path, ConsoleArchive] = {}
    for console in build_consoles(hosts_vars):
        fetched = fetch_console_archive(console)
        archive = archives.get(fetched.path) or read_console_archive(fetched.path)
        archives[fetched.path] = archive
        check_console_version(archive, cluster.version)
        install_dir = f"{console.install_root}/{archive.top_dir}"
        planned[console.inventory_name] = {
            "url": console.url,
            "version": archive.version,
            "archive": str(archive.path),
            "install_root": console.install_root,
            "install_dir": install_dir,
            "home": console.home,
            "config_dir": console.config_dir,
            "config_file": f"{console.config_dir}/{CONFIG_FILE}",
            "data_path": console.data_path,
            "service_user": console.service_user,
            "start_timeout_s": console.start_timeout_s,
            "backend_user": CONSOLE_BACKEND_USER if cluster.secured else None,
            "ca_cert": f"{console.config_dir}/{CA_CERT_FILE}"
            if cluster.security_mode == "tls"
            else None,
            "remove_security_plugin": not cluster.secured,
            "security_plugin_dir": f"{install_dir}/{SECURITY_PLUGIN_DIR}",
            "settings": console_settings(cluster, console),
            "unit": render_console_unit(cluster, console),
        }
    return planned


def consoles_unfetched(
    cluster: Cluster, consoles_vars: Sequence[tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The console hosts' files without their archive (a review does not download it)."""
    return {
        console.inventory_name: {
            "url": console.url,
            "config_dir": console.config_dir,
            "config_file": f"{console.config_dir}/{CONFIG_FILE}",
            "settings": console_settings(cluster, console),
            "unit": render_console_unit(cluster, console),
        }
        for console in build_consoles(consoles_vars)
    }
