"""clusterforge_api's ``auth: cert``: the admin key goes to the host only inside one
clusterforge_http_wait run (issue 31), read on the control node, never as a node's file."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from collection_plugins import load_plugin

api = load_plugin("action", "clusterforge_api")


def plan(tmp_path: Path) -> dict[str, Any]:
    return {
        "cluster": {
            "security_mode": "tls",
            "secured": True,
            "pki": {
                "admin_key": str(tmp_path / "admin-key.pem"),
                "on_node": {
                    "ca_cert": "/etc/opensearch/certs/live/ca.pem",
                    "admin_cert": "/etc/opensearch/certs/admin.pem",
                    "retired_admin_key": "/etc/opensearch/certs/admin-key.pem",
                },
            },
        },
        "nodes": {"os-1": {"url": "https://127.0.0.11:9200"}},
    }


def action(args: dict[str, Any]) -> Any:
    module = object.__new__(api.ActionModule)
    module._task = SimpleNamespace(args=args, check_mode=False)
    return module


def test_cert_auth_carries_the_control_node_key_as_content_not_a_node_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "admin-key.pem").write_text("-----BEGIN PRIVATE KEY-----\nKEY\n")
    task_vars = {"__clusterforge_plan": plan(tmp_path), "inventory_hostname": "os-1"}
    uri_args = action({})._uri_args({"path": "/", "auth": "cert"}, "GET", task_vars)
    assert uri_args["client_key_content"] == "-----BEGIN PRIVATE KEY-----\nKEY\n"
    assert uri_args["client_cert"] == "/etc/opensearch/certs/admin.pem"
    assert "client_key" not in uri_args


def test_a_missing_control_node_key_is_named_with_the_fix(tmp_path: Path) -> None:
    task_vars = {"__clusterforge_plan": plan(tmp_path), "inventory_hostname": "os-1"}
    with pytest.raises(AnsibleActionFail, match=r"admin-key\.pem.*playbooks/plan\.yml"):
        action({})._uri_args({"path": "/", "auth": "cert"}, "GET", task_vars)


def test_cert_auth_without_a_wait_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "admin-key.pem").write_text("KEY")
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    args = {"path": "/_cluster/health", "auth": "cert"}
    module = action(args)
    task_vars = {"__clusterforge_plan": plan(tmp_path), "inventory_hostname": "os-1"}
    with pytest.raises(AnsibleActionFail, match="auth: cert needs wait_seconds"):
        module.run(task_vars=task_vars)
