"""The toolkit's one duration grammar: a whole number and one unit, with no sign, space or
fraction: ``500ms``, ``30s``, ``10m``, ``26h``, ``14d``.

The schema checks every ``duration`` variable with it, and the alert rules, the snapshot
schedule and the model read seconds from it; three parsers used to disagree (the schema
took ``0d`` and ``500ms``, the schedule refused both, issue 51). Whether zero or less than
a second makes sense is each variable's range, said as a range, not a second grammar.
Prometheus and Alertmanager read the same forms, so a value passes to them unchanged.
"""

from __future__ import annotations

import re

UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
# docs/variables.md lists these (clusterforge.schema writes the page's table).
FORMS = "a whole number with a unit (ms, s, m, h, d), e.g. 30s or 10m"
_GRAMMAR = re.compile(r"(\d+)(ms|s|m|h|d)")


def is_duration(text: str) -> bool:
    return _GRAMMAR.fullmatch(text) is not None


def duration_seconds(text: str) -> float | None:
    """The duration in seconds (``500ms`` is 0.5), or None when ``text`` is not one."""
    match = _GRAMMAR.fullmatch(text.strip())
    if match is None:
        return None
    return int(match.group(1)) * UNIT_SECONDS[match.group(2)]


def whole_seconds(text: str, *, at_least: int = 0) -> int:
    """The duration in whole seconds (rounded down), at least ``at_least``; for a value the
    schema checked already. Raises ValueError naming the text otherwise."""
    seconds = duration_seconds(text)
    if seconds is None:
        raise ValueError(f"{text!r} is not a duration; write {FORMS}")
    return max(at_least, int(seconds))


def duration_problem(name: str, value: str, *, minimum_seconds: float = 0) -> str | None:
    """Why ``value`` cannot be ``name``: not a duration, or below its range; or None."""
    seconds = duration_seconds(value)
    if seconds is None:
        return f"{name} {value!r} is not a duration; write {FORMS}"
    if seconds < minimum_seconds:
        return (
            f"{name} {value!r} is below its range (at least {describe(minimum_seconds)}); "
            "set a longer duration"
        )
    return None


def describe(seconds: float) -> str:
    """``seconds`` in the grammar's largest whole unit (90 -> 90s, 120 -> 2m)."""
    for unit in ("d", "h", "m", "s"):
        size = UNIT_SECONDS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds * 1000)}ms"
