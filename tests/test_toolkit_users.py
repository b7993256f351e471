"""The toolkit's own users' generated passwords (issue 51: three copies of one shape):
the order service's writer, the monitoring's exporter, the snapshots' and the lifecycle's
runners all keep theirs where clusterforge.plan.security.toolkit_users says, written by its one
helper, and an unusable file is refused naming the variable that could hold it instead."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusterforge.errors import InventoryError
from clusterforge.plan.cluster.model import build_cluster
from clusterforge.plan.monitoring.monitoring_user import plan_monitoring_user
from clusterforge.plan.security.toolkit_users import generated_password, generated_password_path
from clusterforge.plan.services.orders_search import read_or_generate_password

PLAN = Path(__file__).resolve().parents[1] / "src" / "clusterforge" / "plan"
NODE = {
    "opensearch_security_mode": "tls",
    "opensearch_security_passwords": {
        "admin": "Unit-Admin-7c1e",
        "kibanaserver": "Unit-Kibanaserver-7c1e",
        "logstash": "Unit-Logstash-7c1e",
        "kibana": "Unit-Kibana-7c1e",
    },
}


def test_only_toolkit_users_generates_a_toolkit_users_password() -> None:
    """No module of the plan but toolkit_users reads or generates a password file of its
    own shape (services_database's login roles are PostgreSQL's, the web password is
    the monitoring's, not a cluster user's)."""
    callers = []
    for path in sorted(PLAN.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "read_or_generate":
                callers.append(path.name)
    assert sorted(set(callers)) == [
        "monitoring_host.py",
        "services_database.py",
        "toolkit_users.py",
    ]


def test_the_monitoring_users_password_lives_where_every_toolkit_users_does(
    tmp_path: Path,
) -> None:
    cluster = build_cluster([("os-1", {"ansible_host": "127.0.0.71", **NODE})])
    user = plan_monitoring_user(cluster, [("mon-1", {})], inventory_dir=tmp_path)
    assert user is not None
    path = generated_password_path(tmp_path, user.username)
    assert user.password_file == str(path)
    assert generated_password(tmp_path, user.username) == user.password
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_an_unusable_password_file_is_refused_naming_the_variable(tmp_path: Path) -> None:
    directory = tmp_path / "orders-writer.password"
    directory.mkdir()
    with pytest.raises(InventoryError, match="order_service_search_password"):
        read_or_generate_password(directory)
    cluster = build_cluster([("os-1", {"ansible_host": "127.0.0.71", **NODE})])
    generated_password_path(tmp_path, "clusterforge-monitor").mkdir(parents=True)
    with pytest.raises(InventoryError, match="monitoring_cluster_password"):
        plan_monitoring_user(cluster, [("mon-1", {})], inventory_dir=tmp_path)
