"""``scripts/certs`` (``python -m clusterforge.pki.pki``): the cluster's PKI from the command line.

The PKI itself is split by concern: :mod:`clusterforge.pki.certificates` (subjects,
reading certificates, files), :mod:`clusterforge.pki.authority` (the CA),
:mod:`clusterforge.pki.issuing` (node, admin and server certificates) and
:mod:`clusterforge.pki.ca_rotation` (the CA's rotation, its bundle, retired nodes).
Everything runs on the control node; the roles copy the results to the hosts (never the
CA key) and set ownership. The CA passphrase is read from ``CLUSTERFORGE_CA_PASSPHRASE``
(:func:`clusterforge.pki.certificates.ca_passphrase_from_environment`), never from argv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

# The public API, importable from here as before the split (scripts and other branches
# name clusterforge.pki.pki); new code imports from the module of its concern.
from clusterforge.pki.authority import load_or_create_ca
from clusterforge.pki.ca_rotation import (
    CA_BUNDLE_FILE,
    CA_NEXT_CERT_FILE,
    CA_NEXT_KEY_FILE,
    CA_PREVIOUS_CERT_FILE,
    CA_PREVIOUS_KEY_FILE,
    CA_RETIRED_DIR,
    CA_ROTATION_STATE_FILE,
    CA_ROTATION_STEPS,
    CA_ROTATION_VARIABLE,
    CaRotationOrderError,
    ca_bundle_certificates,
    ca_rotation_state,
    retire_node_certificates,
    rotate_ca,
    write_ca_bundle,
)
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CA_PASSPHRASE_ENV,
    DEFAULT_CA_VALIDITY_DAYS,
    DEFAULT_LEAF_VALIDITY_DAYS,
    DEFAULT_RENEW_WITHIN_DAYS,
    SUBJECT_DEFAULTS,
    CertificateAuthority,
    CertificateExpiry,
    IssuedCertificate,
    PkiError,
    SubjectFields,
    ca_passphrase_from_environment,
    certificate_expiry,
    issued_by,
    load_certificate,
    split_alt_names,
    subject_dn,
    write_file_atomically,
)
from clusterforge.pki.issuing import (
    ensure_admin_certificate,
    ensure_node_certificate,
    ensure_server_certificate,
)

__all__ = [
    "CA_BUNDLE_FILE",
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CA_NEXT_CERT_FILE",
    "CA_NEXT_KEY_FILE",
    "CA_PASSPHRASE_ENV",
    "CA_PREVIOUS_CERT_FILE",
    "CA_PREVIOUS_KEY_FILE",
    "CA_RETIRED_DIR",
    "CA_ROTATION_STATE_FILE",
    "CA_ROTATION_STEPS",
    "CA_ROTATION_VARIABLE",
    "DEFAULT_CA_VALIDITY_DAYS",
    "DEFAULT_LEAF_VALIDITY_DAYS",
    "DEFAULT_RENEW_WITHIN_DAYS",
    "SUBJECT_DEFAULTS",
    "CaRotationOrderError",
    "CertificateAuthority",
    "CertificateExpiry",
    "IssuedCertificate",
    "PkiError",
    "SubjectFields",
    "ca_bundle_certificates",
    "ca_passphrase_from_environment",
    "ca_rotation_state",
    "certificate_expiry",
    "ensure_admin_certificate",
    "ensure_node_certificate",
    "ensure_server_certificate",
    "issued_by",
    "load_certificate",
    "load_or_create_ca",
    "main",
    "retire_node_certificates",
    "rotate_ca",
    "split_alt_names",
    "subject_dn",
    "write_ca_bundle",
    "write_file_atomically",
]


def _parse_node(spec: str) -> tuple[str, list[str]]:
    name, _separator, alt_names = spec.partition(":")
    entries = [entry.strip() for entry in alt_names.split(",") if entry.strip()]
    return name.strip(), [name.strip(), *entries]


def main(argv: Sequence[str] | None = None) -> int:
    """Issue (or reuse) the CA, node certificates and the admin certificate into ``--out``."""
    parser = argparse.ArgumentParser(
        prog="certs",
        description=(
            "Create or reuse a CA and issue node and admin certificates for the cluster. "
            f"The CA key passphrase is read from ${CA_PASSPHRASE_ENV}, never from the "
            "command line. Reruns change nothing unless a subject or SAN changed, the CA "
            "changed, or a certificate is close to expiry."
        ),
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for all files")
    parser.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="NAME[:SAN,...]",
        help="a node: its name (CN and first SAN) and more host names or IP addresses",
    )
    parser.add_argument("--admin-cn", default="admin", help="CN of the admin certificate")
    parser.add_argument("--ca-cn", default="clusterforge root CA", help="CN of a new CA")
    parser.add_argument("--ca-cert", type=Path, help="use your own CA certificate")
    parser.add_argument("--ca-key", type=Path, help="the key of --ca-cert")
    for subject_field, default in SUBJECT_DEFAULTS.items():
        parser.add_argument(f"--{subject_field.replace('_', '-')}", default=default)
    parser.add_argument(
        "--renew-within-days", type=int, default=DEFAULT_RENEW_WITHIN_DAYS, metavar="DAYS"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)

    def fields(common_name: str) -> SubjectFields:
        return SubjectFields(
            common_name=common_name,
            organizational_unit=args.organizational_unit,
            organization=args.organization,
            locality=args.locality,
            state=args.state,
            country=args.country,
        )

    try:
        user_ca = args.ca_cert is not None or args.ca_key is not None
        # A user's CA key may be unencrypted; only then may the passphrase be absent.
        passphrase = (
            (os.environ.get(CA_PASSPHRASE_ENV, "").encode("utf-8") or None)
            if user_ca
            else ca_passphrase_from_environment()
        )
        nodes = [_parse_node(spec) for spec in args.node]
        names = [name for name, _address in nodes]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        admin_file = _file_name_for(args.admin_cn)
        if duplicates or admin_file in names:
            raise PkiError(
                f"node names must be unique and differ from the admin certificate's file "
                f"name {admin_file!r}; rename {duplicates or [admin_file]}"
            )
        args.out.mkdir(mode=0o700, parents=True, exist_ok=True)
        ca = load_or_create_ca(
            args.out,
            passphrase=passphrase,
            subject=fields(args.ca_cn),
            user_ca_cert=args.ca_cert,
            user_ca_key=args.ca_key,
        )
        issued: dict[str, IssuedCertificate] = {}
        for name, alt_names in nodes:
            dns_names, ip_addresses = split_alt_names(alt_names)
            issued[name] = ensure_node_certificate(
                ca,
                directory=args.out,
                name=name,
                subject=fields(name),
                dns_names=dns_names,
                ip_addresses=ip_addresses,
                renew_within_days=args.renew_within_days,
            )
        admin = ensure_admin_certificate(
            ca,
            directory=args.out,
            subject=fields(args.admin_cn),
            name=admin_file,
            renew_within_days=args.renew_within_days,
        )
    except PkiError as error:
        print(f"certs: {error}", file=sys.stderr)
        return 2
    _print_summary(ca, issued, admin, as_json=args.json)
    return 0


def _file_name_for(common_name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", common_name).strip("-.")
    return cleaned or "admin"


def _print_summary(
    ca: CertificateAuthority,
    issued: dict[str, IssuedCertificate],
    admin: IssuedCertificate,
    *,
    as_json: bool,
) -> None:
    def entry(result: IssuedCertificate) -> dict[str, object]:
        return {
            "changed": result.changed,
            "cert": str(result.cert_path),
            "key": str(result.key_path),
            "subject_dn": result.subject_dn,
            "not_valid_after": result.not_valid_after.isoformat(),
            "reasons": list(result.reasons),
        }

    if as_json:
        document = {
            "ca": {
                "changed": ca.changed,
                "cert": str(ca.cert_path),
                "subject_dn": ca.subject_dn,
                "not_valid_after": ca.certificate.not_valid_after_utc.isoformat(),
            },
            "nodes": {name: entry(result) for name, result in issued.items()},
            "admin": entry(admin),
            "nodes_dn": [result.subject_dn for result in issued.values()],
            "admin_dn": [admin.subject_dn],
        }
        print(json.dumps(document, indent=2))
        return
    status = "created" if ca.changed else "reused"
    print(f"CA      {status:8} {ca.cert_path}  {ca.subject_dn}")
    for name, result in [*issued.items(), ("admin", admin)]:
        status = "issued" if result.changed else "reused"
        why = f"  ({'; '.join(result.reasons)})" if result.reasons else ""
        print(f"{name:7} {status:8} {result.cert_path}  {result.subject_dn}{why}")
    print("plugins.security.nodes_dn:")
    for result in issued.values():
        print(f"  - {json.dumps(result.subject_dn)}")
    print("plugins.security.authcz.admin_dn:")
    print(f"  - {json.dumps(admin.subject_dn)}")


if __name__ == "__main__":
    raise SystemExit(main())
