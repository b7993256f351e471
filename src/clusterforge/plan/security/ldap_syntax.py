"""LDAP's string forms, read as the directory reads them: distinguished names (RFC 4514)
and search filters (RFC 4515). The inventory check refuses what a directory would refuse
at the first login, so a typo such as ``opensearch_ldap_userbase: not a dn`` is named
before any host is contacted rather than found as 'no such object' in a node's log.
"""

from __future__ import annotations

import re

# An attribute type: a name (letter, then letters, digits, hyphens) or a numeric OID.
_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9-]*|\d+(?:\.\d+)+")
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")
# Characters a DN's value must escape (RFC 4514, 2.4), besides a leading '#' or space.
_DN_SPECIAL = set(',+"\\<>;=')
# A filter value's escapes are \XX only; '(' ')' and NUL must be escaped, '*' is a wildcard.
_FILTER_UNESCAPED = set("()\x00")


def dn_problem(name: str, value: str) -> str | None:
    """Why ``value`` is no distinguished name, naming ``name`` and the fix; None if it is."""
    example = "e.g. ou=people,dc=example,dc=internal"
    if not value.strip():
        return f"{name} is empty; set a distinguished name, {example}"
    for rdn in _split_unescaped(value, ","):
        for pair in _split_unescaped(rdn, "+"):
            attribute, equals, text = pair.partition("=")
            if not equals:
                return f"{name} {value!r} is not a DN: {pair.strip()!r} has no '='; write {example}"
            if not _ATTRIBUTE.fullmatch(attribute.strip()):
                return (
                    f"{name} {value!r} is not a DN: {attribute.strip()!r} is no attribute "
                    f"name; write {example}"
                )
            problem = _dn_value_problem(text.strip())
            if problem:
                return f"{name} {value!r} is not a DN: {problem}; write {example}"
    return None


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, index = [], "", 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            current += text[index : index + 2]
            index += 2
            continue
        if char == separator:
            parts.append(current)
            current = ""
        else:
            current += char
        index += 1
    parts.append(current)
    return parts


def _dn_value_problem(value: str) -> str | None:
    if not value:
        return "a value is empty"
    if value.startswith("#"):
        return None if re.fullmatch(r"#(?:[0-9A-Fa-f]{2})+", value) else "a '#' value is not hex"
    index = 0
    while index < len(value):
        char = value[index]
        if char == "\\":
            following = value[index + 1 : index + 3]
            if _HEX_PAIR.fullmatch(following):
                index += 3
                continue
            if following[:1] in _DN_SPECIAL or following[:1] in ("#", " "):
                index += 2
                continue
            return f"the escape in {value!r} is incomplete"
        if char in _DN_SPECIAL:
            return f"{char!r} in {value!r} must be escaped as \\{char}"
        index += 1
    return None


def filter_problem(name: str, value: str) -> str | None:
    """Why ``value`` is no search filter (RFC 4515), naming ``name`` and the fix."""
    example = "e.g. (uid={0}) or (&(objectClass=person)(uid={0}))"
    try:
        end = _read_filter(value, 0)
    except ValueError as error:
        return f"{name} {value!r} is not an LDAP filter: {error}; write {example}"
    if end != len(value):
        return f"{name} {value!r} is not an LDAP filter: text after the last ')'; write {example}"
    return None


def _read_filter(text: str, index: int) -> int:
    """The index just past the filter that starts at ``index``."""
    if index >= len(text) or text[index] != "(":
        raise ValueError(f"expected '(' at position {index + 1}")
    index += 1
    if index < len(text) and text[index] in "&|!":
        operator = text[index]
        index += 1
        count = 0
        while index < len(text) and text[index] == "(":
            index = _read_filter(text, index)
            count += 1
        if operator == "!" and count != 1:
            raise ValueError("'!' takes exactly one filter")
        if count == 0:
            raise ValueError(f"'{operator}' needs at least one filter")
    else:
        close = _item_end(text, index)
        _check_item(text[index:close])
        index = close
    if index >= len(text) or text[index] != ")":
        raise ValueError(f"expected ')' at position {index + 1}")
    return index + 1


def _item_end(text: str, index: int) -> int:
    """Where a simple item ends: its closing ')' (which must be there)."""
    while index < len(text) and text[index] != ")":
        if text[index] == "(":
            raise ValueError(f"'(' at position {index + 1} must be escaped as \\28")
        index += 1
    if index >= len(text):
        raise ValueError("a '(' is never closed")
    return index


def _check_item(item: str) -> None:
    equals = item.find("=")
    if equals < 0:
        raise ValueError(f"{item!r} has no comparison (=, ~=, >=, <=)")
    # The comparison is the first '=', with the '~', '>' or '<' before it.
    attribute = item[: equals - 1] if equals and item[equals - 1] in "~<>" else item[:equals]
    attribute = attribute.split(";")[0].split(":")[0]  # options and extensible forms
    if not _ATTRIBUTE.fullmatch(attribute):
        raise ValueError(f"{attribute!r} is no attribute name")
    _check_filter_value(item[equals + 1 :])


def _check_filter_value(value: str) -> None:
    index = 0
    while index < len(value):
        char = value[index]
        if char == "\\":
            if not _HEX_PAIR.fullmatch(value[index + 1 : index + 3]):
                raise ValueError(f"the escape in {value!r} is not \\ and two hex digits")
            index += 3
            continue
        if char in _FILTER_UNESCAPED:
            raise ValueError(f"{char!r} in {value!r} must be escaped")
        index += 1
