"""translate(): a dagger's SQL (Dagger/Flink style or Spark SQL) -> validated Spark SQL plus what its output means."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql.types import StructType
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from jobs.sql import builtins
from jobs.sql.dagger import (
    DAGGER_AGGREGATES,
    SPARK_WINDOWS,
    WINDOW_BOUNDS,
    WINDOW_GROUPS,
    GroupWindow,
    fname,
    rewrite_aggregates,
    rewrite_windows,
)
from jobs.sql.errors import SqlError
from jobs.sql.parse import parse_query
from jobs.sql.validate import (
    Catalog,
    ColumnChecker,
    check_functions,
    check_tables,
    read_sources,
    spark_name,
    star_names,
)

DIALECT = "spark"


@dataclass(frozen=True)
class Query:
    spark_sql: str  # runnable by spark.sql() over temp views named like the declared tables
    tables: tuple[str, ...]  # declared tables the query reads
    aggregated: bool  # has GROUP BY / aggregate functions
    windowed: bool  # groups by an event-time window (TUMBLE/HOP or Spark window())
    key_columns: tuple[str, ...]  # output columns identifying a row: group keys incl. window start/end columns
    value_columns: tuple[str, ...]  # the other output columns (aggregates)
    time_column: str | None  # output column holding the window end (TUMBLE_END/HOP_END) else window start, else None
    window: timedelta = timedelta(0)  # longest event-time window (session: its gap); 0 if none or not known
    stateful_operators: int = 0  # aggregations, DISTINCTs, joins and LIMITs: each keeps state in a stream
    # (kind, size µs, slide µs) of the window of a query whose only stateful operator groups `rowtime` by it: the
    # reader tells its late events (jobs/engine/event_time.py). None otherwise.
    event_window: tuple[str, int, int | None] | None = None
    tree: exp.Query | None = field(default=None, compare=False, repr=False)  # spark_sql's parse tree: no re-parsing


def translate(
    sql: str,
    tables: Mapping[str, StructType],
    functions: Iterable[str] = (),
    shadowed: Mapping[str, str] | None = None,
) -> Query:
    """Validate `sql` against the declared `tables` (name -> schema; `rowtime` is implied) and the registered UDF
    names `functions` (case-insensitive), and translate it to Spark SQL. Raises SqlError saying what is wrong and how
    to fix it. Dagger constructs (TUMBLE/HOP/SESSION, DistinctCount, PercentileAggregator) are always translated,
    even if a UDF of that name is registered, so they stay exact and streaming-safe. `shadowed` maps UDF names that
    a Spark built-in hides to the qualified name that reaches the UDF (`Split` -> `session.Split`)."""
    try:
        return _translate(sql, tables, functions, shadowed)
    except RecursionError:  # within jobs/sql/guard.py's bounds, yet too deep for this caller's stack
        raise SqlError(
            "the SQL nests too deeply to validate here; flatten it, e.g. move inner parts into a WITH query"
        ) from None


def _translate(
    sql: str,
    tables: Mapping[str, StructType],
    functions: Iterable[str],
    shadowed: Mapping[str, str] | None,
) -> Query:
    udfs = {name.lower(): name for name in functions}
    catalog = Catalog(tables)
    root = parse_query(sql, udfs.values())
    read = check_tables(root, catalog)
    check_functions(root, udfs)
    checker = ColumnChecker(catalog)
    checker.check(root)

    outputs = _Outputs(root, checker).name_and_classify()
    selects = list(root.find_all(exp.Select))
    aggregated = any(_is_aggregated(select) for select in selects)
    stateful = sum(_is_aggregated(s) or bool(s.args.get("distinct")) for s in selects)
    stateful += len(list(root.find_all(exp.Join))) + len(list(root.find_all(exp.Limit)))
    # Innermost SELECTs first, so each rewrite sees its own GROUP BY before an outer one is touched.
    windows = [rewrite_windows(select) for select in reversed(selects)]
    rewrite_aggregates(root)
    _check_streaming_windows(root)
    qualified = {k.lower(): v for k, v in (shadowed or {}).items()}
    for call in list(root.find_all(exp.Anonymous)):
        if call.name.lower() in qualified:  # `session.Split(...)`, as the parser reads it back
            schema, _, name = qualified[call.name.lower()].rpartition(".")
            reached = exp.Anonymous(this=name, expressions=call.expressions)
            call.replace(exp.Dot(this=exp.to_identifier(schema), expression=reached))

    keys = tuple(name for name, role in outputs if role != "value")
    values = tuple(name for name, role in outputs if role == "value")
    ends = [name for name, role in outputs if role == "end"]
    starts = [name for name, role in outputs if role == "start"]
    try:
        spark_sql = root.sql(dialect=DIALECT, normalize_functions=False)
    except Exception as e:  # sqlglot cannot print a built-in called with arguments it does not expect
        raise SqlError(
            f"the SQL cannot be translated ({type(e).__name__}: {e}); check each function's arguments"
        ) from None
    return Query(
        spark_sql=spark_sql,
        tables=read,
        aggregated=aggregated,
        windowed=any(w is not None for w in windows),
        key_columns=keys,
        value_columns=values,
        time_column=(ends or starts or [None])[0],
        window=timedelta(microseconds=max((w.size for w in windows if w is not None), default=0)),
        stateful_operators=stateful,
        event_window=_event_window([w for w in windows if w is not None], stateful),
        tree=root,
    )


def _event_window(windows: list[GroupWindow], stateful: int) -> tuple[str, int, int | None] | None:
    if stateful != 1 or len(windows) != 1:
        return None
    w = windows[0]
    if w.kind == "spark" or not (isinstance(w.time, exp.Column) and w.time.name.lower() == "rowtime"):
        return None
    return (w.kind, w.size, w.slide if w.kind == "hop" else None)


def _check_streaming_windows(root: exp.Expression) -> None:
    # Spark streaming cannot aggregate a session window on its own ("global aggregation with session window").
    for select in root.find_all(exp.Select):
        group = select.args.get("group")
        items = list(group.expressions) if group is not None else []
        if any(fname(g) == "session_window" for g in items) and len(items) == 1:
            raise SqlError(
                "a SESSION window needs at least one more GROUP BY key (e.g. the driver or customer id): "
                "Spark streaming cannot aggregate one session window over the whole stream"
            )


# --- what the output columns are --------------------------------------------------------------------------------


def _has_aggregate(node: exp.Expression) -> bool:
    """An aggregate call in this expression, not counting windowed (OVER) ones or nested SELECTs."""
    for child in node.walk(bfs=False, prune=lambda n: isinstance(n, exp.Window | exp.Select | exp.Subquery)):
        if child is not node and isinstance(child, exp.Window | exp.Select | exp.Subquery):
            continue
        if isinstance(child, exp.AggFunc) and not isinstance(child.parent, exp.Window):
            return True
        name = fname(child)
        if (
            name
            and (name in DAGGER_AGGREGATES or builtins.is_aggregate(name))
            and not isinstance(child.parent, exp.Window)
        ):
            return True
    return False


def _is_generator(node: exp.Expression) -> bool:
    name = spark_name(node) if isinstance(node, exp.Func) else None
    return name is not None and builtins.spark_functions().get(name.lower()) == "generator"


def _is_aggregated(select: exp.Select) -> bool:
    if select.args.get("group") is not None:
        return True
    having = select.args.get("having")
    return any(_has_aggregate(p) for p in select.expressions) or (having is not None and _has_aggregate(having))


def _window_bound(node: exp.Expression, select: exp.Select) -> str | None:
    """'start'/'end' if the expression is a window bound: TUMBLE_END(...), window.end or window(...).end."""
    name = fname(node)
    if name in WINDOW_BOUNDS:
        return WINDOW_BOUNDS[name][1]
    if isinstance(node, exp.Dot) and fname(node.this) in SPARK_WINDOWS and node.name.lower() in ("start", "end"):
        return node.name.lower()
    if isinstance(node, exp.Column) and node.table.lower() in SPARK_WINDOWS and node.name.lower() in ("start", "end"):
        group = select.args.get("group")
        windows = {*SPARK_WINDOWS, *WINDOW_GROUPS}
        if group is not None and any(fname(g) in windows for g in group.expressions):
            return node.name.lower()
    return None


def _auto_name(node: exp.Expression, position: int) -> str:
    """A stable, readable name for an unaliased output: count(1) -> count, S2Id(lat, long, 13) -> s2id_lat_long."""
    words: list[str] = []
    for child in node.walk(bfs=False):
        if isinstance(child, exp.Func):
            words.append(spark_name(child) or "")
        elif isinstance(child, exp.Column) and not child.is_star:
            words.append(child.name)
    text = "_".join(w for w in words if w).lower()
    cleaned = "".join(c if c.isalnum() else "_" for c in text)
    name = "_".join(part for part in cleaned.split("_") if part)[:60].rstrip("_")
    return name if name and not name[0].isdigit() else f"col_{position + 1}"


class _Outputs:
    """Names every output column of the top-level SELECT (aliasing unnamed ones) and says what each one is:
    'key' (group key or constant), 'value' (aggregate, or any column of a non-aggregating query), 'start'/'end'."""

    def __init__(self, root: exp.Query, checker: ColumnChecker) -> None:
        self.root = root
        self.checker = checker
        self.scopes: dict[int, Scope] = {id(s.expression): s for s in traverse_scope(root)}

    def name_and_classify(self) -> list[tuple[str, str]]:
        select = self._leftmost(self.root)
        scope = self.scopes[id(select)]
        aggregated = _is_aggregated(select)
        result: list[tuple[str, str]] = []
        used: set[str] = set()

        def add(name: str, role: str, explicit: bool) -> str:
            base, n = name, 1
            while name.lower() in used:
                if explicit:
                    raise SqlError(f"two output columns are named '{name}'; give each a distinct alias")
                n += 1
                name = f"{base}_{n}"
            used.add(name.lower())
            result.append((name, role))
            return name

        for position, projection in enumerate(list(select.expressions)):
            if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star):
                for name, role in self._star(projection, scope):
                    if name.lower() in used:
                        raise SqlError(
                            f"SELECT * gives two columns named '{name}'; list the columns and alias one of them"
                        )
                    add(name, role, explicit=True)
                continue
            inner = projection.unalias() if not isinstance(projection, exp.Aliases) else projection.this
            bound = _window_bound(inner, select)
            role = bound or self._role(inner, scope, aggregated)
            if isinstance(projection, exp.Aliases):  # posexplode(x) AS (pos, value)
                for alias in projection.expressions:
                    add(alias.name, role, explicit=True)
                continue
            if isinstance(projection, exp.Alias):
                add(projection.alias, role, explicit=True)
                continue
            if _is_generator(inner):
                raise SqlError(
                    f"name the columns {inner.sql(dialect=DIALECT)} makes: write e.g. explode(tags) AS tag, "
                    "or posexplode(tags) AS (position, tag)"
                )
            if bound is not None:
                base = f"window_{bound}"
            elif isinstance(inner, exp.Column | exp.Dot) and inner.name:
                base = inner.name
            else:
                base = _auto_name(inner, position)
            name = add(base, role, explicit=False)
            if name != inner.name or not isinstance(inner, exp.Column | exp.Dot):
                projection.replace(exp.alias_(projection.copy(), name, quoted=True))
        return result

    @staticmethod
    def _leftmost(query: exp.Expression) -> exp.Select:
        node = query
        while not isinstance(node, exp.Select):
            if isinstance(node, exp.SetOperation | exp.Subquery):
                node = node.this
            else:
                raise SqlError(f"cannot name the output of {node.sql(dialect=DIALECT)[:60]}; write a plain SELECT")
        return node

    def _role(self, inner: exp.Expression, scope: Scope, aggregated: bool) -> str:
        if _has_aggregate(inner):
            return "value"
        if isinstance(inner, exp.Column):
            derived = self._derived_role(inner, scope)
            if derived is not None:
                return derived
        return "key" if aggregated else "value"

    def _derived_role(self, column: exp.Column, scope: Scope) -> str | None:
        """The role a column had in the subquery / WITH query it comes from, e.g. its window end or aggregate."""
        name = column.name.lower()
        sources = read_sources(scope)
        candidates = [sources.get(column.table)] if column.table else list(sources.values())
        for source in candidates:
            if not isinstance(source, Scope):
                continue
            for inner_name, role in self._source_roles(source):
                if inner_name.lower() == name:
                    return role
        return None

    def _source_roles(self, source: Scope) -> list[tuple[str, str]]:
        expression = source.expression
        if isinstance(expression, exp.SetOperation):
            branches = source.set_operation_scopes
            return self._source_roles(branches[0]) if branches else []
        if not isinstance(expression, exp.Select):
            return []
        aggregated = _is_aggregated(expression)
        names = self.checker.outputs(source)
        roles: list[str] = []
        for projection in expression.expressions:
            if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star):
                return []  # a star in a subquery: roles unknown, callers fall back to the outer query's
            inner = projection.unalias()
            roles.append(_window_bound(inner, expression) or self._role(inner, source, aggregated))
        return list(zip(names, roles, strict=False))

    def _star(self, star: exp.Expression, scope: Scope) -> list[tuple[str, str]]:
        table = star.table.lower() if isinstance(star, exp.Column) else ""
        bare = star.this if isinstance(star, exp.Column) else star
        kept = {n.lower() for n in star_names(bare, [n for n, _ in self._star_all(table, scope)])}
        return [(n, r) for n, r in self._star_all(table, scope) if n.lower() in kept]

    def _star_all(self, table: str, scope: Scope) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for alias, source in read_sources(scope).items():
            if table and alias.lower() != table:
                continue
            if isinstance(source, Scope):
                roles = dict((n.lower(), r) for n, r in self._source_roles(source))
                out += [(n, roles.get(n.lower(), "value")) for n in self.checker.outputs(source)]
            else:
                found = self.checker.catalog.lookup(source.name)
                out += [(f.name, "value") for f in found[1].fields] if found else []
        return out
