"""Client config from the keys demo.rest-template.*, in YAML or the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterforge_userdir import (
    ClientConfig,
    ClientConfigError,
    StatusStyle,
    load_client_config,
    parse_duration,
)


def test_defaults_without_any_source() -> None:
    assert load_client_config(environ={}) == ClientConfig()


def test_nested_yaml(tmp_path: Path) -> None:
    file = tmp_path / "application.yml"
    file.write_text(
        "demo:\n"
        "  rest-template:\n"
        "    root-uri: http://userdir.internal:9000\n"
        "    connect-timeout: 1500ms\n"
        "    connection-request-timeout: 1s\n"
        "    read-timeout: 2m\n"
        "    status-style: comma\n"
        "other: ignored\n",
        encoding="utf-8",
    )
    config = load_client_config(yaml_file=file, environ={})
    assert config.root_uri == "http://userdir.internal:9000"
    assert (config.connect_timeout, config.connection_request_timeout) == (1.5, 1.0)
    assert config.read_timeout == 120.0
    assert config.status_style is StatusStyle.COMMA_JOINED


def test_dotted_yaml_and_environment_wins(tmp_path: Path) -> None:
    file = tmp_path / "client.yml"
    file.write_text(
        "demo.rest-template.root-uri: http://from-file:1\ndemo.rest-template.read-timeout: 4000\n",
        encoding="utf-8",
    )
    config = load_client_config(
        yaml_file=file,
        environ={
            "DEMO_REST_TEMPLATE_ROOT_URI": "http://from-env:2",
            "DEMO_REST_TEMPLATE_CONNECTION_REQUEST_TIMEOUT": "250ms",
            "DEMO_REST_TEMPLATE_BEARER_TOKEN": "token-from-environment",
        },
    )
    assert config.root_uri == "http://from-env:2"
    assert config.read_timeout == 4.0  # a bare number is milliseconds
    assert config.connection_request_timeout == 0.25
    assert config.bearer_token == "token-from-environment"
    assert "token-from-environment" not in repr(config)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"DEMO_REST_TEMPLATE_READ_TIMEOUT": "soon"}, "read-timeout"),
        ({"DEMO_REST_TEMPLATE_CONNECT_TIMEOUT": "0s"}, "connect-timeout"),
        ({"DEMO_REST_TEMPLATE_ROOT_URI": "localhost:8081"}, "root-uri"),
        ({"DEMO_REST_TEMPLATE_STATUS_STYLE": "json"}, "status-style"),
        ({"DEMO_REST_TEMPLATE_MAX_CONNECTIONS_PER_ROUTE": "500"}, "max-connections-per-route"),
    ],
)
def test_bad_values_name_the_key(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ClientConfigError, match=message):
        load_client_config(environ=environ)


def test_unknown_key_in_yaml_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "client.yml"
    file.write_text("demo:\n  rest-template:\n    read-timout: 3s\n", encoding="utf-8")
    with pytest.raises(ClientConfigError, match=r"unknown key demo\.rest-template\.read-timout"):
        load_client_config(yaml_file=file, environ={})


@given(st.integers(min_value=1, max_value=10**7))
def test_duration_units_agree(milliseconds: int) -> None:
    key = "demo.rest-template.read-timeout"
    seconds = parse_duration(f"{milliseconds}ms", key=key)
    assert seconds == pytest.approx(milliseconds / 1000)
    assert parse_duration(str(milliseconds), key=key) == seconds
    assert parse_duration(f"{milliseconds / 1000}s", key=key) == pytest.approx(seconds)


TOKEN_IN_FILE = "file-token-0123456789abcdef"


@pytest.mark.parametrize(
    ("line", "line_number"),
    [
        (f'    bearer-token: "{TOKEN_IN_FILE}\n', 4),  # unterminated quote: found at the end
        (f"    bearer-token: {TOKEN_IN_FILE}: x\n", 3),  # a second colon
        (f"    bearer-token: *{TOKEN_IN_FILE}\n", 3),  # an alias PyYAML would name
        (f"    bearer-token: !{TOKEN_IN_FILE} x\n", 3),  # a tag PyYAML would name
        (f"    bearer-token: {TOKEN_IN_FILE}\n   root-uri: [\n", 4),  # bad indentation
    ],
)
def test_a_yaml_error_names_the_place_but_never_echoes_the_file(
    tmp_path: Path, line: str, line_number: int
) -> None:
    import traceback

    file = tmp_path / "application.yml"
    file.write_text("demo:\n  rest-template:\n" + line, encoding="utf-8")
    with pytest.raises(ClientConfigError) as refused:
        load_client_config(yaml_file=file, environ={})
    message = str(refused.value)
    assert f"{file} is not valid YAML at line {line_number}" in message
    shown = "".join(traceback.format_exception(refused.value))
    assert TOKEN_IN_FILE not in shown
