"""spec → plan: everything checkable about a dagger before Spark starts (schemas, SQL, sink shape)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.tokens import Tokenizer, TokenType

from jobs.engine.event_time import WindowRule
from jobs.events.predicates import Predicate
from jobs.events.protobuf import ROWTIME, Computed, Decoder, SchemaError, field_names, find_message
from jobs.sinks import OutputShape, plan_problem
from jobs.spec import DaggerSpec, SpecError
from jobs.sql import Query, SqlError, translate
from jobs.sql.pushdown import push_filters, push_udfs
from jobs.udfs import SCALAR_UDFS, SHADOWED_BY_BUILTINS
from odin.paths import default_state_dir
from odin.teams.secrets import TeamSecrets


@dataclass(frozen=True)
class StreamPlan:
    table: str
    decoder: Decoder
    columns: list[str]  # top-level fields the query uses: only these are decoded
    computed: tuple[Computed, ...] = ()  # UDF calls the reader evaluates (jobs/sql/pushdown.py)
    filters: tuple[Predicate, ...] = ()  # WHERE conditions the reader evaluates (jobs/events/predicates.py)


@dataclass(frozen=True)
class DaggerPlan:
    spec: DaggerSpec
    streams: list[StreamPlan]
    query: Query
    shape: OutputShape
    output_mode: str  # append: rows are final (windows closed by the watermark); update: upserted
    checkpoint: Path
    secrets: Path  # the team's secrets file (odin/teams/secrets.py), read where the source runs
    late_rule: WindowRule | None = None  # how the reader tells late events (one stream, one window), else Spark
    asked: DaggerSpec | None = None  # on the platform: the spec as its team asked (`spec` is as it was placed)

    @property
    def schemas(self) -> list[str]:
        return [str(p) for p in self.spec.schemas]

    @property
    def fingerprint(self) -> str:
        """What this plan runs, as a digest: the platform plans a deploy once and sends the spec with this, and the
        driver, which must plan again in its own process, verifies it gets the same (jobs/engine/driver.py)."""
        parts = [
            self.spec.model_dump_json(),
            self.query.spark_sql,
            *(f"{s.table}:{s.columns}:{[c.describe() for c in s.computed]}:{[f.describe() for f in s.filters]}"
              for s in self.streams),
            repr((self.shape, self.output_mode, str(self.checkpoint), self.late_rule)),
        ]  # fmt: skip
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _referenced_names(tree: exp.Query, spark_sql: str) -> set[str] | None:
    """Every identifier (lower-cased) in the query Spark runs: a superset of the top-level fields it reads. None
    when a projection is `*`: every field."""
    if any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star)
        for select in tree.find_all(exp.Select)
        for p in select.expressions
    ):
        return None
    # Any token but strings: field names like `long` or `status` are keywords to the tokenizer.
    return {t.text.strip('`"').lower() for t in Tokenizer().tokenize(spark_sql) if t.token_type != TokenType.STRING}


def plan_dagger(spec: DaggerSpec, state_dir: Path | None = None) -> DaggerPlan:
    """Resolve schemas, translate and check the SQL. Raises SpecError with every reason it finds."""
    decoders: dict[str, Decoder] = {}
    for i, stream in enumerate(spec.streams):
        if not stream.resolved:  # callers resolve catalog streams (jobs.spec.resolve_streams) before planning
            raise SpecError(f"streams.{i}.stream: {stream.stream!r} was not looked up in the catalog")
        try:
            desc = find_message(stream.proto, spec.schemas)
            decoders[stream.table] = Decoder(desc, stream.timestamp_field)
        except SchemaError as e:
            raise SpecError(f"streams.{i}: {e}") from None
    try:
        query = translate(
            spec.sql,
            {table: d.spark_schema for table, d in decoders.items()},
            functions=SCALAR_UDFS.keys(),
            shadowed=SHADOWED_BY_BUILTINS,
        )
    except SqlError as e:
        raise SpecError(f"sql: {e}") from None
    computed: list[Computed] = []
    filters: list[Predicate] = []
    assert query.tree is not None
    if len(spec.streams) == 1:  # the reader evaluates what it can: pushdown works on translate's own tree
        table, decoder = next(iter(decoders.items()))
        fields = [n for n in field_names(decoder.desc) if n != ROWTIME]
        tree, computed = push_udfs(query.tree, table, fields, SCALAR_UDFS.keys())
        types = {f.name: f.type for f in decoder.arrow_schema if f.name in fields}
        tree, filters = push_filters(tree, table, types)
        if tree is not query.tree:
            query = replace(query, spark_sql=tree.sql(dialect="spark", normalize_functions=False), tree=tree)
    assert query.tree is not None
    used = _referenced_names(query.tree, query.spark_sql)  # after pushdown: fields only UDF calls read stay there
    streams = []
    for stream in spec.streams:
        full = decoders[stream.table]
        columns = [n for n in field_names(full.desc) if n != ROWTIME and (used is None or n.lower() in used)]
        pruned = Decoder(full.desc, stream.timestamp_field, columns, computed, filters)
        streams.append(StreamPlan(stream.table, pruned, columns, tuple(computed), tuple(filters)))
    state_dir = state_dir or default_state_dir()
    checkpoint = spec.checkpoint_dir or state_dir / "daggers" / spec.team / spec.name / "checkpoint"
    plan = DaggerPlan(
        spec=spec,
        streams=streams,
        query=query,
        shape=OutputShape(query.key_columns, query.value_columns, query.time_column),
        output_mode="update" if query.aggregated and not query.windowed else "append",
        checkpoint=checkpoint,
        late_rule=WindowRule(*query.event_window) if query.event_window and len(streams) == 1 else None,
        secrets=TeamSecrets(state_dir).path(spec.team),
    )
    problem = plan_problem(spec.sink, plan.shape, plan.output_mode, lambda: output_types(plan))
    if problem is not None:  # each sink says what it cannot do with this output
        raise SpecError(problem)
    return plan


def output_types(plan: DaggerPlan) -> dict[str, exp.DataType]:
    """The SQL type of each output column (lower-cased name) that sqlglot can infer from the streams' schemas without
    Spark; columns it cannot follow (window bounds, UDF results) are left out. The writer checks the real type."""
    schema = {s.table: {f.name: f.dataType.simpleString() for f in s.decoder.spark_schema.fields} for s in plan.streams}
    try:
        assert plan.query.tree is not None
        tree = qualify(
            plan.query.tree.copy(),
            schema=schema,
            dialect="spark",
            validate_qualify_columns=False,
            quote_identifiers=False,
        )
        tree = annotate_types(tree, schema=schema, dialect="spark")
    except Exception:  # best effort: sqlglot's inference is not Spark's, and the writer checks the real type anyway
        return {}
    unknown = (exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL)
    return {
        select.alias_or_name.lower(): select.type
        for select in tree.selects
        if select.type is not None and not select.type.is_type(*unknown)
    }
