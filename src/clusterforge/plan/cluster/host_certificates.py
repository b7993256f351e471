"""Server certificates for the hosts beside the cluster: the services' TLS proxy, PostgreSQL.

The cluster's CA (:mod:`clusterforge.plan.cluster.cluster_pki`) issues them too, so one CA bundle
lets every client verify every endpoint the toolkit serves. They differ from node
certificates on purpose:

- serverAuth only, and an OU of their own (``<OU> <purpose>``): ``plugins.security.nodes_dn``
  is a pattern over the nodes' subject fields, and a proxy's key must never pass as a node;
- they live in ``<pki dir>/hosts/``, out of reach of the nodes' retirement
  (:func:`clusterforge.pki.ca_rotation.retire_node_certificates` reads the top directory only).

A user who brings a certificate of their own for a host (a public CA's for a public name,
or their own CA's) gives its chain and key files; they are checked (the key matches, the
certificate is current and names the host) and used as they are, never renewed here.

Issuing runs in an action once per host, in parallel with the other hosts, so every read
and write of the PKI directory holds its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.ca_rotation import write_ca_bundle
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CertificateAuthority,
    PkiError,
    SubjectFields,
    certificate_expiry,
    split_alt_names,
)
from clusterforge.pki.issuing import ensure_server_certificate
from clusterforge.plan.cluster.artifacts import directory_lock
from clusterforge.plan.cluster.cluster_pki import (
    CA_COMMON_NAME_SUFFIX,
    ca_passphrase,
    resolve_pki_dir,
)
from clusterforge.plan.cluster.model import Cluster
from clusterforge.schema import load_schema

HOSTS_SUBDIR = "hosts"
CLUSTER_GROUP = "opensearch"
# What each kind of host certificate serves: its OU suffix and file-name suffix.
PURPOSES = {
    "tls_proxy": "services-proxy",
    "postgresql": "database",
    "monitoring": "monitoring",
    "node_exporter": "node-exporter",
}


@dataclass(frozen=True, kw_only=True)
class IssuingCa:
    """Where the CA is and how to open it: the cluster's, or (no OpenSearch group in the
    inventory) one made with the schema's defaults in the inventory's ``.pki``."""

    pki_dir: Path
    passphrase: bytes | None = field(repr=False)
    cluster_name: str
    cert_subject: Mapping[str, str]
    renew_within_days: int
    user_ca_cert: Path | None = None
    user_ca_key: Path | None = None


def issuing_ca_of_cluster(
    cluster: Cluster, *, pki_dir: Path, passphrase: bytes | None
) -> IssuingCa:
    security = cluster.security
    return IssuingCa(
        pki_dir=pki_dir,
        passphrase=passphrase,
        cluster_name=cluster.name,
        cert_subject=dict(security.cert_subject),
        renew_within_days=security.renew_within_days,
        user_ca_cert=Path(security.ca_cert_path) if security.ca_cert_path else None,
        user_ca_key=Path(security.ca_key_path) if security.ca_key_path else None,
    )


def issuing_ca_without_cluster(host_vars: Mapping[str, Any], *, inventory_dir: Path) -> IssuingCa:
    """An inventory with services but no cluster: the CA in ``<inventory dir>/.pki`` (or
    ``opensearch_pki_dir``), opened with ``opensearch_ca_passphrase`` or the environment."""
    schema = load_schema()

    def value(name: str) -> Any:
        given = host_vars.get(name)
        return schema.default_of(name) if given in (None, "") else given

    configured = str(value("opensearch_pki_dir") or "")
    return IssuingCa(
        pki_dir=Path(configured) if configured else inventory_dir / ".pki",
        passphrase=ca_passphrase(host_vars),
        cluster_name=str(value("opensearch_cluster_name")),
        cert_subject=dict(value("opensearch_cert_subject")),
        renew_within_days=int(value("opensearch_cert_renew_within_days")),
    )


@dataclass(frozen=True, kw_only=True)
class TaskCa:
    """What an action needs from the inventory to issue and serve a host certificate: the
    CA that issues, and the TLS protocols and suites (JDK names) endpoints offer."""

    ca: IssuingCa
    tls_protocols: tuple[str, ...]
    tls_ciphers: tuple[str, ...]


def issuing_ca_for_task(
    task_vars: Mapping[str, Any],
    template: Callable[[Any], Any],
    *,
    model: tuple[Cluster, Sequence[tuple[str, Mapping[str, Any]]]] | None = None,
) -> TaskCa:
    """The issuing CA and TLS profile as an action plugin's task sees the inventory.

    With an ``opensearch`` group, the cluster's: its CA (``opensearch_pki_dir`` or the
    inventory's ``.pki``, a user's own CA when given) and its ``opensearch_tls_*``. Without
    one, a CA of the inventory's own (:func:`issuing_ca_without_cluster`, from the task
    host's ``opensearch_*`` variables) and the schema's TLS defaults. ``template`` is the
    action's templar (values are templated only when read). ``model``: the cluster model
    and nodes' variables the caller built already from the same task (``build_model``),
    so they are not built twice.
    """
    # Imported here: clusterforge.plan.cluster.host_variables imports most of the planner, which
    # the module's other users do not need.
    from clusterforge.plan.cluster.host_variables import TaskHosts, build_model

    hosts = TaskHosts(task_vars, template)
    inventory_dir = Path(str(task_vars.get("inventory_dir") or Path.cwd()))
    if hosts.hosts(CLUSTER_GROUP):
        cluster, nodes_vars = model if model is not None else build_model(hosts, CLUSTER_GROUP)
        inventory_dir = hosts.directory([CLUSTER_GROUP], default=inventory_dir)
        return TaskCa(
            ca=issuing_ca_of_cluster(
                cluster,
                pki_dir=resolve_pki_dir(cluster, inventory_dir),
                passphrase=ca_passphrase(nodes_vars[0][1]),
            ),
            tls_protocols=tuple(cluster.tls_protocols),
            tls_ciphers=tuple(cluster.tls_ciphers),
        )
    schema = load_schema()
    own_vars = {
        name: template(value) for name, value in task_vars.items() if name.startswith("opensearch_")
    }
    return TaskCa(
        ca=issuing_ca_without_cluster(own_vars, inventory_dir=inventory_dir),
        tls_protocols=tuple(schema.default_of("opensearch_tls_protocols")),
        tls_ciphers=tuple(schema.default_of("opensearch_tls_ciphers")),
    )


def ca_bundle_pem(ca_source: IssuingCa) -> str:
    """The CA bundle clients trust (every CA of a rotation in progress), for a client host.

    Nothing is issued. An existing CA is not opened (no passphrase needed); a missing one
    is created, as the first certificate issued from it would.
    """
    with _pki_lock(ca_source.pki_dir):
        if ca_source.user_ca_cert is None and not (ca_source.pki_dir / CA_CERT_FILE).exists():
            load_or_create_ca(
                ca_source.pki_dir, passphrase=ca_source.passphrase, subject=_ca_subject(ca_source)
            )
        bundle = write_ca_bundle(ca_source.pki_dir, ca_cert_path=ca_source.user_ca_cert)
        return bundle.read_text()


@dataclass(frozen=True, kw_only=True)
class HostCertificate:
    """What one host is given: its certificate chain, its key, and the bundle clients trust."""

    host: str
    purpose: str
    certificate_pem: str
    key_pem: str = field(repr=False)
    ca_bundle_pem: str
    serial: str
    days_left: int
    changed: bool
    own: bool

    def public(self) -> dict[str, Any]:
        """Everything but the key (for results, previews and lab.json)."""
        return {
            "host": self.host,
            "purpose": self.purpose,
            "serial": self.serial,
            "days_left": self.days_left,
            "changed": self.changed,
            "own": self.own,
        }


def _ca_subject(ca_source: IssuingCa) -> SubjectFields:
    """The subject of a CA created here: the cluster's name, the inventory's subject fields."""
    return SubjectFields(
        common_name=f"{ca_source.cluster_name}{CA_COMMON_NAME_SUFFIX}",
        **dict(ca_source.cert_subject),
    )


@contextmanager
def _pki_lock(pki_dir: Path) -> Iterator[None]:
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with directory_lock(pki_dir):
        yield


def certificate_file_name(host: str, purpose: str) -> str:
    return f"{host}.{PURPOSES[purpose]}"


def ensure_host_certificate(
    ca_source: IssuingCa,
    *,
    host: str,
    purpose: str,
    alt_names: Sequence[str],
    renew: bool = False,
) -> HostCertificate:
    """Issue (or reuse) ``host``'s certificate for ``purpose`` under the cluster's CA.

    It is issued again when its names change, it nears its end
    (``opensearch_cert_renew_within_days``), the CA changed, or ``renew`` (rotate_certs.yml).
    """
    if purpose not in PURPOSES:
        raise PkiError(f"no host certificate purpose {purpose!r}; use one of {sorted(PURPOSES)}")
    with host_certificate_issuer(ca_source) as issuer:
        return issuer.issue(host=host, purpose=purpose, alt_names=alt_names, renew=renew)


@dataclass(frozen=True, kw_only=True)
class HostCertificateIssuer:
    """The CA, loaded once, issuing (or reusing) several hosts' certificates: unlocking
    the CA's encrypted key costs about 0.15 s here, once per load."""

    ca_source: IssuingCa
    ca: CertificateAuthority
    bundle_pem: str

    def issue(
        self, *, host: str, purpose: str, alt_names: Sequence[str], renew: bool = False
    ) -> HostCertificate:
        """:func:`ensure_host_certificate` under this issuer's CA."""
        if purpose not in PURPOSES:
            raise PkiError(
                f"no host certificate purpose {purpose!r}; use one of {sorted(PURPOSES)}"
            )
        fields = dict(self.ca_source.cert_subject)
        base_unit = str(fields.get("organizational_unit") or "clusterforge")
        issued = ensure_server_certificate(
            self.ca,
            directory=self.ca_source.pki_dir / HOSTS_SUBDIR,
            name=certificate_file_name(host, purpose),
            subject=SubjectFields(
                **{
                    **fields,
                    "common_name": host,
                    "organizational_unit": f"{base_unit} {PURPOSES[purpose]}",
                }
            ),
            alt_names=[host, *alt_names],
            renew_within_days=self.ca_source.renew_within_days,
            force=renew,
        )
        certificate_pem = issued.cert_path.read_text()
        key_pem = issued.key_path.read_text()
        certificate = x509.load_pem_x509_certificate(certificate_pem.encode())
        return HostCertificate(
            host=host,
            purpose=purpose,
            certificate_pem=certificate_pem,
            key_pem=key_pem,
            ca_bundle_pem=self.bundle_pem,
            serial=f"{certificate.serial_number:x}",
            days_left=certificate_expiry(certificate).days_left,
            changed=issued.changed,
            own=False,
        )


@contextmanager
def host_certificate_issuer(ca_source: IssuingCa) -> Iterator[HostCertificateIssuer]:
    """The CA loaded (or created) once, under the PKI directory's lock, for
    :meth:`HostCertificateIssuer.issue` calls inside the block."""
    with _pki_lock(ca_source.pki_dir):
        ca = load_or_create_ca(
            ca_source.pki_dir,
            passphrase=ca_source.passphrase,
            subject=_ca_subject(ca_source),
            user_ca_cert=ca_source.user_ca_cert,
            user_ca_key=ca_source.user_ca_key,
        )
        bundle = write_ca_bundle(ca_source.pki_dir, ca_cert_path=ca_source.user_ca_cert)
        yield HostCertificateIssuer(ca_source=ca_source, ca=ca, bundle_pem=bundle.read_text())


def own_host_certificate(
    *,
    host: str,
    purpose: str,
    cert_path: str,
    key_path: str,
    alt_names: Sequence[str],
    ca_bundle_pem: str,
    variable_prefix: str,
) -> HostCertificate:
    """A certificate the user gives for ``host`` (``<prefix>_cert_path`` and
    ``<prefix>_key_path`` on the control node): checked, then used as it is."""
    cert_variable, key_variable = f"{variable_prefix}_cert_path", f"{variable_prefix}_key_path"
    if not cert_path or not key_path:
        raise PkiError(
            f"{host}: give both {cert_variable} and {key_variable} (your certificate chain "
            "and its key, files on the control node), or neither to have the cluster's CA "
            "issue one"
        )
    try:
        chain_pem = Path(cert_path).read_text()
        key_pem = Path(key_path).read_text()
    except OSError as error:
        raise PkiError(
            f"{host}: cannot read {cert_variable} or {key_variable} ({error.strerror}: "
            f"{error.filename}); fix the path"
        ) from None
    try:
        chain = x509.load_pem_x509_certificates(chain_pem.encode())
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError):
        raise PkiError(
            f"{host}: {cert_variable} must hold PEM certificates (the host's first, then its "
            f"intermediates) and {key_variable} an unencrypted PEM key"
        ) from None
    leaf = chain[0]
    leaf_key = leaf.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    given_key = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if leaf_key != given_key:
        raise PkiError(
            f"{host}: the key in {key_variable} does not belong to the first certificate "
            f"of {cert_variable}; give the matching pair"
        )
    expiry = certificate_expiry(leaf)
    if expiry.days_left < 0:
        raise PkiError(f"{host}: the certificate in {cert_variable} has expired; renew it")
    try:
        named = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        named = x509.SubjectAlternativeName([])
    wanted_dns, wanted_ips = split_alt_names([host, *alt_names])
    covered = {str(name).lower() for name in named.get_values_for_type(x509.DNSName)} | {
        str(address) for address in named.get_values_for_type(x509.IPAddress)
    }
    if not covered & ({name.lower() for name in wanted_dns} | set(wanted_ips)):
        raise PkiError(
            f"{host}: the certificate in {cert_variable} names none of "
            f"{', '.join([*wanted_dns, *wanted_ips])} among its alternative names, so "
            "clients would refuse it; issue it for the name clients use"
        )
    return HostCertificate(
        host=host,
        purpose=purpose,
        certificate_pem=chain_pem,
        key_pem=key_pem,
        ca_bundle_pem=ca_bundle_pem,
        serial=f"{leaf.serial_number:x}",
        days_left=expiry.days_left,
        changed=False,
        own=True,
    )
