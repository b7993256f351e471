"""Bad inventories, each refused before any host is contacted, naming the variable.

Every case starts from a valid three-node open cluster and changes one thing; the model
must refuse it with a message that names the variable (and, where the case says so, a
fragment of the fix). A further test feeds several mistakes at once and gets them all back
in one error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.schema import check_value, load_schema, unknown_variable

PASSWORDS = {
    "admin": "Unit-Admin-5c1e",
    "kibanaserver": "Unit-Kibanaserver-5c1e",
    "logstash": "Unit-Logstash-5c1e",
    "kibana": "Unit-Kibana-5c1e",
}
SMARTCN = {"name": "analysis-smartcn", "source": "build", "path": "engine-plugins/smartcn"}

Nodes = list[tuple[str, dict[str, Any]]]


def valid_nodes(**common: Any) -> Nodes:
    base: dict[str, Any] = {"opensearch_security_mode": "open", **common}
    return [(f"os-{i}", {"ansible_host": f"10.0.0.{i}", **base}) for i in (1, 2, 3)]


def on_first(**host_vars: Any) -> Callable[[], Nodes]:
    def make() -> Nodes:
        nodes = valid_nodes()
        nodes[0][1].update(host_vars)
        return nodes

    return make


def everywhere(**common: Any) -> Callable[[], Nodes]:
    return lambda: valid_nodes(**common)


def secured(**common: Any) -> Callable[[], Nodes]:
    settings = {"opensearch_security_passwords": PASSWORDS, **common}
    return lambda: valid_nodes(opensearch_security_mode="tls", **settings)


# (case id, inventory, variable named in the message, fragment of the message)
BAD_INVENTORIES: list[tuple[str, Callable[[], Nodes], str, str]] = [
    # types: booleans as Ansible reads them, and nothing else (tests/test_schema_booleans.py
    # has the strings Ansible accepts)
    (
        "cors-maybe",
        everywhere(opensearch_cors_enabled="maybe"),
        "opensearch_cors_enabled",
        "true or false",
    ),
    (
        "cors-yess-string",
        everywhere(opensearch_cors_enabled="yess"),
        "opensearch_cors_enabled",
        "not a boolean",
    ),
    ("cors-two", everywhere(opensearch_cors_enabled=2), "opensearch_cors_enabled", "not a boolean"),
    (
        "credentials-empty-string",
        everywhere(opensearch_cors_allow_credentials=""),
        "opensearch_cors_allow_credentials",
        "not a boolean",
    ),
    (
        "remove-unlisted-list",
        on_first(opensearch_plugins_remove_unlisted=["no"]),
        "opensearch_plugins_remove_unlisted",
        "not a boolean",
    ),
    # ports and whole numbers
    ("http-port-true", everywhere(opensearch_http_port=True), "opensearch_http_port", "not a port"),
    ("http-port-zero", everywhere(opensearch_http_port=0), "opensearch_http_port", "1-65535"),
    (
        "http-port-too-big",
        everywhere(opensearch_http_port=70000),
        "opensearch_http_port",
        "1-65535",
    ),
    (
        "transport-port-word",
        everywhere(opensearch_transport_port="nine"),
        "opensearch_transport_port",
        "not a port",
    ),
    (
        "transport-port-float",
        everywhere(opensearch_transport_port=9300.5),
        "opensearch_transport_port",
        "not a port",
    ),
    (
        "nofile-low",
        everywhere(opensearch_limit_nofile=100),
        "opensearch_limit_nofile",
        "1024-1048576",
    ),
    (
        "nofile-bool",
        everywhere(opensearch_limit_nofile=False),
        "opensearch_limit_nofile",
        "whole number",
    ),
    (
        "renew-negative",
        everywhere(opensearch_cert_renew_within_days=-1),
        "opensearch_cert_renew_within_days",
        "0-3650",
    ),
    (
        "renew-too-long",
        everywhere(opensearch_cert_renew_within_days=5000),
        "opensearch_cert_renew_within_days",
        "0-3650",
    ),
    (
        "health-retries-zero",
        on_first(opensearch_security_health_retries=0),
        "opensearch_security_health_retries",
        "1-1000",
    ),
    # durations
    (
        "timeout-soon",
        everywhere(opensearch_discovery_initial_state_timeout="soon"),
        "opensearch_discovery_initial_state_timeout",
        "30s or 10m",
    ),
    (
        "timeout-no-unit",
        everywhere(opensearch_discovery_initial_state_timeout="600"),
        "opensearch_discovery_initial_state_timeout",
        "not a duration",
    ),
    (
        "timeout-int",
        everywhere(opensearch_discovery_initial_state_timeout=600),
        "opensearch_discovery_initial_state_timeout",
        "not text",
    ),
    # absolute paths
    (
        "data-path-relative",
        everywhere(opensearch_data_path="data/opensearch"),
        "opensearch_data_path",
        "absolute path",
    ),
    (
        "log-path-relative",
        everywhere(opensearch_log_path="./logs"),
        "opensearch_log_path",
        "absolute path",
    ),
    (
        "install-root-relative",
        everywhere(opensearch_install_root="opt/opensearch"),
        "opensearch_install_root",
        "absolute path",
    ),
    (
        "config-dir-list",
        everywhere(opensearch_config_dir=["/etc/opensearch"]),
        "opensearch_config_dir",
        "not text",
    ),
    (
        "java-home-relative",
        everywhere(opensearch_java_home="jdk"),
        "opensearch_java_home",
        "absolute path",
    ),
    (
        "repo-path-relative",
        everywhere(opensearch_repo_path="backups"),
        "opensearch_repo_path",
        "absolute path",
    ),
    # names and patterns
    (
        "cluster-name-space-slash",
        everywhere(opensearch_cluster_name="search prod/eu"),
        "opensearch_cluster_name",
        "plain name",
    ),
    (
        "cluster-name-colon",
        everywhere(opensearch_cluster_name="a:b"),
        "opensearch_cluster_name",
        "malformed",
    ),
    (
        "cluster-name-empty",
        everywhere(opensearch_cluster_name=""),
        "opensearch_cluster_name",
        "malformed",
    ),
    (
        "node-name-space",
        on_first(opensearch_node_name="node one"),
        "opensearch_node_name",
        "malformed",
    ),
    (
        "network-host-cidr",
        on_first(opensearch_network_host="10.0.0.1/24"),
        "opensearch_network_host",
        "without spaces or '/'",
    ),
    (
        "publish-host-space",
        on_first(opensearch_publish_host="10.0.0.1 "),
        "opensearch_publish_host",
        "malformed",
    ),
    (
        "service-user-root",
        everywhere(opensearch_service_user="root"),
        "opensearch_service_user",
        "refused",
    ),
    (
        "service-user-upper",
        everywhere(opensearch_service_user="OpenSearch"),
        "opensearch_service_user",
        "system user name",
    ),
    (
        "version-two-parts",
        everywhere(opensearch_version="2.19"),
        "opensearch_version",
        "major.minor.patch",
    ),
    (
        "sha512-short",
        everywhere(opensearch_distribution_sha512="abc"),
        "opensearch_distribution_sha512",
        "128 hexadecimal",
    ),
    (
        "distribution-url-ftp",
        everywhere(opensearch_distribution_url="ftp://x/y.tar.gz"),
        "opensearch_distribution_url",
        "http(s)://",
    ),
    (
        "admin-cn-slash",
        everywhere(opensearch_admin_cert_common_name="admin/ou"),
        "opensearch_admin_cert_common_name",
        "malformed",
    ),
    ("heap-words", everywhere(opensearch_heap_size="lots"), "opensearch_heap_size", "512m or 4g"),
    # choices
    (
        "mode-secure",
        everywhere(opensearch_security_mode="secure"),
        "opensearch_security_mode",
        "open, tls, basic",
    ),
    (
        "source-docker",
        everywhere(opensearch_distribution_source="docker"),
        "opensearch_distribution_source",
        "maven, tarball, file",
    ),
    (
        "node-roles-string",
        on_first(opensearch_node_roles="data"),
        "opensearch_node_roles",
        "must be a list",
    ),
    (
        "node-roles-unknown",
        on_first(opensearch_node_roles=["cluster_manager", "boss"]),
        "opensearch_node_roles",
        "boss",
    ),
    # containers
    (
        "extra-settings-list",
        everywhere(opensearch_extra_settings=["a"]),
        "opensearch_extra_settings",
        "mapping",
    ),
    (
        "extra-settings-managed",
        everywhere(opensearch_extra_settings={"path.data": "/x"}),
        "opensearch_extra_settings",
        "clusterforge manages",
    ),
    (
        "cert-subject-string",
        everywhere(opensearch_cert_subject="CN=x"),
        "opensearch_cert_subject",
        "mapping",
    ),
    (
        "cert-subject-unknown-key",
        everywhere(opensearch_cert_subject={"email": "a@b"}),
        "opensearch_cert_subject",
        "only the keys",
    ),
    (
        "extra-sans-string",
        on_first(opensearch_extra_sans="a.example"),
        "opensearch_extra_sans",
        "must be a list",
    ),
    (
        "extra-sans-numbers",
        on_first(opensearch_extra_sans=[1, 2]),
        "opensearch_extra_sans",
        "list of strings",
    ),
    # plugin entries
    (
        "plugins-mapping",
        everywhere(opensearch_plugins={"analysis-smartcn": SMARTCN}),
        "opensearch_plugins",
        "must be a list",
    ),
    (
        "plugins-state-absnet",
        everywhere(opensearch_plugins=[{**SMARTCN, "state": "absnet"}]),
        "opensearch_plugins[0]",
        "present or absent",
    ),
    (
        "plugins-unknown-key",
        everywhere(opensearch_plugins=[{**SMARTCN, "checksum": "x"}]),
        "opensearch_plugins[0]",
        "unknown key(s) checksum",
    ),
    (
        "plugins-build-no-path",
        everywhere(opensearch_plugins=[{"name": "x", "source": "build"}]),
        "opensearch_plugins[0]",
        "needs path",
    ),
    (
        "plugins-maven-no-coordinates",
        everywhere(opensearch_plugins=[{"name": "x", "source": "maven"}]),
        "opensearch_plugins[0]",
        "needs coordinates",
    ),
    (
        "plugins-url-no-url",
        everywhere(opensearch_plugins=[{"name": "x", "source": "url"}]),
        "opensearch_plugins[0]",
        "needs url",
    ),
    (
        "plugins-unknown-source",
        everywhere(opensearch_plugins=[{"name": "x", "source": "pip"}]),
        "opensearch_plugins[0]",
        "build, maven, url, file",
    ),
    (
        "plugins-no-name",
        everywhere(opensearch_plugins=[{"source": "build", "path": "p"}]),
        "opensearch_plugins[0]",
        "needs a name",
    ),
    (
        "plugins-string-entry",
        everywhere(opensearch_plugins=["analysis-smartcn"]),
        "opensearch_plugins[0]",
        "must be a mapping",
    ),
    (
        "plugins-security-plugin",
        everywhere(
            opensearch_plugins=[
                {"name": "opensearch-security", "source": "file", "path": "/tmp/s.zip"}
            ]
        ),
        "opensearch_plugins[0]",
        "remove this entry",
    ),
    (
        "plugins-twice",
        everywhere(opensearch_plugins=[SMARTCN, SMARTCN]),
        "opensearch_plugins[1]",
        "listed twice",
    ),
    (
        "plugins-bad-version",
        everywhere(
            opensearch_plugins=[
                {"name": "x", "source": "maven", "coordinates": "a:b", "version": "latest"}
            ]
        ),
        "opensearch_plugins[0]",
        "major.minor.patch",
    ),
    # cross-field rules
    (
        "cors-star-with-credentials",
        everywhere(opensearch_cors_enabled=True),
        "opensearch_cors_allow_origin",
        "opensearch_cors_allow_credentials",
    ),
    (
        "ports-clash",
        everywhere(opensearch_http_port=9300),
        "opensearch_transport_port",
        "different ports",
    ),
    (
        "tarball-without-url",
        everywhere(opensearch_distribution_source="tarball", opensearch_distribution_url=""),
        "opensearch_distribution_url",
        "tarball",
    ),
    (
        "own-ca-half",
        everywhere(opensearch_ca_cert_path="/pki/ca.pem"),
        "opensearch_ca_key_path",
        "set both",
    ),
    (
        "user-admin",
        everywhere(opensearch_security_users=[{"name": "admin", "password": "x"}]),
        "opensearch_security_users[0]",
        "reserved",
    ),
    (
        "user-kibanaserver",
        secured(
            opensearch_security_users=[
                {"name": "kibanaserver", "password": "Unit-Kibanaserver-5c1e"}
            ]
        ),
        "opensearch_security_users[0]",
        "reserved",
    ),
    (
        "user-unknown-key",
        everywhere(opensearch_security_users=[{"name": "reporting", "pasword": "x"}]),
        "opensearch_security_users[0]",
        "unknown key(s) pasword",
    ),
    (
        "user-no-name",
        everywhere(opensearch_security_users=[{"password": "x"}]),
        "opensearch_security_users[0]",
        "needs a name",
    ),
    (
        "user-roles-string",
        everywhere(opensearch_security_users=[{"name": "reporting", "backend_roles": "readall"}]),
        "opensearch_security_users[0].backend_roles",
        "list",
    ),
    (
        "users-mapping",
        everywhere(opensearch_security_users={"reporting": {}}),
        "opensearch_security_users",
        "must be a list",
    ),
    (
        "passwords-list",
        secured(opensearch_security_passwords=["x"]),
        "opensearch_security_passwords",
        "mapping",
    ),
    (
        "passwords-unknown-user",
        everywhere(opensearch_security_passwords={"root": "x"}),
        "opensearch_security_passwords",
        "not a predefined user",
    ),
    (
        "tls-password-missing",
        secured(opensearch_security_passwords={**PASSWORDS, "kibana": None}),
        "opensearch_security_passwords.kibana",
        "not set",
    ),
    (
        "mode-differs",
        on_first(opensearch_security_mode="basic"),
        "opensearch_security_mode",
        "differs between nodes",
    ),
    # unknown variables with a known prefix
    (
        "heapsize-misspelled",
        everywhere(opensearch_heapsize="1g"),
        "opensearch_heapsize",
        "did you mean opensearch_heap_size?",
    ),
    (
        "cluster-nmae",
        everywhere(opensearch_cluster_nmae="x"),
        "opensearch_cluster_nmae",
        "did you mean opensearch_cluster_name?",
    ),
    (
        "security-modes",
        everywhere(opensearch_security_modes="tls"),
        "opensearch_security_modes",
        "did you mean opensearch_security_mode?",
    ),
    (
        "plugin-singular",
        everywhere(opensearch_plugin=[]),
        "opensearch_plugin",
        "did you mean opensearch_plugins?",
    ),
    (
        "dashboards-prot",
        on_first(dashboards_prot=5602),
        "dashboards_prot",
        "did you mean dashboards_port?",
    ),
    (
        "no-close-match",
        # Long enough to resemble no variable: the short opensearch_zone is near the
        # bare opensearch_frobnicate.
        everywhere(opensearch_frobnicate_widgets=1),
        "opensearch_frobnicate_widgets",
        "is not a variable; remove it",
    ),
    (
        "registered-result",
        on_first(opensearch_plan={"nodes": {}}),
        "opensearch_plan",
        "is not a variable",
    ),
]


@pytest.mark.parametrize(
    ("make", "variable", "fragment"),
    [
        pytest.param(make, variable, fragment, id=case)
        for case, make, variable, fragment in BAD_INVENTORIES
    ],
)
def test_a_bad_inventory_is_refused_naming_the_variable(
    make: Callable[[], Nodes], variable: str, fragment: str
) -> None:
    with pytest.raises(InventoryError) as caught:
        build_cluster(make())
    problems = caught.value.problems
    naming = [problem for problem in problems if variable in problem]
    assert naming, f"no problem names {variable}: {problems}"
    assert any(fragment in problem for problem in naming), problems


def test_there_are_at_least_forty_bad_inventories() -> None:
    assert len(BAD_INVENTORIES) >= 40
    assert len({case for case, *_ in BAD_INVENTORIES}) == len(BAD_INVENTORIES)


def test_several_problems_come_back_together_in_one_error() -> None:
    nodes = valid_nodes(
        opensearch_heapsize="1g",
        opensearch_http_port=True,
        opensearch_cors_enabled="maybe",
        opensearch_data_path="data",
        opensearch_service_user="root",
        opensearch_discovery_initial_state_timeout="soon",
        opensearch_plugins=[{**SMARTCN, "state": "absnet"}],
        opensearch_security_users=[{"name": "admin", "password": "x"}],
    )
    nodes[1][1]["opensearch_cluster_name"] = "search prod/eu"
    with pytest.raises(InventoryError) as caught:
        build_cluster(nodes)
    problems = caught.value.problems
    for variable in (
        "opensearch_heapsize",
        "opensearch_http_port",
        "opensearch_cors_enabled",
        "opensearch_data_path",
        "opensearch_service_user",
        "opensearch_discovery_initial_state_timeout",
        "opensearch_plugins[0]",
        "opensearch_security_users[0]",
        "opensearch_cluster_name",
    ):
        assert any(variable in problem for problem in problems), variable
    assert str(caught.value).startswith(f"the inventory has {len(problems)} problem(s)")


def test_a_mistake_is_reported_once_not_again_by_the_rules_built_on_it() -> None:
    with pytest.raises(InventoryError) as caught:
        build_cluster(valid_nodes(opensearch_security_mode="secure"))
    assert len(caught.value.problems) == 1  # no password complaints for an unknown mode


def test_an_unknown_variable_is_named_once_with_every_host_that_carries_it() -> None:
    with pytest.raises(InventoryError) as caught:
        build_cluster(valid_nodes(opensearch_heapsize="1g"))
    [problem] = caught.value.problems
    assert problem == (
        "opensearch_heapsize is not a variable; did you mean opensearch_heap_size? "
        "(set for os-1, os-2, os-3)"
    )


def test_secret_values_never_appear_in_a_message() -> None:
    nodes = valid_nodes(opensearch_security_mode="tls", opensearch_ca_passphrase=12345678)
    nodes[0][1]["opensearch_security_passwords"] = {**PASSWORDS, "admin": "Other-Admin-99zz"}
    with pytest.raises(InventoryError) as caught:
        build_cluster(nodes)
    message = str(caught.value)
    assert "opensearch_ca_passphrase" in message and "12345678" not in message
    assert "opensearch_security_passwords differs" in message
    assert "Other-Admin-99zz" not in message and PASSWORDS["admin"] not in message


def test_a_valid_secured_inventory_with_users_and_plugins_builds() -> None:
    cluster = build_cluster(
        secured(
            opensearch_plugins=[SMARTCN, {"name": "analysis-icu", "state": "absent"}],
            opensearch_security_users=[
                {"name": "reporting", "password": "Unit-Reporting-5c1e", "backend_roles": []}
            ],
            opensearch_cors_enabled=True,
            opensearch_cors_allow_origin="https://console.example.internal",
            opensearch_http_port="9201",
        )()
    )
    assert cluster.security_mode == "tls"
    assert cluster.http_port == 9201
    assert [plugin.state for plugin in cluster.plugins] == ["present", "absent"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("opensearch_http_port", "9200"),
        ("opensearch_discovery_initial_state_timeout", "30s"),
        ("opensearch_discovery_initial_state_timeout", "500ms"),
        ("opensearch_cors_enabled", False),
        ("opensearch_data_path", "/srv/data"),
    ],
)
def test_good_values_pass(name: str, value: Any) -> None:
    assert check_value(load_schema().variables[name], value) is None


def test_variables_of_other_prefixes_are_not_ours_to_refuse() -> None:
    assert unknown_variable("ansible_host") is None
    assert unknown_variable("user_directory_port") is None
    assert unknown_variable("opensearch_heap_size") is None


def test_the_example_names_every_opensearch_variable() -> None:
    """inventories/example's vars.yml says it holds every cluster variable: those it sets,
    then every other one, commented, at its default (issue 51: 37 of 84 were missing)."""
    from clusterforge.schema import EXAMPLE_CLUSTER_VARS, ROOT

    text = (ROOT / EXAMPLE_CLUSTER_VARS).read_text()
    named = set(re.findall(r"^#? ?(opensearch_[a-z0-9_]+):", text, re.M))
    declared = {name for name in load_schema().variables if name.startswith("opensearch_")}
    assert declared - named == set()
