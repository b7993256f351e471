"""The console's plan: inventory validated at once, archive version checked, config per mode."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.errors import ArtifactError, InventoryError
from clusterforge.lab.dashboards_standin import standin_archive_bytes, write_standin_archive
from clusterforge.plan.cluster.console import (
    build_consoles,
    console_settings,
    plan_consoles,
    read_console_archive,
    render_console_config,
)
from clusterforge.plan.cluster.model import Cluster, build_cluster

PASSWORDS = {
    "admin": "Unit-Admin-77aa",
    "kibanaserver": "Unit-Kibanaserver-77aa",
    "logstash": "Unit-Logstash-77aa",
    "kibana": "Unit-Kibana-77aa",
}


def cluster(mode: str, version: str = "2.19.4") -> Cluster:
    common: dict[str, Any] = {"opensearch_security_mode": mode, "opensearch_version": version}
    if mode != "open":
        common["opensearch_security_passwords"] = PASSWORDS
    return build_cluster(
        [(f"os-{i}", {"ansible_host": f"127.0.0.{70 + i}", **common}) for i in (1, 2, 3)]
    )


def console_vars(archive: Path, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "console-1",
            {
                "ansible_host": "127.0.0.80",
                "dashboards_archive_path": str(archive),
                **overrides,
            },
        )
    ]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_standin_archive(tmp_path / "osd-2.19.4.tar.gz", "2.19.4")


def test_tls_console_trusts_only_the_cluster_ca_and_signs_in_as_kibanaserver(
    archive: Path,
) -> None:
    plan = plan_consoles(cluster("tls"), console_vars(archive))["console-1"]
    settings = plan["settings"]
    assert settings["server.host"] == "127.0.0.80"
    assert settings["server.port"] == 5601
    assert settings["opensearch.hosts"] == [f"https://127.0.0.{70 + i}:9200" for i in (1, 2, 3)]
    assert settings["opensearch.username"] == "kibanaserver"
    assert settings["opensearch.ssl.verificationMode"] == "full"
    assert settings["opensearch.ssl.certificateAuthorities"] == [plan["ca_cert"]]
    assert plan["ca_cert"].startswith("/etc/opensearch-dashboards/")
    assert plan["backend_user"] == "kibanaserver"
    assert plan["remove_security_plugin"] is False
    assert plan["url"] == "http://127.0.0.80:5601"
    assert plan["install_dir"] == "/opt/opensearch-dashboards/opensearch-dashboards-2.19.4"
    assert "Environment=OSD_PATH_CONF=/etc/opensearch-dashboards" in plan["unit"]
    assert "ExecStart=/opt/opensearch-dashboards/current/bin/opensearch-dashboards" in plan["unit"]


def test_the_plan_carries_no_password(archive: Path) -> None:
    plan = plan_consoles(cluster("tls"), console_vars(archive))
    assert PASSWORDS["kibanaserver"] not in json.dumps(plan)


def test_basic_console_signs_in_over_http_without_tls_settings(archive: Path) -> None:
    plan = plan_consoles(cluster("basic"), console_vars(archive))["console-1"]
    settings = plan["settings"]
    assert settings["opensearch.hosts"][0] == "http://127.0.0.71:9200"
    assert settings["opensearch.username"] == "kibanaserver"
    assert not any(key.startswith("opensearch.ssl.") for key in settings)
    assert plan["ca_cert"] is None


def test_open_console_has_no_credentials_and_drops_its_security_plugin(archive: Path) -> None:
    plan = plan_consoles(cluster("open"), console_vars(archive))["console-1"]
    assert not any(
        key.startswith(("opensearch.username", "opensearch_security")) for key in plan["settings"]
    )
    assert plan["backend_user"] is None
    assert plan["remove_security_plugin"] is True
    assert plan["security_plugin_dir"].endswith("/plugins/securityDashboards")


def test_console_address_falls_back_to_the_node_address_and_extra_settings_win(
    archive: Path,
) -> None:
    vars_ = console_vars(
        archive,
        opensearch_network_host="127.0.0.90",
        dashboards_port=5602,
        dashboards_extra_settings={"server.basePath": "/console", "server.port": 5603},
    )
    settings = console_settings(cluster("open"), build_consoles(vars_)[0])
    assert settings["server.host"] == "127.0.0.90"
    assert settings["server.basePath"] == "/console"
    assert settings["server.port"] == 5603


def test_rendered_config_adds_the_password_only_when_given() -> None:
    settings = {"server.port": 5601, "opensearch.username": "kibanaserver"}
    with_password = yaml.safe_load(render_console_config(settings, "s3cret-Pass"))
    assert with_password["opensearch.password"] == "s3cret-Pass"
    assert "opensearch.password" not in yaml.safe_load(render_console_config(settings, None))
    assert render_console_config(settings, None).startswith("# Managed by clusterforge")


def test_every_console_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as raised:
        build_consoles(
            [
                ("no-archive", {"ansible_host": "127.0.0.81", "dashboards_port": 70000}),
                (
                    "both-sources",
                    {
                        "ansible_host": "127.0.0.82",
                        "dashboards_archive_path": "/x.tar.gz",
                        "dashboards_archive_url": "https://example.invalid/x.tar.gz",
                        "dashboards_archive_sha512": "abc",
                    },
                ),
                ("url-only", {"dashboards_archive_url": "https://example.invalid/x.tar.gz"}),
            ]
        )
    message = str(raised.value)
    assert "no-archive: set exactly one of dashboards_archive_path" in message
    assert "no-archive: dashboards_port 70000 is outside 1-65535" in message
    assert "both-sources: set exactly one of dashboards_archive_path" in message
    assert "both-sources: dashboards_archive_sha512 'abc' is malformed" in message
    assert "128 hexadecimal digits" in message
    assert "url-only: no address for the console; set dashboards_host" in message
    assert "url-only: dashboards_archive_url needs dashboards_archive_sha512" in message


def test_an_archive_of_another_minor_version_is_refused_naming_both(tmp_path: Path) -> None:
    old = write_standin_archive(tmp_path / "osd-2.18.0.tar.gz", "2.18.0")
    with pytest.raises(ArtifactError, match=r"is version 2\.18\.0, but the engine is 2\.19\.4"):
        plan_consoles(cluster("open"), console_vars(old))


def test_a_patch_release_apart_is_accepted(tmp_path: Path) -> None:
    older_patch = write_standin_archive(tmp_path / "osd-2.19.3.tar.gz", "2.19.3")
    plan = plan_consoles(cluster("open", "2.19.4"), console_vars(older_patch))
    assert plan["console-1"]["version"] == "2.19.3"


def test_a_missing_archive_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match=r"dashboards_archive_path .* is not a file"):
        plan_consoles(cluster("open"), console_vars(tmp_path / "absent.tar.gz"))


def test_an_archive_without_package_json_is_not_taken_for_dashboards(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b"#!/bin/sh\n"
        info = tarfile.TarInfo("something-1.0/bin/run")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "something.tar.gz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(ArtifactError, match="not a Dashboards release archive"):
        read_console_archive(path)


def test_standin_archive_has_the_release_layout_and_is_reproducible(tmp_path: Path) -> None:
    archive = read_console_archive(write_standin_archive(tmp_path / "osd-2.19.4.tar.gz", "2.19.4"))
    assert (archive.version, archive.top_dir) == ("2.19.4", "opensearch-dashboards-2.19.4")
    assert standin_archive_bytes("2.19.4") == standin_archive_bytes("2.19.4")
    with tarfile.open(archive.path) as tar:
        launcher = tar.getmember("opensearch-dashboards-2.19.4/bin/opensearch-dashboards")
        assert launcher.mode & 0o111


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("dashboards_port", True, "is not a port"),
        ("dashboards_port", "http", "is not a port"),
        ("dashboards_service_user", "root", "is refused"),
        ("dashboards_install_root", "opt/osd", "is not an absolute path"),
        ("dashboards_data_path", "/var/lib/osd data ", "is not an absolute path"),
        ("dashboards_start_timeout_s", 5, "is outside 10-3600"),
        ("dashboards_extra_settings", ["server.basePath"], "must be a mapping"),
        ("dashboards_host", "10.0.0.1/24", "is malformed"),
        ("dashboards_archive_url", "ftp://host/x.tar.gz", "is malformed"),
    ],
)
def test_bad_console_values_are_refused_naming_the_variable(
    archive: Path, variable: str, value: Any, fragment: str
) -> None:
    with pytest.raises(InventoryError) as raised:
        build_consoles(console_vars(archive, **{variable: value}))
    [problem] = raised.value.problems
    assert problem.startswith(f"console-1: {variable} ") and fragment in problem


def test_an_unknown_console_variable_is_refused_with_a_suggestion(archive: Path) -> None:
    with pytest.raises(InventoryError) as raised:
        build_consoles(console_vars(archive, dashboards_prot=5602))
    [problem] = raised.value.problems
    assert problem.startswith("dashboards_prot is not a variable; did you mean dashboards_port?")
