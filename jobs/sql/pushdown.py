"""Scalar UDF calls over a stream's own fields move into the Kafka reader.

`S2Id(lat, long, 13)` in a dagger's SQL would otherwise cost a second trip of every row from the JVM to a Python
worker and back (the reader is Python already). When a call's arguments are only fields of the stream and
literals, and the SELECT reads the stream directly, the reader evaluates it with the same vectorised kernel on the
Arrow batch it has just decoded, and the SQL reads the result as a column (`__udf_1`). Functions are pure, so the
rows are the same; the same call written twice (SELECT and GROUP BY) becomes one column.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlglot import exp

from jobs.protobuf import Computed
from jobs.sql.parse import parse_query

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


def push_udfs(spark_sql: str, table: str, fields: Iterable[str], udfs: Iterable[str]) -> tuple[str, list[Computed]]:
    """`spark_sql` with every eligible call of `udfs` over `table`'s top-level `fields` replaced by a column, and
    the columns the reader must add. Unchanged (and no columns) when nothing is eligible."""
    names = {u.lower(): u for u in udfs}
    field_set = set(fields)
    root = parse_query(spark_sql, names.values())
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
        return spark_sql, []
    return root.sql(dialect="spark", normalize_functions=False), list(computed.values())
