"""A service variable's default is written once in effect: the schema agrees with the service.

Where a service's own settings model (``services/<dir>/src/<package>/settings.py``) holds
a default, the schema entry names it (``settings_default``) and this test fails when the
two differ, so a default changed in one place must be changed in the other in the same
commit. The settings modules are loaded as the plan loads them (no FastAPI, no SQLAlchemy).
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from clusterforge.plan.services.services_plan import settings_module
from clusterforge.schema import Variable, load_schema

SCHEMA = load_schema()
TIED = sorted(
    (var for var in SCHEMA.variables.values() if var.settings_default),
    key=lambda var: var.name,
)


def _service_of(var: Variable) -> str:
    return next(service for service in SCHEMA.services if var.name.startswith(f"{service}_"))


def settings_model_default(module: types.ModuleType, reference: str) -> Any:
    """The default ``reference`` names: ``CONSTANT``, ``Model.field`` or a whole ``Model``."""
    from pydantic import BaseModel

    owner, _, field_name = reference.partition(".")
    value = getattr(module, owner)
    if isinstance(value, type) and issubclass(value, BaseModel):
        if not field_name:
            return value().model_dump(mode="json", by_alias=True)
        return value.model_fields[field_name].get_default(call_default_factory=True)
    assert not field_name, f"{reference}: {owner} is not a settings model"
    return value


def test_each_service_ties_some_defaults_to_its_settings_model() -> None:
    assert {_service_of(var) for var in TIED} == set(SCHEMA.services)


@pytest.mark.parametrize("var", TIED, ids=lambda var: var.name)
def test_the_schema_default_is_the_settings_models_default(var: Variable) -> None:
    module = settings_module(_service_of(var))
    expected = settings_model_default(module, str(var.settings_default))
    assert var.default == expected, (
        f"{var.name} defaults to {var.default!r} in src/clusterforge/schema.yml, the service's "
        f"{var.settings_default} to {expected!r}: change both, then run "
        "python -m clusterforge.schema generate"
    )
