"""The services' part of the plan: each service host's settings, validated on the control node.

The two services are projects of their own (``services/userdir``, ``services/orders``)
whose runtime needs FastAPI and SQLAlchemy, which the control node does not install.
Their settings, though, must be checked by the services' *own* settings models before
any host is touched, so that a value the service would refuse at start is refused here,
naming the inventory variable. Each service keeps its settings model in a module that
imports nothing but pydantic, pydantic-settings, PyYAML, (orders) its ``errors`` module
and the kit both services share (``services/kit``): ``settings.py``, and its package
imports its web framework only on first use. So the plan imports the model as any
installed package (``clusterforge_userdir.settings``, ``clusterforge_orders.settings``):
scripts/lib/venv.sh installs the checkout's services editable, and a control node that
runs the collection from elsewhere installs them with ``pip install --no-deps`` (the
error says which).

:func:`plan_services` maps the roles' variables (``user_directory_*``,
``order_service_*``) to each service's settings, validates them, and returns for every
host of each service's group what its settings file will hold: ``content`` with the
secrets (for the role to write, 0600, with ``no_log``) and ``public`` with every secret
replaced by :data:`SECRET_MARK` (for previews and render).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from clusterforge.addresses import is_loopback_host
from clusterforge.errors import ClusterforgeError, InventoryError
from clusterforge.plan.services.orders_search import (
    CONFIG_DIR_VARIABLE,
    NOT_GENERATED,
    OrdersSearch,
)
from clusterforge.plan.services.services_database import DatabaseServer, plan_database_url
from clusterforge.plan.services.tls_proxy import check_service_bind, proxied
from clusterforge.schema import Service, load_schema

SECRET_MARK = "<secret: left out>"  # noqa: S105 (shown in place of a secret)
DEFAULT_PROJECT_ROOT = Path(__file__).resolve().parents[4]
_PRIVATE_PACKAGE_PREFIX = "_clusterforge_plan_"


# Where a service lives, how it is installed, and the role that deploys it: declared once,
# in the services section of src/clusterforge/schema.yml.
ServiceDefinition = Service
SERVICES: dict[str, ServiceDefinition] = dict(load_schema().services)


@dataclass(frozen=True, kw_only=True)
class PlannedServiceSettings:
    """What one host's settings file of one service holds.

    ``content`` has the secrets: only the role that writes the file may see it.
    ``public`` is the same settings with every secret replaced by :data:`SECRET_MARK`,
    and ``public_content`` the file as it would be written from them (for render and
    previews).
    ``arguments`` are the command-line options the unit passes (never a secret).
    """

    service: str
    host: str
    content: str = field(repr=False)
    public: dict[str, Any]
    public_content: str
    arguments: dict[str, Any]
    # A host on PostgreSQL: where its URL's password is kept (the content holds the
    # placeholder until clusterforge.plan.services.services_database.with_database_passwords).
    database_password_file: str | None = None

    @property
    def file_name(self) -> str:
        """As the service's definition (the schema) names it, whatever planned the content."""
        return SERVICES[self.service].settings_file_name

    def as_dict(self, *, with_secrets: bool = False) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "service": self.service,
            "host": self.host,
            "file_name": self.file_name,
            "public": self.public,
            "public_content": self.public_content,
            "arguments": self.arguments,
        }
        if self.database_password_file is not None:
            answer["database_password_file"] = self.database_password_file
        if with_secrets:
            answer["content"] = self.content
        return answer


def _not_installed(service: str, error: ModuleNotFoundError) -> ClusterforgeError:
    definition = SERVICES[service]
    return ClusterforgeError(
        f"the settings model of {definition.role} ({definition.package}.settings) cannot be "
        f"imported ({error.name} is missing): install the service on the control node, "
        f"pip install --no-deps ./{definition.project} ./services/kit from a clusterforge "
        "checkout (the toolkit's scripts/lib/venv.sh does), together with pydantic, "
        "pydantic-settings and PyYAML"
    )


def _user_directory_settings() -> Any:
    try:
        from clusterforge_userdir.settings import ServerSettings
    except ModuleNotFoundError as error:
        raise _not_installed("user_directory", error) from None
    return ServerSettings


def _order_service_settings() -> Any:
    try:
        from clusterforge_orders.settings import OrderServiceSettings
    except ModuleNotFoundError as error:
        raise _not_installed("order_service", error) from None
    return OrderServiceSettings


def settings_model(service: str) -> Any:
    """The settings model class of ``service``, as the service itself validates with it."""
    return _PLANNERS[service].settings_model()


def settings_module(service: str) -> types.ModuleType:
    """The module of ``service``'s settings model (its ``settings.py``)."""
    return sys.modules[settings_model(service).__module__]


# --- the user directory ---------------------------------------------------------------

_USERDIR_FIELD_VARIABLES = {
    "database_url": "user_directory_database_url",
    "database_connect_timeout": "user_directory_database_connect_timeout",
    "auth_tokens": "user_directory_auth_tokens",
    "max_page_size": "user_directory_max_page_size",
    "list_limit": "user_directory_list_limit",
    "max_request_body_bytes": "user_directory_max_request_body_bytes",
}
_USERDIR_ENVIRONMENT_PREFIX = "CLUSTERFORGE_USERDIR_"
_USERDIR_SECRET_FIELDS = frozenset({"database_url", "auth_tokens"})
_DATABASE_URL_PREFIXES = ("sqlite:///", "postgresql+psycopg://")


def _check_token_exposure(
    problems: list[str],
    variables: Mapping[str, Any],
    tokens: object,
    *,
    role: str,
    host: str,
    consequence: str,
) -> None:
    """Refuse a service bound off loopback without a bearer token (``<role>_auth_tokens``).

    Anyone who reaches the port could then do what ``consequence`` says; without a token
    that is acceptable on a loopback bind only.
    """
    # Behind clusterforge's TLS proxy the service is reached where the proxy listens.
    bind_variable = "tls_proxy_listen_address" if proxied(variables, role) else f"{role}_host"
    bind = str(variables.get(bind_variable) or "")
    if tokens or is_loopback_host(bind):
        return
    problems.append(
        f"{role}_auth_tokens is empty (host {host}) while {bind_variable} is "
        f"{bind or '(empty: every address)'!r}, not a loopback address, so anyone who reaches "
        f"port {variables.get(f'{role}_port')} could {consequence}; "
        f"set {role}_auth_tokens to a vaulted token, e.g. "
        f'["{{{{ vault_{role}_auth_token }}}}"] with the token made by '
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))', "
        f"or bind {bind_variable} to 127.0.0.1"
    )


def _check_user_directory_exposure(
    problems: list[str], variables: Mapping[str, Any], tokens: frozenset[str], *, host: str
) -> None:
    # The user directory has no read-only mode: whoever reaches its port can create,
    # change and delete users.
    _check_token_exposure(
        problems,
        variables,
        tokens,
        role="user_directory",
        host=host,
        consequence="create, change and delete users",
    )


def _effective_database_url(value: Any, data_dir: Any, file_name: str) -> str:
    url = "" if value is None else str(value)
    return url if url else f"sqlite:///{data_dir}/{file_name}"


def _database_url(
    service: str,
    variables: Mapping[str, Any],
    problems: list[str],
    *,
    host: str,
    database: DatabaseServer | None,
    file_name: str,
) -> tuple[str, str | None]:
    """The host's database URL and, on PostgreSQL, the file of its password: PostgreSQL's
    planned here (clusterforge.plan.services.services_database), else ``<service>_database_url`` or
    the SQLite file ``file_name`` in the data directory."""
    on_postgresql = plan_database_url(service, variables, problems, host=host, server=database)
    if on_postgresql:
        return on_postgresql[0], str(on_postgresql[1])
    url = _effective_database_url(
        variables.get(f"{service}_database_url"), variables.get(f"{service}_data_dir"), file_name
    )
    return url, None


def _check_int(
    problems: list[str], variables: Mapping[str, Any], name: str, low: int, high: int | None
) -> None:
    value = variables.get(name)
    try:
        number = int(value)  # type: ignore[arg-type]
        valid = not isinstance(value, bool) and str(number) == str(value).strip()
    except (TypeError, ValueError):
        valid = False
    if valid and number >= low and (high is None or number <= high):
        return
    limits = f"between {low} and {high}" if high is not None else f"at least {low}"
    problems.append(f"{name} is {value!r}; set it to a whole number {limits}")


def _token_list(
    problems: list[str], variables: Mapping[str, Any], name: str, vault_example: str
) -> list[Any]:
    """A service's token list variable; anything but a list is a problem (empty then)."""
    tokens = variables.get(name) or []
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        problems.append(
            f"{name} must be a list of tokens (one string each); "
            f'set it to a YAML list, e.g. ["{{{{ {vault_example} }}}}"]'
        )
        return []
    return list(tokens)


def _check_database_url(problems: list[str], name: str, url: str) -> None:
    if not url.startswith(_DATABASE_URL_PREFIXES):
        # The URL itself is never printed: it may hold a password.
        problems.append(
            f"{name} must be empty (an SQLite file in the data directory), "
            "sqlite:///<absolute path> or postgresql+psycopg://<user>@<host>/<database>; "
            "set it to one of those"
        )


def _validation_problems(
    error: Exception, variable_of: Callable[[tuple[Any, ...]], str], *, host: str
) -> list[str]:
    from pydantic import ValidationError

    if not isinstance(error, ValidationError):
        return [f"{host}: {error}"]
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        variable = variable_of(tuple(item["loc"]))
        # Only the message: an input may be a token or a URL with a password. The
        # services' own checks (value errors) already say what to set; pydantic's type
        # and range messages get the fix added.
        fix = "" if item["type"] == "value_error" else f"; set {variable} accordingly"
        problems.append(f"{variable} (host {host}): {item['msg']}{fix}")
    return problems


def _env_line(name: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{name}="{escaped}"'


def _env_file(environment: Mapping[str, str]) -> str:
    return "".join(f"{_env_line(name, value)}\n" for name, value in sorted(environment.items()))


def _orders_file(settings: Mapping[str, Any]) -> str:
    header = "# Settings of clusterforge-orders (docs/orders.md), read with --config.\n"
    body = yaml.safe_dump(dict(settings), sort_keys=True, allow_unicode=True)
    return header + body


def _plan_user_directory(
    host: str,
    variables: Mapping[str, Any],
    problems: list[str],
    *,
    search: OrdersSearch | None = None,
    database: DatabaseServer | None = None,
) -> PlannedServiceSettings | None:
    del search  # the user directory delivers nothing into the cluster
    from pydantic import ValidationError

    before = len(problems)
    database_url, password_file = _database_url(
        "user_directory", variables, problems, host=host, database=database, file_name="userdir.db"
    )
    if proxied(variables, "user_directory"):
        problems.extend(check_service_bind(variables, "user_directory", host=host))
    else:
        _check_int(problems, variables, "user_directory_port", 1, 65535)
    _check_int(problems, variables, "user_directory_workers", 1, None)
    tokens = _token_list(problems, variables, "user_directory_auth_tokens", "vault_userdir_token")
    # Blank entries dropped, as the service's comma-separated setting drops them.
    tokens = [str(token).strip() for token in tokens if token is not None and str(token).strip()]
    # The URL's form is the service's settings model's to check (below), once.
    settings_input: dict[str, Any] = {
        "database_url": database_url,
        "database_connect_timeout": variables.get("user_directory_database_connect_timeout"),
        "max_page_size": variables.get("user_directory_max_page_size"),
        "list_limit": variables.get("user_directory_list_limit"),
        "max_request_body_bytes": variables.get("user_directory_max_request_body_bytes"),
    }
    # The service refuses a token setting named without a token, and a settings file
    # that does not say how clients authenticate (issue 49): no token is said by name.
    if tokens:
        settings_input["auth_tokens"] = ",".join(str(token) for token in tokens)
    else:
        settings_input["allow_unauthenticated"] = True
    model = _user_directory_settings()
    try:
        # model_validate, not the constructor: the control node's own environment must
        # not leak into a host's settings.
        settings = model.model_validate(settings_input)
    except (ValidationError, ValueError) as error:
        problems.extend(
            _validation_problems(
                error,
                lambda loc: (
                    _USERDIR_FIELD_VARIABLES.get(str(loc[0]), "user_directory_*")
                    if loc
                    else "user_directory_*"
                ),
                host=host,
            )
        )
        return None
    _check_user_directory_exposure(problems, variables, settings.accepted_tokens(), host=host)
    if len(problems) > before:
        return None
    environment: dict[str, str] = {}
    public: dict[str, Any] = {}
    for field_name in (*_USERDIR_FIELD_VARIABLES, "allow_unauthenticated"):
        if field_name not in settings_input:
            continue
        value = getattr(settings, field_name)
        text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
        text = text.lower() if isinstance(value, bool) else text
        environment[f"{_USERDIR_ENVIRONMENT_PREFIX}{field_name.upper()}"] = text
        secret = field_name in _USERDIR_SECRET_FIELDS and (
            field_name != "database_url" or not text.startswith("sqlite:")
        )
        public[field_name] = SECRET_MARK if secret and text else text
    content = _env_file(environment)
    public_content = _env_file(
        {f"{_USERDIR_ENVIRONMENT_PREFIX}{name.upper()}": value for name, value in public.items()}
    )
    return PlannedServiceSettings(
        service="user_directory",
        host=host,
        content=content,
        public=public,
        public_content=public_content,
        arguments={
            "host": str(variables.get("user_directory_host")),
            "port": int(_application_port(variables, "user_directory")),
            "workers": int(variables["user_directory_workers"]),
        },
        database_password_file=password_file,
    )


# --- the order service ------------------------------------------------------------------

_ORDERS_KEY_VARIABLES: dict[tuple[str, ...], str] = {
    ("orders", "host"): "order_service_host",
    ("orders", "port"): "order_service_port",
    ("orders", "database-url"): "order_service_database_url",
    ("orders", "access-log"): "order_service_access_log",
    ("orders", "log-level"): "order_service_log_level",
    ("orders", "auth-tokens"): "order_service_auth_tokens",
    ("orders", "listeners"): "order_service_listeners",
    ("event", "async"): "order_service_event_async",
    # Wired from the cluster the inventory deploys (clusterforge.plan.services.orders_search).
    ("orders", "search"): "order_service_search_*",
    # Not wired from the inventory yet; named for when it is.
    ("orders", "outbox"): "order_service_outbox",
}


def _orders_variable_of(location: tuple[Any, ...]) -> str:
    for length in (2, 1):
        variable = _ORDERS_KEY_VARIABLES.get(tuple(str(part) for part in location[:length]))
        if variable is not None:
            rest = ".".join(str(part) for part in location[2:])
            return f"{variable}{'.' + rest if rest else ''}"
    return "order_service_*"


def _plan_order_service(
    host: str,
    variables: Mapping[str, Any],
    problems: list[str],
    *,
    search: OrdersSearch | None = None,
    database: DatabaseServer | None = None,
) -> PlannedServiceSettings | None:
    from pydantic import ValidationError

    before = len(problems)
    database_url, password_file = _database_url(
        "order_service", variables, problems, host=host, database=database, file_name="orders.db"
    )
    _check_database_url(problems, "order_service_database_url", database_url)
    for name in ("order_service_event_async", "order_service_listeners"):
        if not isinstance(variables.get(name), Mapping):
            problems.append(f"{name} must be a mapping (see docs/orders.md); set it to one")
    tokens = _token_list(
        problems, variables, "order_service_auth_tokens", "vault_order_service_auth_token"
    )
    # Blank entries dropped as the user directory's comma-separated setting drops them.
    tokens = [str(token).strip() for token in tokens if token is not None and str(token).strip()]
    # Before the model, which refuses the same with the service's setting names.
    _check_token_exposure(
        problems,
        variables,
        tokens,
        role="order_service",
        host=host,
        consequence="place orders and read the service's metrics",
    )
    problems.extend(check_service_bind(variables, "order_service", host=host))
    if len(problems) > before:
        return None
    tree: dict[str, Any] = {
        "orders": {
            "host": variables.get("order_service_host"),
            "port": _application_port(variables, "order_service"),
            "database-url": database_url,
            "access-log": variables.get("order_service_access_log"),
            "log-level": variables.get("order_service_log_level"),
            "listeners": _plain(variables.get("order_service_listeners")),
        },
        "event": {"async": _plain(variables.get("order_service_event_async"))},
    }
    # The service refuses a token setting named without a token, and a settings file
    # that does not say how clients authenticate (issue 49): no token is said by name.
    if tokens:
        tree["orders"]["auth-tokens"] = tokens
    else:
        tree["orders"]["allow-unauthenticated"] = True
    if search is not None:
        # Delivery into the inventory's cluster; the password goes into content only.
        tree["orders"]["search"] = search.settings_for(str(variables.get(CONFIG_DIR_VARIABLE)))
    model = _order_service_settings()
    try:
        settings = model.model_validate(tree)
    except (ValidationError, ValueError) as error:
        problems.extend(_validation_problems(error, _orders_variable_of, host=host))
        return None
    # The validated model, written back by its aliases: the file holds what the service
    # will read, with every default spelled out.
    settled: dict[str, Any] = settings.model_dump(mode="json", by_alias=True)
    if not tokens:
        del settled["orders"]["auth-tokens"]
    public = _plain(settled)
    if not database_url.startswith("sqlite:"):
        public["orders"]["database-url"] = SECRET_MARK
    if public["orders"].get("auth-tokens"):
        public["orders"]["auth-tokens"] = [SECRET_MARK] * len(public["orders"]["auth-tokens"])
    notification = public["orders"]["listeners"]["notification"]
    if notification.get("webhook-url"):
        notification["webhook-url"] = SECRET_MARK
    public_search = public["orders"].get("search") or {}
    if public_search.get("password"):
        public_search["password"] = SECRET_MARK
    content = _orders_file(settled)
    return PlannedServiceSettings(
        service="order_service",
        host=host,
        content=content,
        public=public,
        public_content=_orders_file(public),
        arguments={"host": settings.orders.host, "port": settings.orders.port},
        database_password_file=password_file,
    )


def _application_port(variables: Mapping[str, Any], service: str) -> Any:
    """Where the application itself listens: behind the proxy, ``<service>_app_port``
    (as given: the service's settings model or the caller checks it)."""
    name = f"{service}_app_port" if proxied(variables, service) else f"{service}_port"
    return variables[name]


def _plain(value: Any) -> Any:
    """A deep copy made of plain dicts, lists and scalars (Ansible hands over its own types)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value


class _Planner(Protocol):
    def __call__(
        self,
        host: str,
        variables: Mapping[str, Any],
        problems: list[str],
        *,
        search: OrdersSearch | None = None,
        database: DatabaseServer | None = None,
    ) -> PlannedServiceSettings | None:
        """The host's planned settings, or None with the reasons added to ``problems``."""


@dataclass(frozen=True)
class ServicePlanner:
    """How one service's settings are planned: the planner of one host's settings (which
    adds every refusal to ``problems`` and returns None then) and the service's own
    settings model it validates with."""

    plan: _Planner
    settings_model: Callable[[], Any]


# One entry per service (the services section of src/clusterforge/schema.yml names them):
# adding a service adds its planner here, and nothing else in this module names it.
_PLANNERS: dict[str, ServicePlanner] = {
    "user_directory": ServicePlanner(
        plan=_plan_user_directory, settings_model=_user_directory_settings
    ),
    "order_service": ServicePlanner(
        plan=_plan_order_service, settings_model=_order_service_settings
    ),
}


def role_defaults(service: str, *, checkout: Path = DEFAULT_PROJECT_ROOT) -> dict[str, Any]:
    """The role's ``defaults/main.yml`` (what a host gets for a variable it does not set)."""
    path = checkout / "roles" / service / "defaults" / "main.yml"
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as error:
        raise ClusterforgeError(f"cannot read {path}: {error.strerror}") from error
    if not isinstance(loaded, dict):
        raise ClusterforgeError(f"{path} must hold a mapping")
    return loaded


def service_hosts_variables(
    service: str,
    hosts: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    checkout: Path | None = DEFAULT_PROJECT_ROOT,
) -> list[tuple[str, dict[str, Any]]]:
    """Each host's ``<service>_*`` variables over the role's defaults, as the role sees them."""
    if not hosts:
        return []
    service_defaults = role_defaults(service, checkout=checkout or DEFAULT_PROJECT_ROOT)
    prefix = f"{service}_"
    return [
        (
            host,
            {
                **service_defaults,
                **{name: value for name, value in own.items() if name.startswith(prefix)},
            },
        )
        for host, own in hosts
    ]


def plan_services(
    hosts_by_group: Mapping[str, Sequence[str]],
    hostvars: Mapping[str, Mapping[str, Any]],
    *,
    checkout: Path | None = DEFAULT_PROJECT_ROOT,
    defaults: Mapping[str, Mapping[str, Any]] | None = None,
    orders_search: OrdersSearch | None = None,
    database: DatabaseServer | None = None,
) -> dict[str, dict[str, PlannedServiceSettings]]:
    """Every service host's planned settings: ``{host: {service: planned}}``.

    ``hosts_by_group`` is the inventory's groups (a service runs on the hosts of the
    group named like its role); ``hostvars`` the hosts' variables (templated).
    ``defaults`` maps a service to its role defaults (default: read from the checkout's
    ``roles/<service>/defaults/main.yml``; ``checkout`` is where that is). Raises
    :class:`InventoryError` listing every problem, each naming the variable, when any
    host's settings are refused.
    ``orders_search`` is the order delivery the cluster gets
    (clusterforge.plan.services.orders_search), or None to leave ``orders.search`` at the service's
    default (off). ``database`` is the db host (clusterforge.plan.services.services_database) a host
    with ``<service>_database: postgresql`` connects to; its URL's password is a placeholder
    here (:func:`clusterforge.plan.services.services_database.with_database_passwords`).
    """
    problems: list[str] = []
    planned: dict[str, dict[str, PlannedServiceSettings]] = {}
    for service, planner in _PLANNERS.items():
        hosts = hosts_by_group.get(service) or []
        if not hosts:
            continue
        if defaults is not None and service in defaults:
            service_defaults: Mapping[str, Any] = defaults[service]
        else:
            service_defaults = role_defaults(service, checkout=checkout or DEFAULT_PROJECT_ROOT)
        prefix = f"{service}_"
        for host in hosts:
            own = hostvars.get(host, {})
            variables = {
                **service_defaults,
                **{name: value for name, value in own.items() if name.startswith(prefix)},
            }
            # Where the proxy listens decides who reaches the service (its token check).
            if "tls_proxy_listen_address" in own:
                variables["tls_proxy_listen_address"] = own["tls_proxy_listen_address"]
            result = planner.plan(
                host, variables, problems, search=orders_search, database=database
            )
            if result is not None:
                planned.setdefault(host, {})[service] = result
    if problems:
        raise InventoryError(problems)
    return planned


def plan_services_section(
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
    project_root: Path | None,
    orders_search: OrdersSearch | None = None,
    *,
    with_secrets: bool = False,
    database: DatabaseServer | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every service host's settings: ``{host: {service: planned}}``
    (:meth:`PlannedServiceSettings.as_dict`; ``content``, the settings file with its
    secrets, only ``with_secrets``)."""
    hosts_by_group = {
        group: [host for host, _variables in hosts] for group, hosts in services_vars.items()
    }
    if not any(hosts_by_group.values()):
        return {}
    hostvars: dict[str, dict[str, Any]] = {}
    for hosts in services_vars.values():
        for host, variables in hosts:
            hostvars.setdefault(host, {}).update(variables)
    planned = plan_services(
        hosts_by_group,
        hostvars,
        checkout=project_root or DEFAULT_PROJECT_ROOT,
        orders_search=orders_search,
        database=database,
    )
    return {
        host: {
            service: settings.as_dict(with_secrets=with_secrets)
            for service, settings in by_service.items()
        }
        for host, by_service in planned.items()
    }


ServicesSection = dict[str, dict[str, dict[str, Any]]]


def section_covers(
    section: Mapping[str, Mapping[str, Mapping[str, Any]]],
    services_vars: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
) -> bool:
    """Whether ``section`` (a services section with secrets) holds exactly the settings
    of the hosts of ``services_vars``, each with its file's ``content``."""
    wanted = {
        (host, service) for service, hosts in services_vars.items() for host, _variables in hosts
    }
    held = {(host, service) for host, by_service in section.items() for service in by_service}
    return held == wanted and all(
        isinstance(settings, Mapping) and "content" in settings
        for by_service in section.values()
        for settings in by_service.values()
    )


def with_search_password(
    section: Mapping[str, Mapping[str, Mapping[str, Any]]], search: OrdersSearch | None
) -> ServicesSection:
    """A services section an inventory check planned (``plan_for_cluster(generate=False)``:
    a password still to be generated is
    :data:`~clusterforge.plan.services.orders_search.NOT_GENERATED` there) with the order delivery's
    real password in each order-service host's ``content``.

    Nothing is validated again: the service's model checked these settings with the
    placeholder, and to the model the password is a string set together with the user
    name, which stays. ``public`` and ``public_content`` show no password either way.
    """
    out = {
        host: {service: dict(settings) for service, settings in by_service.items()}
        for host, by_service in section.items()
    }
    if search is None or search.password in (None, NOT_GENERATED):
        return out
    for by_service in out.values():
        settings = by_service.get("order_service")
        if settings is None or "content" not in settings:
            continue
        tree = yaml.safe_load(settings["content"]) or {}
        found = (tree.get("orders") or {}).get("search") or {}
        if found.get("password") == NOT_GENERATED:
            found["password"] = search.password
            settings["content"] = _orders_file(tree)
    return out
