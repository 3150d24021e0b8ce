"""The dagger's output against the ground truth, per window: what is missing, extra or different, and with a count
column, how many events were lost or counted twice.

The truth is the consumer's own SQL run as a batch over exactly the events the feeders had acknowledged
(jobs.engine.runner.batch_over); a second truth over acknowledged + indeterminate events bounds what the output may hold
(an indeterminate event may or may not be in Kafka: counting it is neither loss nor duplication).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from jobs.sinks.base import OutputShape
from jobs.spec import DaggerSpec, PostgresSink

Key = tuple[Any, ...]


def _norm(value: Any) -> Any:
    """One form for a value read from Arrow and from a sink: datetimes as UTC ISO text, floats rounded."""
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else value
    return value


@dataclass
class WindowCheck:
    window: str  # the row time (window end), or "-" for rows without one
    expected_rows: int = 0
    output_rows: int = 0
    missing: int = 0  # rows expected, absent
    extra: int = 0  # rows present, not expected
    different: int = 0  # same key, other values
    expected_events: int = 0  # sum of the count column
    output_events: int = 0
    lost: int = 0
    duplicated: int = 0

    @property
    def exact(self) -> bool:
        return not (self.missing or self.extra or self.different)


@dataclass
class Comparison:
    windows: list[WindowCheck] = field(default_factory=list)
    count_column: str | None = None
    indeterminate_counted: int = 0  # events counted that were indeterminate (within the upper bound)
    lost_beyond_broker: int | None = None  # lost against the events the broker still has (None: it lost none)

    @property
    def lost(self) -> int:
        return sum(w.lost for w in self.windows)

    @property
    def beyond_broker(self) -> int:
        """Events lost that the broker still had: the platform's loss, whatever the broker lost."""
        return self.lost if self.lost_beyond_broker is None else self.lost_beyond_broker

    @property
    def duplicated(self) -> int:
        return sum(w.duplicated for w in self.windows)

    @property
    def exact(self) -> bool:
        return all(w.exact for w in self.windows)

    def totals(self) -> dict[str, int]:
        return {
            "windows": len(self.windows),
            "windows_exact": sum(w.exact for w in self.windows),
            "rows_missing": sum(w.missing for w in self.windows),
            "rows_extra": sum(w.extra for w in self.windows),
            "rows_different": sum(w.different for w in self.windows),
            "events_expected": sum(w.expected_events for w in self.windows),
            "events_output": sum(w.output_events for w in self.windows),
            "events_lost": self.lost,
            "events_lost_beyond_broker": self.beyond_broker,
            "events_duplicated": self.duplicated,
            "events_indeterminate_counted": self.indeterminate_counted,
        }


def _index(rows: Iterable[dict[str, Any]], shape: OutputShape) -> dict[Key, dict[str, Any]]:
    return {tuple(_norm(r[k]) for k in shape.key_columns): {c: _norm(r[c]) for c in shape.value_columns} for r in rows}


def compare(
    expected: list[dict[str, Any]],
    output: list[dict[str, Any]],
    shape: OutputShape,
    count_column: str | None = None,
    upper: list[dict[str, Any]] | None = None,
) -> Comparison:
    """`expected`: the truth over acknowledged events; `upper`: over acknowledged + indeterminate ones (if any)."""
    want, got = _index(expected, shape), _index(output, shape)
    most = _index(upper, shape) if upper is not None else want
    time_at = shape.key_columns.index(shape.time_column) if shape.time_column in shape.key_columns else None
    windows: dict[str, WindowCheck] = {}
    result = Comparison(count_column=count_column)

    def window(key: Key) -> WindowCheck:
        name = str(key[time_at]) if time_at is not None else "-"
        return windows.setdefault(name, WindowCheck(name))

    for key in set(want) | set(got) | set(most):
        w = window(key)
        low, high, out = want.get(key), most.get(key), got.get(key)
        w.expected_rows += low is not None
        w.output_rows += out is not None
        if count_column:
            n_low = int(low[count_column]) if low else 0
            n_high = int(high[count_column]) if high else n_low
            n_out = int(out[count_column]) if out else 0
            w.expected_events += n_low
            w.output_events += n_out
            w.lost += max(0, n_low - n_out)
            w.duplicated += max(0, n_out - n_high)
            result.indeterminate_counted += max(0, min(n_out, n_high) - n_low)
            if n_low <= n_out <= n_high and out and (low or high):
                continue  # within the bounds: exact as far as events go
        if out is None and low is not None:
            w.missing += 1
        elif out is not None and low is None and high is None:
            w.extra += 1
        elif out is not None and out != low and out != high:
            w.different += 1
    result.windows = [windows[k] for k in sorted(windows)]
    return result


def read_postgres_sink(spec: DaggerSpec, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of the consumer's PostgreSQL sink table (none if it was never created); `env` holds the password
    its `password_env` names, if any."""
    sink = spec.sink
    if not isinstance(sink, PostgresSink):
        raise ValueError(f"sink.type: {sink.type}: Loki reads back PostgreSQL sinks; give experiments one")
    password = (env or {}).get(sink.password_env) if sink.password_env else None
    with psycopg.connect(sink.dsn, **({"password": password} if password else {})) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (sink.table,)).fetchone()
        if not exists or exists[0] is None:
            return []
        cur = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(*sink.table.split("."))))
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
