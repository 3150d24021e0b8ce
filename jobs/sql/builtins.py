"""Spark's built-in SQL functions, as committed data, so validating a dagger's SQL needs no JVM.

`spark_functions.tsv` lists every system function of the pinned PySpark with its kind (aggregate, window, generator,
table, scalar) and Spark's own group for it (`agg_funcs`, `math_funcs`, ...; `-` for operators). Regenerate it after
upgrading PySpark:

    .venv/bin/python -m jobs.sql.builtins          # rewrites jobs/sql/spark_functions.tsv from a local session
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

DATA_FILE = Path(__file__).with_name("spark_functions.tsv")

# Why a dagger must never call a built-in, by name. A dagger reads only its declared streams, and its output must be a
# function of their events alone: the sinks write idempotently, so replaying a micro-batch after a crash must give
# identical rows. Refused as nondeterministic, anywhere in the query (a key, a value or a filter can each change what
# the sinks write): what Spark 4.3's analyzer marks nondeterministic, the processing-time clock, and the aggregates
# that keep one row's value by arrival order (first, last, any_value). Aggregates whose elements merely come in
# arrival order (collect_list, array_agg, listagg) stay: a replay gives the same elements, and sort_array() fixes the
# order. Conditional refusals (an option, a missing argument) are in validate.py.
_JAVA = "it calls arbitrary Java methods"
_TABLE = "it is a table function; a dagger reads only its declared streams"
_METADATA = "it lists engine metadata, not stream data; a dagger reads only its declared streams"
ENVIRONMENT = "it exposes the environment the job runs in"
CLOCK = (
    "replays would not be idempotent: it reads the clock (processing time), so the same events processed again give "
    "other rows; use the event time, rowtime"
)
_RANDOM = "replays would not be idempotent: it draws random values (even with a seed: Spark seeds each partition apart)"
_PARTITIONS = "replays would not be idempotent: its value depends on how Spark splits a batch into partitions"
_ORDER = (
    "replays would not be idempotent: its value depends on the order rows arrive in; "
    "use min()/max(), or max_by(x, rowtime) for the latest value"
)
# Avro is no dagger's stream format (streams are decoded before the SQL runs), this Spark has no Avro data source to
# run these with, and their options read a schema from any path or URL (avroSchemaUrl): no safe use is left.
_AVRO = "streams are decoded before the SQL runs, and its options (avroSchemaUrl) read a schema from any path or URL"
DENIED_REASONS: dict[str, str] = {
    **dict.fromkeys(("reflect", "java_method", "try_reflect"), _JAVA),
    "read_files": "it reads files; a dagger reads only its declared streams",
    "from_protobuf": "it reads a descriptor file from the driver's disk; streams are decoded before the SQL runs",
    "to_protobuf": "it reads a descriptor file from the driver's disk",
    **dict.fromkeys(("from_avro", "to_avro", "schema_of_avro"), _AVRO),
    "range": _TABLE,
    **dict.fromkeys(("sql_keywords", "collations"), _METADATA),
    **dict.fromkeys(
        (
            "current_user",
            "user",
            "session_user",
            "current_catalog",
            "current_database",
            "current_schema",
            "current_path",
            "current_timezone",
            "version",
            "input_file_name",
            "input_file_block_start",
            "input_file_block_length",
            "python_worker_logs",
        ),
        ENVIRONMENT,
    ),
    **dict.fromkeys(
        ("current_timestamp", "now", "current_date", "curdate", "current_time", "localtime", "localtimestamp"), CLOCK
    ),
    **dict.fromkeys(("rand", "randn", "random", "randstr", "uniform", "shuffle", "uuid"), _RANDOM),
    **dict.fromkeys(("spark_partition_id", "monotonically_increasing_id"), _PARTITIONS),
    **dict.fromkeys(("first", "first_value", "last", "last_value", "any_value"), _ORDER),
}
DENIED: frozenset[str] = frozenset(DENIED_REASONS)


_KINDS = {"agg_funcs": "aggregate", "window_funcs": "window", "generator_funcs": "generator", "table_funcs": "table"}


@cache
def spark_functions() -> dict[str, str]:
    """Lower-cased built-in function name -> kind (aggregate, window, generator, table, scalar), from the data file."""
    out: dict[str, str] = {}
    for line in DATA_FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, kind, _group = line.split("\t")
            out[name] = kind
    return out


def allowed_builtins() -> frozenset[str]:
    return frozenset(spark_functions()) - DENIED


def is_aggregate(name: str) -> bool:
    return spark_functions().get(name.lower()) == "aggregate"


def _generate() -> list[tuple[str, str, str]]:
    """Every system function of a local Spark session: its kind and the group its ExpressionInfo declares.

    The group alone misses aggregates filed elsewhere (hll_sketch_agg is in sketch_funcs), so the implementing class
    is checked too; builders (e.g. percentile_cont) have no such class and rely on the group."""
    from pyspark.sql import SparkSession  # a plain local session: the SQL folder needs nothing of the engine's

    spark = SparkSession.builder.master("local[1]").appName("daggers-sql-builtins").getOrCreate()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    catalog = spark._jsparkSession.sessionState().catalog()
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    expressions = "org.apache.spark.sql.catalyst.expressions."
    families = [
        (jvm.java.lang.Class.forName(expressions + "aggregate.AggregateFunction", False, loader), "aggregate"),
        (jvm.java.lang.Class.forName(expressions + "Generator", False, loader), "generator"),
    ]
    rows: list[tuple[str, str, str]] = []
    try:
        for fn in sorted(spark.catalog.listFunctions(), key=lambda f: f.name):
            if fn.namespace is not None:  # system functions only, never a session's temporary UDFs
                continue
            info = catalog.lookupFunctionInfo(jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(fn.name))
            group = info.getGroup() or "-"
            kind = _KINDS.get(group, "scalar")
            if kind == "scalar" and fn.className:
                cls = jvm.java.lang.Class.forName(fn.className, False, loader)
                kind = next((k for family, k in families if family.isAssignableFrom(cls)), "scalar")
            rows.append((fn.name, kind, group))
    finally:
        spark.stop()
    return rows


def main() -> None:
    import pyspark

    rows = _generate()
    header = [
        f"# Spark {pyspark.__version__} system functions: name<TAB>kind<TAB>group (Spark's ExpressionInfo group).",
        "# Generated by `.venv/bin/python -m jobs.sql.builtins` from spark.catalog.listFunctions(); do not edit.",
    ]
    DATA_FILE.write_text("\n".join(header + ["\t".join(row) for row in rows]) + "\n")
    print(f"wrote {len(rows)} functions to {DATA_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
