"""WHERE conditions evaluated in the Kafka reader drop exactly the events Spark's WHERE drops (Spark is the
reference), and what they drop still moves event time: one sentinel row per batch carries its latest time and count."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from daggers.events import booking_log_pb2
from pyspark.sql import SparkSession

from jobs.engine.plan import DaggerPlan, plan_dagger
from jobs.events.protobuf import EVENTS, ROWTIME, SENTINEL, Decoder, find_message
from jobs.spec import parse_spec
from odin.traffic.generator import booking_logs

COLUMNS = ["order_number", "status", "service_type", "city_id", "customer_id", "driver_id"]


def plan(sql: str, streams: int = 1) -> DaggerPlan:
    tables = [{"table": "booking", "topics": ["x"], "proto": "daggers.events.BookingLog"}]
    tables += [
        {"table": f"other{i}", "topics": [f"y{i}"], "proto": "daggers.events.BookingLog"} for i in range(1, streams)
    ]
    return plan_dagger(parse_spec({"name": "where", "team": "tests", "streams": tables, "sql": sql}))


def payloads() -> list[bytes]:
    events = list(booking_logs(3000, seed=8))
    for e in events[::50]:
        e.status = 99  # a newer producer's status: null in SQL, which passes neither `=` nor `<>` nor NOT IN
    return [e.SerializeToString() for e in events]


@pytest.mark.parametrize(
    ("where", "pushed"),
    [
        ("status = 'COMPLETED'", ["status = 'COMPLETED'"]),
        ("'COMPLETED' <> b.status", ["status <> 'COMPLETED'"]),
        ("status IN ('COMPLETED', 'CREATED') AND city_id >= 3", ["status IN ('COMPLETED', 'CREATED')", "city_id >= 3"]),
        (
            "NOT status IN ('COMPLETED', 'CREATED') AND (city_id < 4)",
            ["status NOT IN ('COMPLETED', 'CREATED')", "city_id < 4"],
        ),
        (
            "city_id <> 2 AND service_type = 'RIDE' AND -1 < city_id",
            ["city_id <> 2", "service_type = 'RIDE'", "city_id > -1"],
        ),
        ("driver_id = '' AND city_id IN (1, 3)", ["driver_id = ''", "city_id IN (1, 3)"]),
        # Only the conjuncts the reader can decide are pushed; the WHERE stays whole in Spark.
        ("(status = 'COMPLETED' OR service_type = 'RIDE') AND city_id <> 1", ["city_id <> 1"]),
    ],
)
def test_the_reader_drops_what_sparks_where_drops(spark: SparkSession, where: str, pushed: list[str]) -> None:
    sql = f"SELECT order_number FROM `booking` b WHERE {where}"
    p = plan(sql)
    (stream,) = p.streams
    assert [f.describe() for f in stream.filters] == pushed

    def spark_rows(batch: pa.RecordBatch, query: str) -> Counter[str]:
        table = pa.Table.from_batches([batch.drop_columns([SENTINEL, EVENTS])])
        spark.createDataFrame(table).createOrReplaceTempView("booking")
        return Counter(r.order_number for r in spark.sql(query).collect())

    data = payloads()
    full = Decoder(find_message("daggers.events.BookingLog"), "event_timestamp", COLUMNS).decode(data).batch
    expected = spark_rows(full, sql)
    decoded = stream.decoder.decode(data)
    assert expected and spark_rows(decoded.batch, p.query.spark_sql) == expected
    kept = Counter(decoded.batch.column("order_number").to_pylist())
    if len(pushed) == where.count(" AND ") + 1:  # every conjunct pushed: the reader alone gives Spark's rows
        assert kept == expected and "WHERE" not in p.query.spark_sql

    carrier = decoded.dropped
    assert carrier is not None and carrier.num_rows == 1
    assert carrier.column(SENTINEL).to_pylist() == [True]
    assert carrier.column(EVENTS).to_pylist() == [len(data) - decoded.batch.num_rows]
    dropped = set(full.column("order_number").to_pylist()) - set(kept)
    latest = max(
        t
        for o, t in zip(full.column("order_number").to_pylist(), full.column(ROWTIME).to_pylist(), strict=True)
        if o in dropped
    )
    assert carrier.column(ROWTIME).to_pylist() == [latest]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT order_number FROM `booking` WHERE status = 'COMPLETED' OR city_id = 1",
        "SELECT order_number FROM `booking` WHERE status > 'COMPLETED'",  # string order: Spark's, not the reader's
        "SELECT order_number FROM `booking` WHERE city_id = 1.0",  # Spark would compare decimals
        "SELECT order_number FROM `booking` WHERE city_id = '1'",
        "SELECT order_number FROM `booking` WHERE total_fare > 10",  # not a string or integer field
        "SELECT order_number FROM `booking` WHERE status = 'A\\\\B'",  # Spark unescapes backslashes
        "SELECT order_number FROM `booking` WHERE status = 'it''s'",  # Spark joins adjacent literals
        "SELECT order_number FROM (SELECT * FROM `booking` WHERE status = 'COMPLETED')",
        "SELECT o FROM (SELECT order_number AS o, status FROM `booking`) WHERE status = 'COMPLETED'",
        "WITH c AS (SELECT * FROM `booking`) SELECT order_number FROM c WHERE status = 'COMPLETED'",
        "SELECT order_number FROM `booking` WHERE status = 'COMPLETED' UNION ALL SELECT order_number FROM `booking`",
        "SELECT order_number FROM `booking` WHERE status IN (SELECT status FROM `booking`)",
    ],
)
def test_conditions_the_reader_cannot_decide_stay_in_spark(sql: str) -> None:
    p = plan(sql)
    assert p.streams[0].filters == () and "WHERE" in p.query.spark_sql


def test_joins_push_nothing() -> None:
    p = plan(
        "SELECT b.order_number FROM `booking` b JOIN `other1` o ON b.order_number = o.order_number "
        "WHERE b.status = 'COMPLETED'",
        streams=2,
    )
    assert all(s.filters == () for s in p.streams)


def test_a_batch_the_where_keeps_whole_has_no_sentinel_row() -> None:
    (stream,) = plan("SELECT order_number FROM `booking` WHERE city_id > 0").streams
    event = booking_log_pb2.BookingLog(order_number="o", city_id=1)
    event.event_timestamp.seconds = 1_700_000_000
    decoded = stream.decoder.decode([event.SerializeToString()])
    assert decoded.dropped is None and decoded.batch.column("order_number").to_pylist() == ["o"]
