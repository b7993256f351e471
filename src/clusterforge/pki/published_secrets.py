"""Secrets anyone can read in this repository, refused before a deploy contacts a host.

``inventories/example`` ships an ansible-vault whose password is public
(``EXAMPLE-ONLY-vault-password.txt``), so its passwords, passphrase and token are public
too. A deploy that reuses any of them, or one of the security plugin's demo passwords
(:data:`clusterforge.pki.hashing.WELL_KNOWN_PASSWORDS`: admin, kibanaserver, logstash, ...),
runs with credentials an attacker can look up.

The example's values are kept here only as sha256 digests, so the package adds no
plaintext; ``tests/test_published_secrets.py`` decrypts the example vault with the
example's password and checks that every value in it is listed, so the list cannot fall
behind the vault.

:func:`published_secret_findings` walks every value the plan reads (nested lists and
mappings included) and names the variable of each one it finds. The deploy turns the
findings into errors (:func:`clusterforge.plan.validation.validate_inventory`); ``scripts/render``
shows them as warnings, so the example itself still renders for review.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterforge.pki.hashing import WELL_KNOWN_PASSWORDS

PUBLISHED_SECRET_SHA256: frozenset[str] = frozenset(
    {
        # inventories/example/group_vars/opensearch/vault.yml
        "92f531504d2bbd1ef63490c61e1fa92b185714372fef5b55ebf614e990f3e5ff",  # CA passphrase
        "9ddacc169d654af9623377fdc4626860fd44df049d948e1d01d79a0fb964323b",  # admin
        "a6d3917f9ac35cf0b40b15e114882989592d794ecc8b71f5647b052c5fd08156",  # kibanaserver
        "006562a31757d45ce938453a9e4d6a337a9ab6b2ad97c3c4a552f3d88e97e831",  # logstash
        "4af2643195a130a6b6372cc5c4c515eda1effbc74c1889f1b9b59dd5c28b345f",  # kibana
        "63abaca0ccd70d006298c762e13ec7392a89a9fd83c00c777a17841b5e95b27a",  # reporting
        # inventories/example/group_vars/user_directory/vault.yml
        "39ed39717870503261fd4e20fd5697cd8683d1d8fd43b95b0d8b3f504a9a0ddd",  # bearer token
        # inventories/example/group_vars/order_service/vault.yml
        "809b6b4236116c26b983d77bcd89ec4619336f54a6fa17218d3128842030bb3b",  # bearer token
        # inventories/example/EXAMPLE-ONLY-vault-password.txt, reused as a secret
        "9b45234940e257bece4a47457f7d57e5cba34425c74db0e2ad01832e78acfbd0",
    }
)
"""sha256 (hex) of every secret the repository publishes in clear or under a public key."""

# The variables that hold a password, passphrase or token, where a demo password (a short
# word like "admin") is refused too. Elsewhere only the example's long, unique values are
# looked for: "admin" is a fine value for a non-secret setting.
SECRET_VARIABLE_WORDS = ("password", "passphrase", "token", "secret", "database_url")

_WELL_KNOWN_FOLDED = frozenset(word.casefold() for word in WELL_KNOWN_PASSWORDS)


def is_published(value: str) -> bool:
    """True when ``value`` is one of the example's secrets (compared exactly)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest() in PUBLISHED_SECRET_SHA256


def _leaves(name: str, value: Any) -> Iterable[tuple[str, str]]:
    """(variable path, string) for every string inside ``value``: a.b[0].c."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(f"{name}.{key}", item)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for index, item in enumerate(value):
            yield from _leaves(f"{name}[{index}]", item)


# The internal users' passwords get the demo-password check of clusterforge.plan.cluster.model (with
# the user-name rule too); naming them twice would only repeat it.
_CHECKED_BY_MODEL = ("opensearch_security_passwords", "opensearch_security_users")


def _is_secret_variable(path: str) -> bool:
    lowered = path.lower()
    if lowered.startswith(_CHECKED_BY_MODEL):
        return False
    return any(word in lowered for word in SECRET_VARIABLE_WORDS)


def published_secret_findings(
    hosts_vars: Iterable[tuple[str, Mapping[str, Any]]],
) -> list[str]:
    """One message per variable whose value is a published secret, naming the variable
    (and the hosts that have it) and the fix; the value itself never appears."""
    where: dict[tuple[str, str], list[str]] = {}
    for host, variables in hosts_vars:
        for name in sorted(variables):
            for path, text in _leaves(name, variables[name]):
                if is_published(text):
                    kind = "published"
                elif _is_secret_variable(path) and text.casefold() in _WELL_KNOWN_FOLDED:
                    kind = "demo"
                else:
                    continue
                hosts = where.setdefault((path, kind), [])
                if host not in hosts:
                    hosts.append(host)
    findings = []
    for (path, kind), hosts in sorted(where.items()):
        source = (
            "a secret published in this repository (inventories/example's vault, whose "
            "password is public)"
            if kind == "published"
            else "a well-known demo or placeholder password"
        )
        findings.append(
            f"{path} (on {', '.join(hosts)}) is {source}; anyone could use it: set {path} to "
            "a new secret of your own, kept in your own ansible-vault file"
        )
    return findings
