"""Which bind addresses keep a port on this machine."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps the port on this machine (127.0.0.0/8, ::1, localhost).

    A wildcard (0.0.0.0, ::, empty) or any other address or name reaches the network.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
