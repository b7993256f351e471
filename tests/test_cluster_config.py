"""The cluster's own objects: declarations validated, and compared as the engine answers.

The answers below are shaped as OpenSearch 2.19 answers GET for each kind (the defaults
it adds included); the drill on a real cluster is molecule/tls's cluster-config drill.
"""

from __future__ import annotations

from typing import Any

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster_config import (
    CLUSTER_SETTINGS,
    INDEX_TEMPLATES,
    INGEST_PIPELINES,
    ROLE_MAPPINGS,
    ROLES,
    changes_for,
    patterns_overlap,
    plan_cluster_config,
    request_for,
    toolkit_security_names,
)

ROLE = {
    "cluster_permissions": ["cluster_monitor"],
    "index_permissions": [{"index_patterns": ["logs-*"], "allowed_actions": ["read"]}],
}
TEMPLATE = {
    "index_patterns": ["logs-*"],
    "priority": 200,
    "template": {"settings": {"number_of_shards": 1}, "mappings": {"properties": {}}},
}


def problems(**variables: Any) -> list[str]:
    with pytest.raises(InventoryError) as raised:
        plan_cluster_config(variables, secured=True, toolkit_names=toolkit_security_names())
    return raised.value.problems


def test_valid_declarations_are_planned_with_the_toolkit_names_kept() -> None:
    config = plan_cluster_config(
        {
            "opensearch_security_roles": {"logs_reader": ROLE},
            "opensearch_security_role_mappings": {"logs_reader": {"users": ["ann"]}},
            "opensearch_index_templates": {"logs": TEMPLATE},
            "opensearch_cluster_settings": {"search": {"max_buckets": 20000}},
        },
        secured=True,
        toolkit_names=toolkit_security_names(),
        managed_templates=[{"name": "orders", "index_patterns": ["orders*"], "priority": 100}],
    )
    plan = config.as_plan()
    assert plan["declares_anything"]
    assert "security_rest_api_access" in plan["keep"]["opensearch_security_roles"]
    assert plan["keep"]["opensearch_index_templates"] == ["orders"]


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            {"opensearch_security_roles": {"all_access": ROLE}},
            "opensearch_security_roles.all_access",
        ),
        ({"opensearch_security_roles": {"admin": ROLE}}, "opensearch_security_roles.admin"),
        (
            {"opensearch_security_roles": {"r": {"cluster_permissions": ["cluster_everything"]}}},
            "opensearch_security_roles.r.cluster_permissions[0]",
        ),
        (
            {
                "opensearch_security_roles": {
                    "r": {
                        "index_permissions": [
                            {"index_patterns": ["a"], "allowed_actions": ["raed"]}
                        ]
                    }
                }
            },
            "opensearch_security_roles.r.index_permissions[0].allowed_actions[0]",
        ),
        (
            {
                "opensearch_index_templates": {
                    "a": TEMPLATE,
                    "b": {**TEMPLATE, "index_patterns": ["logs-app*"]},
                }
            },
            "opensearch_index_templates.a.index_patterns overlap those of index template b",
        ),
        (
            {"opensearch_ingest_pipelines": {"p": {"processors": [{"geoip": {"field": "ip"}}]}}},
            "opensearch_ingest_pipelines.p.processors[0]: 'geoip'",
        ),
        (
            {"opensearch_cluster_settings": {"cluster.name": "x"}},
            "opensearch_cluster_settings.cluster.name is a static setting",
        ),
        (
            {"opensearch_security_role_mappings": {"nobody_declared": {"users": ["x"]}}},
            "opensearch_security_role_mappings.nobody_declared maps a role no one declares",
        ),
        (
            {"opensearch_security_roles": {"clusterforge_orders_writer": ROLE}},
            "opensearch_security_roles.clusterforge_orders_writer: clusterforge writes",
        ),
        ({"opensearch_config_prune": "yess"}, "opensearch_config_prune must be true or false"),
        ({"opensearch_index_templates": ["logs"]}, "opensearch_index_templates must be a mapping"),
    ],
)
def test_bad_declarations_are_refused_naming_the_variable_and_key(
    variables: dict[str, Any], expected: str
) -> None:
    found = problems(**variables)
    assert any(expected in problem for problem in found), found


def test_a_static_setting_points_to_opensearch_extra_settings() -> None:
    [problem] = problems(opensearch_cluster_settings={"node": {"attr": {"zone": "a"}}})
    assert "opensearch_cluster_settings.node.attr.zone" in problem
    assert "opensearch_extra_settings" in problem


def test_security_objects_need_a_secured_mode() -> None:
    with pytest.raises(InventoryError, match="opensearch_security_roles declares roles"):
        plan_cluster_config({"opensearch_security_roles": {"r": ROLE}}, secured=False)


def test_an_overlap_with_the_orders_template_at_its_priority_is_refused() -> None:
    with pytest.raises(InventoryError, match="overlap those of index template orders"):
        plan_cluster_config(
            {
                "opensearch_index_templates": {
                    "mine": {"index_patterns": ["orders-*"], "priority": 100}
                }
            },
            secured=True,
            managed_templates=[{"name": "orders", "index_patterns": ["orders*"], "priority": 100}],
        )


def test_patterns_overlap_as_index_names_would() -> None:
    assert patterns_overlap("logs-*", "logs-app*")
    assert patterns_overlap("logs-*", "logs-2026")
    assert not patterns_overlap("logs-*", "metrics-*")
    assert not patterns_overlap("a", "b")


def test_a_role_as_the_engine_answers_it_matches_its_declaration() -> None:
    answer = {
        "logs_reader": {
            "reserved": False,
            "hidden": False,
            "static": False,
            "cluster_permissions": ["cluster_monitor"],
            "index_permissions": [
                {
                    "index_patterns": ["logs-*"],
                    "fls": [],
                    "masked_fields": [],
                    "allowed_actions": ["read"],
                }
            ],
            "tenant_permissions": [],
        }
    }
    assert changes_for(ROLES, {"logs_reader": ROLE}, answer) == []


def test_a_permission_removed_from_the_declaration_is_a_change() -> None:
    answer = {"r": {**ROLE, "tenant_permissions": [], "reserved": False}}
    [change] = changes_for(ROLES, {"r": {"index_permissions": ROLE["index_permissions"]}}, answer)
    assert (change.kind, change.name, change.action) == ("role", "r", "update")


def test_a_template_as_the_engine_answers_it_matches_and_a_new_priority_does_not() -> None:
    answer = {
        "index_templates": [
            {
                "name": "logs",
                "index_template": {
                    "index_patterns": ["logs-*"],
                    "template": {
                        "settings": {"index": {"number_of_shards": "1"}},
                        "mappings": {"properties": {}},
                    },
                    "composed_of": [],
                    "priority": 200,
                },
            }
        ]
    }
    assert changes_for(INDEX_TEMPLATES, {"logs": TEMPLATE}, answer) == []
    answer["index_templates"][0]["index_template"]["priority"] = 5
    [change] = changes_for(INDEX_TEMPLATES, {"logs": TEMPLATE}, answer)
    assert change.action == "update" and change.before["priority"] == 5


def test_a_missing_mapping_is_created_with_its_declared_body() -> None:
    declared = {"logs_reader": {"users": ["ann"]}}
    [change] = changes_for(ROLE_MAPPINGS, declared, {})
    assert change.action == "create"
    assert request_for(ROLE_MAPPINGS, change, declared) == (
        "PUT",
        "/_plugins/_security/api/rolesmapping/logs_reader",
        {"users": ["ann"]},
    )


def test_settings_compare_flattened_as_strings() -> None:
    declared = {"search": {"max_buckets": 20000}, "action.auto_create_index": False}
    answer = {"persistent": {"search.max_buckets": "20000", "action.auto_create_index": "false"}}
    assert changes_for(CLUSTER_SETTINGS, declared, answer) == []
    answer["persistent"]["search.max_buckets"] = "10"
    [change] = changes_for(CLUSTER_SETTINGS, declared, answer)
    assert (change.name, change.before, change.after) == ("search.max_buckets", "10", "20000")
    assert request_for(CLUSTER_SETTINGS, change, declared) == (
        "PUT",
        "/_cluster/settings",
        {"persistent": {"search.max_buckets": "20000"}},
    )


def test_prune_removes_only_what_is_neither_declared_protected_nor_kept() -> None:
    answer = {
        "mine": {"processors": [{"set": {"field": "a", "value": 1}}]},
        "by_hand": {"processors": []},
        "kept": {"processors": []},
        ".hidden_one": {"processors": []},
    }
    declared = {"mine": answer["mine"]}
    found = changes_for(INGEST_PIPELINES, declared, answer, prune=True, keep=frozenset({"kept"}))
    assert [(c.name, c.action) for c in found] == [("by_hand", "delete")]
    assert changes_for(INGEST_PIPELINES, declared, answer) == []


def test_prune_never_touches_reserved_or_built_in_roles() -> None:
    answer = {
        "all_access": {"reserved": True, "cluster_permissions": ["*"]},
        "kibana_user": {"reserved": False},
        "made_by_hand": {"reserved": False, "cluster_permissions": []},
    }
    found = changes_for(ROLES, {}, answer, prune=True)
    assert [(c.name, c.action) for c in found] == [("made_by_hand", "delete")]
