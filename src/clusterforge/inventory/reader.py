"""An inventory read from disk as Ansible reads it: files, groups, templating and vault.

``scripts/render`` and ``scripts/status`` read their inventory through it, so they see
exactly what a playbook run sees (group_vars, host_vars, vault and all). What the model
and the services take from the variables it reads is clusterforge.inventory.variables'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clusterforge.errors import ClusterforgeError


class InventoryReadError(ClusterforgeError):
    """Ansible could not read the inventory (a missing file, a vault without its password)."""


class InventoryReader:
    """An inventory as Ansible reads it, vault included, ``extra_vars`` on top (``-e``)."""

    def __init__(
        self,
        inventory: Path,
        *,
        vault_password_file: Path | None = None,
        extra_vars: Mapping[str, Any] | None = None,
    ) -> None:
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
        self._extra_vars = dict(extra_vars or {})
        self.directory = inventory if inventory.is_dir() else inventory.parent

    def _use_vault_password_file(self, vault_password_file: Path) -> None:
        from ansible.parsing.vault import get_file_vault_secret

        secret = get_file_vault_secret(filename=str(vault_password_file), loader=self._loader)
        secret.load()
        secrets = [("default", secret)]
        self._loader.set_vault_secrets(secrets)
        try:
            from ansible.parsing.vault import VaultSecretsContext
        except ImportError:
            # ansible-core before 2.19 (meta/runtime.yml claims 2.17): a !vault value
            # decrypts through the loader's secrets, set above; there is no other context.
            return
        # Values tagged !vault inside plain files are decrypted through Ansible's one
        # process-wide context; it can be set once per process (as ansible's own CLI
        # does), so a second reader in the same process keeps the first one's secrets.
        if VaultSecretsContext.current(optional=True) is None:
            VaultSecretsContext.initialize(VaultSecretsContext(secrets))

    def hosts(self, group: str) -> list[str]:
        """The inventory names of ``group``'s hosts; none for a missing group."""
        inventory_group = self._manager.groups.get(group)
        if inventory_group is None:
            return []  # asking for a missing group would only print Ansible's warning
        return [host.name for host in inventory_group.get_hosts()]

    def variables(self, host: str, wanted: Callable[[str], bool]) -> dict[str, Any]:
        """``host``'s variables whose names are ``wanted``, extra vars on top, templated."""
        from ansible.errors import AnsibleError
        from ansible.template import Templar

        try:
            host_vars = self._variables.get_vars(host=self._manager.get_host(host))
            templar = Templar(loader=self._loader, variables=host_vars)
            merged = {**host_vars, **self._extra_vars}
            return {key: templar.template(merged[key]) for key in merged if wanted(key)}
        except AnsibleError as error:
            raise InventoryReadError(inventory_read_problem(error)) from None


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
