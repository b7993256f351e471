"""Rotating the CA in three steps (trust, reissue, finish), the CA bundle nodes and
clients trust, and retiring the certificates of nodes that left (docs/certificates.md).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Collection, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from clusterforge.pki.authority import create_ca, load_ca, load_or_create_ca
from clusterforge.pki.certificates import (
    CA_CERT_FILE,
    CA_PASSPHRASE_ENV,
    DEFAULT_CA_VALIDITY_DAYS,
    PkiError,
    SubjectFields,
    extended_key_usages,
    issued_by,
    load_certificate,
    subject_dn,
    utcnow,
    write_file_atomically,
)

CA_BUNDLE_FILE = "ca-bundle.pem"


CA_NEXT_CERT_FILE = "ca-next.pem"


CA_NEXT_KEY_FILE = "ca-next-key.pem"


CA_PREVIOUS_CERT_FILE = "ca-previous.pem"


CA_PREVIOUS_KEY_FILE = "ca-previous-key.pem"


CA_ROTATION_STATE_FILE = "ca-rotation.json"


CA_RETIRED_DIR = "retired"


CA_ROTATION_STEPS = ("trust", "reissue", "finish")


CA_ROTATION_VARIABLE = "clusterforge_ca_rotation_step"


# Which step must have run last before each step may run (a step may also be rerun).
_STEP_AFTER = {"trust": ("idle", "finished"), "reissue": ("trust",), "finish": ("reissue",)}


_STEP_DONE = {"trust": "trust", "reissue": "reissue", "finish": "finished"}


class CaRotationOrderError(PkiError):
    """A CA rotation step was asked for out of order; the message names the step to run."""


def ca_rotation_state(directory: Path) -> str:
    """The last CA rotation step that ran in ``directory``: idle (never rotated), trust,
    reissue or finished."""
    path = directory / CA_ROTATION_STATE_FILE
    if not path.exists():
        return "idle"
    try:
        state = json.loads(path.read_text(encoding="utf-8")).get("step", "idle")
    except (OSError, ValueError, AttributeError) as error:
        raise PkiError(
            f"cannot read the CA rotation state {path}; restore it, or remove it if no "
            "rotation is under way"
        ) from error
    if state not in ("idle", "trust", "reissue", "finished"):
        raise PkiError(f"{path} names an unknown step {state!r}; restore the file")
    return str(state)


def _write_rotation_state(directory: Path, step: str) -> None:
    document = {"step": step, "at": utcnow().isoformat(timespec="seconds")}
    write_file_atomically(
        directory / CA_ROTATION_STATE_FILE,
        (json.dumps(document) + "\n").encode("utf-8"),
        mode=0o644,
    )


def ca_bundle_certificates(directory: Path) -> list[x509.Certificate]:
    """The CAs the nodes must trust in the current state, the issuing CA first."""
    state = ca_rotation_state(directory)
    certificates = [load_certificate(directory / CA_CERT_FILE)]
    if state == "trust":
        certificates.append(load_certificate(directory / CA_NEXT_CERT_FILE))
    elif state == "reissue":
        certificates.append(load_certificate(directory / CA_PREVIOUS_CERT_FILE))
    return certificates


def write_ca_bundle(directory: Path, *, ca_cert_path: Path | None = None) -> Path:
    """Write ``ca-bundle.pem`` from the rotation state; rewritten only when it differs.

    ``ca_cert_path`` is a user's own CA (no rotation then): the bundle is that CA alone.
    """
    if ca_cert_path is not None:
        certificates = [load_certificate(ca_cert_path)]
    else:
        certificates = ca_bundle_certificates(directory)
    data = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in certificates)
    path = directory / CA_BUNDLE_FILE
    if not path.exists() or path.read_bytes() != data:
        write_file_atomically(path, data, mode=0o644)
    return path


def rotate_ca(
    directory: Path,
    step: str,
    *,
    passphrase: bytes | None,
    subject: SubjectFields,
    validity_days: int = DEFAULT_CA_VALIDITY_DAYS,
    leaves_signed_by_previous: Sequence[str] = (),
) -> str:
    """Run one CA rotation step in ``directory`` (the control node's PKI directory).

    Returns what it did, one line. A step repeated right after itself changes nothing
    (a rerun after a failed playbook is safe); any other order raises
    :class:`CaRotationOrderError`. ``leaves_signed_by_previous`` names the certificates
    still signed by the old CA: ``finish`` refuses while there are any.
    """
    if step not in CA_ROTATION_STEPS:
        raise CaRotationOrderError(
            f"{CA_ROTATION_VARIABLE}={step!r} is not a step; give one of "
            f"{', '.join(CA_ROTATION_STEPS)}, in that order"
        )
    if not passphrase:
        raise PkiError(
            f"the CA key passphrase is empty; set {CA_PASSPHRASE_ENV} (or the vaulted "
            "variable the role reads) before rotating the CA"
        )
    state = ca_rotation_state(directory)
    if state == _STEP_DONE[step]:
        return f"{step}: already done, nothing to change"
    if state not in _STEP_AFTER[step]:
        raise CaRotationOrderError(_order_message(step, state))
    current = load_or_create_ca(directory, passphrase=passphrase, subject=subject)
    if step == "trust":
        create_ca(
            directory,
            passphrase=passphrase,
            subject=subject,
            validity_days=validity_days,
            cert_name=CA_NEXT_CERT_FILE,
            key_name=CA_NEXT_KEY_FILE,
        )
        _write_rotation_state(directory, "trust")
        write_ca_bundle(directory)
        new_dn = subject_dn(directory / CA_NEXT_CERT_FILE)
        return f"trust: new CA {new_dn} created beside the current one"
    if step == "reissue":
        following = load_ca(
            directory / CA_NEXT_CERT_FILE,
            directory / CA_NEXT_KEY_FILE,
            passphrase=passphrase,
            user_supplied=False,
        )
        # Keep the old CA first, then swap: a run stopped in between still has every file.
        write_file_atomically(
            directory / CA_PREVIOUS_KEY_FILE, current.key_path.read_bytes(), mode=0o600
        )
        write_file_atomically(
            directory / CA_PREVIOUS_CERT_FILE, current.cert_path.read_bytes(), mode=0o644
        )
        os.replace(following.key_path, current.key_path)
        os.replace(following.cert_path, current.cert_path)
        _write_rotation_state(directory, "reissue")
        write_ca_bundle(directory)
        return f"reissue: {following.subject_dn} is now the issuing CA"
    # finish
    if leaves_signed_by_previous:
        raise CaRotationOrderError(
            f"{CA_ROTATION_VARIABLE}=finish: {', '.join(leaves_signed_by_previous)} still "
            "signed by the old CA; rerun playbooks/rotate_ca.yml with "
            f"{CA_ROTATION_VARIABLE}=reissue first"
        )
    previous = load_certificate(directory / CA_PREVIOUS_CERT_FILE)
    retired = directory / CA_RETIRED_DIR
    retired.mkdir(mode=0o700, exist_ok=True)
    write_file_atomically(
        retired / f"ca-{previous.serial_number:x}.pem",
        previous.public_bytes(serialization.Encoding.PEM),
        mode=0o644,
    )
    (directory / CA_PREVIOUS_KEY_FILE).unlink(missing_ok=True)
    (directory / CA_PREVIOUS_CERT_FILE).unlink(missing_ok=True)
    _write_rotation_state(directory, "finished")
    write_ca_bundle(directory)
    return f"finish: old CA {previous.subject.rfc4514_string()} retired; its key is deleted"


def retire_node_certificates(
    directory: Path,
    *,
    keep: Collection[str],
    issuers: Sequence[x509.Certificate] = (),
    now: dt.datetime | None = None,
) -> list[str]:
    """Retire the node certificates in ``directory`` of every name not in ``keep``.

    A node certificate is a ``<name>.pem`` with serverAuth (the CA has no extended key
    usage, the admin certificate clientAuth only) issued by one of ``issuers`` (a user's
    own CA) or a CA of this directory (current, previous, next, or retired by an earlier
    rotation); its key is ``<name>-key.pem``. Anything else is left alone.
    The key is **deleted**: ``plugins.security.nodes_dn`` is a pattern that admits any
    node name with this cluster's subject fields, so the key of a node that left would
    still let its holder join the transport layer as a node until the certificate
    expires. The certificate, which holds no secret, moves to
    ``retired/<name>-<UTC time>.pem`` (0700 directory) so its serial stays on record.
    A node that comes back later simply gets a new key and certificate.

    Returns the retired names, sorted.
    """
    own_cas = [
        directory / name for name in (CA_CERT_FILE, CA_PREVIOUS_CERT_FILE, CA_NEXT_CERT_FILE)
    ]
    own_cas += sorted((directory / CA_RETIRED_DIR).glob("ca-*.pem"))
    issuers = [*issuers, *(load_certificate(path) for path in own_cas if path.is_file())]
    if not issuers:
        return []
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%SZ")
    retired: list[str] = []
    for key_path in sorted(directory.glob("*-key.pem")):
        name = key_path.name.removesuffix("-key.pem")
        cert_path = directory / f"{name}.pem"
        if name in keep or not cert_path.is_file() or not _is_node_certificate(cert_path, issuers):
            continue
        retired_dir = directory / CA_RETIRED_DIR
        retired_dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(retired_dir, 0o700)
        # The key goes first: a run stopped in between leaves a certificate without its
        # key, which the next run issues again if the node returns, and nothing secret.
        key_path.unlink()
        os.replace(cert_path, retired_dir / f"{name}-{stamp}.pem")
        retired.append(name)
    return retired


def _is_node_certificate(path: Path, issuers: Sequence[x509.Certificate]) -> bool:
    try:
        certificate = load_certificate(path)
    except PkiError:
        return False
    return ExtendedKeyUsageOID.SERVER_AUTH in extended_key_usages(certificate) and any(
        issued_by(certificate, issuer) for issuer in issuers
    )


def _order_message(step: str, state: str) -> str:
    last = {"idle": "none", "finished": "finish", "trust": "trust", "reissue": "reissue"}[state]
    following = {"idle": "trust", "finished": "trust", "trust": "reissue", "reissue": "finish"}[
        state
    ]
    return (
        f"{CA_ROTATION_VARIABLE}={step} cannot run now: the last step was {last}. The steps "
        f"run in the order trust, reissue, finish; run playbooks/rotate_ca.yml with "
        f"-e {CA_ROTATION_VARIABLE}={following} next"
    )
