"""The dagger SQL dialect (jobs.sql): translation and validation without Spark, then the translated seed queries run
in Spark, as a batch (results checked against plain Python) and as a streaming query with a watermark."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jobs.sql import Query, SqlError, translate
from jobs.sql import builtins as spark_builtins
from jobs.sql.pushdown import push_udfs
from tests.support.seeds import SUPPLY_S2_SQL, SUPPLY_SQL, SURGE_SQL
from tests.support.sql import BOOKING, SUPPLY, UDFS

PAYMENT = StructType([StructField("order_number", StringType()), StructField("paid", DoubleType())])

JOIN_SQL = """SELECT b.city_id, count(1) AS paid_orders, sum(p.paid) AS revenue,
       TUMBLE_END(b.rowtime, INTERVAL '1' MINUTE) AS window_timestamp
FROM booking AS b JOIN payment AS p
  ON b.order_number = p.order_number
 AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE
GROUP BY TUMBLE(b.rowtime, INTERVAL '1' MINUTE), b.city_id"""


def booking(sql: str, functions: list[str] = UDFS) -> Query:
    return translate(sql, {"data_stream": BOOKING}, functions)


def supply(sql: str) -> Query:
    return translate(sql, {"supply_data": SUPPLY}, UDFS)


def sql_error(sql: str, tables: dict[str, StructType] | None = None) -> str:
    with pytest.raises(SqlError) as e:
        translate(sql, tables or {"data_stream": BOOKING}, UDFS)
    return str(e.value)


def commons_math_percentile(values: list[float], p: float) -> float:
    """Dagger's PercentileAggregator: Apache commons-math Percentile(p).evaluate, LEGACY estimation."""
    v = sorted(values)
    n = len(v)
    pos = n if p == 100 else p / 100 * (n + 1)
    if pos < 1:
        return v[0]
    if pos >= n:
        return v[-1]
    lower, upper = v[int(pos) - 1], v[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


# --- translation ------------------------------------------------------------------------------------------------


def test_surge_seed_query_translates_tumble_and_keeps_aliases() -> None:
    q = booking(SURGE_SQL)
    assert "GROUP BY window(rowtime, '1 minute'), city_id, S2Id(lat, long, 13), vehicle_type" in q.spark_sql
    assert "window(rowtime, '1 minute').end AS window_timestamp" in q.spark_sql
    assert "`data_stream`" in q.spark_sql and "TUMBLE" not in q.spark_sql.upper()
    assert q.tables == ("data_stream",)
    assert q.aggregated and q.windowed and q.window == timedelta(minutes=1)
    assert q.key_columns == ("tag_city_id", "tag_s2id", "tag_vehicle_type", "window_timestamp")
    assert q.value_columns == ("num_of_bookings",)
    assert q.time_column == "window_timestamp"
    assert q.event_window == ("tumble", 60_000_000, None)


def test_supply_seed_query_maps_distinct_count_to_a_streaming_safe_exact_count() -> None:
    q = supply(SUPPLY_SQL)
    assert "size(collect_set(driver_id)) AS drivers" in q.spark_sql
    assert "DISTINCT" not in q.spark_sql.upper()
    assert q.value_columns == ("drivers",)
    assert q.key_columns == ("label_s2id", "label_driver_status", "window_timestamp")
    assert q.time_column == "window_timestamp"


def test_nested_fields_cast_and_constants_of_the_s2_seed_query() -> None:
    q = supply(SUPPLY_S2_SQL)
    assert "window(rowtime, '1 minute').start AS window_start_time" in q.spark_sql
    assert "CAST(S2Id(driver_location.latitude, driver_location.longitude, 13) AS BIGINT) AS s2_id" in q.spark_sql
    assert q.key_columns == ("window_start_time", "window_end_time", "s2_id", "s2_id_level")
    assert q.value_columns == ("num_drivers",)
    assert q.time_column == "window_end_time"  # the end wins over the start


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT city_id, FROM data_stream",
        "SELECT city_id,\n  FROM data_stream",
        "SELECT city_id , count(1) AS n, FROM `data_stream` GROUP BY city_id,",
        "SELECT city_id, count(1) AS n, FROM data_stream GROUP BY city_id, ORDER BY city_id",
        "SELECT n FROM (SELECT count(1) AS n, FROM data_stream),",
    ],
)
def test_trailing_commas_are_accepted(sql: str) -> None:
    spark_sql = booking(sql).spark_sql
    assert ", FROM" not in spark_sql and not spark_sql.rstrip().endswith(",")


@pytest.mark.parametrize(
    ("interval", "spark"),
    [
        ("INTERVAL '60' SECOND", "'1 minute'"),
        ("INTERVAL '90' SECOND", "'90 seconds'"),
        ("INTERVAL '1' MINUTE", "'1 minute'"),
        ("INTERVAL '15' MINUTE", "'15 minutes'"),
        ("INTERVAL '1' HOUR", "'1 hour'"),
        ("INTERVAL '1' DAY", "'1 day'"),
        ("INTERVAL '500' MILLISECOND", "'500 milliseconds'"),
        ("INTERVAL 2 MINUTES", "'2 minutes'"),
    ],
)
def test_tumble_intervals_become_spark_window_durations(interval: str, spark: str) -> None:
    q = booking(f"SELECT TUMBLE_END(rowtime, {interval}) AS t FROM data_stream GROUP BY TUMBLE(rowtime, {interval})")
    assert f"GROUP BY window(rowtime, {spark})" in q.spark_sql


def test_hop_is_spark_window_with_size_then_slide() -> None:
    q = booking(
        "SELECT HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS s, "
        "HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS e, sum(amount) AS total "
        "FROM data_stream GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)"
    )
    assert "GROUP BY window(rowtime, '5 minutes', '1 minute')" in q.spark_sql
    assert "window(rowtime, '5 minutes', '1 minute').end AS e" in q.spark_sql
    assert (q.key_columns, q.value_columns, q.time_column) == (("s", "e"), ("total",), "e")
    assert q.window == timedelta(minutes=5)
    assert q.event_window == ("hop", 300_000_000, 60_000_000)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT count(1) AS n FROM data_stream GROUP BY SESSION(rowtime, INTERVAL '30' SECOND), city_id",
            ("session", 30_000_000, None),
        ),
        (
            "SELECT count(1) AS n FROM data_stream GROUP BY window(rowtime, '10 seconds', '5 seconds')",
            ("hop", 10_000_000, 5_000_000),
        ),
        # Windows whose late events the reader cannot tell: Spark drops them (counted as dropped_by_watermark).
        ("SELECT count(1) AS n FROM data_stream GROUP BY window(rowtime, '1 hour 30 minutes')", None),
        (
            "SELECT count(DISTINCT city_id) AS n FROM (SELECT DISTINCT city_id, rowtime FROM data_stream) "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            None,
        ),
        ("SELECT city_id, count(1) AS n FROM data_stream GROUP BY city_id", None),
    ],
)
def test_the_window_the_reader_tells_late_events_by(sql: str, expected: tuple | None) -> None:
    assert booking(sql).event_window == expected


def test_tumble_end_must_match_the_group_window() -> None:
    group_by = " FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    msg = sql_error("SELECT TUMBLE_END(rowtime, INTERVAL '2' MINUTE) AS t" + group_by)
    assert "does not match the GROUP BY window" in msg
    # 60 seconds and 1 minute are the same window.
    booking("SELECT TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS t" + group_by)
    assert "needs GROUP BY TUMBLE" in sql_error("SELECT TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS t FROM data_stream")
    assert "not a window duration" in sql_error("SELECT count(1) FROM data_stream GROUP BY TUMBLE(rowtime, 60)")
    assert "select TUMBLE_END" in sql_error("SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS t" + group_by)


def test_session_windows_need_another_key() -> None:
    q = supply(
        "SELECT driver_id, SESSION_START(rowtime, INTERVAL '5' MINUTE) AS s, SESSION_END(rowtime, INTERVAL '5' MINUTE) "
        "AS e, count(1) AS pings FROM supply_data GROUP BY SESSION(rowtime, INTERVAL '5' MINUTE), driver_id"
    )
    assert "GROUP BY session_window(rowtime, '5 minutes'), driver_id" in q.spark_sql
    assert "session_window(rowtime, '5 minutes').end AS e" in q.spark_sql
    assert q.windowed and q.time_column == "e" and q.key_columns == ("driver_id", "s", "e")
    msg = sql_error("SELECT count(1) FROM data_stream GROUP BY SESSION(rowtime, INTERVAL '5' MINUTE)")
    assert "needs at least one more GROUP BY key" in msg


def test_plain_group_by_is_aggregated_but_not_windowed() -> None:
    q = booking("SELECT city_id, count(1) AS n FROM data_stream GROUP BY city_id")
    assert q.aggregated and not q.windowed and q.time_column is None and q.window == timedelta(0)
    assert (q.key_columns, q.value_columns) == (("city_id",), ("n",))
    assert "belongs in GROUP BY" in sql_error("SELECT TUMBLE(rowtime, INTERVAL '1' MINUTE) AS w FROM data_stream")
    assert "more than one event-time window" in sql_error(
        "SELECT count(1) FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), window(rowtime, '1 hour')"
    )


def test_spark_sql_written_directly_passes_through() -> None:
    sql = (
        "SELECT window.start AS ws, window.end AS we, city_id, approx_count_distinct(order_number) AS orders, "
        "percentile(amount, 0.5) AS median FROM data_stream WHERE status = 'COMPLETED' "
        "GROUP BY window(rowtime, '5 minutes'), city_id"
    )
    q = booking(sql)
    assert q.spark_sql == (
        "SELECT window.start AS ws, window.end AS we, city_id, APPROX_COUNT_DISTINCT(order_number) AS orders, "
        "PERCENTILE(amount, 0.5) AS median FROM `data_stream` WHERE status = 'COMPLETED' "
        "GROUP BY window(rowtime, '5 minutes'), city_id"
    )
    assert q.windowed and q.time_column == "we"
    assert q.key_columns == ("ws", "we", "city_id") and q.value_columns == ("orders", "median")
    # Spark's window() given an ANSI interval (which it rejects) gets a duration string.
    q = booking("SELECT window.end AS we, count(1) AS n FROM data_stream GROUP BY window(rowtime, INTERVAL '1' MINUTE)")
    assert "GROUP BY window(rowtime, '1 minute')" in q.spark_sql
    # Durations only Spark parses, and start offsets, stay as written.
    for window in ("window(rowtime, '1 hour 30 minutes')", "window(rowtime, '1 hour', '10 minutes', '5 minutes')"):
        q = booking(f"SELECT window.end AS we, count(1) AS n FROM data_stream GROUP BY {window}")
        assert q.spark_sql.endswith(f"GROUP BY {window}") and q.windowed and q.time_column == "we"


def test_count_distinct_and_percentiles_become_exact_streaming_aggregates() -> None:
    q = booking(
        "SELECT city_id, count(DISTINCT order_number) AS orders, PercentileAggregator(95, amount) AS p95, "
        "Percentile(amount, 50) AS p50 FROM data_stream GROUP BY city_id"
    )
    assert "size(collect_set(order_number)) AS orders" in q.spark_sql
    assert q.spark_sql.count("SORT_ARRAY(COLLECT_LIST(CAST(amount AS DOUBLE)))") == 2
    assert "CAST(0.95 AS DOUBLE)" in q.spark_sql and "CAST(0.5 AS DOUBLE)" in q.spark_sql
    assert q.value_columns == ("orders", "p95", "p50") and not q.windowed
    assert "DistinctCount(x) (or COUNT(DISTINCT x))" in sql_error("SELECT sum(DISTINCT amount) FROM data_stream")
    assert "(0, 100]" in sql_error("SELECT PercentileAggregator(0, amount) FROM data_stream")


def test_unaliased_outputs_get_stable_names() -> None:
    q = booking(
        "SELECT city_id, count(1), sum(amount), S2Id(lat, long, 13), 13, TUMBLE_END(rowtime, INTERVAL '1' MINUTE), "
        "count(1) FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id, S2Id(lat, long, 13)"
    )
    names = ("city_id", "count", "sum_amount", "s2id_lat_long", "col_5", "window_end", "count_2")
    assert (*q.key_columns, *q.value_columns) == (
        "city_id",
        "s2id_lat_long",
        "col_5",
        "window_end",
        "count",
        "sum_amount",
        "count_2",
    )
    for name in names[1:]:
        assert f"AS `{name}`" in q.spark_sql
    assert booking(SURGE_SQL).spark_sql == booking(SURGE_SQL).spark_sql  # deterministic
    assert "distinct alias" in sql_error("SELECT city_id AS a, status AS a FROM data_stream")


def test_non_aggregating_query() -> None:
    q = booking("SELECT order_number AS o, d.* FROM (SELECT order_number, amount FROM data_stream) AS d")
    assert not q.aggregated and not q.windowed and q.time_column is None
    assert q.key_columns == () and q.value_columns == ("o", "order_number", "amount")
    assert "two columns named 'order_number'" in sql_error("SELECT order_number, d.* FROM data_stream AS d")
    q = booking("SELECT * FROM data_stream WHERE status = 'COMPLETED'")
    assert q.value_columns == (*BOOKING.fieldNames(), "rowtime")


def test_generators_stars_and_comments() -> None:
    q = booking("SELECT order_number, posexplode(tags) AS (position, tag) FROM data_stream -- one row per tag")
    assert q.value_columns == ("order_number", "position", "tag")
    assert "explode(tags) AS tag" in sql_error("SELECT explode(tags) FROM data_stream")
    assert booking("SELECT * EXCEPT (tags, rowtime) FROM data_stream;").value_columns == tuple(
        BOOKING.fieldNames()[:-1]
    )
    assert booking("SELECT city_id FROM data_stream; -- done").spark_sql == "SELECT city_id FROM `data_stream`"


def test_with_and_union_of_selects_and_roles_through_subqueries() -> None:
    q = booking(
        "WITH per_minute AS (SELECT city_id, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS minute, count(1) AS n "
        "FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id) "
        "SELECT city_id, minute, n FROM per_minute WHERE n > 1"
    )
    assert q.aggregated and q.windowed and q.time_column == "minute"
    assert q.key_columns == ("city_id", "minute") and q.value_columns == ("n",)
    q = booking(
        "SELECT city_id AS c, amount FROM data_stream WHERE status = 'A' "
        "UNION ALL SELECT city_id, amount * 2 FROM data_stream WHERE status = 'B'"
    )
    assert q.value_columns == ("c", "amount") and q.tables == ("data_stream",)


def test_two_stream_join_with_a_time_bound() -> None:
    q = translate(JOIN_SQL, {"booking": BOOKING, "payment": PAYMENT}, UDFS)
    assert q.tables == ("booking", "payment")
    assert "p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE" in q.spark_sql
    assert "GROUP BY window(b.rowtime, '1 minute'), b.city_id" in q.spark_sql
    assert q.key_columns == ("city_id", "window_timestamp") and q.value_columns == ("paid_orders", "revenue")
    tables = {"booking": BOOKING, "payment": PAYMENT}
    msg = sql_error(
        "SELECT order_number FROM booking JOIN payment ON booking.order_number = payment.order_number", tables
    )
    assert "ambiguous" in msg and "table booking" in msg and "table payment" in msg
    msg = sql_error("SELECT p.amount FROM booking b JOIN payment p ON b.order_number = p.order_number", tables)
    assert "unknown column 'amount' in table payment (as p); valid: order_number, paid, rowtime" in msg


# --- validation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CREATE TABLE x AS SELECT * FROM data_stream", "CREATE statement"),
        ("DROP TABLE data_stream", "DROP statement"),
        ("INSERT INTO x SELECT * FROM data_stream", "INSERT statement"),
        ("DELETE FROM data_stream", "DELETE statement"),
        ("SET spark.sql.ansi.enabled=false", "SET statement"),
        ("ADD JAR /tmp/evil.jar", "ADD JAR command"),
        ("CACHE TABLE data_stream", "CACHE statement"),
        ("EXPLAIN SELECT 1", "EXPLAIN command"),
        ("SELECT 1 FROM data_stream; DROP TABLE data_stream", "2 statements"),
        ("", "empty"),
        ("SELECT city_id FROM data_stream WHERE", "does not parse"),
        ("SELECT TRANSFORM(city_id) USING 'rm -rf /' AS (x) FROM data_stream", "runs a shell command"),
    ],
)
def test_only_one_select_is_allowed(sql: str, expected: str) -> None:
    assert expected in sql_error(sql)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM csv.`/tmp/x.csv`", "catalog tables and file paths"),
        ("SELECT * FROM spark_catalog.default.data_stream", "catalog tables and file paths"),
        ("SELECT * FROM `/etc/passwd`", "unknown table '/etc/passwd'; declared streams: data_stream"),
        ("SELECT * FROM data_streams", "unknown table 'data_streams'; declared streams: data_stream. Did you mean"),
        ("SELECT * FROM VALUES (1), (2) AS v(a)", "VALUES cannot be read"),
        ("SELECT * FROM data_stream, LATERAL TABLE(HistogramBucket(amount, '1,2')) AS T(b)", "LATERAL VIEW explode"),
    ],
)
def test_only_declared_streams_can_be_read(sql: str, expected: str) -> None:
    assert expected in sql_error(sql)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT S2ld(lat, long, 13) FROM data_stream", "unknown function S2ld(); Did you mean 'S2Id'?"),
        ("SELECT MapGet(tags, 'x') FROM data_stream", "Registered UDFs: Distance, ElementAt, FormatTimeInZone"),
    ],
)
def test_functions_must_be_spark_builtins_or_registered_udfs(sql: str, expected: str) -> None:
    assert expected in sql_error(sql)


# Each SQL reaches beyond the declared streams or would make a replayed micro-batch write other rows: refused with
# (part of) its reason, compared case-insensitively as sqlglot prints some function names in capitals.
ENVIRONMENT = "is not allowed in a dagger: it exposes the environment the job runs in"
REPLAYS = "is not allowed in a dagger: replays would not be idempotent"
INVISIBLE_WITH = "is a WITH query that is not visible here"
ATTACKS = [
    # Tables and files.
    ("SELECT * FROM parquet.`/etc/passwd`", "catalog tables and file paths"),
    # the platform's own data sources, registered in every dagger session (`dagger run` warms with the second)
    ("SELECT * FROM dagger_kafka.`other-team-topic`", "catalog tables and file paths"),
    ("SELECT * FROM dagger_warm.`x`", "catalog tables and file paths"),
    ("SELECT * FROM read_files('/etc')", "table-valued function"),
    ("SELECT read_files('/etc') FROM data_stream", "read_files() is not allowed in a dagger: it reads files"),
    ("SELECT * FROM range(10)", "table-valued function"),
    ("SELECT range(10) FROM data_stream", "range() is not allowed in a dagger: it is a table function"),
    ("SELECT * FROM IDENTIFIER('parquet.`/etc/passwd`')", "table-valued function"),
    ("SELECT sql_keywords() FROM data_stream", "sql_keywords() is not allowed in a dagger: it lists engine metadata"),
    # A WITH query read outside the query that defines it would be looked up in Spark's catalog.
    (
        "WITH a AS (SELECT * FROM data_stream) SELECT * FROM (SELECT * FROM a) x UNION ALL "
        "SELECT * FROM (WITH b AS (SELECT * FROM data_stream) SELECT * FROM b) y UNION ALL SELECT * FROM b",
        f"unknown table 'b'; declared streams: data_stream. 'b' {INVISIBLE_WITH}",
    ),
    (
        "SELECT * FROM (WITH c AS (SELECT * FROM data_stream) SELECT * FROM c) t JOIN c ON t.city_id = c.city_id",
        f"unknown table 'c'; declared streams: data_stream. 'c' {INVISIBLE_WITH}",
    ),
    (
        "SELECT city_id FROM data_stream WHERE EXISTS (SELECT 1 FROM c) "
        "AND city_id IN (WITH c AS (SELECT city_id FROM data_stream) SELECT city_id FROM c)",
        f"unknown table 'c'; declared streams: data_stream. 'c' {INVISIBLE_WITH}",
    ),
    ("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM data_stream) SELECT * FROM a", f"'b' {INVISIBLE_WITH}"),
    # Arbitrary Java, descriptor and schema files.
    ("SELECT reflect('java.lang.Runtime', 'getRuntime') FROM data_stream", "reflect() is not allowed"),
    ("SELECT java_method('java.lang.System', 'exit', 1) FROM data_stream", "java_method() is not allowed"),
    ("SELECT try_reflect('java.lang.System', 'exit', 1) FROM data_stream", "try_reflect() is not allowed"),
    ("SELECT system.builtin.reflect('java.lang.Runtime', 'getRuntime') FROM data_stream", "arbitrary Java methods"),
    ("SELECT from_protobuf(tags, 'M', '/etc/passwd') FROM data_stream", "from_protobuf() is not allowed"),
    ("SELECT to_protobuf(tags, 'M', '/etc/passwd') FROM data_stream", "reads a descriptor file"),
    (
        "SELECT from_avro(order_number, '\"string\"', map('avroSchemaUrl', 'file:///etc/passwd')) FROM data_stream",
        "from_avro() is not allowed in a dagger: streams are decoded before the SQL runs",
    ),
    ("SELECT to_avro(order_number) FROM data_stream", "to_avro() is not allowed in a dagger"),
    ("SELECT schema_of_avro('\"string\"', map()) FROM data_stream", "schema_of_avro() is not allowed in a dagger"),
    # Options naming a file or URL, or options that cannot be checked.
    (
        "SELECT from_xml(status, 'a INT', map('rowValidationXSDPath', '/etc/passwd')) FROM data_stream",
        "option 'rowValidationXSDPath' of from_xml() is not allowed in a dagger: it reads a file or URL",
    ),
    (
        "SELECT schema_of_xml(status, map('rowTag', 'a', 'ROWVALIDATIONXSDPATH', 'http://10.0.0.1/x.xsd')) "
        "FROM data_stream",
        "option 'ROWVALIDATIONXSDPATH' of schema_of_xml() is not allowed in a dagger: it reads a file or URL",
    ),
    (
        "SELECT from_json(status, 'a INT', str_to_map('mode:FAILFAST')) FROM data_stream",
        "the options of from_json() must be written as map('key', 'value', ...) with literal keys",
    ),
    (
        "SELECT from_csv(status, 'a INT', map_from_arrays(array('sep'), array(';'))) FROM data_stream",
        "the options of from_csv() must be written as map(",
    ),
    (
        "SELECT to_xml(named_struct('a', city_id), map(concat('rowValidation', 'XSDPath'), '/x')) FROM data_stream",
        "the options of to_xml() must be written as map('key', 'value', ...) with literal keys",
    ),
    ("SELECT schema_of_json(status, map('a', 'b', upper('c'), 'd')) FROM data_stream", "with literal keys"),
    # The environment.
    *[
        (f"SELECT {call} AS x FROM data_stream", f"{name}() {ENVIRONMENT}")
        for call, name in [
            ("current_user()", "current_user"),
            ("user()", "user"),
            ("user", "user"),
            ("session_user()", "session_user"),
            ("session_user", "session_user"),
            ("current_catalog()", "current_catalog"),
            ("current_database()", "current_database"),
            ("current_schema()", "current_schema"),
            ("current_path()", "current_path"),
            ("current_timezone()", "current_timezone"),
            ("version()", "version"),
            ("input_file_name()", "input_file_name"),
            ("input_file_block_start()", "input_file_block_start"),
            ("input_file_block_length()", "input_file_block_length"),
        ]
    ],
    # Nondeterminism: in a key, a value or a filter.
    *[
        (f"SELECT {call} AS x FROM data_stream", f"{name}() {REPLAYS}: {why}")
        for call, name, why in [
            ("uuid()", "uuid", "it draws random values"),
            ("rand()", "rand", "it draws random values"),
            ("rand(42)", "rand", "it draws random values (even with a seed"),
            ("randn()", "randn", "it draws random values"),
            ("random()", "rand", "it draws random values"),
            ("randstr(8)", "randstr", "it draws random values"),
            ("uniform(0, 10)", "uniform", "it draws random values"),
            ("shuffle(tags)", "shuffle", "it draws random values"),
            ("monotonically_increasing_id()", "monotonically_increasing_id", "its value depends on how Spark splits"),
            ("current_timestamp()", "current_timestamp", "it reads the clock (processing time)"),
            ("current_timestamp", "current_timestamp", "it reads the clock"),
            ("now()", "now", "it reads the clock"),
            ("current_date", "current_date", "it reads the clock"),
            ("curdate()", "current_date", "it reads the clock"),
            ("current_time()", "current_time", "it reads the clock"),
            ("localtimestamp()", "localtimestamp", "it reads the clock"),
            ("localtime()", "localtime", "it reads the clock"),
            ("first(amount)", "first", "its value depends on the order rows arrive in"),
            ("first_value(amount)", "first_value", "its value depends on the order rows arrive in"),
            ("last(amount)", "last", "its value depends on the order rows arrive in"),
            ("last_value(amount)", "last_value", "its value depends on the order rows arrive in"),
            ("any_value(amount)", "any_value", "its value depends on the order rows arrive in"),
        ]
    ],
    ("SELECT city_id FROM data_stream WHERE spark_partition_id() = 0", f"spark_partition_id() {REPLAYS}"),
    ("SELECT uuid() AS id, count(1) AS n FROM data_stream GROUP BY uuid()", f"uuid() {REPLAYS}"),
    (
        "SELECT count(1) AS n FROM data_stream GROUP BY TUMBLE(current_timestamp(), INTERVAL '1' MINUTE)",
        f"current_timestamp() {REPLAYS}",
    ),
    (
        "SELECT unix_timestamp() AS t FROM data_stream",
        "unix_timestamp() without a time argument is not allowed in a dagger: replays would not be idempotent: it "
        "reads the clock",
    ),
    ("SELECT aes_encrypt(status, '0123456789abcdef') AS x FROM data_stream", "without an initialization vector"),
    ("SELECT aes_encrypt(status, '0123456789abcdef', 'GCM', 'DEFAULT', '') AS x FROM data_stream", "random one"),
    ("SELECT n FROM (SELECT rand() AS n FROM data_stream) AS r", f"rand() {REPLAYS}"),
    ("WITH r AS (SELECT city_id FROM data_stream WHERE rand() < 0.5) SELECT * FROM r", f"rand() {REPLAYS}"),
]


@pytest.mark.parametrize(("sql", "expected"), ATTACKS)
def test_attacks_are_refused_with_their_reason(sql: str, expected: str) -> None:
    assert expected.lower() in sql_error(sql).lower()


def test_safe_uses_of_guarded_functions_and_with_queries_translate() -> None:
    for sql in (
        "SELECT from_json(status, 'a INT', map('mode', 'PERMISSIVE')) AS j FROM data_stream",
        "SELECT from_xml(status, 'a INT', map('rowTag', 'a')) AS x, to_json(named_struct('a', city_id)) AS y "
        "FROM data_stream",
        "SELECT to_json(map('path', order_number)) AS j FROM data_stream",  # a map of data, not options
        "SELECT unix_timestamp(rowtime) AS t FROM data_stream",
        "SELECT aes_encrypt(status, '0123456789abcdef', 'GCM', 'DEFAULT', unhex('000000000000000000000000')) AS x "
        "FROM data_stream",
        "SELECT city_id, sort_array(collect_list(amount)) AS amounts FROM data_stream GROUP BY city_id",
        "WITH a AS (SELECT city_id FROM data_stream) SELECT * FROM (SELECT city_id FROM a) AS x "
        "WHERE EXISTS (SELECT 1 FROM a WHERE a.city_id = x.city_id)",
        "WITH a AS (SELECT city_id FROM data_stream), b AS (SELECT city_id FROM a) SELECT city_id FROM b",
    ):
        booking(sql)
    # Spark matches WITH names regardless of case; the reference is respelled like its WITH query.
    assert (
        "FROM Per_City"
        in booking("WITH Per_City AS (SELECT city_id FROM data_stream) SELECT * FROM per_city").spark_sql
    )
    # A WITH query may shadow the stream it reads; each reference resolves to what Spark reads.
    q = booking(
        "WITH data_stream AS (SELECT city_id FROM data_stream WHERE city_id > 1) SELECT city_id FROM data_stream"
    )
    assert q.tables == ("data_stream",) and "FROM `data_stream` WHERE" in q.spark_sql
    # A WITH query the SELECT does not read adds no columns to it.
    q = booking("WITH a AS (SELECT city_id FROM data_stream) SELECT * FROM data_stream")
    assert q.value_columns == (*BOOKING.fieldNames(), "rowtime")
    assert booking("WITH a AS (SELECT city_id FROM data_stream) SELECT city_id FROM data_stream").value_columns == (
        "city_id",
    )


def test_registered_udfs_keep_their_names_even_when_sqlglot_knows_one() -> None:
    q = booking("SELECT Split(status, ',') AS parts, MapGet(tags, 'k') AS v FROM data_stream", [*UDFS, "MapGet"])
    assert "Split(status, ',') AS parts" in q.spark_sql and "MapGet(tags, 'k') AS v" in q.spark_sql
    assert "S2ID(lat, long, 13)" in booking("SELECT S2ID(lat, long, 13) AS s FROM data_stream", ["s2id"]).spark_sql


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT lattitude FROM data_stream",
            "unknown column 'lattitude' in table data_stream; valid: order_number, city_id, lat, long, vehicle_type",
        ),
        ("SELECT count(1) FROM data_stream GROUP BY citi_id", "Did you mean 'city_id'?"),
        (
            "SELECT driver_location.lattitude FROM supply_data",
            "unknown field 'lattitude' in 'driver_location' (table supply_data); valid: driver_location.latitude, "
            "driver_location.longitude. Did you mean 'driver_location.latitude'",
        ),
        ("SELECT drivr_location.latitude FROM supply_data", "Did you mean 'driver_location.latitude'"),
        ("SELECT driver_status.code FROM supply_data", "'driver_status' in table supply_data is a string"),
        ("SELECT count(1) AS n FROM data_stream WHERE n > 1", "'n' is an output alias of the SELECT, which WHERE"),
        ("SELECT x FROM (SELECT city_id FROM data_stream) AS s", "unknown column 'x' in subquery s; valid: city_id"),
    ],
)
def test_unknown_columns_name_the_valid_ones(sql: str, expected: str) -> None:
    assert expected in sql_error(sql, {"data_stream": BOOKING, "supply_data": SUPPLY})


def test_valid_column_forms() -> None:
    # an alias, a column, a field
    assert supply("SELECT s.driver_location.latitude AS lat FROM supply_data AS s").value_columns == ("lat",)
    assert supply("SELECT supply_data.driver_id FROM supply_data").value_columns == ("driver_id",)
    aliases = booking("SELECT city_id AS c, count(1) AS n FROM data_stream GROUP BY c HAVING n > 1 ORDER BY n")
    assert (aliases.key_columns, aliases.value_columns) == (("c",), ("n",))
    # lambda variables are not columns
    assert booking("SELECT transform(tags, t -> upper(t)) AS up FROM data_stream").value_columns == ("up",)
    assert booking("SELECT tag FROM data_stream LATERAL VIEW explode(tags) t AS tag").value_columns == ("tag",)
    # rowtime is implied; names are case-insensitive
    assert booking("SELECT ROWTIME, City_Id FROM data_stream").value_columns == ("ROWTIME", "City_Id")
    exists = "SELECT city_id FROM data_stream d WHERE EXISTS (SELECT 1 FROM data_stream e WHERE e.city_id = d.city_id)"
    assert booking(exists).tables == ("data_stream",)


def test_builtins_data_file_is_generated_from_spark() -> None:
    functions = spark_builtins.spark_functions()
    assert len(functions) > 500
    assert functions["count"] == "aggregate" and functions["collect_set"] == "aggregate"
    assert functions["window"] == "scalar" and functions["explode"] == "generator"
    assert {"reflect", "java_method", "try_reflect"} <= spark_builtins.DENIED
    assert not spark_builtins.allowed_builtins() & spark_builtins.DENIED
    # Every denied name is a Spark built-in, so none is a typo; read_files (Databricks) is denied in case one comes.
    assert spark_builtins.DENIED - set(functions) == {"read_files"}
    assert "python -m jobs.sql.builtins" in spark_builtins.DATA_FILE.read_text().splitlines()[1]


# --- in Spark ---------------------------------------------------------------------------------------------------

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def s2_stand_in(lat: float, lng: float, level: int) -> str:
    """Not an S2 cell: a deterministic numeric stand-in, so the SQL around the real UDF can run."""
    return str(int(lat * 10) * 1000 + int(lng * 10) + level * 1_000_000)


@pytest.fixture
def spark_udfs(spark: SparkSession) -> Iterator[SparkSession]:
    spark.udf.register("S2Id", s2_stand_in, StringType())
    try:
        yield spark
    finally:
        spark.sql("DROP TEMPORARY FUNCTION IF EXISTS S2Id")
        for view in ("data_stream", "supply_data", "booking", "payment"):
            spark.catalog.dropTempView(view)


def bookings() -> list[dict]:
    """Four minutes of bookings: 3 cities, 2 vehicle types, 2 places, amounts 0..39, some not COMPLETED."""
    return [
        {
            "order_number": f"o{i}",
            "city_id": i % 3,
            "lat": -6.2 if i % 4 < 2 else -6.3,
            "long": 106.8,
            "vehicle_type": "bike" if i % 2 else "car",
            "status": "CANCELLED" if i % 5 == 0 else "COMPLETED",
            "amount": float(i),
            "tags": ["a", "b"][: i % 3],
            "rowtime": T0 + timedelta(seconds=6 * i),
        }
        for i in range(40)
    ]


def supplies() -> list[dict]:
    return [
        {
            "driver_id": f"d{i % 7}",
            "driver_status": "AVAILABLE" if i % 3 else "BUSY",
            "latitude": -6.2,
            "longitude": 106.8 if i % 2 else 106.9,
            "driver_location": {"latitude": -6.2, "longitude": 106.8 if i % 2 else 106.9},
            "rowtime": T0 + timedelta(seconds=5 * i),
        }
        for i in range(36)
    ]


def with_rowtime(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField("rowtime", TimestampType())])


def run_batch(spark: SparkSession, query: Query, data: dict[str, tuple[StructType, list[dict]]]) -> list[dict]:
    for name, (schema, rows) in data.items():
        spark.createDataFrame(rows, with_rowtime(schema)).createOrReplaceTempView(name)
    return [row.asDict(recursive=True) for row in stringify_times(spark.sql(query.spark_sql)).collect()]


def stringify_times(df: DataFrame) -> DataFrame:
    # Compare times as UTC strings: collect() would turn them into naive datetimes in the test process's zone.
    for field in df.schema.fields:
        if isinstance(field.dataType, TimestampType):
            df = df.withColumn(field.name, F.date_format(field.name, "yyyy-MM-dd HH:mm:ss"))
    return df


def minute_end(ts: datetime, minutes: int = 1) -> str:
    start = ts.replace(second=0, microsecond=0) - timedelta(minutes=ts.minute % minutes)
    return (start + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S")


def test_builtins_data_file_matches_this_spark(spark: SparkSession) -> None:
    names = {row[0] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    assert names == set(spark_builtins.spark_functions()), "run: .venv/bin/python -m jobs.sql.builtins"


def test_surge_seed_query_in_spark_matches_python(spark_udfs: SparkSession) -> None:
    rows = bookings()
    got = run_batch(spark_udfs, booking(SURGE_SQL), {"data_stream": (BOOKING, rows)})
    expected = Counter(
        (r["city_id"], s2_stand_in(r["lat"], r["long"], 13), r["vehicle_type"], minute_end(r["rowtime"]))
        for r in rows
        if r["status"] == "COMPLETED"
    )
    assert {
        (r["tag_city_id"], r["tag_s2id"], r["tag_vehicle_type"], r["window_timestamp"]): r["num_of_bookings"]
        for r in got
    } == dict(expected)


def test_supply_seed_queries_in_spark_match_python(spark_udfs: SparkSession) -> None:
    rows = supplies()
    got = run_batch(spark_udfs, supply(SUPPLY_SQL), {"supply_data": (SUPPLY, rows)})
    expected: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        key = (s2_stand_in(r["latitude"], r["longitude"], 13), r["driver_status"], minute_end(r["rowtime"]))
        expected[key].add(r["driver_id"])
    assert {(r["label_s2id"], r["label_driver_status"], r["window_timestamp"]): r["drivers"] for r in got} == {
        k: len(v) for k, v in expected.items()
    }

    got = run_batch(spark_udfs, supply(SUPPLY_S2_SQL), {"supply_data": (SUPPLY, rows)})
    counts = Counter(
        (
            minute_end(r["rowtime"]),
            int(s2_stand_in(r["driver_location"]["latitude"], r["driver_location"]["longitude"], 13)),
        )
        for r in rows
    )
    assert {(r["window_end_time"], r["s2_id"]): r["num_drivers"] for r in got} == dict(counts)
    assert {r["s2_id_level"] for r in got} == {13}
    assert all(r["window_start_time"] < r["window_end_time"] for r in got)


def test_percentile_and_distinct_count_in_spark_match_dagger(spark_udfs: SparkSession) -> None:
    rows = bookings()
    q = booking(
        "SELECT city_id, PercentileAggregator(95, amount) AS p95, Percentile(amount, 50) AS p50, "
        "PercentileAggregator(10, amount) AS p10, PercentileAggregator(100, amount) AS p100, "
        "DistinctCount(vehicle_type) AS types, count(DISTINCT order_number) AS orders "
        "FROM data_stream GROUP BY city_id"
    )
    got = {r["city_id"]: r for r in run_batch(spark_udfs, q, {"data_stream": (BOOKING, rows)})}
    for city in range(3):
        amounts = [r["amount"] for r in rows if r["city_id"] == city]
        for column, p in (("p95", 95), ("p50", 50), ("p10", 10), ("p100", 100)):
            assert got[city][column] == pytest.approx(commons_math_percentile(amounts, p)), (city, column)
        assert got[city]["types"] == 2 and got[city]["orders"] == len(amounts)
    # commons-math's LEGACY estimator on a known case: median of 1..4 interpolates to 2.5, p95 of 1..10 is 10.
    assert commons_math_percentile([1, 2, 3, 4], 50) == 2.5 and commons_math_percentile(list(range(1, 11)), 95) == 10


def test_join_query_runs_in_spark(spark_udfs: SparkSession) -> None:
    rows = bookings()
    payments = [
        {"order_number": r["order_number"], "paid": r["amount"], "rowtime": r["rowtime"] + timedelta(minutes=m)}
        for r, m in zip(rows, [1, 10] * 20, strict=True)
    ]
    q = translate(JOIN_SQL, {"booking": BOOKING, "payment": PAYMENT}, UDFS)
    got = run_batch(spark_udfs, q, {"booking": (BOOKING, rows), "payment": (PAYMENT, payments)})
    paid_in_time = [r for r, m in zip(rows, [1, 10] * 20, strict=True) if m <= 5]
    expected = Counter((r["city_id"], minute_end(r["rowtime"])) for r in paid_in_time)
    assert {(r["city_id"], r["window_timestamp"]): r["paid_orders"] for r in got} == dict(expected)


def test_with_queries_run_in_spark_as_validated(spark_udfs: SparkSession) -> None:
    rows = bookings()
    data = {"data_stream": (BOOKING, rows)}
    # Spark reads the stream inside the WITH query that shadows it, and the WITH query outside it.
    q = booking(
        "WITH data_stream AS (SELECT city_id FROM data_stream WHERE city_id > 0) SELECT count(1) AS n FROM data_stream"
    )
    assert run_batch(spark_udfs, q, data) == [{"n": sum(r["city_id"] > 0 for r in rows)}]
    # A reference spelled in another case reads the WITH query, in Spark as in the validator.
    q = booking(
        "WITH Per_City AS (SELECT city_id, count(1) AS n FROM data_stream GROUP BY city_id) "
        "SELECT c.city_id, c.n FROM per_city AS c"
    )
    assert {r["city_id"]: r["n"] for r in run_batch(spark_udfs, q, data)} == Counter(r["city_id"] for r in rows)


def run_stream(
    spark: SparkSession, tmp_path: Path, name: str, schema: StructType, rows: list[dict], sql: str
) -> list[dict]:
    """The translated query as a streaming query: JSON files -> watermark 0s -> append mode -> memory sink."""
    source = tmp_path / "in"
    source.mkdir()
    with (source / "events.json").open("w") as f:
        for row in rows:
            f.write(json.dumps({**row, "rowtime": row["rowtime"].isoformat()}) + "\n")
    stream = spark.readStream.schema(with_rowtime(schema)).json(str(source)).withWatermark("rowtime", "0 seconds")
    stream.createOrReplaceTempView(name)
    result = spark.sql(sql)
    assert result.isStreaming
    sink = f"sql_test_{tmp_path.name}".replace("-", "_")
    query = (
        result.writeStream.outputMode("append")
        .format("memory")
        .queryName(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        return [r.asDict(recursive=True) for r in stringify_times(spark.table(sink)).collect()]
    finally:
        query.stop()
        spark.catalog.dropTempView(sink)


def test_seed_queries_run_as_streaming_aggregations_with_a_watermark(spark_udfs: SparkSession, tmp_path: Path) -> None:
    rows = bookings()
    last_minute = minute_end(rows[-1]["rowtime"])  # still open: the watermark (last event time) has not passed it
    got = run_stream(spark_udfs, tmp_path, "data_stream", BOOKING, rows, booking(SURGE_SQL).spark_sql)
    expected = Counter(
        (r["city_id"], s2_stand_in(r["lat"], r["long"], 13), r["vehicle_type"], minute_end(r["rowtime"]))
        for r in rows
        if r["status"] == "COMPLETED" and minute_end(r["rowtime"]) != last_minute
    )
    assert expected  # closed windows exist
    assert len(got) == len(expected)
    assert {
        (r["tag_city_id"], r["tag_s2id"], r["tag_vehicle_type"], r["window_timestamp"]): r["num_of_bookings"]
        for r in got
    } == dict(expected)


def test_supply_seed_query_streams_with_distinct_count(spark_udfs: SparkSession, tmp_path: Path) -> None:
    rows = supplies()
    last_minute = minute_end(rows[-1]["rowtime"])
    got = run_stream(spark_udfs, tmp_path, "supply_data", SUPPLY, rows, supply(SUPPLY_SQL).spark_sql)
    expected: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        if minute_end(r["rowtime"]) != last_minute:
            key = (s2_stand_in(r["latitude"], r["longitude"], 13), r["driver_status"], minute_end(r["rowtime"]))
            expected[key].add(r["driver_id"])
    assert len(got) == len(expected)
    assert {(r["label_s2id"], r["label_driver_status"], r["window_timestamp"]): r["drivers"] for r in got} == {
        k: len(v) for k, v in expected.items()
    }


def test_hop_and_percentile_stream(spark_udfs: SparkSession, tmp_path: Path) -> None:
    rows = bookings()  # 00:00:00 .. 00:03:54
    q = booking(
        "SELECT HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS window_start, "
        "HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS window_end, count(1) AS n, "
        "PercentileAggregator(50, amount) AS p50 FROM data_stream "
        "GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)"
    )
    got = {r["window_end"]: r for r in run_stream(spark_udfs, tmp_path, "data_stream", BOOKING, rows, q.spark_sql)}
    last = rows[-1]["rowtime"]
    expected = {}
    for end_minute in range(1, 6):
        end = T0 + timedelta(minutes=end_minute)
        if end > last:
            continue  # not closed by the watermark yet
        amounts = [r["amount"] for r in rows if end - timedelta(minutes=2) <= r["rowtime"] < end]
        expected[end.strftime("%Y-%m-%d %H:%M:%S")] = (len(amounts), commons_math_percentile(amounts, 50))
    assert {k: r["n"] for k, r in got.items()} == {k: n for k, (n, _) in expected.items()}
    assert {k: r["p50"] for k, r in got.items()} == pytest.approx({k: p for k, (_, p) in expected.items()})
    assert list(got) and all(r["window_start"] < r["window_end"] for r in got.values())


# -- UDF calls evaluated in the Kafka reader ------------------------------------------------------------------------


def pushed(sql: str) -> tuple[str, list[str]]:
    fields = [f.name for f in BOOKING.fields]
    tree, computed = push_udfs(booking(sql).tree, "data_stream", fields, UDFS)  # type: ignore[arg-type]
    return tree.sql(dialect="spark", normalize_functions=False), [c.describe() for c in computed]


def test_udf_calls_over_stream_fields_move_into_the_reader() -> None:
    spark_sql, computed = pushed(SURGE_SQL)
    assert computed == ["__udf_1 = S2Id(lat, long, 13)"]  # SELECT and GROUP BY share one column
    assert "S2Id" not in spark_sql and spark_sql.count("`__udf_1`") == 2
    _, computed = pushed("SELECT S2Id(b.lat, b.long, 13) AS cell, GeoHash(lat, long, 6) AS gh FROM data_stream b")
    assert computed == ["__udf_1 = S2Id(lat, long, 13)", "__udf_2 = GeoHash(lat, long, 6)"]


def test_udf_calls_stay_in_spark_unless_they_read_only_stream_fields() -> None:
    for sql in (
        "SELECT S2Id(lat * 2, long, 13) AS cell FROM data_stream",  # an expression argument
        "SELECT S2Id(lat, long, 13) AS cell FROM (SELECT lat + 1 AS lat, long FROM data_stream) AS x",  # derived
        "SELECT S2Id(13.5, 100.1, 13) AS cell FROM data_stream",  # constant
        "SELECT Split(order_number, '\\\\.') AS parts FROM data_stream",  # Spark unescapes '\\.' to '\.'
    ):
        spark_sql, computed = pushed(sql)
        assert computed == [] and spark_sql == booking(sql).spark_sql, sql
