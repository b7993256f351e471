"""The services' TLS front: one nginx per service host, planned from the inventory.

Each service on a host whose ``<service>_tls_proxy`` is true (the default) is served by
the proxy on ``<service>_port`` over HTTPS, while the application itself binds
``<service>_host`` (a loopback address) on ``<service>_app_port``. The proxy holds the
HTTP edges for it: TLS with the cluster's protocols and suites (TLS 1.3 and 1.2, ECDHE
with AEAD only), header size and read timeouts, a body cap per service, idle and
per-client connection limits, and an access log with neither query strings nor the
``Authorization`` header. A service whose ``<service>_tls_proxy`` is false has a proxy of
the user's own in front: clusterforge then serves it as before and lets it bind off
loopback.

:func:`plan_tls_proxy` decides everything from the variables; :func:`render_nginx_conf`
and :func:`render_unit` write the two files the role copies. Nothing here touches a host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterforge.addresses import is_loopback_host
from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.render import render_template
from clusterforge.plan.security.tls_profile import TlsProfile
from clusterforge.schema import as_bool, load_schema

# The services the proxy can front, in the order their server blocks are written.
PROXIED_SERVICES = ("user_directory", "order_service")
# The proxy caps a body at twice the service's own cap: a body up to that size still
# reaches the service, which answers 413 in its own words (the spec's shape); anything
# larger is refused by the proxy unread.
BODY_CAP_FACTOR = 2
# The order service's fixed body cap (clusterforge_orders.app.MAX_BODY_BYTES); the user
# directory's is its variable user_directory_max_request_body_bytes.
ORDER_SERVICE_MAX_BODY_BYTES = 64 * 1024
# uvicorn closes an idle keep-alive connection after 5 s; the proxy must let go of its
# idle upstream connections first, or it may send a request down one being closed.
UPSTREAM_IDLE_SECONDS = 4


@dataclass(frozen=True, kw_only=True)
class ProxiedService:
    service: str
    public_port: int
    app_host: str
    app_port: int
    max_body_bytes: int

    @property
    def upstream(self) -> str:
        host = f"[{self.app_host}]" if ":" in self.app_host else self.app_host
        return f"{host}:{self.app_port}"


@dataclass(frozen=True, kw_only=True)
class TlsProxyPlan:
    """One host's proxy: what it listens on, what it forwards to, and its edges."""

    host: str
    listen_address: str
    services: tuple[ProxiedService, ...]
    config_dir: str
    service_name: str
    user: str
    header_timeout: int
    body_timeout: int
    keepalive_timeout: int
    keepalive_requests: int
    max_header_bytes: int
    connections_per_client: int
    worker_connections: int
    tls_protocols: tuple[str, ...]
    tls12_ciphers: tuple[str, ...]
    tls13_suites: tuple[str, ...]

    @property
    def cert_path(self) -> str:
        return f"{self.config_dir}/tls/proxy.pem"

    @property
    def key_path(self) -> str:
        return f"{self.config_dir}/tls/proxy-key.pem"

    @property
    def ca_bundle_path(self) -> str:
        return f"{self.config_dir}/tls/ca-bundle.pem"

    @property
    def config_path(self) -> str:
        return f"{self.config_dir}/nginx.conf"

    @property
    def runtime_dir(self) -> str:
        return f"/run/{self.service_name}"

    def listen(self, port: int) -> str:
        if not self.listen_address:
            return str(port)
        address = self.listen_address
        return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"

    def urls(self, reach: str) -> dict[str, str]:
        """Each proxied service's base URL, reached at ``reach`` (an address or name)."""
        host = self.listen_address or reach
        host = f"[{host}]" if ":" in host else host
        return {entry.service: f"https://{host}:{entry.public_port}" for entry in self.services}


def _value(variables: Mapping[str, Any], name: str) -> Any:
    given = variables.get(name)
    return load_schema().default_of(name) if given is None else given


def proxied(variables: Mapping[str, Any], service: str) -> bool:
    """Whether clusterforge's proxy fronts ``service`` on this host (``<service>_tls_proxy``,
    read as Ansible reads a boolean; a value that is none counts as the safe default,
    true, and :func:`check_service_bind` refuses it)."""
    return as_bool(_value(variables, f"{service}_tls_proxy")) is not False


def _is_port(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        number = int(value)
    except (TypeError, ValueError):
        return False
    return str(number) == str(value).strip() and 1 <= number <= 65535


def check_service_bind(variables: Mapping[str, Any], service: str, *, host: str) -> list[str]:
    """The service's own bind, as the proxy needs it: loopback, on a port of its own."""
    if not proxied(variables, service):
        return []
    problems = []
    flag = _value(variables, f"{service}_tls_proxy")
    if as_bool(flag) is None:
        problems.append(
            f"{service}_tls_proxy (host {host}) is {flag!r}, not a boolean; write true "
            "(clusterforge's TLS proxy in front) or false (a proxy of your own)"
        )
    bind = str(_value(variables, f"{service}_host") or "")
    port, app_port = _value(variables, f"{service}_port"), _value(variables, f"{service}_app_port")
    for name, value in ((f"{service}_port", port), (f"{service}_app_port", app_port)):
        if not _is_port(value):
            problems.append(
                f"{name} (host {host}) is {value!r}; set it to a port number from 1 to 65535"
            )
    if problems:
        return problems
    if not is_loopback_host(bind):
        problems.append(
            f"{service}_host is {bind or '(empty: every address)'!r} on {host}, but "
            f"clusterforge's TLS proxy serves {service} on port {port} and the application "
            f"must then be reachable on loopback only; set {service}_host: 127.0.0.1, or, "
            f"with a TLS proxy or load balancer of your own in front, {service}_tls_proxy: false"
        )
    if str(port) == str(app_port):
        problems.append(
            f"{service}_app_port equals {service}_port ({port}) on {host}: the proxy listens "
            f"on {service}_port and the application on {service}_app_port; give them "
            "different ports"
        )
    return problems


def plan_tls_proxy(
    host: str,
    variables: Mapping[str, Any],
    services: Sequence[str],
    *,
    tls_protocols: Sequence[str],
    tls_ciphers: Sequence[str],
) -> TlsProxyPlan | None:
    """The proxy of ``host``, which runs ``services``; None when none of them is proxied.

    ``variables`` are the host's (``tls_proxy_*`` and the services'); the TLS protocols and
    suites are the cluster's (``opensearch_tls_*``), so every listener has one profile.
    """
    problems: list[str] = []
    entries = []
    for service in PROXIED_SERVICES:
        if service not in services or not proxied(variables, service):
            continue
        problems += check_service_bind(variables, service, host=host)
        body = (
            int(_value(variables, "user_directory_max_request_body_bytes"))
            if service == "user_directory"
            else ORDER_SERVICE_MAX_BODY_BYTES
        )
        entries.append(
            ProxiedService(
                service=service,
                public_port=int(_value(variables, f"{service}_port")),
                app_host=str(_value(variables, f"{service}_host")),
                app_port=int(_value(variables, f"{service}_app_port")),
                max_body_bytes=body * BODY_CAP_FACTOR,
            )
        )
    if not entries:
        return None
    ports = [entry.public_port for entry in entries] + [entry.app_port for entry in entries]
    if len(set(ports)) != len(ports):
        problems.append(
            f"the services on {host} share a port among "
            + ", ".join(
                f"{entry.service}_port {entry.public_port}, {entry.service}_app_port "
                f"{entry.app_port}"
                for entry in entries
            )
            + "; give each its own"
        )
    profile = TlsProfile.of(tls_protocols, tls_ciphers)
    problems += profile.problems()
    if problems:
        raise InventoryError(problems)
    return TlsProxyPlan(
        host=host,
        listen_address=str(_value(variables, "tls_proxy_listen_address") or ""),
        services=tuple(entries),
        config_dir=str(_value(variables, "tls_proxy_config_dir")),
        service_name=str(_value(variables, "tls_proxy_service_name")),
        user=str(_value(variables, "tls_proxy_user")),
        header_timeout=int(_value(variables, "tls_proxy_header_timeout")),
        body_timeout=int(_value(variables, "tls_proxy_body_timeout")),
        keepalive_timeout=int(_value(variables, "tls_proxy_keepalive_timeout")),
        keepalive_requests=int(_value(variables, "tls_proxy_keepalive_requests")),
        max_header_bytes=int(_value(variables, "tls_proxy_max_header_bytes")),
        connections_per_client=int(_value(variables, "tls_proxy_connections_per_client")),
        worker_connections=int(_value(variables, "tls_proxy_worker_connections")),
        # nginx writes its protocols oldest first; the set is what counts.
        tls_protocols=tuple(sorted(tls_protocols)),
        tls12_ciphers=profile.tls12_openssl_ciphers,
        tls13_suites=profile.tls13_suites,
    )


def render_nginx_conf(plan: TlsProxyPlan) -> str:
    return render_template(
        "tls-proxy-nginx.conf.j2", proxy=plan, upstream_idle_seconds=UPSTREAM_IDLE_SECONDS
    )


def render_unit(plan: TlsProxyPlan) -> str:
    return render_template("tls-proxy.service.j2", proxy=plan)


def planned_files(plan: TlsProxyPlan) -> dict[str, str]:
    """The proxy's files by their path on the host (certificates aside)."""
    return {
        plan.config_path: render_nginx_conf(plan),
        f"/etc/systemd/system/{plan.service_name}.service": render_unit(plan),
    }


# Listen addresses that name no one address: the health check and the certificate then
# use loopback and the host's own address.
_WILDCARDS = {"", "0.0.0.0", "::"}  # noqa: S104 (names, not a bind)


def proxy_plan_data(
    plan: TlsProxyPlan, *, address: str, extra_sans: Sequence[Any]
) -> dict[str, Any]:
    """What roles/tls_proxy copies for ``plan``'s host, as plain data: the nginx
    configuration and the unit (``files``), the paths, the URLs at ``address`` (the
    host's ``ansible_host``, else its inventory name), each service's health URL, and the
    names its certificate carries (``alt_names``). The certificate, its key and the CA
    bundle are the role's action's to add (clusterforge_tls_proxy): they come from the CA
    on the control node, or from the user's own files (``own_cert_path``,
    ``own_key_path``)."""
    files: list[dict[str, Any]] = []
    for path, content in planned_files(plan).items():
        # The unit root's; the configuration readable by the proxy's group only.
        unit = path.startswith("/etc/systemd/")
        group, mode = ("root", "0644") if unit else (plan.user, "0640")
        files.append(
            {"path": path, "content": content, "owner": "root", "group": group, "mode": mode}
        )
    names = [address]
    if plan.listen_address not in _WILDCARDS:
        names.append(plan.listen_address)
    names += [str(name) for name in extra_sans or []]
    health_host = plan.listen_address if plan.listen_address not in _WILDCARDS else "127.0.0.1"
    health_host = f"[{health_host}]" if ":" in health_host else health_host
    definitions = load_schema().services
    return {
        "enabled": True,
        "files": files,
        "user": plan.user,
        "config_dir": plan.config_dir,
        "service_name": plan.service_name,
        "unit_path": f"/etc/systemd/system/{plan.service_name}.service",
        "install": debian_install(),
        "cert_path": plan.cert_path,
        "key_path": plan.key_path,
        "ca_bundle_path": plan.ca_bundle_path,
        "urls": plan.urls(address or plan.host),
        "health": {
            entry.service: f"https://{health_host}:{entry.public_port}"
            f"{definitions[entry.service].health_path}"
            for entry in plan.services
        },
        "alt_names": [name for name in dict.fromkeys(names) if name],
    }


# Debian's nginx.service would start on port 80 of every address as the package
# installs; the proxy has a unit of its own, so Debian's is masked first (a link to
# /dev/null, which the package's scripts respect).
PACKAGE = "nginx"
DEBIAN_UNIT = "nginx"


def debian_install() -> dict[str, list[Any]]:
    """What roles/tls_proxy installs, in roles/_debian_service's shape (as
    clusterforge.plan.monitoring.monitoring.debian_install): the package, Debian's unit to
    mask first, and no binary to look for, so apt is asked on every run."""
    return {
        "packages": [PACKAGE],
        "masks": [{"path": f"/etc/systemd/system/{DEBIAN_UNIT}.service", "target": "/dev/null"}],
        "binaries": [],
    }


def plan_tls_proxies(
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
    *,
    tls_protocols: Sequence[str],
    tls_ciphers: Sequence[str],
    addresses: Mapping[str, str] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every service host's proxy, planned once, in the inventory check (issue 51): the
    plan of each host with a proxy (:func:`proxy_plan_data`; ``addresses`` maps a host to
    its ``ansible_host``), and every problem (its ports' clashes, its binds, the
    profile's suites), each naming the variable. roles/tls_proxy copies the plans; the
    problems stop the run before any host is contacted."""
    by_host: dict[str, dict[str, Any]] = {}
    services_of: dict[str, list[str]] = {}
    for service, hosts in services_vars.items():
        for host, variables in hosts:
            by_host.setdefault(host, {}).update(variables)
            services_of.setdefault(host, []).append(service)
    plans: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for host, variables in by_host.items():
        try:
            plan = plan_tls_proxy(
                host,
                variables,
                services_of[host],
                tls_protocols=tls_protocols,
                tls_ciphers=tls_ciphers,
            )
            if plan is not None:
                plans[host] = {
                    **proxy_plan_data(
                        plan,
                        address=str((addresses or {}).get(host) or ""),
                        extra_sans=_value(variables, "tls_proxy_extra_sans") or [],
                    ),
                    "own_cert_path": str(variables.get("tls_proxy_cert_path") or ""),
                    "own_key_path": str(variables.get("tls_proxy_key_path") or ""),
                }
        except InventoryError as error:
            problems += error.problems
        except (TypeError, ValueError):
            continue  # a value of the wrong type: the services' own check names it
    return plans, problems


def check_tls_proxies(
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
    *,
    tls_protocols: Sequence[str],
    tls_ciphers: Sequence[str],
) -> list[str]:
    """The problems of :func:`plan_tls_proxies`: every service host's proxy planned as its
    role copies it, for the inventory check."""
    return plan_tls_proxies(services_vars, tls_protocols=tls_protocols, tls_ciphers=tls_ciphers)[1]
