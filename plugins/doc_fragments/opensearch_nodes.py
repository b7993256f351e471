"""Options that several action plugins take about the OpenSearch nodes, documented once.

A module page names them in ``extends_documentation_fragment``
(``clusterforge.stack.opensearch_nodes.group``), and ansible-doc merges them into its
options; tests/test_plugin_docs.py checks the merged page against the plugin's arguments.
"""

from __future__ import annotations


class ModuleDocFragment:
    GROUP = r"""
options:
  group:
    description: The inventory group of the OpenSearch nodes.
    type: str
    default: opensearch
"""

    SERVICE = r"""
options:
  service:
    description: The systemd unit of the engine.
    type: str
    required: true
"""
