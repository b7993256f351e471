"""The settings files the plan writes are read by the services' own strict loaders
(issue 49): with a token, authentication is on; without one, the file says so by name
(allow-unauthenticated) and never holds an empty token setting, which the services refuse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterforge.plan.services.services_plan import plan_services

TOKEN = "planned-file-token-0123456789abcdef"


def planned_file(tmp_path: Path, service: str, **variables: Any) -> Path:
    hostvars = {"svc-1": {f"{service}_tls_proxy": False, **variables}}
    planned = plan_services({service: ["svc-1"]}, hostvars)["svc-1"][service]
    path = tmp_path / planned.file_name
    path.write_text(planned.content, encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("tokens", [[TOKEN], []])
def test_the_user_directorys_planned_file_loads(tmp_path: Path, tokens: list[str]) -> None:
    from clusterforge_userdir.settings import load_server_settings

    path = planned_file(tmp_path, "user_directory", user_directory_auth_tokens=tokens)
    settings = load_server_settings(settings_file=path, environ={}, options={})
    assert settings.accepted_tokens() == frozenset(tokens)
    assert settings.allow_unauthenticated is (not tokens)


@pytest.mark.parametrize("tokens", [[TOKEN], []])
def test_the_order_services_planned_file_loads(tmp_path: Path, tokens: list[str]) -> None:
    from clusterforge_orders.settings import load_settings

    path = planned_file(tmp_path, "order_service", order_service_auth_tokens=tokens)
    settings = load_settings(config_file=path, environ={})
    assert settings.orders.accepted_tokens() == frozenset(tokens)
    assert settings.orders.allow_unauthenticated is (not tokens)
