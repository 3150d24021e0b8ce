"""WHERE conditions the Kafka reader evaluates, so that events the query drops never reach the JVM.

Only conditions whose result is certain to be Spark's: a top-level string (or enum) field compared with string
literals, or an integer field with integer literals (`=`, `<>`, `IN`, `NOT IN`, and for integers `<`, `<=`, `>`,
`>=`). They are evaluated on the very columns Spark would see (enum names, unsigned integers as long) with Spark's
null semantics: a null field never passes. The planner picks them (jobs/sql/pushdown.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa

# Arrow's compute functions by operator. pyarrow.compute is imported where a predicate is evaluated: the source's
# planning processes import this module too, and never evaluate one (75 ms each, docs/decisions.md).
COMPARISONS = {"=": "equal", "<>": "not_equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}
STRING_OPERATORS = frozenset({"=", "<>", "in", "not in"})  # no ordering: Spark's and Arrow's could differ


@dataclass(frozen=True)
class Predicate:
    column: str  # a top-level field, as the message spells it
    op: str  # a key of COMPARISONS, "in" or "not in"
    values: tuple[Any, ...]  # one value for comparisons, the list for IN / NOT IN

    def describe(self) -> str:
        shown = ", ".join(repr(v) for v in self.values)
        return f"{self.column} {self.op.upper()} ({shown})" if "in" in self.op else f"{self.column} {self.op} {shown}"

    def mask(self, column: pa.Array) -> pa.Array:
        """True where the row passes, null where Spark's result would be null (a null field)."""
        import pyarrow.compute as pc

        if pa.types.is_integer(column.type):
            column = column.cast(pa.int64())
        if self.op in COMPARISONS:
            return pc.call_function(COMPARISONS[self.op], [column, pa.scalar(self.values[0], column.type)])
        found = pc.is_in(column, value_set=pa.array(self.values, column.type))
        if self.op == "in":
            return pc.if_else(pc.is_valid(column), found, None)
        return pc.if_else(pc.is_valid(column), pc.invert(found), None)


def passing(predicates: tuple[Predicate, ...], columns: dict[str, pa.Array]) -> pa.Array:
    """The rows every predicate keeps (Spark's WHERE: null counts as false)."""
    import pyarrow.compute as pc

    masks = [p.mask(columns[p.column]) for p in predicates]
    return reduce(pc.and_kleene, masks).fill_null(False)
