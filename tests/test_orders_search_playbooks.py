"""The Ansible side of order delivery, run with ansible-playbook on this machine.

- roles/order_service/tasks/orders_index.yml runs against ``StandinSearchApi``, a stand-in
  (not OpenSearch: no cluster may run here) for the four endpoints the tasks call,
  which answers a template back the way OpenSearch does (inside ``index_templates``,
  with ``composed_of`` added). The lead checks the same tasks on the lab's real cluster.
- services.yml's way without a plan (the inventory check, then services_plan.yml) plans
  ``orders.search`` from the inventory's ``opensearch`` group as the plan does, with the
  password generated on the control node; the clusterforge_service_settings action
  copies it, and the run's output (-v) never holds the password.
- The action plans nothing: a host no check and plan of the run planned is refused,
  naming the playbooks that plan it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.plan.services.orders_search import OrdersSearch, index_template

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


class StandinSearchApi(ThreadingHTTPServer):
    """Stand-in for GET/PUT /_index_template/orders and HEAD/PUT /orders (not OpenSearch)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _StandinHandler)
        self.template: dict[str, Any] | None = None
        self.index_exists = False
        self.head_says_missing = False  # a bulk created the index after the HEAD
        self.create_error: str | None = None
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _StandinHandler(BaseHTTPRequestHandler):
    server: StandinSearchApi

    def _answer(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.requests.append(f"GET {self.path}")
        if self.path == "/_index_template/orders" and self.server.template is not None:
            answered = {**self.server.template, "composed_of": []}
            self._answer(200, {"index_templates": [{"name": "orders", "index_template": answered}]})
        else:
            self._answer(404, {"error": {"type": "resource_not_found_exception"}, "status": 404})

    def do_HEAD(self) -> None:
        self.server.requests.append(f"HEAD {self.path}")
        exists = self.server.index_exists and not self.server.head_says_missing
        self._answer(200 if exists and self.path == "/orders" else 404)

    def do_PUT(self) -> None:
        self.server.requests.append(f"PUT {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        if self.path == "/_index_template/orders":
            self.server.template = body
            self._answer(200, {"acknowledged": True})
        elif self.path == "/orders" and self.server.create_error:
            self._answer(400, {"error": {"type": self.server.create_error}, "status": 400})
        elif self.path == "/orders" and self.server.index_exists:
            error = {"type": "resource_already_exists_exception"}
            self._answer(400, {"error": error, "status": 400})
        elif self.path == "/orders":
            self.server.index_exists = True
            self._answer(200, {"acknowledged": True, "index": "orders"})
        else:
            self._answer(404, {"status": 404})

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def standin() -> Iterator[StandinSearchApi]:
    server = StandinSearchApi()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_playbook(
    playbook: Path, *, inventory: str, extra: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    return subprocess.run(
        [
            str(ANSIBLE_PLAYBOOK),
            "-i",
            inventory,
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            *(extra or []),
            str(playbook),
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def recap(output: str) -> dict[str, int]:
    line = next(line for line in output.splitlines() if line.startswith("localhost "))
    return {
        key: int(value)
        for key, value in (part.split("=") for part in line.split(":", 1)[1].split())
    }


@pytest.fixture
def index_play(tmp_path: Path, standin: StandinSearchApi) -> Path:
    search = OrdersSearch(
        urls=("https://unused:9200",),
        username="orders-writer",
        password="standin-unused",
        password_file=None,
        ca_bundle="/nonexistent",
        template=index_template(),
    )
    plan = {
        "cluster": {"security_mode": "open", "secured": False, "pki": None},
        "nodes": {"localhost": {"url": standin.url}},
        "orders_search": search.public(),
    }
    (tmp_path / "plan.yml").write_text(yaml.safe_dump({"__clusterforge_plan": plan}))
    play = [
        {
            "name": "The orders index tasks against the stand-in",
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(tmp_path / "plan.yml")],
            "tasks": [
                {
                    "name": "Create the index template and the index",
                    "ansible.builtin.include_role": {
                        "name": "clusterforge.stack.order_service",
                        "tasks_from": "orders_index.yml",
                    },
                }
            ],
        }
    ]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    return path


def run_index_tasks(play: Path) -> subprocess.CompletedProcess[str]:
    return run_playbook(play, inventory="localhost,", extra=["-c", "local"])


def test_the_template_and_the_index_are_created_once_and_a_rerun_changes_nothing(
    index_play: Path, standin: StandinSearchApi
) -> None:
    first = run_index_tasks(index_play)
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout)["changed"] == 2
    assert standin.template is not None
    assert standin.template["template"]["mappings"]["properties"]["productName"]["analyzer"] == (
        "smartcn"
    )
    assert standin.index_exists
    standin.requests.clear()
    second = run_index_tasks(index_play)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout)["changed"] == 0
    assert standin.requests == ["GET /_index_template/orders", "HEAD /orders"]


def test_a_template_that_is_not_the_planned_one_is_rewritten(
    index_play: Path, standin: StandinSearchApi
) -> None:
    standin.template = {"index_patterns": ["orders*"], "template": {}}  # someone else's
    standin.index_exists = True
    result = run_index_tasks(index_play)
    assert result.returncode == 0, result.stdout + result.stderr
    assert recap(result.stdout)["changed"] == 1
    assert standin.template == index_template()


def test_an_index_a_bulk_created_meanwhile_is_accepted_and_other_refusals_fail(
    index_play: Path, standin: StandinSearchApi
) -> None:
    standin.index_exists = True
    standin.head_says_missing = True
    raced = run_index_tasks(index_play)
    assert raced.returncode == 0, raced.stdout + raced.stderr
    assert "PUT /orders" in standin.requests
    assert recap(raced.stdout)["changed"] == 1  # the template only
    standin.index_exists = False
    standin.head_says_missing = False
    standin.create_error = "mapper_parsing_exception"
    refused = run_index_tasks(index_play)
    assert refused.returncode != 0
    assert recap(refused.stdout)["failed"] == 1


def _order_inventory(tmp_path: Path) -> Path:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "opensearch": {
                            "hosts": {
                                "os-1": {"ansible_host": "127.0.0.91"},
                                "os-2": {
                                    "ansible_host": "127.0.0.92",
                                    "opensearch_node_roles": ["data", "ingest"],
                                },
                            }
                        },
                        "order_service": {
                            "hosts": {
                                "localhost": {
                                    "ansible_connection": "local",
                                    # Reached on loopback alone: no token needed.
                                    "tls_proxy_listen_address": "127.0.0.1",
                                }
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
                # The inventory check (services.yml's first play) wants it.
                "opensearch_ca_passphrase": "Unit-Ca-Passphrase-7c1e",
                "opensearch_security_passwords": {
                    name: f"Unit-{name.title()}-5d2b"
                    for name in ("admin", "kibanaserver", "logstash", "kibana")
                },
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


# services_plan.yml's result on a service host; undefined in a run without it.
RUN_PLAN = "__clusterforge_services_plan | default({})"


def _settings_play(tmp_path: Path, *, planned_by_the_run: bool) -> Path:
    """The order_service role's settings task as roles/_python_service/tasks/preflight.yml
    calls it, after services.yml's check and services_plan.yml, or alone."""
    run_plan = [
        {"ansible.builtin.import_playbook": str(ROOT / "playbooks/check_inventory.yml")},
        {"ansible.builtin.import_playbook": str(ROOT / "playbooks/services_plan.yml")},
    ]
    play = [
        *(run_plan if planned_by_the_run else []),
        {
            "name": "The order_service role's settings action",
            "hosts": "order_service",
            "gather_facts": False,
            "vars_files": [str(ROOT / "roles/order_service/defaults/main.yml")],
            "tasks": [
                {
                    "name": "Copy the settings",
                    "clusterforge.stack.clusterforge_service_settings": {
                        "service": "order_service",
                        "planned": {
                            "services": f"{{{{ ({RUN_PLAN}).services | default({{}}) }}}}",
                            "orders_search": (
                                f"{{{{ ({RUN_PLAN}).orders_search | default(none) }}}}"
                            ),
                        },
                    },
                    "register": "planned",
                },
                {
                    "name": "Keep the content for the test",
                    "ansible.builtin.copy": {
                        "content": "{{ planned.content }}",
                        "dest": str(tmp_path / "orders.yml"),
                        "mode": "0600",
                    },
                    "no_log": True,
                },
            ],
        },
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    return tmp_path / "play.yml"


def test_the_run_plans_delivery_the_action_copies_it_and_prints_no_password(
    tmp_path: Path,
) -> None:
    inventory = _order_inventory(tmp_path)
    play = _settings_play(tmp_path, planned_by_the_run=True)
    result = run_playbook(play, inventory=str(inventory), extra=["-v"])
    assert result.returncode == 0, result.stdout + result.stderr
    password_file = inventory / ".opensearch" / "orders-writer.password"
    password = password_file.read_text().strip()
    assert password not in result.stdout + result.stderr
    content = yaml.safe_load((tmp_path / "orders.yml").read_text())
    search = content["orders"]["search"]
    assert search["password"] == password
    assert search["username"] == "orders-writer"
    assert search["urls"] == ["https://127.0.0.91:9200", "https://127.0.0.92:9200"]
    assert search["ca-file"] == "/etc/clusterforge-orders/ca-bundle.pem"


def test_the_action_plans_nothing_a_host_the_run_did_not_plan_is_refused(
    tmp_path: Path,
) -> None:
    """The role used without the inventory check and the plan fails closed, naming the
    playbooks that plan its settings; nothing is generated behind its back."""
    inventory = _order_inventory(tmp_path)
    play = _settings_play(tmp_path, planned_by_the_run=False)
    result = run_playbook(play, inventory=str(inventory))
    assert result.returncode != 0
    assert (
        "this run planned no order_service settings for localhost: run the role through "
        "playbooks/services.yml or playbooks/site.yml"
    ) in " ".join(result.stdout.split())
    assert not (inventory / ".opensearch" / "orders-writer.password").exists()
