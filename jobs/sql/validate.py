"""Checks that run before anything starts: which tables, functions and columns a dagger's SQL may use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType, TimestampType
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, traverse_scope

from jobs.sql import builtins
from jobs.sql.dagger import DAGGER_FUNCTIONS, DISPLAY_NAMES, SPARK_WINDOWS, UNSUPPORTED, WINDOW_GROUPS, fname
from jobs.sql.errors import SqlError, listing, suggest

ROWTIME = "rowtime"
DIALECT = "spark"


class Catalog:
    """The declared streams: table name -> Spark schema, each with the engine's `rowtime` event-time column."""

    def __init__(self, tables: Mapping[str, StructType]) -> None:
        if not tables:
            raise SqlError("no streams are declared; a dagger's SQL reads at least one declared stream")
        self._tables: dict[str, tuple[str, StructType]] = {}
        for name, schema in tables.items():
            if not any(f.name.lower() == ROWTIME for f in schema.fields):
                schema = StructType([*schema.fields, StructField(ROWTIME, TimestampType())])
            self._tables[name.lower()] = (name, schema)

    def names(self) -> list[str]:
        return [name for name, _ in self._tables.values()]

    def lookup(self, name: str) -> tuple[str, StructType] | None:
        return self._tables.get(name.lower())


def field_paths(fields: Iterable[StructField], prefix: str = "") -> list[str]:
    """Top-level names first, then nested struct paths (a.b, a.b.c), as a user would type them."""
    fields = list(fields)
    top = [prefix + f.name for f in fields]
    nested: list[str] = []
    for f in fields:
        inner = _struct_of(f.dataType)
        if inner is not None:
            nested += field_paths(inner.fields, prefix + f.name + ".")
    return top + nested


def _struct_of(dtype: DataType) -> StructType | None:
    # Spark lets `arr.field` reach into an array of structs (giving an array of that field).
    while isinstance(dtype, ArrayType):
        dtype = dtype.elementType
    return dtype if isinstance(dtype, StructType) else None


# --- tables -----------------------------------------------------------------------------------------------------


def query_scopes(root: exp.Expression) -> list[Scope]:
    """sqlglot's scopes of the query: each SELECT, set operation, subquery and WITH query, innermost first."""
    try:
        return list(traverse_scope(root))
    except OptimizeError as e:
        raise SqlError(f"the query's structure is not valid: {e}") from None


def read_sources(scope: Scope) -> dict[str, exp.Table | Scope]:
    """What a scope's FROM, JOINs and LATERAL VIEWs read, by alias: sqlglot also lists every WITH query visible
    there among its sources, read or not."""
    read = {name for name, _ in scope.references}
    return {name: source for name, source in scope.sources.items() if name in read or name not in scope.cte_sources}


def check_tables(root: exp.Expression, catalog: Catalog) -> tuple[str, ...]:
    """Every table read is a declared stream or a WITH query visible where it is read; returns the declared names
    read, in order.

    Table names are respelled as declared, so the SQL matches the temp views the engine registers. A WITH query is
    visible only in the query defining it (its subqueries and later WITH queries included); a name it does not cover
    would reach Spark's catalog at run time, so it must be a declared stream. sqlglot's scopes say which WITH queries
    a reference sees, but match names as written while Spark ignores case: a reference is respelled like its WITH
    query, so later scope walks (columns, outputs) resolve it too."""
    declared = listing(catalog.names())
    visible = {
        id(table): {name.lower(): name for name in scope.cte_sources}
        for scope in query_scopes(root)
        for table in scope.tables
    }
    defined = {cte.alias_or_name.lower() for cte in root.find_all(exp.CTE)}
    read: list[str] = []
    for node in root.find_all(exp.Values, exp.Lateral):
        if isinstance(node, exp.Values):
            raise SqlError(f"VALUES cannot be read: a dagger reads only its declared streams ({declared})")
        if not node.args.get("view"):
            raise SqlError(
                f"{node.sql(dialect=DIALECT)[:60]}: LATERAL TABLE/subqueries are not supported; "
                "use LATERAL VIEW explode(array_column) alias AS column"
            )
    for table in list(root.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            raise SqlError(
                f"{table.this.sql(dialect=DIALECT)} in FROM is a table-valued function; "
                f"a dagger reads only its declared streams: {declared}"
            )
        if table.args.get("db") or table.args.get("catalog"):
            raise SqlError(
                f"{table.sql(dialect=DIALECT)} is not a declared stream: catalog tables and file paths "
                f"(parquet.`/path`, csv.`/path`, ...) cannot be read; declared streams: {declared}"
            )
        name = table.name
        cte = visible.get(id(table), {}).get(name.lower())
        if cte is not None:
            if cte != name:
                table.set("this", exp.to_identifier(cte))
            continue
        found = catalog.lookup(name)
        if found is None:
            hint = (
                f" '{name}' is a WITH query that is not visible here: it can be read only inside the query whose WITH "
                "defines it, and by the WITH queries after it; define it in a WITH enclosing every query reading it"
                if name.lower() in defined
                else suggest(name, catalog.names())
            )
            raise SqlError(f"unknown table '{name}'; declared streams: {declared}.{hint}")
        table.set("this", exp.to_identifier(found[0], quoted=True))
        if found[0] not in read:
            read.append(found[0])
    if not read:
        raise SqlError(f"the query reads no declared stream; read one of: {declared}")
    return tuple(read)


# --- functions --------------------------------------------------------------------------------------------------


def spark_name(node: exp.Func) -> str | None:
    """The function name Spark will see for a call: as written for plain calls, as generated for sqlglot's typed
    ones (e.g. SUBSTR -> SUBSTRING, a bare CURRENT_DATE); None for syntax that is not a call (CASE ... END, x BETWEEN
    ...)."""
    if isinstance(node, exp.Anonymous):
        return node.name
    try:
        text = node.sql(dialect=DIALECT)
    except Exception:  # sqlglot cannot print a call with unexpected arguments; name it as parsed
        return node.sql_name()
    head, paren, _ = text.partition("(")
    head = head.strip()
    if not head or not head.replace("_", "").isalnum():
        return None
    return head if paren or not any(node.args.values()) else None


def denied(name: str) -> SqlError:
    """The refusal of a call of a built-in in builtins.DENIED."""
    return SqlError(f"function {name}() is not allowed in a dagger: {builtins.DENIED_REASONS[name.lower()]}")


# Built-ins taking an options map -> the position of that argument. A few options name a file or URL Spark opens when
# the query runs (from_xml's rowValidationXSDPath reads an XSD from any path or URL); the others only shape parsing
# or printing, so the functions stay allowed and only such options are refused. Spark takes options only as a map(...)
# call; its keys are checked one by one, so each must be a literal (a computed key cannot be checked).
_OPTIONS_AT = {
    **dict.fromkeys(("from_json", "from_csv", "from_xml"), 2),
    **dict.fromkeys(("schema_of_json", "schema_of_csv", "schema_of_xml", "to_json", "to_csv", "to_xml"), 1),
}
# Words of option keys naming a file or URL: rowValidationXSDPath today, any such option a later Spark adds.
_PATH_WORDS = ("path", "url", "file")


def check_functions(root: exp.Expression, udfs: Mapping[str, str]) -> None:
    """Every call is a Spark built-in (minus dangerous ones), a Dagger construct or a registered UDF."""
    allowed = builtins.allowed_builtins()
    for node in root.find_all(exp.Func):
        name = spark_name(node)
        if name is None:
            continue
        low = name.lower()
        if low in builtins.DENIED:
            raise denied(name)
        refusal = _refused_use(node, name)
        if refusal is not None:
            raise SqlError(refusal)
        if low in UNSUPPORTED:
            raise SqlError(UNSUPPORTED[low])
        if low in allowed or low in udfs or low in DAGGER_FUNCTIONS:
            continue
        registered = listing(sorted(udfs.values(), key=str.lower), limit=100)
        hint = suggest(name, [*udfs.values(), *DISPLAY_NAMES.split(", "), *allowed])
        raise SqlError(
            f"unknown function {name}();{hint} Registered UDFs: {registered}. Dagger functions: {DISPLAY_NAMES}. "
            "Any Spark SQL built-in function works too"
        )


def _refused_use(call: exp.Func, name: str) -> str | None:
    """Why this call of an allowed built-in is refused, for built-ins only some uses of which are unsafe."""
    low = name.lower()
    args = _arguments(call)
    if low in _OPTIONS_AT and len(args) > _OPTIONS_AT[low]:
        return _refused_options(name, args[_OPTIONS_AT[low]])
    # sqlglot writes unix_timestamp() as UNIX_TIMESTAMP(CURRENT_TIMESTAMP()), which is what Spark computes too.
    if low == "unix_timestamp" and (not args or isinstance(args[0], exp.CurrentTimestamp)):
        clock = builtins.CLOCK
        return f"function {name}() without a time argument is not allowed in a dagger: {clock}: {name}(rowtime)"
    if low == "aes_encrypt" and _random_iv(args):
        return (
            f"function {name}() without an initialization vector is not allowed in a dagger: replays would not be "
            f"idempotent: it encrypts with a random one (modes GCM and CBC); pass one: {name}(input, key, mode, "
            "padding, iv)"
        )
    return None


def _refused_options(name: str, options: exp.Expression) -> str | None:
    keys = options.args["keys"].expressions if isinstance(options, exp.VarMap) else None
    if keys is None or not all(isinstance(k, exp.Literal) and k.is_string for k in keys):
        return (
            f"the options of {name}() must be written as map('key', 'value', ...) with literal keys: other forms "
            "cannot be checked for options that read a file or URL"
        )
    for key in keys:
        if any(word in key.name.lower() for word in _PATH_WORDS):
            return (
                f"option '{key.name}' of {name}() is not allowed in a dagger: it reads a file or URL, and a dagger "
                "reads only its declared streams; remove it"
            )
    return None


def _random_iv(args: list[exp.Expression]) -> bool:
    """aes_encrypt(input, key[, mode[, padding[, iv[, aad]]]]) draws a random IV unless the mode is ECB or an IV is
    given (an empty one means random too)."""
    mode = args[2] if len(args) > 2 else None
    iv = args[4] if len(args) > 4 else None
    if isinstance(mode, exp.Literal) and mode.name.upper() == "ECB":
        return False
    return iv is None or (isinstance(iv, exp.Literal) and iv.is_string and not iv.name)


def _arguments(call: exp.Func) -> list[exp.Expression]:
    """A call's arguments in the order written: sqlglot keeps a typed call's under named keys, declared in order."""
    if isinstance(call, exp.Anonymous):
        return list(call.expressions)
    values = [call.args.get(key) for key in call.arg_types]
    return [e for v in values for e in (v if isinstance(v, list) else [v]) if isinstance(e, exp.Expression)]


# --- columns ----------------------------------------------------------------------------------------------------

# Clauses where Spark lets a column name an output alias of the same SELECT.
_ALIAS_CLAUSES = {"expressions", "group", "having", "order", "qualify", "sort", "cluster", "distribute"}


class _Source:
    """What one FROM item offers: column name -> Spark type (None when unknown, e.g. a subquery's output)."""

    def __init__(self, label: str, columns: dict[str, DataType | None], display: list[str]) -> None:
        self.label = label
        self.columns = columns
        self.display = display


class ColumnChecker:
    """Resolves every column reference like Spark would, and says what is valid when one does not resolve."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._outputs: dict[int, list[str]] = {}

    def check(self, root: exp.Expression) -> None:
        for scope in query_scopes(root):
            for column in scope.columns:
                self._check_column(scope, column)
            for star in scope.stars:
                sources = read_sources(scope)
                if isinstance(star, exp.Column) and star.table and star.table.lower() not in _lower(sources):
                    raise SqlError(
                        f"{star.sql(dialect=DIALECT)}: no table or alias '{star.table}' in this SELECT; "
                        f"tables here: {listing(sources)}"
                    )

    # A column reference and the struct fields after it: `a.b.c.d` may be table a, column b, fields c.d.
    def _check_column(self, scope: Scope, column: exp.Column) -> None:
        if column.is_star:
            return
        parts = [p.name for p in column.parts]
        node: exp.Expression = column
        while isinstance(node.parent, exp.Dot) and node.parent.this is node:
            node = node.parent
            parts.append(node.expression.name)
        clause = _clause(column, scope)
        current: Scope | None = scope
        while current is not None:
            if self._resolve(current, parts):
                return
            current = current.parent  # correlated reference to an outer query
        select = scope.expression if isinstance(scope.expression, exp.Select) else None
        aliases = {a.lower() for a in _aliases(select)} if select is not None else set()
        if parts[0].lower() in aliases:
            if clause in _ALIAS_CLAUSES:
                return
            raise SqlError(
                f"'{parts[0]}' is an output alias of the SELECT, which {clause.upper()} cannot use; "
                "repeat the expression there instead"
            )
        if select is not None and parts[0].lower() in SPARK_WINDOWS and _groups_by_window(select):
            return  # Spark's window()/session_window() result struct, e.g. window.end
        if len(parts) == 1 and parts[0].lower() in builtins.DENIED:
            raise denied(parts[0])  # Spark reads a bare `user`, `current_date`, ... naming no column as that call
        self._unknown(scope, parts)

    def _resolve(self, scope: Scope, parts: list[str]) -> bool:
        sources = self._sources(scope)
        head = parts[0].lower()
        if len(parts) >= 2 and head in sources:
            source = sources[head]
            name = parts[1].lower()
            if name not in source.columns:
                raise SqlError(
                    f"unknown column '{parts[1]}' in {source.label}; valid: {listing(source.display)}."
                    f"{suggest(parts[1], source.display)}"
                )
            self._check_fields(source, parts[1], source.columns[name], parts[2:])
            return True
        matches = [s for s in sources.values() if head in s.columns]
        if len(matches) > 1:
            labels = " and ".join(s.label for s in matches)
            raise SqlError(f"column '{parts[0]}' is ambiguous: it is in {labels}; qualify it, e.g. alias.{parts[0]}")
        if matches:
            self._check_fields(matches[0], parts[0], matches[0].columns[head], parts[1:])
            return True
        return False

    def _check_fields(self, source: _Source, column: str, dtype: DataType | None, fields: list[str]) -> None:
        path = column
        for field in fields:
            if dtype is None or isinstance(dtype, MapType):
                return  # unknown type, or a map key: Spark decides at run time
            struct = _struct_of(dtype)
            if struct is None:
                raise SqlError(f"'{path}' in {source.label} is a {dtype.simpleString()}, it has no field '{field}'")
            by_name = {f.name.lower(): f for f in struct.fields}
            if field.lower() not in by_name:
                valid = field_paths(struct.fields, path + ".")
                raise SqlError(
                    f"unknown field '{field}' in '{path}' ({source.label}); valid: {listing(valid)}."
                    f"{suggest(path + '.' + field, valid)}"
                )
            dtype = by_name[field.lower()].dataType
            path = f"{path}.{field}"

    def _unknown(self, scope: Scope, parts: list[str]) -> None:
        sources = list(self._sources(scope).values())
        name = ".".join(parts)
        if len(sources) == 1:
            valid = sources[0].display
            where = sources[0].label
        else:
            valid = [f"{s.label.split()[-1]}.{c}" for s in sources for c in s.display]
            where = " and ".join(s.label for s in sources) or "this SELECT"
        raise SqlError(f"unknown column '{name}' in {where}; valid: {listing(valid)}.{suggest(name, valid)}")

    def _sources(self, scope: Scope) -> dict[str, _Source]:
        out: dict[str, _Source] = {}
        for alias, source in read_sources(scope).items():
            if isinstance(source, exp.Table):
                found = self.catalog.lookup(source.name)
                if found is None:
                    continue
                name, schema = found
                label = f"table {name}" if alias.lower() == name.lower() else f"table {name} (as {alias})"
                columns: dict[str, DataType | None] = {f.name.lower(): f.dataType for f in schema.fields}
                out[alias.lower()] = _Source(label, columns, field_paths(schema.fields))
            elif isinstance(source, Scope):
                names = self.outputs(source)
                out[alias.lower()] = _Source(f"subquery {alias}", dict.fromkeys(n.lower() for n in names), names)
        return out

    def outputs(self, scope: Scope) -> list[str]:
        """Column names a subquery, WITH query, UNION or LATERAL VIEW offers to the query around it."""
        key = id(scope.expression)
        if key not in self._outputs:
            self._outputs[key] = self._compute_outputs(scope)
        return self._outputs[key]

    def _compute_outputs(self, scope: Scope) -> list[str]:
        expression = scope.expression
        if scope.outer_columns:  # (SELECT ...) AS x(a, b) and WITH x(a, b) AS (...) rename the outputs
            return list(scope.outer_columns)
        if isinstance(expression, exp.SetOperation):
            branches = scope.set_operation_scopes
            return self.outputs(branches[0]) if branches else []
        if isinstance(expression, exp.Lateral):
            alias = expression.args.get("alias")
            columns = [c.name for c in alias.columns] if alias is not None and alias.columns else []
            return columns or ["col", "pos", "key", "value"]  # Spark's default generator output names
        if not isinstance(expression, exp.Select):
            return []
        names: list[str] = []
        sources = self._sources(scope)
        for projection in expression.expressions:
            if isinstance(projection, exp.Star):
                names += star_names(projection, [c for s in sources.values() for c in s.display if "." not in c])
            elif isinstance(projection, exp.Column) and projection.is_star:
                source = sources.get(projection.table.lower())
                names += star_names(projection.this, [c for c in source.display if "." not in c] if source else [])
            elif isinstance(projection, exp.Aliases):  # posexplode(x) AS (pos, value)
                names += [alias.name for alias in projection.expressions]
            else:
                names.append(projection.alias_or_name or projection.sql(dialect=DIALECT).lower())
        return names


def star_names(star: exp.Expression, names: list[str]) -> list[str]:
    """The columns `*` expands to, minus those of `* EXCEPT (a, b)`."""
    excluded = {e.name.lower() for e in star.args.get("except_") or star.args.get("except") or []}
    return [n for n in names if n.lower() not in excluded]


def _lower(names: Iterable[str]) -> set[str]:
    return {n.lower() for n in names}


def _aliases(select: exp.Select) -> list[str]:
    return [p.alias for p in select.expressions if isinstance(p, exp.Alias)]


def _groups_by_window(select: exp.Select) -> bool:
    group = select.args.get("group")
    return group is not None and any(fname(g) in SPARK_WINDOWS or fname(g) in WINDOW_GROUPS for g in group.expressions)


def _clause(node: exp.Expression, scope: Scope) -> str:
    """The clause of `scope`'s SELECT a node sits in: expressions (the select list), where, group, having, ..."""
    while node.parent is not None and node.parent is not scope.expression:
        node = node.parent
    return node.arg_key or ""
