"""Monitoring from the inventory (issue 42): the monitoring host's files, checked by the
real tools (promtool, amtool), and the monitoring user in the security files.

- every TLS scrape verifies the cluster's CA (no insecure_skip_verify anywhere);
- the targets, the node count and the credentials come from the inventory: three nodes
  give three cluster exporters, six TLS probes (9200 and 9300) and three node exporters;
- no rendered configuration holds a secret: the password, the tokens and the web
  password are in files marked secret only (the exporter's root-only env file included);
- the monitoring user's role holds monitor permissions only, and its password is
  generated once, 0600, into <inventory>/.opensearch/.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.pki.hashing import verify_password
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.monitoring.alerting import build_alerting
from clusterforge.plan.monitoring.monitoring import (
    BINARIES,
    CONFIG_DIR,
    DEBIAN_UNITS,
    MONITOR_ROLE,
    PACKAGES,
    MonitoringSettings,
    ServiceEndpoint,
    check_monitoring,
    debian_install,
    plan_monitoring,
    plan_monitoring_user,
)
from clusterforge.plan.monitoring.monitoring_inputs import more_than_one_host
from clusterforge.plan.plan import build_plan
from clusterforge.plan.security.tls_profile import TlsProfile, default_profile
from clusterforge.schema import undeclared_variable

PASSWORDS = {
    "admin": "Unit-Admin-7c1e",
    "kibanaserver": "Unit-Kibanaserver-7c1e",
    "logstash": "Unit-Logstash-7c1e",
    "kibana": "Unit-Kibana-7c1e",
}
TOKEN_USERS = "unit-userdir-token-0123456789"
TOKEN_ORDERS = "unit-orders-token-0123456789"
WEB_PASSWORD = "unit-web-password-0123456789"
CLUSTER_PASSWORD = "Unit-Monitor-Password-7c1e"
HOOK_TOKEN = "unit-hook-token-0123456789"
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")


def nodes(inventory: Path, mode: str = "tls") -> list[tuple[str, dict[str, Any]]]:
    common: dict[str, Any] = {
        "opensearch_security_mode": mode,
        "opensearch_pki_dir": str(inventory / ".pki"),
        "opensearch_ca_passphrase": "unit-test-passphrase",
        "opensearch_security_passwords": PASSWORDS,
    }
    return [(f"os-{i}", {"ansible_host": f"127.0.0.{70 + i}", **common}) for i in (1, 2, 3)]


def planned(inventory: Path, **variables: Any) -> dict[str, Any]:
    cluster = build_cluster(nodes(inventory))
    user = plan_monitoring_user(
        cluster,
        [("mon-1", {"monitoring_cluster_password": CLUSTER_PASSWORD})],
        inventory_dir=inventory,
    )
    settings = MonitoringSettings.of("mon-1", "127.0.0.80", variables)
    return plan_monitoring(
        settings,
        cluster=cluster,
        user=user,
        services=[
            ServiceEndpoint(
                service="user_directory",
                host="apps-1",
                base_url="https://127.0.0.81:8081",
                token=TOKEN_USERS,
            ),
            ServiceEndpoint(
                service="order_service",
                host="apps-1",
                base_url="https://127.0.0.81:8082",
                token=TOKEN_ORDERS,
            ),
        ],
        node_exporters=[(f"os-{i}", f"127.0.0.{70 + i}") for i in (1, 2, 3)]
        + [("apps-1", "127.0.0.81"), ("mon-1", "127.0.0.80")],
        alerting=build_alerting(
            {
                "monitoring_alertmanager_receivers": [
                    {"name": "lab", "webhook": {"url": "http://127.0.0.1:19093/"}},
                    {
                        "name": "hook",
                        "webhook": {
                            "url": "https://hooks.example.com/alerts",
                            "bearer_token_var": "vault_hook_token",
                        },
                    },
                ],
            }
        ),
        alerting_secrets={"vault_hook_token": HOOK_TOKEN},
        web_password=WEB_PASSWORD,
        web_password_hash="$2b$10$" + "a" * 53,
    )


def by_path(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["path"]: entry for entry in plan["files"]}


def test_every_tls_scrape_verifies_the_ca(tmp_path: Path) -> None:
    plan = planned(tmp_path)
    config = yaml.safe_load(by_path(plan)[f"{CONFIG_DIR}/prometheus.yml"]["content"])
    text = by_path(plan)[f"{CONFIG_DIR}/prometheus.yml"]["content"]
    assert "insecure_skip_verify: true" not in text
    for job in config["scrape_configs"]:
        if job.get("scheme") == "https":
            assert job["tls_config"]["ca_file"] == f"{CONFIG_DIR}/tls/ca-bundle.pem", job
    blackbox = yaml.safe_load(by_path(plan)[f"{CONFIG_DIR}/blackbox.yml"]["content"])
    probe = blackbox["modules"]["tls_cluster_ca"]["tcp"]
    assert probe["tls"] is True
    assert probe["tls_config"]["ca_file"] == f"{CONFIG_DIR}/tls/ca-bundle.pem"
    assert probe["tls_config"]["insecure_skip_verify"] is False


def test_targets_come_from_the_inventory(tmp_path: Path) -> None:
    plan = planned(tmp_path)
    config = yaml.safe_load(by_path(plan)[f"{CONFIG_DIR}/prometheus.yml"]["content"])
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {
        "prometheus",
        "alertmanager",
        "opensearch",
        "node",
        "tls_expiry",
        "user_directory",
        "order_service",
    }
    assert [group["labels"]["node"] for group in jobs["opensearch"]["static_configs"]] == [
        "os-1",
        "os-2",
        "os-3",
    ]
    assert jobs["tls_expiry"]["static_configs"][0]["targets"] == [
        "127.0.0.71:9200",
        "127.0.0.72:9200",
        "127.0.0.73:9200",
        "127.0.0.71:9300",
        "127.0.0.72:9300",
        "127.0.0.73:9300",
        "127.0.0.81:8081",
        "127.0.0.81:8082",
    ]
    assert len(jobs["node"]["static_configs"]) == 5
    assert plan["expected_nodes"] == 3
    assert jobs["order_service"]["authorization"]["credentials_file"].endswith(".token")
    assert plan["cluster_exporters"] == [f"clusterforge-cluster-exporter@os-{i}" for i in (1, 2, 3)]


def test_no_configuration_holds_a_secret(tmp_path: Path) -> None:
    plan = planned(tmp_path)
    secrets = (TOKEN_USERS, TOKEN_ORDERS, WEB_PASSWORD, CLUSTER_PASSWORD, HOOK_TOKEN)
    holders: dict[str, list[str]] = {}
    for entry in plan["files"]:
        for secret in secrets:
            if secret in entry["content"]:
                holders.setdefault(secret, []).append(entry["path"])
                assert entry.get("secret") is True, entry["path"]
    assert [Path(p).name for p in holders[CLUSTER_PASSWORD]] == ["os-1.env", "os-2.env", "os-3.env"]
    for path in holders[CLUSTER_PASSWORD]:
        assert by_path(plan)[path]["mode"] == "0600"
        assert by_path(plan)[path]["owner"] == "root"
    assert len(holders[TOKEN_USERS]) == 1
    assert len(holders[WEB_PASSWORD]) == 1
    assert len(holders[HOOK_TOKEN]) == 1
    assert by_path(plan)[holders[HOOK_TOKEN][0]]["mode"] == "0600"
    # The unit reads the password from the environment file, never from its arguments.
    unit = by_path(plan)["/etc/systemd/system/clusterforge-cluster-exporter@.service"]["content"]
    assert "EnvironmentFile=" in unit
    assert CLUSTER_PASSWORD not in unit
    assert "--es.ssl-skip-verify" not in str(plan)


def test_listeners_are_tls_with_a_password_or_loopback(tmp_path: Path) -> None:
    plan = planned(tmp_path)
    web = yaml.safe_load(by_path(plan)[f"{CONFIG_DIR}/web.yml"]["content"])
    assert web["tls_server_config"]["cert_file"].endswith("monitoring.pem")
    assert list(web["basic_auth_users"]) == ["clusterforge"]
    prometheus = by_path(plan)["/etc/systemd/system/clusterforge-prometheus.service"]["content"]
    assert "--web.config.file=" in prometheus
    alertmanager = by_path(plan)["/etc/systemd/system/clusterforge-alertmanager.service"]["content"]
    assert "--web.config.file=" in alertmanager
    assert "--cluster.listen-address=\n" in alertmanager
    blackbox = by_path(plan)["/etc/systemd/system/clusterforge-blackbox-exporter.service"][
        "content"
    ]
    assert "--web.listen-address=127.0.0.1:9115" in blackbox
    env = by_path(plan)[f"{CONFIG_DIR}/cluster-exporter/os-1.env"]["content"]
    assert "--web.listen-address=127.0.0.1:9120" in env
    node_unit = plan["node_exporter"]["units"]["os-2"]
    assert "--web.listen-address=127.0.0.72:9100" in node_unit
    assert "--web.config.file=" in node_unit


def test_exporter_ports_must_not_meet(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="monitoring_cluster_exporter_base_port"):
        planned(tmp_path, monitoring_cluster_exporter_base_port=9114)


def test_monitoring_needs_a_tls_cluster(tmp_path: Path) -> None:
    cluster = build_cluster(nodes(tmp_path, "basic"))
    with pytest.raises(InventoryError, match="opensearch_security_mode: tls"):
        plan_monitoring(
            MonitoringSettings.of("mon-1", "127.0.0.80", {}),
            cluster=cluster,
            user=None,
            services=[],
            node_exporters=[],
            alerting=build_alerting({}),
            alerting_secrets={},
            web_password=WEB_PASSWORD,
            web_password_hash="x",
        )


def _installed(plan: dict[str, Any], root: Path) -> None:
    """The plan's files under ``root`` (their paths rewritten), for the real checkers."""
    for entry in plan["files"]:
        target = root / entry["path"].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(entry["content"].replace(CONFIG_DIR, str(root / CONFIG_DIR.lstrip("/"))))


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus) is not installed")
def test_promtool_checks_the_rendered_config(tmp_path: Path) -> None:
    plan = planned(tmp_path / "inventory")
    root = tmp_path / "root"
    _installed(plan, root)
    ca = root / CONFIG_DIR.lstrip("/") / "tls" / "ca-bundle.pem"
    ca.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(tmp_path / "ca-key.pem"),
            "-out",
            str(ca),
            "-days",
            "1",
            "-subj",
            "/CN=unit-test-ca",
        ],
        capture_output=True,
        check=True,
    )
    config = root / CONFIG_DIR.lstrip("/") / "prometheus.yml"
    result = subprocess.run(
        [str(PROMTOOL), "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


@pytest.mark.skipif(
    AMTOOL is None, reason="amtool (Debian's prometheus-alertmanager) is not installed"
)
def test_amtool_checks_the_rendered_alertmanager_config(tmp_path: Path) -> None:
    plan = planned(tmp_path / "inventory")
    root = tmp_path / "root"
    _installed(plan, root)
    result = subprocess.run(
        [str(AMTOOL), "check-config", str(root / CONFIG_DIR.lstrip("/") / "alertmanager.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_security_files_hold_the_monitoring_user(tmp_path: Path) -> None:
    plan = build_plan(
        nodes(tmp_path),
        inventory_dir=tmp_path,
        fetch=False,
        monitoring_vars=[("mon-1", {})],
    )
    users = yaml.safe_load(plan["security"]["files"]["internal_users.yml"])
    password_file = tmp_path / ".opensearch" / "clusterforge-monitor.password"
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    password = password_file.read_text().strip()
    assert verify_password(password, users["clusterforge-monitor"]["hash"])
    roles = yaml.safe_load(plan["security"]["files"]["roles.yml"])
    role = roles[MONITOR_ROLE]
    assert role["cluster_permissions"] == [
        "cluster_monitor",
        "cluster:admin/repository/get",
        "cluster:admin/snapshot/get",
    ]
    assert role["index_permissions"] == [
        {"index_patterns": ["*"], "allowed_actions": ["indices_monitor"]}
    ] or all(entry["allowed_actions"] == ["indices_monitor"] for entry in role["index_permissions"])
    mapping = yaml.safe_load(plan["security"]["files"]["roles_mapping.yml"])[MONITOR_ROLE]
    assert mapping["users"] == ["clusterforge-monitor"]
    # A second plan reuses the password; without a monitoring host there is no user.
    again = build_plan(
        nodes(tmp_path), inventory_dir=tmp_path, fetch=False, monitoring_vars=[("mon-1", {})]
    )
    assert yaml.safe_load(again["security"]["files"]["internal_users.yml"])["clusterforge-monitor"]
    without = build_plan(nodes(tmp_path), inventory_dir=tmp_path, fetch=False)
    assert "clusterforge-monitor" not in yaml.safe_load(
        without["security"]["files"]["internal_users.yml"]
    )


def test_a_host_may_name_where_its_node_exporter_listens(tmp_path: Path) -> None:
    """monitoring_node_exporter_address wins over ansible_host, which a container's
    connection may hold as the container's name (the tls molecule scenario)."""
    from clusterforge.inventory.variables import TaskHosts
    from clusterforge.plan.monitoring.monitoring import read_monitoring_inputs

    hostvars: dict[str, dict[str, Any]] = {name: dict(v) for name, v in nodes(tmp_path)}
    hostvars["os-2"].update(
        ansible_host="cf-os-2",
        opensearch_network_host="127.0.0.72",
        monitoring_node_exporter_address="127.0.0.72",
    )
    hostvars["mon-1"] = {"ansible_host": "127.0.0.80"}
    for variables in hostvars.values():
        variables["inventory_dir"] = str(tmp_path)
    source = TaskHosts(
        {
            "groups": {"opensearch": ["os-1", "os-2", "os-3"], "monitoring": ["mon-1"]},
            "hostvars": hostvars,
        },
        lambda value: value,
    )
    cluster = build_cluster(nodes(tmp_path))
    inputs = read_monitoring_inputs(
        source,
        inventory_dir=tmp_path,
        tls_protocols=cluster.tls_protocols,
        tls_ciphers=cluster.tls_ciphers,
    )
    assert inputs is not None
    assert dict(inputs.node_exporters) == {
        "os-1": "127.0.0.71",
        "os-2": "127.0.0.72",
        "os-3": "127.0.0.73",
        "mon-1": "127.0.0.80",
    }


def test_a_node_being_removed_leaves_the_scrape_targets_in_that_run(tmp_path: Path) -> None:
    """opensearch_node_state: absent takes the node's exporter out of prometheus.yml in the
    run that removes the node; it stayed a target, down, until a later run (issue 51)."""
    from clusterforge.inventory.variables import TaskHosts
    from clusterforge.plan.monitoring.monitoring import read_monitoring_inputs

    hostvars: dict[str, dict[str, Any]] = {name: dict(v) for name, v in nodes(tmp_path)}
    hostvars["os-4"] = {**hostvars["os-3"], "ansible_host": "127.0.0.74"}
    hostvars["os-4"]["opensearch_node_state"] = "absent"
    hostvars["mon-1"] = {"ansible_host": "127.0.0.80"}
    for variables in hostvars.values():
        variables["inventory_dir"] = str(tmp_path)
    source = TaskHosts(
        {
            "groups": {"opensearch": ["os-1", "os-2", "os-3", "os-4"], "monitoring": ["mon-1"]},
            "hostvars": hostvars,
        },
        lambda value: value,
    )
    cluster = build_cluster(nodes(tmp_path))
    inputs = read_monitoring_inputs(
        source,
        inventory_dir=tmp_path,
        tls_protocols=cluster.tls_protocols,
        tls_ciphers=cluster.tls_ciphers,
        model=(cluster, nodes(tmp_path)),
    )
    assert inputs is not None
    assert "os-4" not in dict(inputs.node_exporters)
    assert set(dict(inputs.node_exporters)) == {"os-1", "os-2", "os-3", "mon-1"}


def test_the_units_give_prometheus_and_alertmanager_the_inventorys_url() -> None:
    """Notifications link to the URL the inventory gives (--web.external-url), not to the
    machine's host name; a listener on every address is reached at the host's address."""
    from clusterforge.plan.monitoring.monitoring import MonitoringSettings, render_unit

    settings = MonitoringSettings.of(
        "mon-1",
        "127.0.0.80",
        {"monitoring_prometheus_listen_address": "0.0.0.0"},  # noqa: S104 - not bound
    )
    prometheus = render_unit("prometheus", settings=settings)
    alertmanager = render_unit("alertmanager", settings=settings)
    assert "--web.external-url=https://127.0.0.80:9090 " in prometheus
    assert "--web.external-url=https://127.0.0.80:9093 " in alertmanager


def test_no_snapshot_age_alert_without_a_schedule_or_a_given_age() -> None:
    """A repository and no schedule: nothing takes snapshots, so their age is no alert
    (a fresh lab fired OpenSearchSnapshotTooOld 13 minutes after scripts/up, issue 51).
    A schedule, or an age given, brings the alert."""
    from clusterforge.plan.monitoring.alert_rules import alert_rules
    from clusterforge.plan.monitoring.alerting import build_alerting

    def rules(variables: dict[str, Any], allows: int | None) -> str:
        return alert_rules(build_alerting(variables, snapshot_schedule_allows=allows), 3)

    assert "OpenSearchSnapshotTooOld" not in rules({}, None)
    # The schedule's period not read here: the variable's default.
    assert "> 93600" in rules({}, 0)
    assert "OpenSearchSnapshotTooOld" in rules({"monitoring_alert_snapshot_max_age": "2d"}, None)


def test_the_snapshot_age_alert_follows_the_declared_schedule_as_status_does(
    tmp_path: Path,
) -> None:
    """One allowance for the newest scheduled snapshot: the alert's threshold is the one
    scripts/status judges by (two periods and a minute), unless an age is given; removing
    the schedule removes the alert (issue 51: the lab's fixed 10m outlived its schedule,
    and the alert fired on a lab whose schedule had been removed)."""
    from clusterforge.plan.monitoring.alert_rules import alert_rules
    from clusterforge.plan.monitoring.monitoring_inputs import build_host_alerting

    def rules(schedule: str | None, monitoring_vars: dict[str, Any]) -> str:
        hosts = nodes(tmp_path)
        if schedule is not None:
            hosts = [
                (name, {**host_vars, "opensearch_snapshot_schedule": schedule})
                for name, host_vars in hosts
            ]
        alerting = build_host_alerting(
            build_cluster(hosts), monitoring_vars, hosts, inventory_dir=tmp_path
        )
        return alert_rules(alerting, 3)

    every_5_minutes = rules("*:0/5", {})
    assert "> 660" in every_5_minutes and "for 11m" in every_5_minutes
    assert "OpenSearchSnapshotTooOld" not in rules(None, {})
    assert "> 3600" in rules("*:0/5", {"monitoring_alert_snapshot_max_age": "1h"})
    assert "> 3600" in rules(None, {"monitoring_alert_snapshot_max_age": "1h"})


def test_the_tls_lab_schedules_snapshots() -> None:
    from clusterforge.lab.lab_inventory import lab_snapshot_vars
    from clusterforge.plan.snapshots.snapshot_schedule import declared_schedule

    assert lab_snapshot_vars("open") == {}
    schedule = declared_schedule(lab_snapshot_vars("tls"))
    assert schedule is not None
    # Every 5 minutes: status, and the age alert with it, allow two periods and a minute.
    assert schedule["allowed_age_seconds"] == 2 * 300 + 60


def test_the_check_words_an_unknown_variable_as_the_schema_does(tmp_path: Path) -> None:
    """One wording of an undeclared variable (clusterforge.schema.undeclared_variable),
    the monitoring's check included, not a copy of its did-you-mean."""
    cluster = build_cluster(nodes(tmp_path))
    problems = check_monitoring(
        cluster,
        nodes(tmp_path),
        [("mon-1", {"monitoring_nothing_like_this": 1, "monitoring_retentoin": "5d"})],
        inventory_dir=tmp_path,
    )
    assert problems == [
        f"mon-1: {undeclared_variable('monitoring_nothing_like_this', 'monitoring_')}",
        "mon-1: monitoring_retentoin is not a variable; did you mean monitoring_retention?",
    ]
    assert "the monitoring_* variables are listed in docs/variables.md" in problems[0]


def test_the_check_and_the_plan_refuse_a_second_monitoring_host_in_one_wording(
    tmp_path: Path,
) -> None:
    cluster = build_cluster(nodes(tmp_path))
    two = [("mon-1", {}), ("mon-2", {})]
    checked = check_monitoring(cluster, nodes(tmp_path), two, inventory_dir=tmp_path)
    assert checked == [more_than_one_host(["mon-1", "mon-2"])]
    assert "put one host in the group monitoring" in checked[0]


def test_the_cluster_names_its_tls_profile_once(tmp_path: Path) -> None:
    """Cluster.tls_profile: the profile every listener takes (monitoring, the security
    files' LDAP, the proxies' check), from opensearch_tls_* as the inventory gives them."""
    only13 = [
        (host, {**variables, "opensearch_tls_protocols": ["TLSv1.3"]})
        for host, variables in nodes(tmp_path)
    ]
    assert build_cluster(only13).tls_profile == TlsProfile.of(
        ["TLSv1.3"], default_profile().ciphers
    )
    assert build_cluster(nodes(tmp_path)).tls_profile == default_profile()


def test_the_debian_packages_and_units_are_named_in_python_only() -> None:
    """The roles install what the plan's ``install`` gives (debian_install); neither role
    holds a copy of a package, a Debian unit or a binary."""
    monitoring_host = debian_install(["prometheus", "alertmanager", "blackbox", "cluster_exporter"])
    every_host = debian_install(["node_exporter"])
    assert monitoring_host["packages"] + every_host["packages"] == list(PACKAGES)
    assert [mask["path"] for mask in monitoring_host["masks"] + every_host["masks"]] == [
        f"/etc/systemd/system/{unit}.service" for unit in DEBIAN_UNITS
    ]
    assert monitoring_host["binaries"] + every_host["binaries"] == list(BINARIES.values())
    roles = Path(__file__).resolve().parents[1] / "roles"
    for role in ("monitoring", "node_exporter"):
        for path in sorted((roles / role).glob("*/*.yml")):
            if path.parent.name == "meta":
                continue  # the argument specs' descriptions name the package
            text = path.read_text()
            for package in PACKAGES:  # a list item or apt's name, not the group prometheus
                assert f"- {package}\n" not in text and f"name: {package}\n" not in text
            for unit in DEBIAN_UNITS:
                assert f"/{unit}.service" not in text, (path, unit)
            for binary in BINARIES.values():
                assert binary not in text, (path, binary)
