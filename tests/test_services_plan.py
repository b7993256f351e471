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
from clusterforge.plan.services.services_plan import SECRET_MARK, plan_services, role_defaults

CHECKOUT = Path(__file__).resolve().parents[1]
TOKEN = "t0ken-of-the-test-0123456789"
EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 (the bind these tests are about)


def without_proxy(service: str, variables: dict[str, Any]) -> dict[str, Any]:
    """The service's own settings as served without clusterforge's TLS proxy (a proxy of
    the user's own in front): what these tests are about. The proxy's own rules are
    tests/test_tls_proxy_plan.py's."""
    return {f"{service}_tls_proxy": False, **variables}


def plan_one(service: str, **variables: Any) -> Any:
    hostvars = {"svc-1": without_proxy(service, variables)}
    return plan_services({service: ["svc-1"]}, hostvars)["svc-1"][service]


def problems_of(service: str, **variables: Any) -> list[str]:
    with pytest.raises(InventoryError) as raised:
        plan_services({service: ["svc-1"]}, {"svc-1": without_proxy(service, variables)})
    return raised.value.problems


def test_no_service_group_plans_nothing() -> None:
    assert plan_services({"opensearch": ["node-1"]}, {"node-1": {}}) == {}


def test_the_user_directorys_environment_file_from_the_defaults() -> None:
    planned = plan_one("user_directory")
    lines = planned.content.splitlines()
    assert lines == sorted(lines)
    database = "sqlite:////var/lib/clusterforge-userdir/userdir.db"
    assert f'CLUSTERFORGE_USERDIR_DATABASE_URL="{database}"' in lines
    # No token is said by name; an empty token setting would stop the service (issue 49).
    assert 'CLUSTERFORGE_USERDIR_ALLOW_UNAUTHENTICATED="true"' in lines
    assert not any(line.startswith("CLUSTERFORGE_USERDIR_AUTH_TOKENS") for line in lines)
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


def test_both_models_take_a_postgresql_url_that_verifies_the_server() -> None:
    """The URL the postgresql role's client tasks build (issue 39): TLS with the server's
    certificate and name verified against a CA bundle on the service host."""
    url = (
        "postgresql+psycopg://clusterforge_userdir:pa55word@127.0.0.65:5432/clusterforge_userdir"
        "?sslmode=verify-full&sslrootcert=/etc/clusterforge-userdir/postgresql-ca.pem"
    )
    planned = plan_services(
        {"user_directory": ["svc-1"], "order_service": ["svc-1"]},
        {
            "svc-1": {
                "tls_proxy_listen_address": "127.0.0.1",
                "user_directory_database_url": url,
                "order_service_database_url": url,
            }
        },
    )["svc-1"]
    assert f'CLUSTERFORGE_USERDIR_DATABASE_URL="{url}"' in planned["user_directory"].content
    orders = yaml.safe_load(planned["order_service"].content)
    assert orders["orders"]["database-url"] == url
    assert planned["user_directory"].public["database_url"] == SECRET_MARK
    assert "pa55word" not in repr(planned["order_service"].as_dict())


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


@pytest.mark.parametrize(
    "bind", [EVERY_ADDRESS, "", "::", "10.20.0.21", "192.168.1.5", "app-1.example.internal"]
)
@pytest.mark.parametrize("tokens", [[], [""], None])
def test_a_user_directory_reachable_from_the_network_needs_a_token(
    bind: str, tokens: list[str] | None
) -> None:
    # It has no read-only mode: whoever reaches the port can create, change and delete users.
    problems = problems_of(
        "user_directory", user_directory_host=bind, user_directory_auth_tokens=tokens
    )
    assert len(problems) == 1, problems
    [problem] = problems
    assert problem.startswith("user_directory_auth_tokens is empty (host svc-1)")
    assert "user_directory_host" in problem and "not a loopback address" in problem
    assert "vault_user_directory_auth_token" in problem and "token_urlsafe" in problem
    assert "bind user_directory_host to 127.0.0.1" in problem


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.61", "::1", "[::1]", "localhost"])
def test_a_loopback_user_directory_may_run_without_a_token(bind: str) -> None:
    planned = plan_one("user_directory", user_directory_host=bind)
    # Said by name: an empty token setting would stop the service (issue 49).
    assert "auth_tokens" not in planned.public
    assert planned.public["allow_unauthenticated"] == "true"
    assert planned.arguments["host"] == bind


def test_a_user_directory_on_every_address_with_a_token_is_planned() -> None:
    planned = plan_one(
        "user_directory", user_directory_host=EVERY_ADDRESS, user_directory_auth_tokens=[TOKEN]
    )
    assert planned.arguments["host"] == EVERY_ADDRESS
    assert planned.public["auth_tokens"] == SECRET_MARK


EXAMPLE = CHECKOUT / "inventories" / "example"


def example_user_directory_hosts() -> dict[str, dict[str, Any]]:
    """The example's user_directory hosts as a playbook run sees them, vault decrypted."""
    from clusterforge.inventory.reader import InventoryReader
    from clusterforge.inventory.variables import service_vars

    reader = InventoryReader(
        EXAMPLE, vault_password_file=EXAMPLE / "EXAMPLE-ONLY-vault-password.txt"
    )
    return dict(service_vars(reader, "user_directory"))


def test_the_example_user_directory_serves_every_address_with_a_vaulted_token() -> None:
    hosts = example_user_directory_hosts()
    assert list(hosts) == ["app-1"]
    variables = hosts["app-1"]
    # The application on loopback, the TLS proxy on every address (its default).
    assert variables["user_directory_host"] == "127.0.0.1"
    assert variables["user_directory_tls_proxy"] is True
    assert "tls_proxy_listen_address" not in variables
    [token] = variables["user_directory_auth_tokens"]
    assert token.startswith("Example-Only-")
    vault = EXAMPLE / "group_vars" / "user_directory" / "vault.yml"
    assert vault.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n")
    assert token not in vault.read_text()
    planned = plan_services({"user_directory": ["app-1"]}, hosts)["app-1"]["user_directory"]
    assert f'CLUSTERFORGE_USERDIR_AUTH_TOKENS="{token}"' in planned.content
    assert token not in planned.public_content
    # The example without its token is what the preflight now stops.
    with pytest.raises(InventoryError, match="user_directory_auth_tokens is empty"):
        plan_services(
            {"user_directory": ["app-1"]},
            {"app-1": {**variables, "user_directory_auth_tokens": []}},
        )


def test_the_database_connect_timeout_is_planned_and_bounded() -> None:
    planned = plan_one("user_directory")
    assert 'CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT="5"' in planned.content
    assert planned.public["database_connect_timeout"] == "5"
    planned = plan_one("user_directory", user_directory_database_connect_timeout=30)
    assert 'CLUSTERFORGE_USERDIR_DATABASE_CONNECT_TIMEOUT="30"' in planned.content
    for refused in (0, 1, 301, "soon"):
        problems = problems_of("user_directory", user_directory_database_connect_timeout=refused)
        assert problems[0].startswith("user_directory_database_connect_timeout (host svc-1)")


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
                "a": {
                    "user_directory_port": 0,
                    "order_service_port": "high",
                    "tls_proxy_listen_address": "127.0.0.1",
                },
                "b": {"user_directory_max_page_size": 1, "tls_proxy_listen_address": "127.0.0.1"},
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
        order_service_auth_tokens=["orders-token-0123456789abcdef"],
    )
    assert planned.file_name == "orders.yml"
    settings_file = tmp_path / "orders.yml"
    settings_file.write_text(planned.content)
    settings_file.chmod(0o600)  # as the role writes it; the service refuses others-readable
    settings = load_settings(config_file=settings_file, environ={})
    assert settings.orders.accepted_tokens() == {"orders-token-0123456789abcdef"}
    assert planned.public["orders"]["auth-tokens"] == [SECRET_MARK]
    assert "orders-token" not in planned.public_content
    assert settings.orders.database_url == "sqlite:////var/lib/clusterforge-orders/orders.db"
    assert settings.event_async.max_pool_size == 3
    assert settings.event_async.queue_capacity == 200  # the default, spelled out
    assert settings.orders.listeners.notification.webhook_url == "http://hook/t0ken"
    assert planned.public["orders"]["listeners"]["notification"]["webhook-url"] == SECRET_MARK
    assert "t0ken" not in yaml.safe_dump(planned.public)
    assert planned.arguments == {"host": "127.0.0.1", "port": 8082}


@pytest.mark.parametrize(
    "bind", [EVERY_ADDRESS, "", "::", "10.20.0.22", "192.168.1.5", "app-1.example.internal"]
)
@pytest.mark.parametrize("tokens", [[], [""], None])
def test_an_order_service_reachable_from_the_network_needs_a_token(
    bind: str, tokens: list[str] | None
) -> None:
    # Whoever reaches the port could place orders and read the metrics.
    problems = problems_of(
        "order_service", order_service_host=bind, order_service_auth_tokens=tokens
    )
    assert len(problems) == 1, problems
    [problem] = problems
    assert problem.startswith("order_service_auth_tokens is empty (host svc-1)")
    assert "order_service_host" in problem and "not a loopback address" in problem
    assert "vault_order_service_auth_token" in problem and "token_urlsafe" in problem
    assert "bind order_service_host to 127.0.0.1" in problem


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.61", "::1", "localhost"])
def test_a_loopback_order_service_may_run_without_a_token(bind: str) -> None:
    planned = plan_one("order_service", order_service_host=bind)
    # Said by name: an empty token setting would stop the service (issue 49).
    assert "auth-tokens" not in planned.public["orders"]
    assert planned.public["orders"]["allow-unauthenticated"] is True
    assert planned.arguments["host"] == bind


def test_order_service_tokens_are_checked_and_never_printed() -> None:
    planned = plan_one(
        "order_service", order_service_host=EVERY_ADDRESS, order_service_auth_tokens=[TOKEN]
    )
    assert planned.arguments["host"] == EVERY_ADDRESS
    assert planned.public["orders"]["auth-tokens"] == [SECRET_MARK]
    assert TOKEN in planned.content and TOKEN not in planned.public_content
    for tokens, expected in (
        (["short-one"], "order_service_auth_tokens (host svc-1): Value error, token #1"),
        ("a-single-string-not-a-list", "order_service_auth_tokens must be a list"),
    ):
        problems = problems_of("order_service", order_service_auth_tokens=tokens)
        assert problems[0].startswith(expected), problems
        assert not any("short-one" in problem for problem in problems)


def test_the_example_order_service_serves_every_address_with_a_vaulted_token() -> None:
    from clusterforge.inventory.reader import InventoryReader
    from clusterforge.inventory.variables import service_vars

    reader = InventoryReader(
        EXAMPLE, vault_password_file=EXAMPLE / "EXAMPLE-ONLY-vault-password.txt"
    )
    hosts = dict(service_vars(reader, "order_service"))
    variables = hosts["app-1"]
    assert variables["order_service_host"] == "127.0.0.1"
    assert variables["order_service_tls_proxy"] is True
    [token] = variables["order_service_auth_tokens"]
    assert token.startswith("Example-Only-")
    vault = EXAMPLE / "group_vars" / "order_service" / "vault.yml"
    assert vault.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256\n")
    assert token not in vault.read_text()
    planned = plan_services({"order_service": ["app-1"]}, hosts)["app-1"]["order_service"]
    assert yaml.safe_load(planned.content)["orders"]["auth-tokens"] == [token]
    assert token not in planned.public_content
    with pytest.raises(InventoryError, match="order_service_auth_tokens is empty"):
        plan_services(
            {"order_service": ["app-1"]},
            {"app-1": {**variables, "order_service_auth_tokens": []}},
        )


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


# Not httpx: the toolkit itself depends on it (pyproject.toml), and the user directory's
# package imports its client (httpx) on import.
BLOCKED = ("fastapi", "sqlalchemy", "alembic", "uvicorn", "starlette", "psycopg")


def _plan_without(blocked: tuple[str, ...]) -> str:
    """A script that plans both services with the named packages refused on import."""
    return textwrap.dedent(
        f"""
        import sys

        class Refuse:
            # Stands in for a control node without these packages: importing any of
            # them fails.
            blocked = {blocked!r}

            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in self.blocked:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Refuse())
        from clusterforge.errors import ClusterforgeError, InventoryError
        from clusterforge.plan.services.services_plan import plan_services

        groups = {{"user_directory": ["a"], "order_service": ["a"]}}
        on_loopback = {{"tls_proxy_listen_address": "127.0.0.1"}}
        try:
            planned = plan_services(groups, {{"a": on_loopback}})
        except ClusterforgeError as error:
            print(error)
            raise SystemExit(3)
        print(sorted(planned["a"]))
        try:
            plan_services(groups, {{"a": {{**on_loopback, "order_service_port": 0}}}})
        except InventoryError as error:
            print(error.problems[0].split(" ")[0])
        loaded = [name for name in sys.modules if name.split(".")[0] in Refuse.blocked]
        print(loaded)
        """
    )


def test_the_plan_needs_the_services_settings_but_not_their_web_runtime() -> None:
    # The settings models are imported as installed packages; their packages import the
    # web framework only on first use, so a control node needs none of it.
    answer = subprocess.run(
        [sys.executable, "-c", _plan_without(BLOCKED)],
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


def test_without_the_service_packages_the_plan_names_the_pip_install() -> None:
    answer = subprocess.run(
        [sys.executable, "-c", _plan_without(("clusterforge_userdir", "clusterforge_orders"))],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=CHECKOUT,
    )
    assert answer.returncode == 3, answer.stderr
    assert "clusterforge_userdir.settings" in answer.stdout
    assert "pip install --no-deps ./services/userdir ./services/kit" in answer.stdout


def test_an_installed_copy_serves_when_there_is_no_checkout() -> None:
    # This virtualenv has both services installed (editable), as a control node would
    # have them with pip install --no-deps.
    planned = plan_services(
        {"order_service": ["a"]}, {"a": {"tls_proxy_listen_address": "127.0.0.1"}}, checkout=None
    )
    assert planned["a"]["order_service"].file_name == "orders.yml"
