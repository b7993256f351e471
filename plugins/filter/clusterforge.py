"""Filters that let the roles ask the library instead of recomputing in Jinja.

- ``clusterforge_changed_types(digests, marker_text)``: the security config types whose
  digest differs from the marker recorded at the last load (all of them without one).
- ``clusterforge_installed_plugins(descriptors)``: ``{plugin directory: version}`` from
  ``{descriptor path: its text}`` (clusterforge_files' ``before``).
- ``clusterforge_plugin_changes(wanted, installed, remove_unlisted)``: what a node must
  install and remove.
- ``clusterforge_merge_users(rendered, current)``: the rendered internal_users.yml plus the
  users the cluster has that the inventory does not manage (created through the REST API).
- ``clusterforge_console_config(settings, backend_password)``: the console's
  opensearch_dashboards.yml from its planned settings.
- ``clusterforge_host_groups(groups)``: the groups whose hosts the toolkit deploys that
  the inventory has (``opensearch`` always first), for a play's host pattern
  (clusterforge.plan.cluster.host_groups: the groups are named there once).
- ``clusterforge_file_entries(files, directory, owner=, group=, mode=, secret=)``: a
  ``{name: content}`` mapping as entries of the clusterforge_files module.

Which nodes restart, and in which batches, is no filter: the plan decides it
(clusterforge_plan with ``changes:``, clusterforge.plan.plan.with_restarts), once, at the
start of playbooks/rolling.yml, so no play asks the library again after planning. Nor
which changed opensearch.yml settings need a restart: playbooks/plan.yml's look reads the
node's file and the plan says so in ``rollout.nodes[host].config_restart``
(clusterforge.plan.cluster.restarts.with_config_restarts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import PurePosixPath
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.clusterforge.stack.plugins.plugin_utils.library import require_library

# Imported inside try: ansible-doc and plugin listings load this file where the library
# need not be installed; a filter that needs it then fails with the fix when it runs.
CLUSTERFORGE_IMPORT_ERROR: ImportError | None
try:
    from clusterforge.pki.security_config import (
        SECURITY_CONFIG_TYPES,
        changed_config_types,
        merge_unmanaged_users,
        parse_digest_marker,
    )
    from clusterforge.plan.cluster.console import render_console_config
    from clusterforge.plan.cluster.host_groups import present_host_groups
    from clusterforge.plan.cluster.plugins import parse_descriptor, plan_plugin_changes

    CLUSTERFORGE_IMPORT_ERROR = None
except ImportError as error:
    CLUSTERFORGE_IMPORT_ERROR = error


def clusterforge_changed_types(digests: Mapping[str, str], marker_text: str | None) -> list[str]:
    return changed_config_types(parse_digest_marker(marker_text), dict(digests))


def clusterforge_merge_users(rendered: str, current: str) -> str:
    return merge_unmanaged_users(str(rendered), str(current)).text


def clusterforge_config_file(config_type: str) -> str:
    """The file name of a securityadmin config type (internalusers -> internal_users.yml)."""
    by_type = {kind: name for name, kind in SECURITY_CONFIG_TYPES.items()}
    return by_type[config_type]


def clusterforge_installed_plugins(descriptors: Mapping[str, str | None]) -> dict[str, str]:
    """``{plugin directory name: version}`` from ``{.../<name>/plugin-descriptor.properties:
    its text}``; a version the descriptor does not name is ''."""
    return {
        PurePosixPath(path).parent.name: parse_descriptor(str(text or "")).version
        for path, text in descriptors.items()
    }


def clusterforge_plugin_changes(
    wanted: list[dict[str, Any]], installed: dict[str, str], remove_unlisted: bool = False
) -> dict[str, list[Any]]:
    """What a node must install and remove
    (clusterforge.plan.cluster.plugins.plan_plugin_changes)."""
    return plan_plugin_changes(list(wanted), dict(installed), remove_unlisted=remove_unlisted)


def clusterforge_console_config(settings: dict[str, Any], backend_password: str | None) -> str:
    """The console's opensearch_dashboards.yml
    (clusterforge.plan.cluster.console.render_console_config)."""
    return render_console_config(settings, backend_password)


def clusterforge_host_groups(groups: Mapping[str, Any]) -> list[str]:
    """The toolkit's host groups the inventory has (``groups``: Ansible's magic variable)."""
    return present_host_groups(groups)


def clusterforge_file_entries(
    files: Mapping[str, str],
    directory: str,
    *,
    owner: str,
    group: str,
    mode: str,
    secret: bool = False,
) -> list[dict[str, Any]]:
    """``{name: content}`` as the ``files`` entries of the clusterforge_files module, each
    placed in ``directory`` with the same owner, group and mode."""
    return [
        {
            "path": f"{directory.rstrip('/')}/{name}",
            "content": str(content),
            "owner": owner,
            "group": group,
            "mode": mode,
            "secret": secret,
        }
        for name, content in files.items()
    ]


def _needing_library(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, failing with the fix when the library could not be imported."""

    @wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        require_library(CLUSTERFORGE_IMPORT_ERROR, AnsibleFilterError)
        return function(*args, **kwargs)

    return checked


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "clusterforge_changed_types": _needing_library(clusterforge_changed_types),
            "clusterforge_merge_users": _needing_library(clusterforge_merge_users),
            "clusterforge_config_file": _needing_library(clusterforge_config_file),
            "clusterforge_installed_plugins": _needing_library(clusterforge_installed_plugins),
            "clusterforge_plugin_changes": _needing_library(clusterforge_plugin_changes),
            "clusterforge_console_config": _needing_library(clusterforge_console_config),
            "clusterforge_host_groups": _needing_library(clusterforge_host_groups),
            # Plain data shaping: no library needed.
            "clusterforge_file_entries": clusterforge_file_entries,
        }
