"""The inventory first, then the hosts (issue 31, item 5).

Every bad inventory below goes through the real ``ansible-playbook playbooks/site.yml``
with its hosts at unused loopback addresses that do not answer (127.0.0.31...). The
first play (playbooks/check_inventory.yml) must refuse it on the control node, naming the
variable at fault, before any connection: the output never says "Cannot reach", and the
inventory directory, its existing ``.pki`` included, is byte-identical afterwards (no
certificate issued, no file written) and the artifact cache was never created.

A good inventory with hosts that do not answer stops at the reach play, again with
nothing written on the control node, and so does rotate_certs.yml, which used to issue
every certificate again before it found the hosts unreachable.

The runs are independent processes, started a few at a time (each is mostly Ansible's
start-up), so the whole module stays well under three minutes without a cluster.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.inventory.variables import load_inventory_nodes
from clusterforge.plan.cluster.cluster_pki import ensure_cluster_pki
from clusterforge.plan.cluster.model import build_cluster

ROOT = Path(__file__).resolve().parents[1]
# Beside the interpreter running the tests: the virtualenv's own Ansible.
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
EXAMPLE_VAULT_PASSWORD = ROOT / "inventories" / "example" / "EXAMPLE-ONLY-vault-password.txt"
# Published in inventories/example's vault (its password is public): refused by a deploy.
PUBLISHED_ADMIN_PASSWORD = "Example-Only-Admin-3b8f2e"
PUBLISHED_CA_PASSPHRASE = "example-only-ca-passphrase-7d41c9"
PUBLISHED_USERDIR_TOKEN = "Example-Only-Userdir-Token-6a19f3e2"
CA_PASSPHRASE = "invfirst-ca-Passphrase-8e21"
# Hosts that do not answer: unused loopback addresses (nothing listens on them).
NODES = {"n1": "127.0.0.31", "n2": "127.0.0.32", "n3": "127.0.0.33"}
APP_HOST = ("app1", "127.0.0.34")
PARALLEL_RUNS = 4

BASE_VARS: dict[str, Any] = {
    "opensearch_cluster_name": "invfirst",
    "opensearch_version": "2.19.4",
    "opensearch_security_mode": "tls",
    "opensearch_heap_size": "512m",
    "opensearch_ca_passphrase": CA_PASSPHRASE,
    "opensearch_security_passwords": {
        "admin": "Invfirst-Admin-4d2a",
        "kibanaserver": "Invfirst-Kibanaserver-4d2a",
        "logstash": "Invfirst-Logstash-4d2a",
        "kibana": "Invfirst-Kibana-4d2a",
    },
    "opensearch_security_users": [
        {"name": "analyst", "password": "Invfirst-Analyst-4d2a", "backend_roles": ["readall"]}
    ],
}
USERDIR_VARS: dict[str, Any] = {
    "user_directory_host": "127.0.0.1",
    "user_directory_auth_tokens": ["invfirst-userdir-token-0123456789"],
}


def write_yaml(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def make_inventory(directory: Path, console_archive: Path) -> Path:
    """A good secured inventory: three nodes, a console, the user directory."""
    write_yaml(
        directory / "hosts.yml",
        {
            "all": {
                "vars": {"ansible_user": "deploy"},
                "children": {
                    "opensearch": {
                        "hosts": {name: {"ansible_host": addr} for name, addr in NODES.items()}
                    },
                    "dashboards": {"hosts": {"n1": None}},
                    "user_directory": {"hosts": {APP_HOST[0]: {"ansible_host": APP_HOST[1]}}},
                },
            }
        },
    )
    write_yaml(directory / "group_vars" / "opensearch.yml", BASE_VARS)
    write_yaml(
        directory / "group_vars" / "dashboards.yml",
        {"dashboards_archive_path": str(console_archive)},
    )
    write_yaml(directory / "group_vars" / "user_directory.yml", USERDIR_VARS)
    return directory


def tree_digest(directory: Path) -> dict[str, str]:
    """Every file and directory under ``directory`` with its mode and content digest."""
    if not directory.exists():
        return {}
    entries = {}
    for path in sorted(directory.rglob("*")):
        stat = path.lstat()
        content = path.read_bytes() if path.is_file() else b""
        entries[str(path.relative_to(directory))] = (
            f"{stat.st_mode:o}:{hashlib.sha256(content).hexdigest()}"
        )
    return entries


# --- the bad inventories ------------------------------------------------------------------

Mutation = Callable[[Path], None]


def group_vars(**changes: Any) -> Mutation:
    def mutate(inventory: Path) -> None:
        path = inventory / "group_vars" / "opensearch.yml"
        data = read_yaml(path)
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        write_yaml(path, data)

    return mutate


def passwords(**changes: Any) -> Mutation:
    merged = {**BASE_VARS["opensearch_security_passwords"], **changes}
    return group_vars(
        opensearch_security_passwords={k: v for k, v in merged.items() if v is not None}
    )


def users(*entries: dict[str, Any]) -> Mutation:
    return group_vars(opensearch_security_users=list(entries))


def host_vars(host: str, **values: Any) -> Mutation:
    def mutate(inventory: Path) -> None:
        path = inventory / "hosts.yml"
        data = read_yaml(path)
        data["all"]["children"]["opensearch"]["hosts"][host].update(values)
        write_yaml(path, data)

    return mutate


def every_host(**values: Any) -> Mutation:
    def mutate(inventory: Path) -> None:
        for host in NODES:
            host_vars(host, **values)(inventory)

    return mutate


def other_group_vars(group: str, **changes: Any) -> Mutation:
    def mutate(inventory: Path) -> None:
        path = inventory / "group_vars" / f"{group}.yml"
        write_yaml(path, {**read_yaml(path), **changes})

    return mutate


def raw_file(relative: str, text: str) -> Mutation:
    def mutate(inventory: Path) -> None:
        (inventory / relative).write_text(text)

    return mutate


def vaulted_group_vars(inventory: Path) -> None:
    """group_vars/opensearch.yml encrypted with ansible-vault; the run gets no password."""
    subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK.with_name("ansible-vault")),
            "encrypt",
            "--vault-password-file",
            str(EXAMPLE_VAULT_PASSWORD),
            str(inventory / "group_vars" / "opensearch.yml"),
        ],
        check=True,
        capture_output=True,
    )


def remove_pki_file(name: str) -> Mutation:
    def mutate(inventory: Path) -> None:
        (inventory / ".pki" / name).unlink()

    return mutate


def plugin_zip(version: str, name: str = "analysis-fake") -> Mutation:
    """A ``source: file`` plugin whose zip is built for ``version`` of the engine."""

    def mutate(inventory: Path) -> None:
        archive = inventory.parent / f"{name}-{version}.zip"
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.writestr(
                "plugin-descriptor.properties",
                f"name={name}\nversion={version}\nopensearch.version={version}\n"
                f"java.version=11\nclassname=org.example.Fake\ndescription=fake\n",
            )
        group_vars(
            opensearch_plugins=[{"name": "analysis-fake", "source": "file", "path": str(archive)}]
        )(inventory)

    return mutate


MONITORING_HOST = ("mon1", "127.0.0.36")


def monitoring(**values: Any) -> Mutation:
    """A monitoring host (the group monitoring) with ``values`` as its group's variables."""

    def mutate(inventory: Path) -> None:
        path = inventory / "hosts.yml"
        data = read_yaml(path)
        name, address = MONITORING_HOST
        data["all"]["children"]["monitoring"] = {"hosts": {name: {"ansible_host": address}}}
        write_yaml(path, data)
        write_yaml(inventory / "group_vars" / "monitoring.yml", values)

    return mutate


LDAP_VARS: dict[str, Any] = {
    "opensearch_ldap_enabled": True,
    "opensearch_ldap_hosts": ["127.0.0.37:636"],
    "opensearch_ldap_bind_dn": "cn=opensearch,ou=services,dc=example,dc=internal",
    "opensearch_ldap_bind_password": "Invfirst-Bind-4d2a",
    "opensearch_ldap_rolebase": "ou=groups,dc=example,dc=internal",
}


def services_only(then: Mutation) -> Mutation:
    """The inventory without the cluster and its console (the services alone), then
    ``then``."""

    def mutate(inventory: Path) -> None:
        path = inventory / "hosts.yml"
        data = read_yaml(path)
        for group in ("opensearch", "dashboards"):
            data["all"]["children"].pop(group)
        write_yaml(path, data)
        then(inventory)

    return mutate


def missing_console_archive(inventory: Path) -> None:
    other_group_vars("dashboards", dashboards_archive_path="/nonexistent/osd.tar.gz")(inventory)


@dataclass(frozen=True)
class Case:
    name: str
    mutate: Mutation
    # What the refusal must say: the variable at fault (or the file and line, or the option).
    expected: tuple[str, ...]
    playbook: str = "site.yml"
    extra_args: tuple[str, ...] = ()


CASES = [
    Case("heap-not-a-size", group_vars(opensearch_heap_size="lots"), ("opensearch_heap_size",)),
    Case("http-port-range", group_vars(opensearch_http_port=70000), ("opensearch_http_port",)),
    Case(
        "ports-equal",
        group_vars(opensearch_http_port=9300, opensearch_transport_port=9300),
        ("opensearch_transport_port",),
    ),
    Case(
        "unknown-mode", group_vars(opensearch_security_mode="medium"), ("opensearch_security_mode",)
    ),
    Case(
        "unknown-variable",
        group_vars(opensearch_heapsize="1g"),
        ("opensearch_heapsize", "opensearch_heap_size"),
    ),
    Case("bad-version", group_vars(opensearch_version="banana"), ("opensearch_version",)),
    Case("jvm-options", group_vars(opensearch_jvm_options="-Xmx1g"), ("opensearch_jvm_options",)),
    Case(
        "renew-days",
        group_vars(opensearch_cert_renew_within_days=-1),
        ("opensearch_cert_renew_within_days",),
    ),
    Case("data-path", group_vars(opensearch_data_path="data"), ("opensearch_data_path",)),
    Case(
        "cors-any-origin",
        group_vars(opensearch_cors_enabled=True, opensearch_cors_allow_origin="*"),
        ("opensearch_cors_allow_origin",),
    ),
    Case(
        "managed-extra-setting",
        group_vars(opensearch_extra_settings={"cluster.name": "other"}),
        ("opensearch_extra_settings",),
    ),
    Case(
        "cert-country",
        group_vars(opensearch_cert_subject={"country": "Germany"}),
        ("opensearch_cert_subject",),
    ),
    Case(
        "own-ca-half",
        group_vars(opensearch_ca_cert_path="/etc/ca.pem"),
        ("opensearch_ca_key_path",),
    ),
    Case(
        "own-ca-missing",
        group_vars(opensearch_ca_cert_path="/nonexistent/ca.pem", opensearch_ca_key_path="/x.pem"),
        ("opensearch_ca_cert_path",),
    ),
    Case("demo-admin-password", passwords(admin="admin"), ("opensearch_security_passwords.admin",)),
    Case(
        "demo-logstash-password",
        passwords(logstash="logstash"),
        ("opensearch_security_passwords.logstash",),
    ),
    Case(
        "placeholder-password",
        passwords(kibana="changeme"),
        ("opensearch_security_passwords.kibana",),
    ),
    Case(
        "missing-password",
        passwords(kibanaserver=None),
        ("opensearch_security_passwords.kibanaserver",),
    ),
    Case(
        "password-is-user-name",
        users({"name": "analyst", "password": "Analyst"}),
        ("opensearch_security_users[0].password",),
    ),
    Case(
        "published-admin-password",
        passwords(admin=PUBLISHED_ADMIN_PASSWORD),
        ("opensearch_security_passwords.admin", "published"),
    ),
    Case(
        "published-user-password",
        users({"name": "analyst", "password": "Example-Only-Reporting-48d3b7"}),
        ("opensearch_security_users[0].password", "published"),
    ),
    Case(
        "published-ca-passphrase",
        group_vars(opensearch_ca_passphrase=PUBLISHED_CA_PASSPHRASE),
        ("opensearch_ca_passphrase", "published"),
    ),
    Case(
        "demo-ca-passphrase",
        group_vars(opensearch_ca_passphrase="admin"),
        ("opensearch_ca_passphrase",),
    ),
    Case(
        "no-ca-passphrase", group_vars(opensearch_ca_passphrase=None), ("opensearch_ca_passphrase",)
    ),
    Case(
        "wrong-ca-passphrase",
        group_vars(opensearch_ca_passphrase="another-Passphrase-19"),
        ("opensearch_ca_passphrase", "cannot be decrypted"),
    ),
    Case("lone-ca-certificate", remove_pki_file("ca-key.pem"), ("opensearch_ca_passphrase",)),
    Case(
        "unknown-predefined-user",
        passwords(bob="Invfirst-Bob-4d2a"),
        ("opensearch_security_passwords", "bob"),
    ),
    Case(
        "reserved-user-name",
        users({"name": "admin", "password": "Invfirst-Other-4d2a"}),
        ("opensearch_security_users[0]",),
    ),
    Case(
        "user-unknown-key",
        users({"name": "analyst", "password": "Invfirst-Analyst-4d2a", "group": "x"}),
        ("opensearch_security_users[0]",),
    ),
    Case(
        "node-role", host_vars("n2", opensearch_node_roles=["wizard"]), ("opensearch_node_roles",)
    ),
    Case(
        "no-cluster-manager",
        every_host(opensearch_node_roles=["data"]),
        ("opensearch_node_roles",),
    ),
    Case("same-address", host_vars("n2", ansible_host="127.0.0.31"), ("ansible_host",)),
    Case("same-node-name", every_host(opensearch_node_name="one"), ("opensearch_node_name",)),
    Case("all-absent", every_host(opensearch_node_state="absent"), ("opensearch_node_state",)),
    Case(
        "plugin-source",
        group_vars(opensearch_plugins=[{"name": "x", "source": "ftp", "path": "/x"}]),
        ("opensearch_plugins",),
    ),
    Case(
        "plugin-file-missing",
        group_vars(
            opensearch_plugins=[{"name": "x", "source": "file", "path": "/nonexistent/x.zip"}]
        ),
        ("opensearch_plugins",),
    ),
    Case(
        "plugin-file-wrong-engine",
        plugin_zip("2.11.0"),
        ("opensearch_plugins", "2.11.0", "2.19.4"),
    ),
    Case(
        "engine-file-missing",
        group_vars(
            opensearch_distribution_source="file",
            opensearch_distribution_path="/nonexistent/opensearch.tar.gz",
        ),
        ("opensearch_distribution_path",),
    ),
    Case(
        "snapshot-repository-name",
        group_vars(opensearch_snapshot_repository="Bad Name!"),
        ("opensearch_snapshot_repository",),
    ),
    Case("console-archive-missing", missing_console_archive, ("dashboards_archive_path",)),
    # The monitoring play runs last; its settings are checked with the rest (issue 51).
    Case(
        "monitoring-duration-word",
        monitoring(monitoring_alert_red_for="banana"),
        ("monitoring_alert_red_for",),
    ),
    Case(
        "monitoring-duration-negative",
        monitoring(monitoring_scrape_interval="-5m"),
        ("monitoring_scrape_interval",),
    ),
    Case(
        "monitoring-one-port",
        monitoring(monitoring_prometheus_port=9093, monitoring_alertmanager_port=9093),
        ("monitoring_prometheus_port", "monitoring_alertmanager_port"),
    ),
    Case(
        "monitoring-heap-percent",
        monitoring(monitoring_alert_heap_percent=250),
        ("monitoring_alert_heap_percent",),
    ),
    Case(
        "monitoring-receiver-url",
        monitoring(monitoring_alertmanager_receivers=[{"name": "ops", "webhook": {"url": "nope"}}]),
        ("monitoring_alertmanager_receivers", "webhook.url"),
    ),
    Case(
        "monitoring-unknown-variable",
        monitoring(monitoring_scrape_intervall="30s"),
        ("monitoring_scrape_intervall", "monitoring_scrape_interval"),
    ),
    Case(
        "ldap-userbase-not-a-dn",
        group_vars(**LDAP_VARS, opensearch_ldap_userbase="not a dn"),
        ("opensearch_ldap_userbase",),
    ),
    Case(
        "ldap-filter-not-a-filter",
        group_vars(
            **LDAP_VARS,
            opensearch_ldap_userbase="ou=people,dc=example,dc=internal",
            opensearch_ldap_usersearch="(uid={0}",
        ),
        ("opensearch_ldap_usersearch",),
    ),
    Case(
        "console-port",
        other_group_vars("dashboards", dashboards_port="console"),
        ("dashboards_port",),
    ),
    Case(
        "userdir-published-token",
        other_group_vars("user_directory", user_directory_auth_tokens=[PUBLISHED_USERDIR_TOKEN]),
        ("user_directory_auth_tokens[0]", "published"),
    ),
    Case(
        "userdir-short-token",
        other_group_vars("user_directory", user_directory_auth_tokens=["short"]),
        ("user_directory_auth_tokens",),
    ),
    Case(
        "userdir-port",
        other_group_vars("user_directory", user_directory_port=0),
        ("user_directory_port",),
    ),
    Case(
        "yaml-error",
        raw_file("group_vars/opensearch.yml", "opensearch_heap_size: 1g\nfoo: : bar\n"),
        ("group_vars/opensearch.yml:2",),
    ),
    Case("vault-without-password", vaulted_group_vars, ("--vault-password-file",)),
    Case(
        "hosts-file-unparsable",
        raw_file("hosts.yml", "all:\n  children:\n    opensearch:\n      hosts: [\n"),
        ("Unable to parse", "hosts.yml", "no host in the group 'opensearch'"),
    ),
    # The TLS proxy's own checks (its ports' clash, its binds, the profile) run in the
    # inventory check, not when the run reaches the proxy's host (issue 51).
    Case(
        "proxy-port-clash",
        other_group_vars("user_directory", user_directory_app_port=8081),
        ("user_directory_port 8081", "user_directory_app_port 8081", "give each its own"),
    ),
    # --limit keeps the limited hosts in the check's play: it still checks everything.
    Case(
        "limited-run",
        host_vars("n3", opensearch_heap_size="lots"),
        ("opensearch_heap_size",),
        extra_args=("--limit", "n1"),
    ),
    # The other playbooks start with the same check.
    Case(
        "plan-playbook",
        group_vars(opensearch_heap_size="lots"),
        ("opensearch_heap_size",),
        "plan.yml",
    ),
    Case(
        "rotate_certs-playbook",
        group_vars(opensearch_ca_passphrase="another-Passphrase-19"),
        ("opensearch_ca_passphrase",),
        "rotate_certs.yml",
    ),
    Case(
        "rotate_ca-playbook",
        group_vars(opensearch_ca_passphrase=None),
        ("opensearch_ca_passphrase",),
        "rotate_ca.yml",
        ("-e", "clusterforge_ca_rotation_step=trust"),
    ),
    Case(
        "rolling_restart-playbook",
        passwords(admin="admin"),
        ("opensearch_security_passwords.admin",),
        "rolling_restart.yml",
    ),
    Case(
        "upgrade-playbook",
        group_vars(opensearch_version="banana"),
        ("opensearch_version",),
        "upgrade.yml",
    ),
    Case(
        "snapshot-playbook",
        group_vars(opensearch_snapshot_repository="Bad Name!"),
        ("opensearch_snapshot_repository",),
        "snapshot.yml",
    ),
    Case(
        "restore-playbook",
        group_vars(opensearch_heap_size="lots"),
        ("opensearch_heap_size",),
        "restore.yml",
        ("-e", "snapshot_name=nightly"),
    ),
    Case(
        "decommission-playbook",
        host_vars("n3", opensearch_node_roles=["wizard"]),
        ("opensearch_node_roles",),
        "decommission.yml",
    ),
    Case(
        "services-playbook",
        other_group_vars("user_directory", user_directory_auth_tokens=[PUBLISHED_USERDIR_TOKEN]),
        ("user_directory_auth_tokens[0]",),
        "services.yml",
    ),
    # A services-only inventory has no plan (no OpenSearch group): its proxy is refused by
    # the same check, before the services' hosts are contacted.
    Case(
        "services-only-proxy-port-clash",
        services_only(other_group_vars("user_directory", user_directory_app_port=8081)),
        ("user_directory_port 8081", "user_directory_app_port 8081", "give each its own"),
        "services.yml",
    ),
    # monitoring.yml alone plans first (the monitoring is a section of the plan): the
    # same check runs before it.
    Case(
        "monitoring-playbook",
        monitoring(monitoring_alert_red_for="banana"),
        ("monitoring_alert_red_for",),
        "monitoring.yml",
    ),
    # -e name=value hands over a string: what Ansible reads as a boolean passes (the good
    # run below), anything else is refused naming the variable.
    Case(
        "extra-var-not-a-boolean",
        lambda inventory: None,
        ("opensearch_config_prune 'sometimes' is not a boolean",),
        "site.yml",
        ("-e", "opensearch_config_prune=sometimes"),
    ),
]


@dataclass
class Run:
    output: str
    returncode: int
    before: dict[str, str]
    after: dict[str, str]
    cache_created: bool


def run_playbook(inventory: Path, case_dir: Path, playbook: str, extra: tuple[str, ...]) -> Run:
    cache = case_dir / "cache"
    env = {key: value for key, value in os.environ.items() if key != "CLUSTERFORGE_CA_PASSPHRASE"}
    env.update(
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        # Nothing listens on the nodes' addresses; the timeout only bounds a surprise.
        ANSIBLE_TIMEOUT="5",
        ANSIBLE_NOCOLOR="1",
        CLUSTERFORGE_CACHE=str(cache),
        HOME=str(case_dir / "home"),
    )
    before = tree_digest(inventory)
    completed = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / playbook), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return Run(
        output=completed.stdout + completed.stderr,
        returncode=completed.returncode,
        before=before,
        after=tree_digest(inventory),
        cache_created=cache.exists(),
    )


@pytest.fixture(scope="module")
def base_inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The good inventory, with the PKI a first deploy would have issued (.pki)."""
    root = tmp_path_factory.mktemp("invfirst-base")
    console_archive = root / "opensearch-dashboards-2.19.4-linux-x64.tar.gz"
    console_archive.write_bytes(b"not read by the check")
    inventory = make_inventory(root / "inventory", console_archive)
    nodes = load_inventory_nodes(inventory, "opensearch")
    ensure_cluster_pki(
        build_cluster(nodes), pki_dir=inventory / ".pki", passphrase=CA_PASSPHRASE.encode()
    )
    return inventory


@dataclass(frozen=True)
class Job:
    key: str
    inventory: Path
    case_dir: Path
    playbook: str
    extra: tuple[str, ...]


@pytest.fixture(scope="module")
def runs(base_inventory: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every run of this module, started a few at a time."""
    root = tmp_path_factory.mktemp("invfirst-runs")
    jobs = []
    for case in CASES:
        case_dir = root / case.name
        inventory = case_dir / "inventory"
        shutil.copytree(base_inventory, inventory)
        case.mutate(inventory)
        jobs.append(Job(case.name, inventory, case_dir, case.playbook, case.extra_args))
    # Good inventories whose hosts do not answer.
    for key, playbook, keep_pki, extra in (
        ("good-site", "site.yml", True, ()),
        ("good-site-first-deploy", "site.yml", False, ()),
        ("good-rotate_certs", "rotate_certs.yml", True, ()),
        # Booleans as Ansible passes them on the command line (issue 41, item 4).
        (
            "good-site-string-booleans",
            "site.yml",
            True,
            ("-e", "opensearch_config_prune=true", "-e", "opensearch_audit_failed_logins=Yes"),
        ),
    ):
        case_dir = root / key
        inventory = case_dir / "inventory"
        shutil.copytree(base_inventory, inventory)
        if not keep_pki:
            shutil.rmtree(inventory / ".pki")
        jobs.append(Job(key, inventory, case_dir, playbook, extra))
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        results = pool.map(
            lambda job: (
                job.key,
                run_playbook(job.inventory, job.case_dir, job.playbook, job.extra),
            ),
            jobs,
        )
        return dict(results)


def test_there_are_forty_bad_inventories_through_site_yml() -> None:
    assert len([case for case in CASES if case.playbook == "site.yml"]) >= 40


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_inventory_is_refused_before_any_host_naming_the_variable(
    case: Case, runs: dict[str, Run]
) -> None:
    run = runs[case.name]
    assert run.returncode != 0, run.output
    for expected in case.expected:
        assert expected in run.output, f"{expected!r} not in:\n{run.output}"
    # Refused by the check on localhost, not by the reach play: no host was contacted.
    assert "Cannot reach" not in run.output, run.output
    assert "PLAY [Reach every node" not in run.output, run.output
    assert run.after == run.before, "the inventory directory (its .pki included) changed"
    assert ".pki/ca.pem" in run.before
    assert not run.cache_created, "the artifact cache was touched"


def test_good_inventory_with_hosts_that_do_not_answer_stops_before_the_plan(
    runs: dict[str, Run],
) -> None:
    run = runs["good-site"]
    assert run.returncode != 0
    assert "Cannot reach n1" in run.output, run.output
    assert "PLAY [Plan the cluster on the control node]" not in run.output
    assert run.after == run.before
    assert not run.cache_created


def test_booleans_passed_as_ansible_passes_them_get_past_the_check(runs: dict[str, Run]) -> None:
    # `-e opensearch_config_prune=true` is the string 'true': the check accepts it as the
    # JSON form's true, and the run goes on to reach the hosts.
    run = runs["good-site-string-booleans"]
    assert "is not a boolean" not in run.output, run.output
    assert "Cannot reach n1" in run.output, run.output
    assert run.after == run.before


def test_first_deploy_to_hosts_that_do_not_answer_issues_no_certificate(
    runs: dict[str, Run],
) -> None:
    run = runs["good-site-first-deploy"]
    assert "Cannot reach n1" in run.output, run.output
    assert not any(path.startswith(".pki") for path in run.after), run.after
    assert run.after == run.before


def test_rotate_certs_to_hosts_that_do_not_answer_changes_no_file(runs: dict[str, Run]) -> None:
    run = runs["good-rotate_certs"]
    assert run.returncode != 0
    assert "Cannot reach n1" in run.output, run.output
    assert "PLAY [Issue every certificate again" not in run.output
    assert run.after == run.before, "rotate_certs.yml wrote on the control node"
