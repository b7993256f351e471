"""The ``clusterforge`` command: ``render`` writes every host's files for review.

``scripts/render`` calls it. It reads the inventory with Ansible's own inventory loader
(group_vars, host_vars, vault and all), so it sees exactly what a playbook run sees, and
calls the same :func:`clusterforge.plan.plan.build_plan` as the ``clusterforge_plan`` action:
the certificates are issued or reused in the inventory's PKI directory as the playbook
does, so ``plugins.security.nodes_dn`` comes from them. Secrets are left out of what it
writes: no private key, no password, no password hash. It also prints the batches a
rolling restart would take (docs/zones.md), for review without any host.

It refuses what the playbooks' first play refuses (both run
:func:`clusterforge.plan.plan.validate_inventory`), as a review: a secret published in this
repository, or an archive missing on this machine, is a warning saying a playbook run
would refuse it (docs/inventory-checks.md). What Ansible itself cannot read is said with
its file and line, and a vault without its password names --vault-password-file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clusterforge.errors import ClusterforgeError
from clusterforge.plan.services_plan import SERVICES

_READ_PREFIXES = ("opensearch_", "dashboards_")
_READ_KEYS = ("ansible_host",)


class InventoryReadError(ClusterforgeError):
    """Ansible could not read the inventory (a missing file, a vault without its password)."""


def select_service_vars(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The host variables the services' plan reads (``user_directory_*``, ``order_service_*``)."""
    prefixes = tuple(f"{service}_" for service in SERVICES)
    return {key: value for key, value in host_vars.items() if key.startswith(prefixes)}


def select_model_vars(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The host variables the model reads; the action plugin uses the same selection."""
    return {
        key: value
        for key, value in host_vars.items()
        if key.startswith(_READ_PREFIXES) or key in _READ_KEYS
    }


class InventoryReader:
    """An inventory as Ansible reads it, vault included."""

    def __init__(self, inventory: Path, *, vault_password_file: Path | None = None) -> None:
        from ansible.errors import AnsibleError
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        if not inventory.exists():
            raise InventoryReadError(f"{inventory}: no such inventory file or directory")
        _ensure_plugin_loader()
        self._loader = DataLoader()
        try:
            if vault_password_file is not None:
                self._use_vault_password_file(vault_password_file)
            self._manager = InventoryManager(loader=self._loader, sources=[str(inventory)])
        except AnsibleError as error:
            raise InventoryReadError(inventory_read_problem(error)) from None
        self._variables = VariableManager(loader=self._loader, inventory=self._manager)
        self.directory = inventory if inventory.is_dir() else inventory.parent

    def _use_vault_password_file(self, vault_password_file: Path) -> None:
        from ansible.parsing.vault import VaultSecretsContext, get_file_vault_secret

        secret = get_file_vault_secret(filename=str(vault_password_file), loader=self._loader)
        secret.load()
        secrets = [("default", secret)]
        self._loader.set_vault_secrets(secrets)
        # Values tagged !vault inside plain files are decrypted through Ansible's one
        # process-wide context; it can be set once per process (as ansible's own CLI
        # does), so a second reader in the same process keeps the first one's secrets.
        if VaultSecretsContext.current(optional=True) is None:
            VaultSecretsContext.initialize(VaultSecretsContext(secrets))

    def hosts_vars(
        self,
        group: str,
        select: Callable[[Mapping[str, Any]], dict[str, Any]] = select_model_vars,
    ) -> list[tuple[str, dict[str, Any]]]:
        """(inventory name, selected variables) for every host of ``group``, templated."""
        from ansible.errors import AnsibleError
        from ansible.template import Templar

        nodes: list[tuple[str, dict[str, Any]]] = []
        inventory_group = self._manager.groups.get(group)
        if inventory_group is None:
            return nodes  # asking for a missing group would only print Ansible's warning
        try:
            for host in inventory_group.get_hosts():
                host_vars = self._variables.get_vars(host=host)
                templar = Templar(loader=self._loader, variables=host_vars)
                selected = {
                    key: templar.template(value) for key, value in select(host_vars).items()
                }
                nodes.append((host.name, selected))
        except AnsibleError as error:
            raise InventoryReadError(inventory_read_problem(error)) from None
        return nodes


_plugin_loader_ready = False


def _ensure_plugin_loader() -> None:
    """Lookups in an inventory (the lab reads its secrets with ansible.builtin.file) need
    Ansible's plugin loader, which only its own CLIs initialize, once per process."""
    global _plugin_loader_ready
    if not _plugin_loader_ready:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader()
        _plugin_loader_ready = True


# Ansible's words for an encrypted value read without a vault password (2.19 says the
# first reading a vaulted file, the second templating a !vault value).
_NO_VAULT_SECRET = ("vault password must be specified", "no vault secrets found")


def _origin_of(error: BaseException) -> str | None:
    """``file:line:column`` of the first error in the chain that names where it happened
    (ansible 2.19 keeps it as the error's ``obj``, an Origin, for a YAML error)."""
    seen: BaseException | None = error
    while seen is not None:
        origin = getattr(seen, "obj", None)
        path = getattr(origin, "path", None)
        if path:
            line = getattr(origin, "line_num", None)
            column = getattr(origin, "col_num", None)
            return ":".join(str(part) for part in (path, line, column) if part is not None)
        seen = seen.__cause__ or seen.__context__
    return None


def inventory_read_problem(error: Exception) -> str:
    """What to do about an error Ansible raised reading the inventory, in one line that
    names the file and line when Ansible knows them, and the option a vault needs."""
    message = _one_line(error)
    origin = _origin_of(error)
    if any(words in message.lower() for words in _NO_VAULT_SECRET):
        where = f" ({origin})" if origin else ""
        return (
            f"the inventory holds ansible-vault encrypted data{where} and no vault password "
            "was given: pass --vault-password-file FILE (ansible-playbook also takes "
            "--ask-vault-pass)"
        )
    if origin and origin.split(":", 1)[0] not in message:
        return f"{origin}: {message} Fix the file there."
    return message


def _one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def load_inventory_nodes(
    inventory: Path, group: str, *, vault_password_file: Path | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(inventory name, model variables) for every host of ``group``, as Ansible sees them."""
    return InventoryReader(inventory, vault_password_file=vault_password_file).hosts_vars(group)


def render_to_directory(
    inventory: Path,
    out: Path,
    group: str,
    console_group: str = "dashboards",
    *,
    vault_password_file: Path | None = None,
) -> list[Path]:
    """Write every host's files under ``out/<host>/``; returns the paths written."""
    from clusterforge.plan.plan import build_plan, host_files
    from clusterforge.plan.rollout import describe_rollout

    reader = InventoryReader(inventory, vault_password_file=vault_password_file)
    nodes = reader.hosts_vars(group)
    if not nodes:
        raise InventoryReadError(
            f"{inventory}: the group {group!r} has no hosts; add them, or fix the file "
            "Ansible could not parse (its warning above names it)"
        )
    plan = build_plan(
        nodes,
        inventory_dir=reader.directory,
        consoles_vars=reader.hosts_vars(console_group),
        fetch=False,
        # A review may show the example inventory; the warning says why it would not deploy.
        review=True,
        services_vars={
            service: reader.hosts_vars(service, select_service_vars) for service in SERVICES
        },
    )
    for warning in plan["model_warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    # The batches a rolling restart would take, for review without hosts (docs/zones.md).
    for line in describe_rollout(plan["rollout"]["batches"]):
        print(line)
    if plan["rollout"]["scale_in"]:
        for line in describe_rollout(plan["rollout"]["scale_in"], title="scale-in"):
            print(line)
    written = []
    for host, files in host_files(plan).items():
        for name, content in files.items():
            path = out / host / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            written.append(path)
    return written


def _error_lines(error: ClusterforgeError) -> Sequence[str]:
    problems = getattr(error, "problems", None)
    if problems:
        return [str(problem) for problem in problems]
    return [line for line in str(error).splitlines() if line.strip()] or [type(error).__name__]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterforge")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser("render", help="write every host's files for review")
    render.add_argument("--inventory", type=Path, required=True, help="inventory file or directory")
    render.add_argument("--out", type=Path, required=True, help="directory to write into")
    render.add_argument("--group", default="opensearch", help="group of the OpenSearch nodes")
    render.add_argument("--console-group", default="dashboards", help="group of the console hosts")
    render.add_argument(
        "--vault-password-file",
        type=Path,
        default=None,
        help="file holding the password of the inventory's ansible-vault files",
    )
    args = parser.parse_args(argv)
    try:
        written = render_to_directory(
            args.inventory,
            args.out,
            args.group,
            args.console_group,
            vault_password_file=args.vault_password_file,
        )
    except ClusterforgeError as error:
        for line in _error_lines(error):
            print(f"clusterforge: error: {line}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
