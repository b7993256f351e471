"""A STAND-IN for the security plugin's matching of ``plugins.security.nodes_dn``
(org.opensearch.security.support.WildcardMatcher): an entry between slashes is a regular
expression that must match the whole DN, an entry with ``*`` or ``?`` a glob, any other
entry an exact DN. Python's ``re`` stands in for java.util.regex; the toolkit's pattern
uses only constructs both read the same way (classes, a negative lookahead, escapes of
punctuation). The plugin also tries the DN with its spaces removed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence


def admits(entries: Sequence[str], dn: str) -> bool:
    candidates = (dn, dn.replace(" ", ""))
    for entry in entries:
        for candidate in candidates:
            if len(entry) > 1 and entry.startswith("/") and entry.endswith("/"):
                if re.fullmatch(entry[1:-1], candidate):
                    return True
            elif "*" in entry or "?" in entry:
                if fnmatch.fnmatchcase(candidate, entry):
                    return True
            elif entry == candidate:
                return True
    return False
