"""Dagger (Flink/Calcite) constructs rewritten into Spark SQL that runs in a streaming aggregation.

- GROUP BY TUMBLE(t, size) / HOP(t, slide, size) / SESSION(t, gap) -> window(t, size[, slide]) / session_window(t, gap);
  TUMBLE_START/_END etc. in the same SELECT -> that window's `.start` / `.end` (Flink's end is exclusive, as Spark's).
- DistinctCount(x) and COUNT(DISTINCT x) -> size(collect_set(x)): exact, and Spark streaming rejects DISTINCT.
- PercentileAggregator(p, x) (raystack/dagger's UDAF, p in percent) and Percentile(x, p) with p > 1 -> an exact
  percentile with the same estimator as Dagger's (commons-math Percentile, LEGACY), from sort_array(collect_list(x)).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp

from jobs.sql.errors import SqlError

# Flink group-window functions: name -> number of interval arguments after the time column.
WINDOW_GROUPS: dict[str, int] = {"tumble": 1, "hop": 2, "session": 1}
# Window bound functions -> (group window, Spark struct field).
WINDOW_BOUNDS: dict[str, tuple[str, str]] = {
    f"{group}_{bound}": (group, bound) for group in WINDOW_GROUPS for bound in ("start", "end")
}
DAGGER_AGGREGATES = frozenset({"distinctcount", "percentileaggregator"})
# Spark's own grouping windows, whose result struct is addressable as `window` / `session_window`.
SPARK_WINDOWS = frozenset({"window", "session_window"})
UNSUPPORTED: dict[str, str] = {
    **{
        f"{group}_rowtime": f"{group.upper()}_ROWTIME is not supported: select {group.upper()}_END(...) instead"
        for group in WINDOW_GROUPS
    },
    **{
        f"{group}_proctime": f"{group.upper()}_PROCTIME is not supported: daggers aggregate on event time (rowtime)"
        for group in WINDOW_GROUPS
    },
    "proctime": "PROCTIME() is not supported: daggers aggregate on event time (rowtime)",
}
# Names the function check accepts besides Spark built-ins and registered UDFs.
DAGGER_FUNCTIONS = frozenset({*WINDOW_GROUPS, *WINDOW_BOUNDS, *DAGGER_AGGREGATES})
DISPLAY_NAMES = (
    "TUMBLE, TUMBLE_START, TUMBLE_END, HOP, HOP_START, HOP_END, SESSION, SESSION_START, SESSION_END, "
    "DistinctCount, PercentileAggregator"
)

_MICROS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}


def fname(node: exp.Expression) -> str:
    """Lower-cased name of a plain (anonymous) function call, else ''."""
    return node.name.lower() if isinstance(node, exp.Anonymous) else ""


def _unit(text: str) -> str | None:
    unit = text.lower()
    unit = unit[:-1] if unit.endswith("s") else unit
    return unit if unit in _MICROS else None


def duration_micros(node: exp.Expression, what: str) -> int:
    """INTERVAL '60' SECOND, INTERVAL 1 MINUTE or '1 minute' -> microseconds; anything else is a SqlError."""
    amount: str | None = None
    unit: str | None = None
    if isinstance(node, exp.Interval) and isinstance(node.this, exp.Literal):
        amount = node.this.name
        spec = node.args.get("unit")
        if isinstance(spec, exp.Var):
            unit = _unit(spec.name)
        elif spec is None and len(amount.split()) == 2:
            amount, unit_text = amount.split()
            unit = _unit(unit_text)
    elif isinstance(node, exp.Literal) and node.is_string and len(node.name.split()) == 2:
        amount, unit_text = node.name.split()
        unit = _unit(unit_text)
    try:
        value = Decimal(amount) * _MICROS[unit] if amount is not None and unit is not None else None
    except InvalidOperation:
        value = None
    if value is None or value <= 0 or value != value.to_integral_value():
        raise SqlError(
            f"{what}: {node.sql(dialect='spark')} is not a window duration; write e.g. INTERVAL '60' SECOND, "
            "INTERVAL '5' MINUTE, INTERVAL '1' HOUR or INTERVAL '1' DAY"
        )
    return int(value)


def duration_text(micros: int) -> str:
    """Spark's duration string for window(): the largest unit that divides exactly, e.g. '1 minute', '90 seconds'."""
    for unit in ("week", "day", "hour", "minute", "second", "millisecond", "microsecond"):
        count, rest = divmod(micros, _MICROS[unit])
        if rest == 0:
            return f"{count} {unit}" + ("s" if count != 1 else "")
    raise AssertionError(micros)  # microsecond always divides


@dataclass(frozen=True)
class GroupWindow:
    """The event-time window a SELECT groups by, as Spark builds it."""

    kind: str  # tumble | hop | session | spark (a Spark window() call kept exactly as written)
    time: exp.Expression
    size: int  # microseconds (the gap for session windows)
    slide: int | None = None
    raw: exp.Expression | None = None

    def spark(self) -> exp.Expression:
        if self.raw is not None:
            return self.raw.copy()
        if self.kind == "session":
            return exp.Anonymous(this="session_window", expressions=[self.time.copy(), _string(self.size)])
        args = [self.time.copy(), _string(self.size)]
        if self.slide is not None and self.slide != self.size:
            args.append(_string(self.slide))
        return exp.Anonymous(this="window", expressions=args)

    def bound(self, field: str) -> exp.Expression:
        return exp.Dot(this=self.spark(), expression=exp.to_identifier(field))

    def key(self) -> tuple[str, str, int, int | None]:
        """What makes two windows the same (sqlglot nodes compare by identity-sensitive details)."""
        raw = self.raw.sql(dialect="spark").lower() if self.raw is not None else ""
        return (self.kind, self.time.sql(dialect="spark").lower() + raw, self.size, self.slide)

    def flink(self) -> str:
        return f"{self.kind.upper()}({self.time.sql(dialect='spark')}, ...)"


def _string(micros: int) -> exp.Literal:
    return exp.Literal.string(duration_text(micros))


def _window_of(call: exp.Expression) -> GroupWindow | None:
    """The GroupWindow a GROUP BY item stands for: Flink TUMBLE/HOP/SESSION or Spark window()/session_window()."""
    name = fname(call)
    args = list(call.expressions) if isinstance(call, exp.Anonymous) else []
    if name in WINDOW_GROUPS:
        want = WINDOW_GROUPS[name] + 1
        if len(args) != want:
            usage = {
                "tumble": "TUMBLE(rowtime, size)",
                "hop": "HOP(rowtime, slide, size)",
                "session": "SESSION(rowtime, gap)",
            }
            raise SqlError(f"{name.upper()} takes {want} arguments: {usage[name]}, e.g. INTERVAL '1' MINUTE")
        time, *durations = args
        micros = [duration_micros(d, name.upper()) for d in durations]
        if name == "hop":
            slide, size = micros
            if slide > size:
                raise SqlError(f"HOP(rowtime, slide, size): the slide ({duration_text(slide)}) exceeds the size")
            return GroupWindow("hop", time, size, slide)
        return GroupWindow(name, time, micros[0])
    if name in SPARK_WINDOWS and len(args) >= 2:
        time, *durations = args
        try:
            micros = [duration_micros(d, f"{name}()") for d in durations]
        except SqlError:
            if any(isinstance(d, exp.Interval) for d in durations):
                raise  # Spark rejects INTERVAL here, so it must be one this module can convert
            return GroupWindow("spark", time, 0, raw=call)  # e.g. '1 hour 30 minutes': Spark parses it
        if name == "session_window":
            return GroupWindow("session", time, micros[0])
        if len(micros) > 2:  # a start offset: keep the call as written
            return GroupWindow("spark", time, 0, raw=call)
        slide = micros[1] if len(micros) > 1 else None
        return GroupWindow("hop" if slide is not None else "tumble", time, micros[0], slide)
    return None


def rewrite_windows(select: exp.Select) -> GroupWindow | None:
    """Turn this SELECT's group window into Spark's, and its *_START/*_END calls into the window's fields."""
    group = select.args.get("group")
    window: GroupWindow | None = None
    if group is not None:
        for item in list(group.expressions):
            found = _window_of(item)
            if found is None:
                continue
            if window is not None:
                raise SqlError("GROUP BY has more than one event-time window; group by exactly one TUMBLE/HOP/SESSION")
            window = found
            if fname(item) in WINDOW_GROUPS or _has_interval(item):
                item.replace(found.spark())
    for node in list(select.find_all(exp.Anonymous)):
        name = fname(node)
        if _scope_select(node) is not select:
            continue  # nested SELECTs get their own pass
        if name in WINDOW_GROUPS:  # any left after the GROUP BY pass sits elsewhere
            raise SqlError(
                f"{name.upper()}(...) belongs in GROUP BY; select its bounds with {name.upper()}_START/_END(...)"
            )
        if name not in WINDOW_BOUNDS:
            continue
        kind, field = WINDOW_BOUNDS[name]
        if window is None or window.kind != kind:
            raise SqlError(
                f"{name.upper()}(...) needs GROUP BY {kind.upper()}(...) with the same arguments in the same SELECT"
            )
        bound = _window_of(exp.Anonymous(this=kind, expressions=[a.copy() for a in node.expressions]))
        if bound is None or bound.key() != window.key():
            raise SqlError(
                f"{node.sql(dialect='spark')} does not match the GROUP BY window {window.flink()}: "
                "use the same time column and intervals"
            )
        node.replace(window.bound(field))
    return window


def _has_interval(node: exp.Expression) -> bool:
    return any(isinstance(a, exp.Interval) for a in node.expressions)


def _scope_select(node: exp.Expression) -> exp.Select | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def rewrite_aggregates(root: exp.Expression) -> None:
    """DistinctCount / COUNT(DISTINCT x) / PercentileAggregator / Percentile(x, >1) -> streaming-safe exact forms."""
    for node in list(root.find_all(exp.Anonymous, exp.Count, exp.Quantile, exp.AggFunc)):
        name = fname(node)
        if name == "distinctcount":
            if len(node.expressions) != 1:
                raise SqlError("DistinctCount takes one argument: DistinctCount(column)")
            node.replace(_distinct_count(node.expressions[0]))
        elif name == "percentileaggregator":
            if len(node.expressions) != 2:
                raise SqlError("PercentileAggregator takes two arguments: PercentileAggregator(percentile, value)")
            node.replace(dagger_percentile(node.expressions[1], _percent(node.expressions[0], node)))
        elif isinstance(node, exp.Quantile):
            p = node.args.get("quantile")
            if isinstance(p, exp.Literal) and not p.is_string and Decimal(p.name) > 1:
                node.replace(dagger_percentile(node.this, _percent(p, node)))
        elif isinstance(node, exp.AggFunc) and isinstance(node.this, exp.Distinct):
            args = node.this.expressions
            if isinstance(node, exp.Count) and len(args) == 1:
                node.replace(_distinct_count(args[0]))
            else:
                raise SqlError(
                    f"{node.sql(dialect='spark')}: DISTINCT aggregates cannot run in a streaming aggregation; "
                    "use DistinctCount(x) (or COUNT(DISTINCT x)) for one column, or collect_set() and array functions"
                )


def _distinct_count(arg: exp.Expression) -> exp.Expression:
    # collect_set skips NULLs, as DistinctCount and COUNT(DISTINCT) do.
    return exp.Anonymous(this="size", expressions=[exp.Anonymous(this="collect_set", expressions=[arg.copy()])])


def _percent(node: exp.Expression, call: exp.Expression) -> Decimal:
    value: Decimal | None = None
    if isinstance(node, exp.Literal) and not node.is_string:
        value = Decimal(node.name)
    elif isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        value = -Decimal(node.this.name)
    if value is None or not 0 < value <= 100:
        raise SqlError(
            f"{call.sql(dialect='spark')}: the percentile must be a number in (0, 100], e.g. 95 (Dagger's convention); "
            "Spark's percentile(x, 0.95) takes a fraction instead"
        )
    return value


# commons-math Percentile (LEGACY estimation) as Dagger's PercentileAggregator computes it: with the n sorted values
# v and pos = p/100 * (n + 1): pos < 1 -> v[0]; pos >= n -> v[n-1]; else interpolate between v[floor(pos) - 1] and
# v[floor(pos)]. The lambdas only bind names: one collect_list, evaluated once per group.
_PERCENTILE = """
element_at(transform(array(sort_array(collect_list(CAST(__value AS DOUBLE)))), __v ->
  element_at(transform(array((size(__v) + 1) * CAST(__q AS DOUBLE)), __pos -> CASE
    WHEN size(__v) = 0 THEN CAST(NULL AS DOUBLE)
    WHEN __pos < 1 THEN __v[0]
    WHEN __pos >= size(__v) THEN __v[size(__v) - 1]
    ELSE __v[CAST(__pos AS INT) - 1] + (__pos - floor(__pos)) * (__v[CAST(__pos AS INT)] - __v[CAST(__pos AS INT) - 1])
  END), 1)), 1)
"""


def dagger_percentile(value: exp.Expression, percent: Decimal) -> exp.Expression:
    template = sqlglot.parse_one(_PERCENTILE, read="spark")
    quantile = repr(float(percent) / 100)  # Java divides the double percentile by 100, as here
    for column in list(template.find_all(exp.Column)):
        if column.name == "__value":
            column.replace(value.copy())
        elif column.name == "__q":
            column.replace(exp.Literal.number(quantile))
    return template
