"""clusterforge: a library for building secured OpenSearch clusters and their services.

The package holds no Ansible. The roles reach it through one action plugin on the
control node; ``scripts/render`` and the CLI call the same functions.
"""

__version__ = "0.1.0"
