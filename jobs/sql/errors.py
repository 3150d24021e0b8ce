"""The one error a dagger's SQL can raise, and helpers that make its message say how to fix the query."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SqlError(ValueError):
    """Dagger SQL that cannot run: the message says what is wrong and how to fix it (e.g. lists valid names)."""


def listing(names: Iterable[str], limit: int = 40) -> str:
    """'a, b, c' — capped, because a protobuf schema can have hundreds of nested paths."""
    items = list(dict.fromkeys(names))
    if not items:
        return "(none)"
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown}, ... ({len(items) - limit} more)"


def suggest(name: str, candidates: Iterable[str]) -> str:
    """' Did you mean 'x'?' for a likely typo, else ''. Nested paths also match on their last part, so 'lattitude'
    finds 'driver_location.latitude'."""
    keys: dict[str, str] = {}
    for candidate in candidates:
        keys.setdefault(candidate.lower(), candidate)
        keys.setdefault(candidate.rsplit(".", 1)[-1].lower(), candidate)
    close = difflib.get_close_matches(name.lower(), list(keys), n=3, cutoff=0.75)
    found = list(dict.fromkeys(keys[c] for c in close))
    if not found:
        return ""
    return " Did you mean " + " or ".join(f"'{c}'" for c in found) + "?"
