"""The collection's filters that turn what a host reported into the library's input."""

from __future__ import annotations

from types import ModuleType

from collection_plugins import load_plugin


def load_filters() -> ModuleType:
    return load_plugin("filter", "clusterforge")


def test_installed_plugins_are_named_by_their_directory_with_the_descriptor_version() -> None:
    installed = load_filters().clusterforge_installed_plugins(
        {
            "/opt/os/plugins/opensearch-security/plugin-descriptor.properties": (
                "# comment\nname=opensearch-security\nversion=2.19.4.0\n"
            ),
            "/opt/os/plugins/analysis-smartcn/plugin-descriptor.properties": "version = 2.19.4",
            "/opt/os/plugins/odd/plugin-descriptor.properties": "name=odd\n",
            "/opt/os/plugins/gone/plugin-descriptor.properties": None,
        }
    )
    assert installed == {
        "opensearch-security": "2.19.4.0",
        "analysis-smartcn": "2.19.4",
        "odd": "",
        "gone": "",
    }
    assert "clusterforge_installed_plugins" in load_filters().FilterModule().filters()


def test_the_host_groups_are_named_once_and_the_playbooks_hold_that_list() -> None:
    """clusterforge.plan.cluster.host_groups names the groups the toolkit deploys. The playbooks
    that reach them or run the node exporter on them write the list out (ansible-core
    2.17 and 2.18 template a play's hosts at parse time, so a filter needing the library
    failed their syntax check without it), and this holds every copy equal to the one
    list, in its order (three lists, in two orders, before)."""
    import re
    from pathlib import Path

    from clusterforge.plan.cluster.host_groups import HOST_GROUPS

    host_groups = load_filters().FilterModule().filters()["clusterforge_host_groups"]
    inventory = {"all": [], "ungrouped": [], "opensearch": ["os-1"], "monitoring": ["mon-1"]}
    assert host_groups(inventory) == ["opensearch", "monitoring"]
    # opensearch always: the check refused an inventory without it before any pattern.
    assert host_groups({"order_service": ["app-1"]}) == ["opensearch", "order_service"]
    assert host_groups({group: [] for group in HOST_GROUPS}) == list(HOST_GROUPS)
    playbooks = Path(__file__).resolve().parents[1] / "playbooks"
    for name in ("site.yml", "rotate_certs.yml", "monitoring.yml"):
        text = (playbooks / name).read_text()
        lists = re.findall(r"\(\[('dashboards', [^\]]*)\]", text)
        assert lists, name
        for written in lists:
            assert [item.strip().strip("'") for item in written.split(",")] == list(
                HOST_GROUPS[1:]
            ), name
