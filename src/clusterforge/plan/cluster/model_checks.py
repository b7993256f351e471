"""The checks behind :func:`clusterforge.plan.cluster.model.build_cluster`: each value against the
schema, and the rules that involve several variables (topology, TLS, users, passwords,
plugins). Every check adds to one :class:`Problems`, so the operator sees every problem of
an inventory in one run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clusterforge.durations import whole_seconds
from clusterforge.pki.security_config import PREDEFINED_USERS
from clusterforge.schema import check_value, load_schema

# Settings the model owns; opensearch_extra_settings may not set them behind its back.
MANAGED_SETTING_PREFIXES = (
    "cluster.name",
    "node.",
    "network.",
    "http.port",
    "transport.port",
    "discovery.",
    "cluster.initial_",
    "path.",
    "http.cors.",
    "plugins.security.",
    "cluster.routing.allocation.awareness.",
)

# Above ~32 GiB the JVM loses compressed object pointers and a bigger heap holds less.
MAX_HEAP_MB = 31 * 1024

MIN_HEAP_MB = 128

# Lists of entries that a builder below checks one by one, with the entry's index in each
# message; the schema check only makes sure they are lists.
_CHECKED_ENTRY_BY_ENTRY = frozenset({"opensearch_plugins", "opensearch_security_users"})

# TLS 1.3 names its suites without the key exchange; TLS 1.2's strong ones all start so.
_TLS13_CIPHER_PREFIXES = ("TLS_AES_", "TLS_CHACHA20_")

_TLS12_CIPHER_PREFIX = "TLS_ECDHE_"

PREDEFINED_USER_NAMES = tuple(user.name for user in PREDEFINED_USERS)

SECURED_MODES = frozenset({"tls", "basic"})

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")

_SHA512 = re.compile(r"^[0-9A-Fa-f]{128}$")

_HEAP = re.compile(r"^(\d+)([mMgG])$")


def heap_megabytes(heap: str) -> int:
    """'512m' -> 512, '4g' -> 4096; ValueError when malformed."""
    match = _HEAP.match(heap)
    if not match:
        raise ValueError(heap)
    amount, unit = int(match.group(1)), match.group(2).lower()
    return amount * 1024 if unit == "g" else amount


def cluster_defaults() -> dict[str, Any]:
    """The defaults of every variable the model reads, from the schema (one source)."""
    return load_schema().defaults("cluster", "host")


class Problems:
    """Collects every problem so the operator sees them all in one run."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def report_unknown_keys(
    where: str, entry: Mapping[Any, Any], keys: Sequence[str], report: Callable[[str], None]
) -> None:
    """Report the keys of ``entry`` that are not in ``keys`` (a typo, most often), naming
    the keys there are."""
    unknown = sorted(str(key) for key in entry if key not in keys)
    if unknown:
        report(f"{where} has unknown key(s) {', '.join(unknown)}; the keys are {', '.join(keys)}")


def cluster_value(
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]],
    key: str,
    defaults: Mapping[str, Any],
    problems: Problems,
    *,
    secret: bool = False,
) -> Any:
    """A cluster-wide variable must be equal on every node; report where it is not."""
    seen: dict[str, list[str]] = {}
    for inventory_name, host_vars in nodes_vars:
        value = host_vars.get(key, defaults.get(key))
        seen.setdefault(repr(value), []).append(inventory_name)
    if len(seen) > 1:
        if secret:
            detail = "; ".join(", ".join(hosts) for hosts in seen.values())
        else:
            detail = "; ".join(f"{', '.join(hosts)}: {value}" for value, hosts in seen.items())
        problems.error(
            f"{key} differs between nodes ({detail}); it is cluster-wide: set it once in "
            "group_vars for the whole group"
        )
    first = nodes_vars[0][1] if nodes_vars else {}
    return first.get(key, defaults.get(key))


# The heap has a variable of its own; a second -Xms/-Xmx would silently win or lose.
_HEAP_FLAGS = ("-Xms", "-Xmx", "-XX:MaxHeapSize", "-XX:InitialHeapSize")


def check_jvm_options(raw: Any, problems: Problems) -> tuple[str, ...]:
    options: list[str] = []
    for option in raw or []:
        text = str(option)
        # One line of jvm.options.d holds one flag: whitespace would join two in one item.
        if not text.startswith("-") or any(character.isspace() for character in text):
            problems.error(
                f"opensearch_jvm_options item {text!r} is not one JVM flag; write one flag "
                "per item, starting with '-', e.g. -XX:TieredStopAtLevel=1"
            )
        elif text.startswith(_HEAP_FLAGS):
            problems.error(
                f"opensearch_jvm_options item {text!r} sets the heap; remove it and set "
                "opensearch_heap_size instead"
            )
        else:
            options.append(text)
    return tuple(options)


def check_heap(heap: Any, problems: Problems) -> None:
    try:
        megabytes = heap_megabytes(str(heap))
    except ValueError:
        problems.error(
            f"opensearch_heap_size {heap!r} is malformed; write a whole number with m or g, "
            "e.g. 512m or 4g"
        )
        return
    if megabytes > MAX_HEAP_MB:
        problems.error(
            f"opensearch_heap_size {heap!r} exceeds 31g (compressed oops limit); "
            "set it to 31g or less"
        )
    if megabytes < MIN_HEAP_MB:
        problems.error(f"opensearch_heap_size {heap!r} is below 128m; set at least 128m")


def schema_problem(name: str, value: Any) -> str | None:
    var = load_schema().variables[name]
    if name in _CHECKED_ENTRY_BY_ENTRY and isinstance(value, list):
        return None
    return check_value(var, value)


def check_cluster_values(
    nodes_vars: Sequence[tuple[str, Mapping[str, Any]]], problems: Problems
) -> tuple[dict[str, Any], set[str]]:
    """Every cluster-wide value checked against the schema; the names of the bad ones."""
    defaults = cluster_defaults()
    values: dict[str, Any] = {}
    bad: set[str] = set()
    for var in load_schema().of_scope("cluster"):
        if not var.name.startswith("opensearch_"):
            continue
        raw = cluster_value(nodes_vars, var.name, defaults, problems, secret=var.secret)
        values[var.name] = raw
        if raw is None:
            continue
        problem = schema_problem(var.name, raw)
        if problem:
            problems.error(problem)
            bad.add(var.name)
    return values, bad


def check_host_values(
    inventory_name: str, host_vars: Mapping[str, Any], problems: Problems
) -> set[str]:
    """The per-host variables checked against the schema; the names of the bad ones."""
    bad: set[str] = set()
    for var in load_schema().of_scope("host", "role"):
        raw = host_vars.get(var.name)
        if raw is None or not var.name.startswith("opensearch_"):
            continue
        problem = schema_problem(var.name, raw)
        if problem:
            problems.error(f"{inventory_name}: {problem}")
            bad.add(var.name)
    return bad


def check_tls(
    value: Callable[[str], Any], problems: Problems
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The TLS versions and suites; each version kept needs a suite it can use."""
    protocols = tuple(str(item) for item in value("opensearch_tls_protocols") or ())
    ciphers = tuple(str(item) for item in value("opensearch_tls_ciphers") or ())
    if not protocols:
        problems.error(
            "opensearch_tls_protocols is empty, which would let the plugin offer its own "
            "defaults; list TLSv1.3 and/or TLSv1.2"
        )
    for protocol, prefixes, example in (
        ("TLSv1.3", _TLS13_CIPHER_PREFIXES, "TLS_AES_256_GCM_SHA384"),
        ("TLSv1.2", (_TLS12_CIPHER_PREFIX,), "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    ):
        if protocol in protocols and not any(suite.startswith(prefixes) for suite in ciphers):
            problems.error(
                f"opensearch_tls_protocols has {protocol} but opensearch_tls_ciphers has no "
                f"suite for it; add one (e.g. {example}) or remove {protocol}"
            )
    return protocols, ciphers


def seconds(duration: str) -> int:
    """A schema-checked duration (30s, 10m) in whole seconds, at least 1."""
    try:
        return whole_seconds(duration, at_least=1)
    except ValueError:  # already reported by the schema check; its default stands in
        return 1


USER_KEYS = ("name", "password", "backend_roles", "description")


_USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")


def check_users(users: Any, problems: Problems) -> None:
    """The inventory's own users, in every mode: shape, names, and no predefined name."""
    if not isinstance(users, list):
        return  # reported by the schema check
    seen: set[str] = set()
    for index, user in enumerate(users):
        where = f"opensearch_security_users[{index}]"
        if not isinstance(user, Mapping):
            problems.error(f"{where} must be a mapping {{name, password, backend_roles}}")
            continue
        report_unknown_keys(where, user, USER_KEYS, problems.error)
        name = user.get("name")
        if not isinstance(name, str) or not _USER_NAME.match(name):
            problems.error(
                f"{where} needs a name of letters, digits, '.', '_', '@' and '-', "
                "e.g. name: reporting"
            )
        elif name in PREDEFINED_USER_NAMES:
            problems.error(
                f"{where} is the reserved predefined user {name!r}; choose another name, "
                "and set the predefined users' passwords in opensearch_security_passwords"
            )
        elif name in seen:
            problems.error(f"{where}: user {name!r} is listed twice; keep one entry")
        else:
            seen.add(name)
        roles = user.get("backend_roles", [])
        if roles is not None and (
            not isinstance(roles, list) or not all(isinstance(role, str) for role in roles)
        ):
            problems.error(f"{where}.backend_roles must be a list of role names")


def check_passwords(
    value: Callable[[str], Any], security_mode: str, mode_bad: bool, problems: Problems
) -> None:
    """Secured modes refuse missing, empty and well-known passwords (values never echoed)."""
    from clusterforge.pki.hashing import PasswordRejectedError, check_password_allowed

    passwords = value("opensearch_security_passwords") or {}
    unknown = sorted(str(name) for name in passwords if name not in PREDEFINED_USER_NAMES)
    if unknown:
        problems.error(
            f"opensearch_security_passwords has {', '.join(unknown)}, which is not a predefined "
            f"user ({', '.join(PREDEFINED_USER_NAMES)}); put other users in "
            "opensearch_security_users with their password"
        )
    if mode_bad or security_mode not in SECURED_MODES:
        return
    candidates: list[tuple[str, Any, str]] = [
        (name, passwords.get(name), f"opensearch_security_passwords.{name}")
        for name in PREDEFINED_USER_NAMES
    ]
    users = value("opensearch_security_users") or []
    for index, user in enumerate(users if isinstance(users, list) else []):
        if isinstance(user, Mapping) and isinstance(user.get("name"), str):
            if user["name"] in PREDEFINED_USER_NAMES:
                continue  # reported by check_users
            candidates.append(
                (user["name"], user.get("password"), f"opensearch_security_users[{index}].password")
            )
    for name, password, setting in candidates:
        if password is None:
            problems.error(
                f"{setting} is not set; secured modes need a password for user {name!r} "
                "(keep it in an ansible-vault file)"
            )
            continue
        try:
            check_password_allowed(name, str(password), setting=setting)
        except PasswordRejectedError as error:
            problems.error(str(error))


PLUGIN_REQUIRED_FIELDS = {
    "build": ("path",),
    "maven": ("coordinates",),
    "url": ("url",),
    "file": ("path",),
}


PLUGIN_KEYS = ("name", "source", "state", "path", "coordinates", "version", "url", "sha512")


PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


_COORDINATES = re.compile(r"^[A-Za-z0-9._-]+:[A-Za-z0-9._-]+$")


def check_plugin_fields(where: str, entry: Mapping[str, Any], problems: Problems) -> None:
    report_unknown_keys(where, entry, PLUGIN_KEYS, problems.error)
    checks = (
        ("version", _VERSION, "major.minor.patch, e.g. 2.19.4"),
        ("coordinates", _COORDINATES, "group:artifact, e.g. org.opensearch.plugin:analysis-icu"),
        ("sha512", _SHA512, "128 hexadecimal digits"),
    )
    for key, pattern, hint in checks:
        given = entry.get(key)
        if given not in (None, "") and not (isinstance(given, str) and pattern.match(given)):
            problems.error(f"{where}.{key} {given!r} is malformed; write {hint}")
    url = entry.get("url")
    if url not in (None, "") and not (
        isinstance(url, str) and re.match(r"^(https?|file)://\S+$", url)
    ):
        problems.error(f"{where}.url {url!r} is not an http(s):// or file:// URL; fix it")


def check_extra_settings(extra_settings: Mapping[str, Any], problems: Problems) -> None:
    """opensearch_extra_settings may not set what the model manages behind its back."""
    for key in sorted(extra_settings):
        if str(key).startswith(MANAGED_SETTING_PREFIXES):
            problems.error(
                f"opensearch_extra_settings sets {key!r}, which clusterforge manages; "
                "remove it and set the matching opensearch_* variable instead"
            )


def check_cors(
    enabled: bool, allow_origin: str, allow_credentials: bool, problems: Problems
) -> None:
    if enabled and allow_credentials and allow_origin.strip() == "*":
        problems.error(
            "opensearch_cors_allow_origin is '*' while opensearch_cors_allow_credentials is "
            "true: any web page could use a signed-in browser's credentials; set "
            "opensearch_cors_allow_origin to the console's origin, e.g. "
            "https://console.example.internal, or set opensearch_cors_allow_credentials: false"
        )


def check_state_dir(state_dir: str, value: Callable[[str], Any], problems: Problems) -> None:
    for owned in ("opensearch_data_path", "opensearch_log_path", "opensearch_repo_path"):
        # The service user owns those trees: a marker there is one it could forge.
        path = str(value(owned)).rstrip("/")
        if state_dir == path or state_dir.startswith(path + "/"):
            problems.error(
                f"opensearch_state_dir {state_dir} is inside {owned} ({path}), which the "
                "service user owns; set it to a root-only path, e.g. "
                "/var/lib/clusterforge/opensearch"
            )
