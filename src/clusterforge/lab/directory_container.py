"""The lab's directory container: Debian's slapd over LDAPS, on a loopback address.

``scripts/up --ldap`` starts it beside the nodes (``directory-1``, 127.0.0.25, LDAPS on
636 and StartTLS on 389), from an image variant of the lab image with ``slapd`` and
``ldap-utils`` added (built once by ``docker build``, tagged by a hash of its base and
recipe). Its certificate is issued by the lab's CA, and the nodes trust that CA
(``opensearch_ldap_ca_path``). The tree is :mod:`clusterforge.lab.directory`'s; every
password in it is generated once into its own 0600 file under ``inventories/lab/.secrets``
and the tree holds only salted hashes. slapd runs in the foreground as PID 1 of the
container, as the ``openldap`` user, so ``docker stop`` is the directory going down.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.errors import LabError
from clusterforge.lab.directory import (
    BIND_DN,
    GROUP_BASE,
    LAB_PEOPLE,
    PEOPLE_BASE,
    DirectoryFiles,
    slapd_conf,
    tree_ldif,
)
from clusterforge.lab.process import run, say, wait_until
from clusterforge.pki.generated_secrets import read_or_generate, url_safe
from clusterforge.pki.pki import (
    CA_CERT_FILE,
    SubjectFields,
    ensure_server_certificate,
    load_or_create_ca,
)
from clusterforge.plan.cluster_pki import CA_COMMON_NAME_SUFFIX
from clusterforge.schema import load_schema

__all__ = [
    "DIRECTORY_ADDRESS",
    "DIRECTORY_CONTAINER",
    "LabDirectory",
    "directory_image_tag",
]

DIRECTORY_HOST = "directory-1"
DIRECTORY_CONTAINER = f"clusterforge-lab-{DIRECTORY_HOST}"
DIRECTORY_ADDRESS = "127.0.0.25"
LDAPS_PORT = 636
STARTTLS_PORT = 389
BIND_SECRET = "ldap_bind"  # noqa: S105 - a file name
IN_CONTAINER = Path("/srv/directory")
# The host's files, read-only: the container copies them, so nothing it writes (as its
# own openldap user) lands in the lab's directory on the host.
SOURCE_IN_CONTAINER = Path("/srv/directory-source")
_RECIPE = """FROM {base}
# No service starts during the build (there is no init); slapd runs as the command.
RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \\
 && apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slapd ldap-utils \\
 && rm -rf /var/lib/apt/lists/*
"""
# On the container's first start: copy the config and TLS files in, load the tree
# (slapadd); on every start, slapd in the foreground. docker stop/start keeps the data.
_START = (
    "set -e; s={source}; d={root}; "
    "if [ ! -e $d/data/data.mdb ]; then "
    "mkdir -p $d/data $d/tls; cp $s/slapd.conf $d/; cp $s/tls/* $d/tls/; "
    "slapadd -q -f $d/slapd.conf -l $s/tree.ldif; "
    "chown -R openldap:openldap $d; chmod -R go= $d; fi; "
    'exec slapd -d 0 -u openldap -g openldap -f $d/slapd.conf -h "{urls}"'
)


def person_secret(name: str) -> str:
    return f"ldap_{name}"


def directory_image_tag(base_image: str) -> str:
    """The variant's tag: a hash of the base image's id and the recipe."""
    base_id = run(["docker", "image", "inspect", "-f", "{{.Id}}", base_image]).stdout.decode()
    digest = hashlib.sha256((base_id.strip() + _RECIPE).encode()).hexdigest()
    return f"clusterforge-lab-directory:{digest[:12]}"


def ensure_directory_image(base_image: str) -> str:
    tag = directory_image_tag(base_image)
    if run(["docker", "image", "inspect", tag], check=False).returncode == 0:
        return tag
    say(f"building the directory image {tag} (the lab image with slapd and ldap-utils)")
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "Dockerfile").write_text(_RECIPE.format(base=base_image))
        run(["docker", "build", "--network", "host", "-t", tag, context])
    return tag


@dataclass
class LabDirectory:
    """The directory of one lab: files under ``lab_dir/.directory``, secrets beside the lab's."""

    lab_dir: Path
    secret_file: Callable[[str], Path]
    pki_dir: Path

    @property
    def root(self) -> Path:
        # Hidden: Ansible reads every other file of an inventory directory as inventory.
        return self.lab_dir / ".directory"

    @property
    def url(self) -> str:
        return f"ldaps://{DIRECTORY_ADDRESS}:{LDAPS_PORT}"

    def _secrets(self) -> dict[str, str]:
        names = [BIND_SECRET, *(person_secret(name) for name in LAB_PEOPLE)]
        return {
            name: read_or_generate(self.secret_file(name), generate=url_safe(18)) for name in names
        }

    def _certificate(self, cluster_name: str, passphrase: bytes) -> None:
        defaults = dict(load_schema().default_of("opensearch_cert_subject"))
        # The CA the plan makes (clusterforge.plan.cluster_pki), made here first when the
        # lab is new: the directory must serve before the first run binds to it.
        ca = load_or_create_ca(
            self.pki_dir,
            passphrase=passphrase,
            subject=SubjectFields(common_name=f"{cluster_name}{CA_COMMON_NAME_SUFFIX}", **defaults),
        )
        # Another OU than the nodes', so no nodes_dn pattern can take it for a node.
        subject = {**defaults, "organizational_unit": "directory"}
        issued = ensure_server_certificate(
            ca,
            directory=self.root / "pki",
            name="directory",
            subject=SubjectFields(common_name=DIRECTORY_HOST, **subject),
            alt_names=[DIRECTORY_ADDRESS, DIRECTORY_HOST],
        )
        tls = self.root / "tls"
        tls.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(issued.cert_path, tls / "directory.pem")
        shutil.copyfile(issued.key_path, tls / "directory-key.pem")
        (tls / "directory-key.pem").chmod(0o600)
        shutil.copyfile(self.pki_dir / CA_CERT_FILE, tls / "ca.pem")

    def _running(self) -> bool:
        state = run(
            ["docker", "inspect", "-f", "{{.State.Running}}", DIRECTORY_CONTAINER], check=False
        )
        return state.returncode == 0 and state.stdout.decode().strip() == "true"

    def ensure(
        self, *, base_image: str, network: str, cluster_name: str, passphrase: bytes
    ) -> None:
        """The directory serving on 127.0.0.25 (loopback network only), its tree loaded."""
        if network != "loopback":
            raise LabError(
                "scripts/up --ldap runs the directory in the loopback network only; "
                "use --network loopback"
            )
        secrets = self._secrets()
        self._certificate(cluster_name, passphrase)
        if self._running():
            return
        image = ensure_directory_image(base_image)
        # A new container loads the tree anew: the people's passwords are the files' values.
        run(["docker", "rm", "-f", DIRECTORY_CONTAINER], check=False)
        files = DirectoryFiles(
            root=IN_CONTAINER,
            cert=IN_CONTAINER / "tls" / "directory.pem",
            key=IN_CONTAINER / "tls" / "directory-key.pem",
            ca=IN_CONTAINER / "tls" / "ca.pem",
        )
        (self.root / "slapd.conf").write_text(slapd_conf(files))
        ldif = self.root / "tree.ldif"
        ldif.touch(mode=0o600)
        people = {name: secrets[person_secret(name)] for name in LAB_PEOPLE}
        ldif.write_text(tree_ldif(people, secrets[BIND_SECRET]))
        urls = (
            f"ldaps://{DIRECTORY_ADDRESS}:{LDAPS_PORT}/ ldap://{DIRECTORY_ADDRESS}:{STARTTLS_PORT}/"
        )
        say(f"starting the directory {DIRECTORY_CONTAINER} ({self.url})")
        run(
            [
                "docker", "run", "-d", "--name", DIRECTORY_CONTAINER,
                "--label", "clusterforge.lab=1", "--label", f"clusterforge.lab.dir={self.lab_dir}",
                "--network", "host",
                "-v", f"{self.root}:{SOURCE_IN_CONTAINER}:ro",
                image, "sh", "-c",
                _START.format(source=SOURCE_IN_CONTAINER, root=IN_CONTAINER, urls=urls),
            ]
        )  # fmt: skip
        self.wait_serving()

    def wait_serving(self, timeout_s: float = 60) -> None:
        def answers() -> bool:
            try:
                socket.create_connection((DIRECTORY_ADDRESS, LDAPS_PORT), timeout=1).close()
            except OSError:
                return False
            return True

        def logs() -> str:
            result = run(["docker", "logs", "--tail", "5", DIRECTORY_CONTAINER], check=False)
            return (result.stdout + result.stderr).decode(errors="replace").strip()

        wait_until("the directory (slapd)", answers, timeout_s=timeout_s, last_error=logs)

    def inventory_vars(self, lookup: Callable[[str], str]) -> dict[str, Any]:
        """The opensearch group's variables: the directory, and a role per group."""
        return {
            "opensearch_ldap_enabled": True,
            "opensearch_ldap_hosts": [f"{DIRECTORY_ADDRESS}:{LDAPS_PORT}"],
            "opensearch_ldap_tls": "ldaps",
            "opensearch_ldap_ca_path": str(self.pki_dir / CA_CERT_FILE),
            "opensearch_ldap_bind_dn": BIND_DN,
            "opensearch_ldap_bind_password": lookup(BIND_SECRET),
            "opensearch_ldap_userbase": PEOPLE_BASE,
            "opensearch_ldap_rolebase": GROUP_BASE,
            **lab_roles(),
        }

    def facts(self) -> dict[str, Any]:
        """lab.json's ``ldap``."""
        return {
            "url": self.url,
            "container": DIRECTORY_CONTAINER,
            # For the checks that the password appears nowhere (tests/cluster/test_ldap_logins.py).
            "bind_password_file": str(self.secret_file(BIND_SECRET)),
            "people": {
                name: {
                    "password_file": str(self.secret_file(person_secret(name))),
                    "groups": list(groups),
                }
                for name, groups in LAB_PEOPLE.items()
            },
        }


def lab_roles() -> Mapping[str, Any]:
    """A role per group: each reads and writes its own indices (``team-a-*``), nothing else."""
    groups = sorted({group for groups in LAB_PEOPLE.values() for group in groups})
    return {
        "opensearch_security_roles": {
            f"lab_{group.replace('-', '_')}": {
                "cluster_permissions": ["cluster_composite_ops"],
                "index_permissions": [
                    {"index_patterns": [f"{group}-*"], "allowed_actions": ["crud", "create_index"]}
                ],
            }
            for group in groups
        },
        "opensearch_security_role_mappings": {
            f"lab_{group.replace('-', '_')}": {"backend_roles": [group]} for group in groups
        },
    }


def remove_directory() -> None:
    run(["docker", "rm", "-f", DIRECTORY_CONTAINER], check=False)
