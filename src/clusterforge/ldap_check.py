"""Bind to the directory as the nodes will, and say which variable to fix when it fails.

The security plugin reports a directory it cannot use only in the nodes' logs, login by
login. After a deploy, ``playbooks/site.yml`` runs this from the control node against
every host of ``opensearch_ldap_hosts`` (LDAPS or StartTLS, the CA of
``opensearch_ldap_ca_path``, hostname checked as the plugin does) and stops the run on
an unreachable directory, an untrusted certificate or a refused bind, each message
naming the variable. The password comes on standard input, never in the arguments::

    python -m clusterforge.ldap_check --host ldap.example.internal:636 --tls ldaps \
        --ca ca.pem --bind-dn cn=opensearch,ou=services,dc=example < password-file

It speaks just enough LDAPv3 (RFC 4511: a simple bind, StartTLS, unbind) to need no
client library on the control node.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from clusterforge.errors import ClusterforgeError

__all__ = ["DirectoryCheckError", "DirectoryHost", "check_bind", "main"]

_STARTTLS_OID = b"1.3.6.1.4.1.1466.20037"
_RESULT_NAMES = {
    0: "success",
    2: "protocolError",
    32: "noSuchObject",
    34: "invalidDNSyntax",
    48: "inappropriateAuthentication",
    49: "invalidCredentials",
    50: "insufficientAccessRights",
    51: "busy",
    52: "unavailable",
    53: "unwillingToPerform",
}


class DirectoryCheckError(ClusterforgeError):
    """The directory cannot be used as configured; the message names the variable."""


@dataclass(frozen=True)
class DirectoryHost:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> DirectoryHost:
        host, _separator, port = text.rpartition(":")
        return cls(host.strip("[]"), int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def _length(size: int) -> bytes:
    if size < 0x80:
        return bytes([size])
    body = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _tlv(tag: int, value: bytes) -> bytes:
    return bytes([tag]) + _length(len(value)) + value


def _integer(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big", signed=True))


def _message(message_id: int, operation: bytes) -> bytes:
    return _tlv(0x30, _integer(message_id) + operation)


def _bind_request(message_id: int, bind_dn: str, password: str) -> bytes:
    body = _integer(3) + _tlv(0x04, bind_dn.encode()) + _tlv(0x80, password.encode())
    return _message(message_id, _tlv(0x60, body))


def _read_exact(sock: socket.socket | ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the directory closed the connection")
        data += chunk
    return data


def _read_tlv(sock: socket.socket | ssl.SSLSocket) -> tuple[int, bytes]:
    tag, first = _read_exact(sock, 2)
    size = first
    if first & 0x80:
        size = int.from_bytes(_read_exact(sock, first & 0x7F), "big")
    return tag, _read_exact(sock, size)


def _split(data: bytes) -> list[tuple[int, bytes]]:
    items = []
    offset = 0
    while offset < len(data):
        tag, size = data[offset], data[offset + 1]
        offset += 2
        if size & 0x80:
            count = size & 0x7F
            size = int.from_bytes(data[offset : offset + count], "big")
            offset += count
        items.append((tag, data[offset : offset + size]))
        offset += size
    return items


def _result(sock: socket.socket | ssl.SSLSocket, expected_tag: int) -> tuple[int, str]:
    """The result code and diagnostic message of the response to our one request."""
    tag, body = _read_tlv(sock)
    if tag != 0x30:
        raise ConnectionError("the directory answered something that is not LDAP")
    _message_id, (operation_tag, operation) = _split(body)[:2]
    if operation_tag != expected_tag:
        raise ConnectionError("the directory answered another operation")
    parts = _split(operation)
    code = int.from_bytes(parts[0][1], "big")
    diagnostic = parts[2][1].decode(errors="replace") if len(parts) > 2 else ""
    return code, diagnostic


def _describe(code: int, diagnostic: str) -> str:
    name = _RESULT_NAMES.get(code, "error")
    return f"{name} ({code}){': ' + diagnostic if diagnostic else ''}"


def check_bind(
    host: DirectoryHost,
    *,
    tls: str,
    ca_pem: str,
    bind_dn: str,
    password: str,
    timeout: float = 5.0,
) -> None:
    """Bind as ``bind_dn``; raise :class:`DirectoryCheckError` naming what to fix."""
    context = ssl.create_default_context(cadata=ca_pem)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    where = f"opensearch_ldap_hosts entry {host}"
    try:
        raw = socket.create_connection((host.host, host.port), timeout=timeout)
    except OSError as error:
        raise DirectoryCheckError(
            f"{where} does not answer ({error.strerror or error}); check the host and port "
            "and that the nodes and this control node may reach it"
        ) from error
    with raw:
        try:
            if tls == "starttls":
                raw.sendall(_message(1, _tlv(0x77, _tlv(0x80, _STARTTLS_OID))))
                code, diagnostic = _result(raw, 0x78)
                if code != 0:
                    raise DirectoryCheckError(
                        f"{where} refused StartTLS: {_describe(code, diagnostic)}; set "
                        "opensearch_ldap_tls: ldaps with its LDAPS port, or enable StartTLS there"
                    )
            sock = context.wrap_socket(raw, server_hostname=host.host)
        except ssl.SSLCertVerificationError as error:
            raise DirectoryCheckError(
                f"{where}: its certificate is not trusted ({error.verify_message}); set "
                "opensearch_ldap_ca_path to the CA that issued it, and list the host by a "
                "name its certificate carries"
            ) from error
        except (ssl.SSLError, OSError) as error:
            raise DirectoryCheckError(
                f"{where}: no TLS session ({error}); is opensearch_ldap_tls "
                f"({tls}) what that port speaks? LDAPS is usually 636, StartTLS 389"
            ) from error
        with sock:
            try:
                sock.sendall(_bind_request(2, bind_dn, password))
                code, diagnostic = _result(sock, 0x61)
                sock.sendall(_tlv(0x30, _integer(3) + bytes([0x42, 0x00])))  # unbind
            except (OSError, ValueError) as error:
                raise DirectoryCheckError(f"{where}: the bind failed ({error})") from error
    if code == 49:
        raise DirectoryCheckError(
            f"{where} refused the bind as opensearch_ldap_bind_dn {bind_dn!r}: "
            f"{_describe(code, diagnostic)}; set opensearch_ldap_bind_password to that "
            "account's password (or opensearch_ldap_bind_dn to the right account)"
        )
    if code != 0:
        raise DirectoryCheckError(
            f"{where} refused the bind as opensearch_ldap_bind_dn {bind_dn!r}: "
            f"{_describe(code, diagnostic)}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", action="append", required=True, help="host:port, repeatable")
    parser.add_argument("--tls", choices=("ldaps", "starttls"), required=True)
    parser.add_argument("--ca", required=True, help="the directory's CA certificate (PEM)")
    parser.add_argument("--bind-dn", required=True)
    args = parser.parse_args(argv)
    password = sys.stdin.read().rstrip("\n")
    with open(args.ca, encoding="ascii") as handle:
        ca_pem = handle.read()
    failures = []
    for text in args.host:
        try:
            check_bind(
                DirectoryHost.parse(text),
                tls=args.tls,
                ca_pem=ca_pem,
                bind_dn=args.bind_dn,
                password=password,
            )
            print(f"ok {text}: bound as {args.bind_dn}")
        except DirectoryCheckError as error:
            failures.append(str(error))
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
