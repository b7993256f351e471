"""The README's "Real hosts" steps, followed literally on a copy of the example (issue 41,
item 7): its `rm` and `ansible-vault create` commands, with a vault password of the
test's own and the variables its YAML blocks name, then `scripts/render`'s entry point.
A vault the steps forget leaves a `vault_*` variable undefined, and rendering fails."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from clusterforge.cli import main as clusterforge_main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "inventories" / "example"
ANSIBLE_VAULT = Path(sys.executable).with_name("ansible-vault")


def _real_hosts_step_two() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Real hosts") :]
    return section[section.index("2. Make your own vault") : section.index("3. Trust")]


def _vault_variables_the_example_uses() -> set[str]:
    used: set[str] = set()
    for path in EXAMPLE.rglob("*.yml"):
        if path.name == "vault.yml":
            continue
        for line in path.read_text().splitlines():
            if not line.lstrip().startswith("#"):
                used.update(re.findall(r"\bvault_[a-z0-9_]+", line))
    return used


def test_the_real_hosts_steps_name_every_vault_and_render_the_example(tmp_path: Path) -> None:
    step = _real_hosts_step_two()
    commands = [
        line.strip()
        for line in step.splitlines()
        if line.strip().startswith(("rm ", "ansible-vault create "))
    ]
    variables: dict[str, str] = {}
    for block in re.findall(r"```yaml\n(.*?)```", step, flags=re.DOTALL):
        for name in yaml.safe_load(re.sub(r"<[^>]*>", "x", block)):
            # A unique value of each kind: long enough for a token, not a demo password.
            variables[name] = f"Readme-{name.replace('_', '-')}-0123456789abcdef"
    assert set(variables) >= _vault_variables_the_example_uses() - {
        # Named only in the example's comments of what a user may add.
        "vault_order_service_database_url",
        "vault_user_directory_database_url",
        "vault_order_service_webhook_url",
    }, "the README's yaml blocks miss a vault_* variable the example uses"

    yours = tmp_path / "inventories" / "yours"
    shutil.copytree(EXAMPLE, yours)
    password_file = tmp_path / "vault-password"
    password_file.write_text("a-password-of-the-tests-own\n")
    created = []
    for command in commands:
        argv = shlex.split(command.replace("inventories/<yours>", str(yours)))
        if argv[0] == "rm":
            for pattern in argv[1:]:
                for path in Path("/").glob(pattern.lstrip("/")):
                    path.unlink()
            continue
        # ansible-vault create opens an editor; encrypt writes the same file unattended.
        vault = Path(argv[-1])
        group = vault.parent.name
        prefix = f"vault_{group}_"
        vault.write_text(
            yaml.safe_dump({k: v for k, v in variables.items() if k.startswith(prefix)})
        )
        subprocess.run(
            [
                str(ANSIBLE_VAULT),
                "encrypt",
                "--vault-password-file",
                str(password_file),
                str(vault),
            ],
            check=True,
            capture_output=True,
        )
        created.append(group)
    assert not (yours / "EXAMPLE-ONLY-vault-password.txt").exists()
    assert sorted(created) == sorted(
        p.parent.name for p in (EXAMPLE / "group_vars").glob("*/vault.yml")
    )

    out = tmp_path / "review"
    code = clusterforge_main(
        [
            "render",
            "--inventory",
            str(yours),
            "--out",
            str(out),
            "--vault-password-file",
            str(password_file),
        ]
    )
    assert code == 0
    rendered = "\n".join(path.read_text() for path in out.rglob("*") if path.is_file())
    assert "is undefined" not in rendered
    assert any(out.rglob("orders.yml")) and any(out.rglob("userdir.env"))
