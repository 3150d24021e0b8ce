"""Reading back what was written to VictoriaMetrics (the demo, benchmarks and tests)."""

from __future__ import annotations

import json
import re
from typing import Any

from odin.apis import http_client


def literal(value: str) -> str:
    """`value` as the content of a MetricsQL string literal."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def any_of(values: list[str]) -> str:
    """A MetricsQL regex string's content matching exactly one of `values`."""
    return literal("|".join(re.escape(v) for v in values))


def flush(vm: str) -> None:
    """Make recently written samples searchable now (they otherwise appear within seconds)."""
    http_client.get(f"{vm}/internal/force_flush", timeout=10).raise_for_status()


def export(vm: str, match: str) -> list[dict[str, Any]]:
    """Every sample of the series matching `match`: [{"metric": labels, "values": [...], "timestamps": [...]}]."""
    flush(vm)
    r = http_client.get(f"{vm}/api/v1/export", params={"match[]": match, "start": "0"}, timeout=120)
    r.raise_for_status()
    return [json.loads(line) for line in r.text.splitlines()]


def query(vm: str, expr: str, timeout_s: float = 5.0) -> float | None:
    """An instant MetricsQL query's single value (summed if several series); None when nothing matches."""
    r = http_client.get(f"{vm}/api/v1/query", params={"query": expr}, timeout=timeout_s)
    r.raise_for_status()
    result = r.json().get("data", {}).get("result", [])
    if not result:
        return None
    return sum(float(series["value"][1]) for series in result)
