"""A run validates each service host's settings once (issue 41, item 2).

The services' settings models (``ServerSettings`` of the user directory,
``OrderServiceSettings`` of the order service) are counted where they validate,
``model_validate``:

- site.yml's steps on the control node, in this process: the inventory check
  (check_inventory.yml: ``validate_inventory`` as the ``validate_only`` action calls it),
  the plan (plan.yml: ``build_plan`` with the check's ``services``), and what the roles
  copy (the plan's ``services`` section, with the delivery's real password). Counted with
  the interpreter's profiling hook, which sees every Python call: nothing is patched.
- a PostgreSQL host the same way: its database URL is planned with its settings (the
  first host of the group postgresql, the generated password), validated once, and copied.
- services.yml's steps for real, with ansible-playbook on this machine: check_inventory.yml
  imported twice (site.yml imports it through plan.yml and services.yml), then each
  service's play running the role's own preflight tasks (read from
  roles/_python_service/tasks/preflight.yml, so the test follows the role's wiring). The
  actions run in Ansible's worker processes, so there a counter wraps ``model_validate``
  (a ``sitecustomize`` on PYTHONPATH that appends one line per call to a file): a
  stand-in for counting, the validation itself is the model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.plan.plan import build_plan
from clusterforge.plan.services.orders_search import NOT_GENERATED
from clusterforge.plan.validation import validate_inventory
from test_orders_search_plan import LOOPBACK_PROXY, cluster_nodes

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
MODELS = {"ServerSettings": "user_directory", "OrderServiceSettings": "order_service"}
USERDIR_HOSTS = ("apps-1", "apps-2")
ORDERS_HOSTS = ("apps-1",)
ORDERS_TOKEN = "orders-token-kept-out-of-the-log-0123456789"  # a test value
# The db host (never contacted): an unused loopback address.
DATABASE_VARS = [("db-1", {"postgresql_listen_addresses": ["127.0.0.95"], "postgresql_port": 5433})]


def _validations(run: Any) -> tuple[Any, Counter[str]]:
    """``run()``'s result and how often each settings model validated in it."""
    counted: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "model_validate":
            model = frame.f_locals.get("cls")
            name = getattr(model, "__name__", "")
            if name in MODELS:
                counted[MODELS[name]] += 1

    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(None)
    return result, counted


def _services_vars() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    return {
        "user_directory": [(host, dict(LOOPBACK_PROXY)) for host in USERDIR_HOSTS],
        "order_service": [
            (host, {**LOOPBACK_PROXY, "order_service_auth_tokens": [ORDERS_TOKEN]})
            for host in ORDERS_HOSTS
        ],
    }


def test_site_yml_steps_validate_each_service_host_once(tmp_path: Path) -> None:
    nodes = cluster_nodes(tmp_path)
    services = _services_vars()
    # check_inventory.yml: the validate_only action.
    checked, at_check = _validations(
        lambda: validate_inventory(
            nodes, inventory_dir=tmp_path, project_root=ROOT, services_vars=services
        )
    )
    assert at_check == {"user_directory": len(USERDIR_HOSTS), "order_service": len(ORDERS_HOSTS)}
    # What the check keeps holds the placeholder: it generates and writes nothing.
    check_file = yaml.safe_load(checked.services["apps-1"]["order_service"]["content"])
    assert check_file["orders"]["search"]["password"] == NOT_GENERATED
    assert not (tmp_path / ".opensearch").exists()
    # plan.yml: the plan, given what the check kept (as check_inventory.yml keeps it).
    plan, at_plan = _validations(
        lambda: build_plan(
            nodes,
            inventory_dir=tmp_path,
            project_root=ROOT,
            fetch=False,
            services_vars=services,
            checked_services=json.loads(json.dumps(checked.services)),
        )
    )
    assert at_plan == Counter()
    # The roles copy the plan's section: the settings file, with the real password.
    password = (tmp_path / ".opensearch" / "orders-writer.password").read_text().strip()
    planned = plan["services"]
    assert sorted(planned) == sorted(USERDIR_HOSTS)
    orders_file = yaml.safe_load(planned["apps-1"]["order_service"]["content"])
    assert orders_file["orders"]["search"]["password"] == password
    assert orders_file["orders"]["auth-tokens"] == [ORDERS_TOKEN]
    # The rest of the file is what the check validated.
    del orders_file["orders"]["search"]["password"], check_file["orders"]["search"]["password"]
    assert orders_file == check_file
    for host in USERDIR_HOSTS:
        assert planned[host]["user_directory"] == checked.services[host]["user_directory"]


def test_a_plan_without_a_check_validates_once(tmp_path: Path) -> None:
    """scripts/render, and a check that holds other hosts than the plan's: planned once."""
    services = _services_vars()
    stale = {"apps-9": {"user_directory": {"content": "stale"}}}
    for checked in (None, stale):
        plan, counted = _validations(
            lambda checked=checked: build_plan(
                cluster_nodes(tmp_path),
                inventory_dir=tmp_path,
                project_root=ROOT,
                fetch=False,
                services_vars=services,
                checked_services=checked,
            )
        )
        assert counted == {"user_directory": len(USERDIR_HOSTS), "order_service": 1}
        assert "apps-9" not in plan["services"]


def _postgresql_services_vars() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """apps-2's user directory and apps-1's order service on PostgreSQL."""
    services = _services_vars()
    services["user_directory"][1][1]["user_directory_database"] = "postgresql"
    services["order_service"][0][1]["order_service_database"] = "postgresql"
    return services


def _url(service: str, password: str, config_dir: str) -> str:
    names = {"user_directory": "clusterforge_userdir", "order_service": "clusterforge_orders"}
    return (
        f"postgresql+psycopg://{names[service]}:{password}@127.0.0.95:5433/{names[service]}"
        f"?sslmode=verify-full&sslrootcert={config_dir}/postgresql-ca.pem"
    )


def test_a_postgresql_host_is_validated_once_with_the_url_the_plan_builds(tmp_path: Path) -> None:
    nodes = cluster_nodes(tmp_path)
    services = _postgresql_services_vars()
    checked, at_check = _validations(
        lambda: validate_inventory(
            nodes,
            inventory_dir=tmp_path,
            project_root=ROOT,
            services_vars=services,
            database_vars=DATABASE_VARS,
        )
    )
    # Once per host, the PostgreSQL ones included (with the URL, its password a placeholder).
    assert at_check == {"user_directory": len(USERDIR_HOSTS), "order_service": len(ORDERS_HOSTS)}
    passwords = tmp_path / ".postgresql"
    assert not passwords.exists()  # the check writes nothing
    held = checked.services["apps-2"]["user_directory"]
    assert _url("user_directory", NOT_GENERATED, "/etc/clusterforge-userdir") in held["content"]
    assert held["public"]["database_url"] == "<secret: left out>"
    plan, at_plan = _validations(
        lambda: build_plan(
            nodes,
            inventory_dir=tmp_path,
            project_root=ROOT,
            fetch=False,
            services_vars=services,
            checked_services=json.loads(json.dumps(checked.services)),
            database_vars=DATABASE_VARS,
        )
    )
    assert at_plan == Counter()
    # The password the postgresql role gives the login role: one 0600 file per service.
    userdir_password = (passwords / "user_directory.password").read_text().strip()
    orders_password = (passwords / "order_service.password").read_text().strip()
    assert (passwords / "user_directory.password").stat().st_mode & 0o777 == 0o600
    assert len(userdir_password) == 32 and userdir_password.isalnum()
    planned = plan["services"]
    userdir = planned["apps-2"]["user_directory"]["content"]
    assert (
        f'CLUSTERFORGE_USERDIR_DATABASE_URL="'
        f'{_url("user_directory", userdir_password, "/etc/clusterforge-userdir")}"' in userdir
    )
    assert NOT_GENERATED not in userdir
    orders = yaml.safe_load(planned["apps-1"]["order_service"]["content"])
    assert orders["orders"]["database-url"] == _url(
        "order_service", orders_password, "/etc/clusterforge-orders"
    )
    # The SQLite host is as before; no password is in what a preview shows.
    assert "sqlite:///" in planned["apps-1"]["user_directory"]["content"]
    assert userdir_password not in json.dumps(
        {host: {s: v["public"] for s, v in by.items()} for host, by in planned.items()}
    )


def test_postgresql_without_a_db_host_or_with_a_url_of_its_own_is_refused(tmp_path: Path) -> None:
    services = _postgresql_services_vars()
    with pytest.raises(InventoryError) as refused:
        validate_inventory(
            cluster_nodes(tmp_path),
            inventory_dir=tmp_path,
            project_root=ROOT,
            services_vars=services,
        )
    assert any(
        "user_directory_database is postgresql on apps-2: put the db host in the inventory "
        "group postgresql" in problem
        for problem in refused.value.problems
    )
    services["user_directory"][1][1]["user_directory_database_url"] = "sqlite:////tmp/x.db"
    with pytest.raises(InventoryError, match="leave user_directory_database_url unset"):
        validate_inventory(
            cluster_nodes(tmp_path),
            inventory_dir=tmp_path,
            project_root=ROOT,
            services_vars=services,
            database_vars=DATABASE_VARS,
        )


COUNTER = """\
import os

_COUNT_FILE = os.environ["CLUSTERFORGE_TEST_VALIDATIONS"]


def _counted(model, service):
    original = model.model_validate.__func__

    def model_validate(cls, *args, **kwargs):
        with open(_COUNT_FILE, "a", encoding="utf-8") as out:
            out.write(service + "\\n")
        return original(cls, *args, **kwargs)

    model.model_validate = classmethod(model_validate)


from clusterforge_orders.settings import OrderServiceSettings  # noqa: E402
from clusterforge_userdir.settings import ServerSettings  # noqa: E402

_counted(ServerSettings, "user_directory")
_counted(OrderServiceSettings, "order_service")
"""


def _inventory(directory: Path) -> Path:
    """A tls cluster (never contacted: no task here connects to it) with delivery on, and
    the services on hosts Ansible runs locally."""
    inventory = directory / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    local = {"ansible_connection": "local", **LOOPBACK_PROXY}
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "opensearch": {
                            "hosts": {
                                "os-1": {"ansible_host": "127.0.0.91"},
                                "os-2": {"ansible_host": "127.0.0.92"},
                                "os-3": {"ansible_host": "127.0.0.93"},
                            }
                        },
                        "user_directory": {
                            "hosts": {
                                # apps-2 on PostgreSQL: its URL is planned with its settings.
                                host: {**local, "user_directory_database": "postgresql"}
                                if host == "apps-2"
                                else local
                                for host in USERDIR_HOSTS
                            }
                        },
                        # Never contacted: no play targets it.
                        "postgresql": {
                            "hosts": {host: dict(variables) for host, variables in DATABASE_VARS}
                        },
                        "order_service": {
                            "hosts": {
                                host: {**local, "order_service_auth_tokens": [ORDERS_TOKEN]}
                                for host in ORDERS_HOSTS
                            }
                        },
                    }
                }
            }
        )
    )
    (inventory / "group_vars" / "opensearch.yml").write_text(
        yaml.safe_dump(
            {
                "opensearch_security_mode": "tls",
                "opensearch_pki_dir": str(inventory / ".pki"),
                "opensearch_ca_passphrase": "unit-test-passphrase",
                "opensearch_security_passwords": {
                    name: f"Unit-{name.title()}-5d2b"
                    for name in ("admin", "kibanaserver", "logstash", "kibana")
                },
                # Delivery's index needs it; a build is never started by the check.
                "opensearch_plugins": [
                    {
                        "name": "analysis-smartcn",
                        "source": "build",
                        "path": "engine-plugins/analysis-smartcn",
                    }
                ],
            }
        )
    )
    return inventory


def _service_play(service: str, preflight: list[dict[str, Any]], kept: Path) -> dict[str, Any]:
    # The role's tasks up to the wheelhouse (which builds wheels: not what is counted).
    settings_tasks = []
    for task in preflight:
        if "clusterforge.stack.clusterforge_wheelhouse" in task:
            break
        settings_tasks.append(task)
    return {
        "name": f"The {service} role's settings steps",
        "hosts": service,
        "gather_facts": False,
        "vars": {"_python_service_role": service},
        "tasks": [
            *settings_tasks,
            {
                "name": "Keep each host's settings file for the test",
                "ansible.builtin.copy": {
                    "content": "{{ __python_service_settings.content }}",
                    "dest": f"{kept}/{service}-{{{{ inventory_hostname }}}}",
                    "mode": "0600",
                },
                "delegate_to": "localhost",
                "no_log": True,
            },
        ],
    }


def test_services_yml_steps_validate_each_service_host_once(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path)
    site_packages = tmp_path / "counter"
    site_packages.mkdir()
    (site_packages / "sitecustomize.py").write_text(COUNTER)
    count_file = tmp_path / "validations"
    kept = tmp_path / "kept"
    kept.mkdir()
    preflight = yaml.safe_load((ROOT / "roles/_python_service/tasks/preflight.yml").read_text())
    check = str(ROOT / "playbooks/check_inventory.yml")
    playbook = [
        # site.yml imports it twice (plan.yml, services.yml): the second one checks nothing.
        {"name": "Check", "ansible.builtin.import_playbook": check},
        {"name": "Check again", "ansible.builtin.import_playbook": check},
        # services.yml alone: the passwords put into the check's settings, nothing validated.
        {
            "name": "Plan the services",
            "ansible.builtin.import_playbook": str(ROOT / "playbooks/services_plan.yml"),
        },
        _service_play("user_directory", preflight, kept),
        _service_play("order_service", preflight, kept),
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    environment = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "PYTHONPATH": os.pathsep.join(
            [str(site_packages), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "CLUSTERFORGE_TEST_VALIDATIONS": str(count_file),
    }
    result = subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            str(inventory),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-v",
            str(tmp_path / "play.yml"),
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    counted = Counter(count_file.read_text().split())
    assert counted == {"user_directory": len(USERDIR_HOSTS), "order_service": len(ORDERS_HOSTS)}
    # The files the hosts get: the order service's with the real password, generated once
    # after the check (which writes nothing) by services_plan.yml; the role copies it.
    password = (inventory / ".opensearch" / "orders-writer.password").read_text().strip()
    orders = yaml.safe_load((kept / "order_service-apps-1").read_text())
    assert orders["orders"]["search"]["password"] == password
    assert orders["orders"]["auth-tokens"] == [ORDERS_TOKEN]
    for host in USERDIR_HOSTS:
        assert "CLUSTERFORGE_USERDIR_DATABASE_URL=" in (kept / f"user_directory-{host}").read_text()
    # apps-2's URL, copied from the check with the generated password put in.
    database_password = (inventory / ".postgresql" / "user_directory.password").read_text().strip()
    assert (
        _url("user_directory", database_password, "/etc/clusterforge-userdir")
        in (kept / "user_directory-apps-2").read_text()
    )
    assert database_password not in output
    # Secrets in no output, -v included.
    assert password not in output
    assert ORDERS_TOKEN not in output
