"""How fast a dagger's SQL is refused or validated at the bounds of jobs/sql/guard.py.

`python -m bench.sql_bounds` prints one line per query: seconds to translate() it (best of 3) and the outcome.
Targets: every pathological query is refused within 0.5 s (before the bounds: a RecursionError, or 86 s for a
20,000-term sum); the slowest query within every bound validates within 5 s.
"""

from __future__ import annotations

import sys
import time

from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from jobs.sql import SqlError, guard, translate

SCHEMA = StructType(
    [StructField("amount", DoubleType()), StructField("city_id", IntegerType()), StructField("status", StringType())]
)
REFUSE_WITHIN_S = 0.5
ACCEPT_WITHIN_S = 5.0


def _nested(depth: int) -> str:
    return "SELECT " + "(" * depth + "amount" + ")" * depth + " AS s FROM data_stream"


def _chains(count: int, terms: int) -> str:
    chain = " + ".join(["amount"] * (terms + 1))
    return "SELECT " + ", ".join(f"{chain} AS c{i}" for i in range(count)) + " FROM data_stream"


PATHOLOGICAL = {
    "2,000 nested parentheses": _nested(2_000),
    "20,000-term sum": "SELECT " + " + ".join(["1"] * 20_000) + " AS s FROM data_stream",
    "20,000-term sum of columns": "SELECT " + " + ".join(["amount"] * 20_000) + " AS s FROM data_stream",
    "400 NOTs": "SELECT amount FROM data_stream WHERE " + "NOT " * 400 + "status = 'x'",
    "a 1 MB comment": "SELECT amount FROM data_stream -- " + "x" * 1_000_000,
}
# The most a query may cost within the bounds: as many longest expressions as the token bound lets through.
WORST_ACCEPTED = {
    "deepest nesting": _nested(guard.MAX_NESTING - 1),
    "longest expressions, as many as fit": _chains(guard.MAX_TOKENS // (2 * guard.MAX_TERMS + 4), guard.MAX_TERMS - 1),
    "IN list of 9,990 values": "SELECT amount FROM data_stream WHERE city_id IN ("
    + ",".join(str(i) for i in range(9_990))
    + ")",
}


def _time(sql: str) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(3):
        start = time.perf_counter()
        try:
            translate(sql, {"data_stream": SCHEMA})
            outcome = "validated"
        except SqlError as e:
            outcome = f"refused: {str(e)[:80]}"
        best = min(best, time.perf_counter() - start)
    return best, outcome


def main() -> int:
    missed = 0
    for group, queries, target, expect in (
        ("pathological", PATHOLOGICAL, REFUSE_WITHIN_S, "refused"),
        ("within bounds", WORST_ACCEPTED, ACCEPT_WITHIN_S, "validated"),
    ):
        for name, sql in queries.items():
            seconds, outcome = _time(sql)
            ok = seconds <= target and outcome.startswith(expect)
            missed += not ok
            print(f"{group:13} {name:38} {seconds:6.3f} s (target {target} s) {'ok ' if ok else 'MISSED'} {outcome}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
