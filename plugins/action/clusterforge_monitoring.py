"""Action plugin: the monitoring host's plan, with its certificate and secrets.

Runs on the control node (delegate it to localhost) for the host of the group
``monitoring``, through :func:`clusterforge.plan.monitoring.plan_monitoring`: the cluster
model from the ``opensearch`` group, the services' endpoints from their TLS proxies'
plan, every host's address for its node exporter, the cluster's CA, the monitoring user's
password (generated once, as the plan's security files have it), the services' first
bearer tokens, and the web password (generated once into
``<inventory>/.monitoring/web.password``; the hosts get its bcrypt hash). Returns
``files`` for ``clusterforge_files`` (secrets marked), the units, the URLs and
``node_exporter`` (what every host's node exporter gets). The result is no_log.

Arguments:
  renew: issue the monitoring host's certificate again now (playbooks/rotate-certs.yml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from clusterforge.errors import ClusterforgeError, InventoryError
from clusterforge.inventory.variables import TaskHosts, build_model, services_vars
from clusterforge.pki.generated_secrets import GeneratedSecretError, read_or_generate, url_safe
from clusterforge.pki.hashing import hash_password, verify_password
from clusterforge.plan.host_certificates import ensure_host_certificate, issuing_ca_for_task
from clusterforge.plan.monitoring import (
    GROUP,
    PATHS,
    SERVICE_USER,
    WEB_HASH_FILE,
    WEB_PASSWORD_FILE,
    WEB_SECRETS_DIR_NAME,
    MonitoringSettings,
    ServiceEndpoint,
    build_host_alerting,
    plan_monitoring,
    plan_monitoring_user,
)
from clusterforge.plan.tls_proxy import PROXIED_SERVICES, plan_tls_proxy

# Groups whose hosts run a node exporter (every host the toolkit deploys).
HOST_GROUPS = ("opensearch", "dashboards", "postgresql", *PROXIED_SERVICES, GROUP)
# bcrypt's cost for the web password: every scrape of a node exporter checks it.
WEB_HASH_ROUNDS = 10


def web_password(inventory_dir: Path) -> tuple[str, str]:
    """The web password and a bcrypt hash of it, both kept on the control node so a rerun
    renders the same web configs (a new salt every run would change them)."""
    directory = inventory_dir / WEB_SECRETS_DIR_NAME
    try:
        password = read_or_generate(directory / WEB_PASSWORD_FILE, generate=url_safe(24))
        hash_path = directory / WEB_HASH_FILE
        password_hash = read_or_generate(
            hash_path, generate=lambda: hash_password(password, rounds=WEB_HASH_ROUNDS)
        )
        if not verify_password(password, password_hash):
            hash_path.unlink()
            password_hash = read_or_generate(
                hash_path, generate=lambda: hash_password(password, rounds=WEB_HASH_ROUNDS)
            )
    except GeneratedSecretError as error:
        raise InventoryError([str(error)]) from None
    return password, password_hash


class ActionModule(ActionBase):  # type: ignore[misc]
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"renew"})

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            return {**result, **self._plan(task_vars), "changed": False, "_ansible_no_log": True}
        except ClusterforgeError as error:
            raise AnsibleActionFail(str(error)) from None

    def _plan(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        template = self._templar.template
        host = str(task_vars.get("inventory_hostname"))
        hosts = TaskHosts(task_vars, template)
        hostvars = task_vars.get("hostvars", {})
        monitoring_hosts = hosts.hosts(GROUP)
        if monitoring_hosts[:1] != [host]:
            raise InventoryError(
                [
                    f"the monitoring group holds {', '.join(monitoring_hosts) or 'nothing'}; "
                    "monitoring runs on exactly one host: put one host in the group monitoring"
                ]
            )
        variables = {
            name: template(value)
            for name, value in task_vars.items()
            if name.startswith("monitoring_")
        }
        if not hosts.hosts("opensearch"):
            raise InventoryError(
                ["the monitoring group needs the cluster it watches: the group opensearch is empty"]
            )
        cluster, nodes_vars = build_model(hosts, "opensearch")
        inventory_dir = hosts.directory(["opensearch"])
        user = plan_monitoring_user(cluster, [(host, variables)], inventory_dir=inventory_dir)

        def address(name: str) -> str:
            return str(template(hostvars[name].get("ansible_host") or name))

        settings = MonitoringSettings.of(host, address(host), variables)
        task_ca = issuing_ca_for_task(task_vars, template)
        endpoints = []
        for service, service_hosts in services_vars(hosts).items():
            if service not in PROXIED_SERVICES:
                continue
            for service_host, service_variables in service_hosts:
                groups = [s for s in PROXIED_SERVICES if service_host in hosts.hosts(s)]
                proxy_variables = {
                    name: template(value)
                    for name, value in hostvars[service_host].items()
                    if name.startswith(("tls_proxy_", *(f"{s}_" for s in PROXIED_SERVICES)))
                }
                proxy = plan_tls_proxy(
                    service_host,
                    proxy_variables,
                    groups,
                    tls_protocols=task_ca.tls_protocols,
                    tls_ciphers=task_ca.tls_ciphers,
                )
                if proxy is None:
                    continue
                tokens = list(service_variables.get(f"{service}_auth_tokens") or [])
                if not tokens:
                    raise InventoryError(
                        [
                            f"{service}_auth_tokens is empty on {service_host}: Prometheus "
                            f"scrapes {service}'s /metrics with a bearer token; give the "
                            "service one (vaulted)"
                        ]
                    )
                url = proxy.urls(address(service_host)).get(service)
                if url:
                    endpoints.append(
                        ServiceEndpoint(
                            service=service, host=service_host, base_url=url, token=str(tokens[0])
                        )
                    )
        exporter_hosts: list[tuple[str, str]] = []
        for group in HOST_GROUPS:
            for name in hosts.hosts(group):
                if name not in {known for known, _ in exporter_hosts}:
                    exporter_hosts.append((name, address(name)))
        alerting = build_host_alerting(cluster, variables, nodes_vars, inventory_dir=inventory_dir)
        # The receivers' secrets, by the vaulted variables they name (the only ones read).
        alerting_secrets = {
            name: template(task_vars[name])
            for name in alerting.secret_variables
            if name in task_vars
        }
        password, password_hash = web_password(inventory_dir)
        plan = plan_monitoring(
            settings,
            cluster=cluster,
            user=user,
            services=endpoints,
            node_exporters=exporter_hosts,
            alerting=alerting,
            alerting_secrets=alerting_secrets,
            web_password=password,
            web_password_hash=password_hash,
        )
        alt_names = [settings.address, settings.prometheus_listen, settings.alertmanager_listen]
        certificate = ensure_host_certificate(
            task_ca.ca,
            host=host,
            purpose="monitoring",
            alt_names=list(dict.fromkeys(name for name in alt_names if name)),
            renew=bool(self._task.args.get("renew")),
        )
        owner = {"owner": "root", "group": SERVICE_USER}
        plan["files"] += [
            {"path": PATHS["ca"], "content": certificate.ca_bundle_pem, **owner, "mode": "0644"},
            {
                "path": PATHS["cert"],
                "content": certificate.certificate_pem,
                **owner,
                "mode": "0644",
            },
            {
                "path": PATHS["key"],
                "content": certificate.key_pem,
                **owner,
                "mode": "0640",
                "secret": True,
            },
        ]
        plan["certificate"] = certificate.public()
        plan["ca_bundle_control_path"] = str(task_ca.ca.pki_dir / "ca-bundle.pem")
        plan["web_password_file"] = str(inventory_dir / WEB_SECRETS_DIR_NAME / WEB_PASSWORD_FILE)
        plan["cluster_password_file"] = user.password_file if user else None
        return plan
