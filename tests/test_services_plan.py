"""The services' settings, planned and validated on the control node by their own models.

Every test here loads the services' real ``settings.py`` from this checkout's source
trees; one runs in a fresh interpreter where importing FastAPI, SQLAlchemy or either
service's package ``__init__`` raises, as on a control node without them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import InventoryError
from clusterforge.services_plan import SECRET_MARK, plan_services, role_defaults

CHECKOUT = Path(__file__).resolve().parents[1]
TOKEN = "t0ken-of-the-test-0123456789"


def plan_one(service: str, **variables: Any) -> Any:
    return plan_services({service: ["svc-1"]}, {"svc-1": variables})["svc-1"][service]


def problems_of(service: str, **variables: Any) -> list[str]:
    with pytest.raises(InventoryError) as raised:
        plan_services({service: ["svc-1"]}, {"svc-1": variables})
    return raised.value.problems


def test_no_service_group_plans_nothing() -> None:
    assert plan_services({"opensearch": ["node-1"]}, {"node-1": {}}) == {}


def test_the_user_directorys_environment_file_from_the_defaults() -> None:
    planned = plan_one("user_directory")
    lines = planned.content.splitlines()
    assert lines == sorted(lines)
    database = "sqlite:////var/lib/clusterforge-userdir/userdir.db"
    assert f'CLUSTERFORGE_USERDIR_DATABASE_URL="{database}"' in lines
    assert 'CLUSTERFORGE_USERDIR_AUTH_TOKENS=""' in lines
    assert 'CLUSTERFORGE_USERDIR_MAX_PAGE_SIZE="100"' in lines
    assert planned.file_name == "userdir.env"
    assert planned.arguments == {"host": "127.0.0.1", "port": 8081, "workers": 1}


def test_the_user_directorys_secrets_stay_out_of_the_public_settings() -> None:
    planned = plan_one(
        "user_directory",
        user_directory_auth_tokens=[TOKEN],
        user_directory_database_url="postgresql+psycopg://userdir:pa55word@db/userdir",
    )
    assert f'CLUSTERFORGE_USERDIR_AUTH_TOKENS="{TOKEN}"' in planned.content
    assert planned.public["auth_tokens"] == SECRET_MARK
    assert planned.public["database_url"] == SECRET_MARK
    assert TOKEN not in repr(planned)
    assert "pa55word" not in repr(planned.as_dict())


def test_the_environment_file_escapes_quotes_and_backslashes() -> None:
    token = 'a"quoted\\token-long-enough'
    planned = plan_one("user_directory", user_directory_auth_tokens=[token])
    assert 'CLUSTERFORGE_USERDIR_AUTH_TOKENS="a\\"quoted\\\\token-long-enough"' in planned.content


@pytest.mark.parametrize(
    ("variables", "variable"),
    [
        ({"user_directory_max_page_size": 50}, "user_directory_max_page_size"),
        ({"user_directory_list_limit": 0}, "user_directory_list_limit"),
        ({"user_directory_max_request_body_bytes": 10}, "user_directory_max_request_body_bytes"),
        ({"user_directory_max_page_size": "many"}, "user_directory_max_page_size"),
        ({"user_directory_auth_tokens": ["short"]}, "user_directory_auth_tokens"),
        ({"user_directory_auth_tokens": ["changeme"]}, "user_directory_auth_tokens"),
        ({"user_directory_auth_tokens": TOKEN}, "user_directory_auth_tokens"),
        ({"user_directory_database_url": "mysql://u:p@db/x"}, "user_directory_database_url"),
        ({"user_directory_port": 0}, "user_directory_port"),
        ({"user_directory_port": 70000}, "user_directory_port"),
        ({"user_directory_port": True}, "user_directory_port"),
        ({"user_directory_workers": 0}, "user_directory_workers"),
    ],
)
def test_a_bad_user_directory_setting_is_refused_naming_the_variable(
    variables: dict[str, Any], variable: str
) -> None:
    problems = problems_of("user_directory", **variables)
    assert any(problem.startswith(variable) for problem in problems), problems


def test_a_refused_token_or_url_is_never_printed() -> None:
    problems = problems_of(
        "user_directory",
        user_directory_auth_tokens=["weak-secret"],
        user_directory_database_url="mysql://u:hidden-password@db/x",
    )
    assert len(problems) == 2
    assert "weak-secret" not in str(problems)
    assert "hidden-password" not in str(problems)
    assert "token_urlsafe" in str(problems)  # the fix


def test_every_host_and_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InventoryError) as raised:
        plan_services(
            {"user_directory": ["a", "b"], "order_service": ["a"]},
            {
                "a": {"user_directory_port": 0, "order_service_port": "high"},
                "b": {"user_directory_max_page_size": 1},
            },
        )
    text = str(raised.value)
    assert "user_directory_port" in text
    assert "host b" in text
    assert "order_service_port (host a)" in text
    assert len(raised.value.problems) == 3


def test_the_order_services_settings_file_is_what_the_service_reads(tmp_path: Path) -> None:
    from clusterforge_orders.settings import load_settings

    planned = plan_one(
        "order_service",
        order_service_listeners={
            "notification": {"sender": "webhook", "webhook-url": "http://hook/t0ken"}
        },
        order_service_event_async={"core-pool-size": 2, "max-pool-size": 3},
    )
    assert planned.file_name == "orders.yml"
    settings_file = tmp_path / "orders.yml"
    settings_file.write_text(planned.content)
    settings = load_settings(config_file=settings_file, environ={})
    assert settings.orders.database_url == "sqlite:////var/lib/clusterforge-orders/orders.db"
    assert settings.event_async.max_pool_size == 3
    assert settings.event_async.queue_capacity == 200  # the default, spelled out
    assert settings.orders.listeners.notification.webhook_url == "http://hook/t0ken"
    assert planned.public["orders"]["listeners"]["notification"]["webhook-url"] == SECRET_MARK
    assert "t0ken" not in yaml.safe_dump(planned.public)
    assert planned.arguments == {"host": "127.0.0.1", "port": 8082}


@pytest.mark.parametrize(
    ("variables", "variable"),
    [
        ({"order_service_port": 0}, "order_service_port"),
        ({"order_service_port": "high"}, "order_service_port"),
        (
            {"order_service_event_async": {"core-pool-size": 9, "max-pool-size": 2}},
            "order_service_event_async",
        ),
        ({"order_service_event_async": {"core-pool-sise": 2}}, "order_service_event_async"),
        ({"order_service_event_async": [1, 2]}, "order_service_event_async"),
        ({"order_service_listeners": {"audit-logg": {}}}, "order_service_listeners.audit-logg"),
        (
            {"order_service_listeners": {"notification": {"sender": "webhook"}}},
            "order_service_listeners.notification",
        ),
        (
            {"order_service_listeners": {"notification": {"sender": "pigeon"}}},
            "order_service_listeners.notification.sender",
        ),
        ({"order_service_database_url": "oracle://x"}, "order_service_database_url"),
        ({"order_service_access_log": "maybe"}, "order_service_access_log"),
    ],
)
def test_a_bad_order_service_setting_is_refused_naming_the_variable(
    variables: dict[str, Any], variable: str
) -> None:
    problems = problems_of("order_service", **variables)
    assert any(problem.startswith(variable) for problem in problems), problems


def test_the_plan_uses_the_role_defaults_for_what_a_host_leaves_out() -> None:
    defaults = role_defaults("order_service")
    assert defaults["order_service_port"] == 8082
    planned = plan_one("order_service", order_service_port=9090)
    assert planned.arguments["port"] == 9090
    assert yaml.safe_load(planned.content)["orders"]["port"] == 9090


def test_variables_of_other_prefixes_are_ignored() -> None:
    planned = plan_one("user_directory", order_service_port=0, opensearch_heap_size="1g")
    assert planned.arguments["port"] == 8081


BLOCKED = ("fastapi", "sqlalchemy", "alembic", "uvicorn", "starlette", "psycopg", "httpx")

WITHOUT_THE_SERVICES_RUNTIME = textwrap.dedent(
    f"""
    import sys

    class Refuse:
        # Stands in for a control node without the services' runtime: importing any
        # of these, or running either service package's __init__, fails.
        blocked = {BLOCKED!r} + ("clusterforge_userdir", "clusterforge_orders")

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ImportError(f"{{name}} is not on this control node")
            return None

    sys.meta_path.insert(0, Refuse())
    from clusterforge.errors import InventoryError
    from clusterforge.services_plan import plan_services

    groups = {{"user_directory": ["a"], "order_service": ["a"]}}
    planned = plan_services(groups, {{"a": {{}}}})
    print(sorted(planned["a"]))
    try:
        plan_services(groups, {{"a": {{"order_service_port": 0}}}})
    except InventoryError as error:
        print(error.problems[0].split(" ")[0])
    loaded = [name for name in sys.modules if name.split(".")[0] in Refuse.blocked]
    print(loaded)
    """
)


def test_the_plan_needs_neither_fastapi_nor_sqlalchemy_nor_the_service_packages() -> None:
    answer = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SERVICES_RUNTIME],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=CHECKOUT,
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines() == [
        "['order_service', 'user_directory']",
        "order_service_port",
        "[]",
    ]


def test_an_installed_copy_serves_when_there_is_no_checkout() -> None:
    # This virtualenv has both services installed (editable), as a control node would
    # have them with pip install --no-deps.
    planned = plan_services({"order_service": ["a"]}, {"a": {}}, checkout=None)
    assert planned["a"]["order_service"].file_name == "orders.yml"
