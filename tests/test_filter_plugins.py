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
