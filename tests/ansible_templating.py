"""Role data as Ansible's own loader hands it to the templar.

ansible-core 2.19 templates only strings marked as trusted templates, which its YAML
loader does for a role's files; the tests that evaluate a role's ``when`` and loop
expressions with a bare Templar mark what they read from those files the same way.
"""

from __future__ import annotations

from typing import Any


def trusted(value: Any) -> Any:
    """``value`` with every string in it (through lists and dicts) a trusted template."""
    from ansible.template import trust_as_template

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value
