"""Schema-driven tests: schemathesis generates requests from the served OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from clusterforge_userdir import ServerSettings, create_app
from userdir_support import RunningServer, serve_in_thread


@pytest.fixture(scope="module")
def schemathesis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    database = tmp_path_factory.mktemp("schemathesis") / "userdir.db"
    running = serve_in_thread(create_app(ServerSettings(database_url=f"sqlite:///{database}")))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def served_schema(schemathesis_server: RunningServer) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{schemathesis_server.base_url}/openapi.json")


OPERATIONS = [
    ("GET", "/mock-api/users/{id}"),
    ("GET", "/mock-api/users"),
    ("POST", "/mock-api/users"),
    ("PUT", "/mock-api/users/{id}"),
    ("DELETE", "/mock-api/users/{id}"),
    ("GET", "/mock-api/orgs/{orgId}/users/{userId}"),
    ("POST", "/mock-api/users/search"),
    ("GET", "/mock-api/health"),
    ("GET", "/mock-api/result/users/{id}"),
    ("GET", "/mock-api/result/users"),
    ("GET", "/mock-api/result/users/page"),
    ("POST", "/mock-api/result/users"),
]


# What every answer, to valid and invalid requests alike, is held to: no 5xx, a status
# the document lists for the operation, and a body that matches its schema.
ALWAYS_CHECKED = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_every_served_operation_is_fuzzed(served_schema: schemathesis.BaseSchema) -> None:
    served = {
        (method.upper(), path)
        for path, operations in served_schema.raw_schema["paths"].items()
        for method in operations
    }
    assert served == set(OPERATIONS)


# Without parameters or body there is no invalid request to make.
WITHOUT_INPUT = {("GET", "/mock-api/health"), ("GET", "/mock-api/result/users")}
FUZZED = [
    pytest.param(method, path, mode, id=f"{method}-{path}-{mode.value}")
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or (method, path) not in WITHOUT_INPUT
]


# schemathesis' own pytest loader (from_fixture) does not work with this pytest, so each
# operation's strategy is driven by hypothesis directly, one test per operation and mode.
@pytest.mark.parametrize(("method", "path", "mode"), FUZZED)
def test_operation_conforms_to_the_served_schema(
    served_schema: schemathesis.BaseSchema, method: str, path: str, mode: GenerationMode
) -> None:
    operation = served_schema[path][method]
    checks = list(ALWAYS_CHECKED)
    if mode is GenerationMode.NEGATIVE and not path.startswith("/mock-api/result/"):
        # The envelope endpoints answer invalid input with HTTP 200 and a business code
        # of 400 (the spec's rule 9), so only the plain ones must refuse it by status.
        checks.append(negative_data_rejection)
    elif path != "/mock-api/users/search":
        # A pattern cannot say that February has no 30th, which the server refuses with
        # 400, so valid-looking searches may be refused.
        checks.append(positive_data_acceptance)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=15 if mode is GenerationMode.POSITIVE else 10,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def conforms(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=checks)

    conforms()


def test_schema_file_is_not_needed_on_disk() -> None:
    assert not (Path.cwd() / "alembic.ini").exists()
