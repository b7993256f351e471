"""The role's documented inputs agree with the model's defaults (one source of truth)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from clusterforge.model import cluster_defaults

ROLE = Path(__file__).resolve().parents[1] / "roles" / "opensearch"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_role_defaults_equal_the_model_defaults() -> None:
    assert load(ROLE / "defaults" / "main.yml") == cluster_defaults()


def test_every_default_is_declared_with_the_same_default() -> None:
    options = load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    for key, value in cluster_defaults().items():
        assert key in options, f"{key} is missing from meta/argument_specs.yml"
        assert options[key].get("default") == value, f"{key}: argument_specs default differs"


def test_every_input_is_in_the_role_readme() -> None:
    options = load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    readme = (ROLE / "README.md").read_text()
    missing = [key for key in options if f"`{key}`" not in readme]
    assert not missing, f"roles/opensearch/README.md does not list {missing}"
