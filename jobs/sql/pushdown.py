"""Scalar UDF calls over a stream's own fields move into the Kafka reader.

`S2Id(lat, long, 13)` in a dagger's SQL would otherwise cost a second trip of every row from the JVM to a Python
worker and back (the reader is Python already). When a call's arguments are only fields of the stream and
literals, and the SELECT reads the stream directly, the reader evaluates it with the same vectorised kernel on the
Arrow batch it has just decoded, and the SQL reads the result as a column (`__udf_1`). Functions are pure, so the
rows are the same; the same call written twice (SELECT and GROUP BY) becomes one column.

Simple WHERE conditions on such a SELECT's fields are evaluated in the reader too (jobs/events/predicates.py): events
the query drops are not sent to Spark at all, and those conditions leave the SQL (with the fields only they read).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from jobs.events.predicates import STRING_OPERATORS, Predicate
from jobs.events.protobuf import Computed

PREFIX = "__udf_"


def _literal(node: exp.Literal) -> Any:
    if node.is_string:
        return node.name
    number = float(node.name)
    return int(number) if number.is_integer() and "." not in node.name and "e" not in node.name.lower() else number


def _reads_only(select: exp.Select, table: str) -> set[str] | None:
    """The names the SELECT may qualify the stream's columns with, if it reads the stream directly and alone."""
    source = select.args.get("from_")
    if source is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    this = source.this
    if not isinstance(this, exp.Table) or this.name.lower() != table.lower() or this.args.get("db"):
        return None
    return {table.lower(), (this.alias or table).lower()}


def _arguments(call: exp.Anonymous, qualifiers: set[str], fields: set[str]) -> tuple[tuple[str, Any], ...] | None:
    args: list[tuple[str, Any]] = []
    for arg in call.expressions:
        if isinstance(arg, exp.Literal) and arg.is_string and "\\" in arg.name:
            return None  # Spark unescapes backslashes in string literals: leave such calls to Spark
        if isinstance(arg, exp.Literal):
            args.append(("literal", _literal(arg)))
        elif isinstance(arg, exp.Neg) and isinstance(arg.this, exp.Literal) and not arg.this.is_string:
            args.append(("literal", -_literal(arg.this)))
        elif (
            isinstance(arg, exp.Column)
            and not arg.args.get("db")
            and (not arg.table or arg.table.lower() in qualifiers)
            and arg.name in fields
        ):
            args.append(("column", arg.name))
        else:
            return None
    return tuple(args) if any(kind == "column" for kind, _ in args) else None


def push_udfs(
    query: exp.Query, table: str, fields: Iterable[str], udfs: Iterable[str]
) -> tuple[exp.Query, list[Computed]]:
    """The query (a translated tree, not changed) with every eligible call of `udfs` over `table`'s top-level
    `fields` replaced by a column, and the columns the reader must add. The same tree (and no columns) when nothing
    is eligible."""
    names = {u.lower(): u for u in udfs}
    field_set = set(fields)
    root = query.copy()
    computed: dict[tuple[str, tuple[tuple[str, Any], ...]], Computed] = {}
    for call in list(root.find_all(exp.Anonymous)):
        function = names.get(call.name.lower())
        select = call.find_ancestor(exp.Select)
        if function is None or select is None:
            continue
        target: exp.Expression = call
        if isinstance(call.parent, exp.Dot):  # session.Split(...): a UDF reached past a built-in of its name
            if call.parent.this.name.lower() != "session":
                continue
            target = call.parent
        qualifiers = _reads_only(select, table)
        args = None if qualifiers is None else _arguments(call, qualifiers, field_set)
        if args is None:
            continue
        key = (function, args)
        if key not in computed:
            computed[key] = Computed(f"{PREFIX}{len(computed) + 1}", function, args)
        target.replace(exp.column(computed[key].name, quoted=True))
    if not computed:
        return query, []
    return root, list(computed.values())


_COMPARISONS: dict[type[exp.Expression], tuple[str, str]] = {  # node -> (op, op with its sides swapped)
    exp.EQ: ("=", "="),
    exp.NEQ: ("<>", "<>"),
    exp.LT: ("<", ">"),
    exp.LTE: ("<=", ">="),
    exp.GT: (">", "<"),
    exp.GTE: (">=", "<="),
}
INT64 = (-(2**63), 2**63 - 1)


def _conjuncts(where: exp.Expression) -> list[exp.Expression]:
    node = where.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _value(node: exp.Expression, arrow: pa.DataType) -> Any:
    """The literal's value if Spark would compare it with a field of this type as is; else None."""
    negative = isinstance(node, exp.Neg)
    lit = node.this if negative else node
    if not isinstance(lit, exp.Literal):
        return None
    if pa.types.is_string(arrow):
        # Spark unescapes backslashes and joins adjacent literals ('it''s' is "its"): leave such strings to Spark.
        plain = lit.is_string and not negative and not set(lit.name) & set("\\'\"")
        return lit.name if plain else None
    if lit.is_string or not lit.name.isdigit():  # integers only: `5.0` or `5e0` would make Spark compare decimals
        return None
    value = -int(lit.name) if negative else int(lit.name)
    return value if INT64[0] <= value <= INT64[1] else None


def _predicate(
    cond: exp.Expression, qualifiers: set[str], fields: dict[str, tuple[str, pa.DataType]]
) -> Predicate | None:
    negated = isinstance(cond, exp.Not)
    node = cond.this.unnest() if negated else cond

    def field(col: exp.Expression) -> tuple[str, pa.DataType] | None:
        if not isinstance(col, exp.Column) or col.args.get("db") or (col.table and col.table.lower() not in qualifiers):
            return None
        return fields.get(col.name.lower())

    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        target = field(node.this)
        op = "not in" if negated else "in"
        if target is None:
            return None
        values = [_value(v, target[1]) for v in node.expressions]
        return None if any(v is None for v in values) else Predicate(target[0], op, tuple(values))
    if negated or type(node) not in _COMPARISONS:
        return None
    op, swapped = _COMPARISONS[type(node)]
    target, other = field(node.this), node.expression
    if target is None:
        target, other, op = field(node.expression), node.this, swapped
    if target is None or (pa.types.is_string(target[1]) and op not in STRING_OPERATORS):
        return None
    value = _value(other, target[1])
    return None if value is None else Predicate(target[0], op, (value,))


def push_filters(query: exp.Query, table: str, fields: dict[str, pa.DataType]) -> tuple[exp.Query, list[Predicate]]:
    """The WHERE conjuncts of a query that is one SELECT over `table` alone which the reader can evaluate exactly
    (see jobs/events/predicates.py), given the type each top-level field has in Spark, and the query without them.
    The same tree (and no predicates) when there are none."""
    root = query.copy()
    selects = list(root.find_all(exp.Select))
    if not isinstance(root, exp.Select) or len(selects) != 1 or root.args.get("with_"):
        return query, []  # a subquery, CTE or set operation: the WHERE's rows are not simply the stream's
    qualifiers = _reads_only(root, table)
    where = root.args.get("where")
    if qualifiers is None or where is None:
        return query, []
    usable = {
        name.lower(): (name, arrow)
        for name, arrow in fields.items()
        if pa.types.is_string(arrow) or pa.types.is_integer(arrow)
    }
    pushed, kept = [], []
    for cond in _conjuncts(where.this):
        predicate = _predicate(cond, qualifiers, usable)
        if predicate is None:
            kept.append(cond)
        else:
            pushed.append(predicate)
    if not pushed:
        return query, []
    root.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    return root, pushed
