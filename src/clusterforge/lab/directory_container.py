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

import argparse
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.addresses import is_loopback_host
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
from clusterforge.pki.certificates import CA_PASSPHRASE_ENV
from clusterforge.pki.generated_secrets import read_or_generate, url_safe
from clusterforge.pki.pki import (
    CA_CERT_FILE,
    SubjectFields,
    ensure_server_certificate,
    load_or_create_ca,
)
from clusterforge.plan.cluster.cluster_pki import CA_COMMON_NAME_SUFFIX
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
    """The directory of one lab: files under ``lab_dir/.directory``, secrets beside the lab's.

    ``address``, ``container`` and ``host`` default to the lab's; the tls molecule
    scenario gives its own (``python -m clusterforge.lab.directory_container``), so that
    it never meets a lab's directory nor another scenario's addresses."""

    lab_dir: Path
    secret_file: Callable[[str], Path]
    pki_dir: Path
    address: str = DIRECTORY_ADDRESS
    container: str = DIRECTORY_CONTAINER
    host: str = DIRECTORY_HOST

    @property
    def root(self) -> Path:
        # Hidden: Ansible reads every other file of an inventory directory as inventory.
        return self.lab_dir / ".directory"

    @property
    def url(self) -> str:
        return f"ldaps://{self.address}:{LDAPS_PORT}"

    def _secrets(self) -> dict[str, str]:
        names = [BIND_SECRET, *(person_secret(name) for name in LAB_PEOPLE)]
        return {
            name: read_or_generate(self.secret_file(name), generate=url_safe(18)) for name in names
        }

    def _certificate(self, cluster_name: str, passphrase: bytes) -> None:
        defaults = dict(load_schema().default_of("opensearch_cert_subject"))
        # The CA the plan makes (clusterforge.plan.cluster.cluster_pki), made here first when the
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
            subject=SubjectFields(common_name=self.host, **subject),
            alt_names=[self.address, self.host],
        )
        tls = self.root / "tls"
        tls.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(issued.cert_path, tls / "directory.pem")
        shutil.copyfile(issued.key_path, tls / "directory-key.pem")
        (tls / "directory-key.pem").chmod(0o600)
        shutil.copyfile(self.pki_dir / CA_CERT_FILE, tls / "ca.pem")

    def _running(self) -> bool:
        state = run(["docker", "inspect", "-f", "{{.State.Running}}", self.container], check=False)
        return state.returncode == 0 and state.stdout.decode().strip() == "true"

    def ensure(
        self, *, base_image: str, network: str, cluster_name: str, passphrase: bytes
    ) -> None:
        """The directory serving on its address (loopback network only), its tree loaded."""
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
        run(["docker", "rm", "-f", self.container], check=False)
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
        urls = f"ldaps://{self.address}:{LDAPS_PORT}/ ldap://{self.address}:{STARTTLS_PORT}/"
        say(f"starting the directory {self.container} ({self.url})")
        run(
            [
                "docker", "run", "-d", "--name", self.container,
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
                socket.create_connection((self.address, LDAPS_PORT), timeout=1).close()
            except OSError:
                return False
            return True

        def logs() -> str:
            result = run(["docker", "logs", "--tail", "5", self.container], check=False)
            return (result.stdout + result.stderr).decode(errors="replace").strip()

        wait_until("the directory (slapd)", answers, timeout_s=timeout_s, last_error=logs)

    def inventory_vars(self, lookup: Callable[[str], str]) -> dict[str, Any]:
        """The opensearch group's variables: the directory, and a role per group."""
        return {
            "opensearch_ldap_enabled": True,
            "opensearch_ldap_hosts": [f"{self.address}:{LDAPS_PORT}"],
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
            "container": self.container,
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


def remove_directory(container: str = DIRECTORY_CONTAINER) -> None:
    run(["docker", "rm", "-f", container], check=False)


FACTS_FILE = "directory.json"


def main(argv: Sequence[str] | None = None) -> int:
    """A directory for a test scenario (molecule/tls), outside any lab: a test tool.

        python -m clusterforge.lab.directory_container --dir D --pki-dir P \\
            --cluster-name N --address 127.0.0.35 --container cf-tls-directory
        python -m clusterforge.lab.directory_container --container cf-tls-directory --remove

    Starts (or keeps) the container as ``scripts/up --ldap`` does, with its certificate
    from the CA in ``--pki-dir`` (made first when missing; the passphrase is read from
    the environment variable CLUSTERFORGE_CA_PASSPHRASE, never from the command line),
    the passwords in ``D/secrets`` (0600) and lab.json's ``ldap`` object in
    ``D/directory.json``. The scenario's inventory reads the bind password from
    ``D/secrets/ldap_bind``."""
    parser = argparse.ArgumentParser(prog="python -m clusterforge.lab.directory_container")
    parser.add_argument("--container", required=True, help="the container's name")
    parser.add_argument("--remove", action="store_true", help="remove the container, then stop")
    parser.add_argument("--dir", type=Path, help="where its files and secrets go")
    parser.add_argument("--pki-dir", type=Path, help="the cluster's CA directory")
    parser.add_argument("--cluster-name", help="the cluster's name (the CA's common name)")
    parser.add_argument("--address", help="a loopback address of its own (LDAPS on 636)")
    parser.add_argument("--host", default="directory", help="its host name (certificate)")
    parser.add_argument("--base-image", default="clusterforge-lab:current")
    args = parser.parse_args(argv)
    if args.remove:
        remove_directory(args.container)
        return 0
    missing = [
        flag
        for flag, value in (
            ("--dir", args.dir),
            ("--pki-dir", args.pki_dir),
            ("--cluster-name", args.cluster_name),
            ("--address", args.address),
        )
        if not value
    ]
    if missing:
        parser.error(f"{', '.join(missing)} needed to start a directory")
    if not is_loopback_host(args.address):
        parser.error(f"--address {args.address} is not a loopback address")
    passphrase = os.environ.get(CA_PASSPHRASE_ENV, "")
    if not passphrase:
        parser.error(f"set {CA_PASSPHRASE_ENV} to the cluster's CA passphrase")
    root = args.dir.resolve()
    directory = LabDirectory(
        lab_dir=root,
        secret_file=lambda name: root / "secrets" / name,
        pki_dir=args.pki_dir.resolve(),
        address=args.address,
        container=args.container,
        host=args.host,
    )
    try:
        directory.ensure(
            base_image=args.base_image,
            network="loopback",
            cluster_name=args.cluster_name,
            passphrase=passphrase.encode(),
        )
    except LabError as error:
        print(error, file=sys.stderr)
        return 1
    facts = root / FACTS_FILE
    facts.write_text(json.dumps(directory.facts(), indent=2) + "\n")
    facts.chmod(0o600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
