"""Sinks against the real services: each writes a batch, gets the same batch id again (a replay), then a later batch
updating a key, and the result is read back through the service itself."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from google.protobuf.message import Message
from pyspark.sql import SparkSession

import protos
from jobs.engine.plan import plan_dagger
from jobs.sinks import OutputShape, RetryPolicy, SinkError, open_sink, read_log
from jobs.sinks.influx import InfluxWriter
from jobs.sinks.kafka import KafkaWriter, commit_topic, transactional_id
from jobs.sinks.log import LogWriter
from jobs.sinks.postgres import PostgresWriter
from jobs.spec import DaggerSpec, SpecError, parse_spec
from odin.apis import http_client, victoria
from tests.support.http_stub import Handler, serving
from tests.support.kafka import consume_all, latest_by_key
from tests.support.services import Services, TeamDb

TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("window_start", TS),
        ("window_end", TS),
        ("tag_city_id", pa.int32()),
        ("label_service", pa.string()),
        ("bookings", pa.int64()),
        ("fare", pa.float64()),
        ("surge", pa.float64()),
    ]
)
SHAPE = OutputShape(
    ("window_start", "window_end", "tag_city_id", "label_service"), ("bookings", "fare", "surge"), "window_end"
)
# Recent windows: VictoriaMetrics refuses samples older than its retention (30 days).
W1 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
W2 = W1 + timedelta(minutes=1)
FAST = RetryPolicy(attempts=2, initial_delay=0.01)


def row(
    start: datetime, city: int, service: str, bookings: int | None, fare: float | None, surge: float | None = None
) -> dict[str, Any]:
    return {
        "window_start": start,
        "window_end": start + timedelta(minutes=1),
        "tag_city_id": city,
        "label_service": service,
        "bookings": bookings,
        "fare": fare,
        "surge": surge,
    }


def table(*rows: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=SCHEMA)


# Batch 0: two windows' rows; batch 1 updates (city 1, RIDE, W1) and adds W2.
BATCH_0 = table(row(W1, 1, "RIDE", 3, 10.5, 1.5), row(W1, 2, "CAR", 1, 7.25))
BATCH_1 = table(row(W1, 1, "RIDE", 5, 20.0, 1.25), row(W2, 1, "RIDE", 2, 4.0))


def spec(sink: dict[str, Any], name: str | None = None, schemas: list[str] | None = None) -> DaggerSpec:
    return parse_spec(
        {
            "name": name or f"s-{uuid.uuid4().hex[:10]}",
            "team": "tests",
            "schemas": schemas or [],
            "streams": [{"table": "t", "topics": ["unused"], "proto": "daggers.events.BookingLog"}],
            "sql": "SELECT 1",
            "sink": sink,
        }
    )


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# The expected current view, as (city, service, window end) -> (bookings, fare, surge).
EXPECTED = {
    (1, "RIDE", W1 + timedelta(minutes=1)): (5, 20.0, 1.25),
    (2, "CAR", W1 + timedelta(minutes=1)): (1, 7.25, None),
    (1, "RIDE", W2 + timedelta(minutes=1)): (2, 4.0, None),
}


def poll(fetch: Any, done: Any, timeout_s: float = 40.0) -> Any:
    """fetch() until done(result) or the deadline; returns the last result (the caller asserts on it)."""
    deadline = time.monotonic() + timeout_s
    result = fetch()
    while not done(result) and time.monotonic() < deadline:
        time.sleep(0.5)
        result = fetch()
    return result


# -- log ----------------------------------------------------------------------------------------------------------


def test_log_sink_replay_supersede_and_torn_batch(tmp_path: Path) -> None:
    path = tmp_path / "out" / "dagger.jsonl"
    d = spec({"type": "log", "path": str(path)})
    first = open_sink(d, SHAPE)
    assert first.write(BATCH_0, 0) == 2
    assert first.write(BATCH_0, 0) == 0  # replay in the same process
    first.close()

    restarted = LogWriter(d, SHAPE)  # a new driver: the batch record comes from the file
    assert restarted.last_batch_id == 0
    assert restarted.write(BATCH_0, 0) == 0
    assert restarted.write(BATCH_1, 1) == 2
    assert restarted.stats() | {"attempts_failed": 0} == {
        "rows_written": 2,
        "rows_skipped": 0,
        "batches_written": 1,
        "batches_replayed": 1,
        "attempts_failed": 0,
        "last_batch_id": 1,
    }
    restarted.close()

    # A crash in the middle of batch 2: rows of an uncommitted batch and a torn line.
    with path.open("a") as f:
        f.write('{"_begin": 2}\n' + json.dumps({"_batch": 2, "tag_city_id": 9}) + '\n{"_batch": 2, "tag_ci')
    after_crash = LogWriter(d, SHAPE)
    assert after_crash.last_batch_id == 1
    assert after_crash.write(table(row(W2, 2, "CAR", 7, 1.0)), 2) == 1
    with pytest.raises(SinkError, match="checkpoint was probably reset"):
        after_crash.write(BATCH_0, 0)

    view = read_log(path)
    expected = {**EXPECTED, (2, "CAR", W2 + timedelta(minutes=1)): (7, 1.0, None)}
    assert {
        (r["tag_city_id"], r["label_service"], r["window_end"]): (r["bookings"], r["fare"], r["surge"])
        for r in view.values()
    } == {(c, s, iso(t)): v for (c, s, t), v in expected.items()}
    key = (iso(W1), iso(W1 + timedelta(minutes=1)), 1, "RIDE")
    assert view[key] == {
        "window_start": iso(W1),
        "window_end": iso(W1 + timedelta(minutes=1)),
        "tag_city_id": 1,
        "label_service": "RIDE",
        "bookings": 5,
        "fare": 20.0,
        "surge": 1.25,
    }
    # Each committed row was written exactly once: 2 + 2 + 1, plus the crashed attempt's one whole line.
    lines = path.read_text().splitlines()
    assert sum(1 for line in lines if line.startswith('{"_batch"') and line.endswith("}")) == 6
    assert lines[-4] == '{"_batch": 2, "tag_ci'  # the torn line, ended by the next writer
    assert [json.loads(line)["_commit"] for line in lines if line.startswith('{"_commit"')] == [0, 1, 2]


def test_log_sink_to_stdout() -> None:
    out = io.StringIO()
    writer = LogWriter(spec({"type": "log"}), SHAPE, stream=out)
    assert writer.write(BATCH_0, 0) == 2
    assert writer.write(BATCH_0, 0) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0] == {"_begin": 0}
    assert lines[1]["window_end"] == iso(W1 + timedelta(minutes=1)) and lines[1]["bookings"] == 3
    assert lines[-1] == {"_commit": 0, "_rows": 2, "_key": list(SHAPE.key_columns)}
    assert len(lines) == 4


# -- influx -------------------------------------------------------------------------------------------------------


def vm_export(url: str, measurement: str) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    out: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for series in victoria.export(url, f'{{__name__=~"{measurement}_.*"}}'):
        m = series["metric"]
        key = (m["__name__"].removeprefix(f"{measurement}_"), m["tag_city_id"], m["service"])
        out[key] = sorted(zip(series["timestamps"], series["values"], strict=True))
    return out


def vm_view(
    view: dict[tuple[int, str, datetime], tuple[Any, ...]],
) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    """The samples VictoriaMetrics should hold for a (city, service, window end) -> values view."""
    out: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for (city, service, end), values in view.items():
        for field, value in zip(("bookings", "fare", "surge"), values, strict=True):
            if value is not None:  # null fields are not written
                out.setdefault((field, str(city), service), []).append((ms(end), value))
    return {k: sorted(v) for k, v in out.items()}


def test_influx_v2_sink_on_victoria_metrics(services: Services) -> None:
    url = services.victoria_metrics_url
    measurement = f"sink_{uuid.uuid4().hex[:8]}"
    d = spec({"type": "influx", "url": url, "version": 2, "measurement": measurement})
    first = open_sink(d, SHAPE)
    assert first.write(BATCH_0, 0) == 2
    assert first.write(BATCH_0, 0) == 0
    first.close()
    restarted = InfluxWriter(d, SHAPE)
    assert restarted.write(BATCH_0, 0) == 2  # after a restart the replay rewrites identical points
    end1 = W1 + timedelta(minutes=1)
    after_0 = vm_view({(1, "RIDE", end1): (3, 10.5, 1.5), (2, "CAR", end1): (1, 7.25, None)})
    got = poll(lambda: vm_export(url, measurement), lambda g: g == after_0)
    assert got == after_0  # one sample per point, whatever the replays

    # A later batch updates (1, RIDE, W1) and adds W2; a row with no field values is skipped and counted.
    assert restarted.write(pa.concat_tables([BATCH_1, table(row(W2, 3, "FOOD", None, None))]), 1) == 2
    assert restarted.rows_skipped == 1
    assert restarted.skipped_columns == ("window_start",)
    restarted.close()
    want = vm_view(EXPECTED)
    got = poll(lambda: vm_export(url, measurement), lambda g: g.keys() == want.keys() and g == want, timeout_s=20)
    assert got.keys() == want.keys()
    updated = {
        ("bookings", "1", "RIDE"): (3, 5),
        ("fare", "1", "RIDE"): (10.5, 20.0),
        ("surge", "1", "RIDE"): (1.5, 1.25),
    }
    for series, samples in want.items():
        if series not in updated:
            assert got[series] == samples
            continue
        # VictoriaMetrics 1.79 (-dedup.minScrapeInterval=1ms) keeps ONE of the samples written for a millisecond,
        # not necessarily the last: exact superseding needs the window written once (append mode) or InfluxDB.
        (ts, value), *rest = got[series]
        assert ts == ms(end1) and value in updated[series]
        assert rest == samples[1:]


def influx_rows(url: str, measurement: str) -> list[list[Any]]:
    r = http_client.get(
        f"{url}/query",
        params={
            "db": "daggers",
            "epoch": "ms",
            "q": f'SELECT bookings, fare, surge, tag_city_id, service FROM "{measurement}"',
        },
        timeout=10,
    )
    r.raise_for_status()
    series = r.json()["results"][0].get("series") or [{"values": []}]
    return sorted(series[0]["values"])


def test_influx_v1_sink_on_influxdb_1_6(services: Services) -> None:
    measurement = f"sink_{uuid.uuid4().hex[:8]}"
    d = spec({"type": "influx", "url": services.influxdb_url, "version": 1, "measurement": measurement})
    writer = open_sink(d, SHAPE)
    assert writer.write(BATCH_0, 0) == 2
    assert writer.write(BATCH_0, 0) == 0
    writer.close()
    restarted = open_sink(d, SHAPE)
    assert restarted.write(BATCH_0, 0) == 2
    assert restarted.write(BATCH_1, 1) == 2
    restarted.close()
    want = sorted(
        [ms(end), bookings, fare, surge, str(city), service]
        for (city, service, end), (bookings, fare, surge) in EXPECTED.items()
    )
    assert influx_rows(services.influxdb_url, measurement) == want
    # Tags vs fields as stored: tag_ kept, label_ stripped; numbers are fields.
    keys = http_client.get(
        f"{services.influxdb_url}/query", params={"db": "daggers", "q": f'SHOW TAG KEYS FROM "{measurement}"'}
    ).json()
    assert sorted(v[0] for v in keys["results"][0]["series"][0]["values"]) == ["service", "tag_city_id"]


def test_influx_measurement_defaults_to_dagger_name_and_time_column_must_exist(services: Services) -> None:
    name = f"m-{uuid.uuid4().hex[:8]}"
    assert InfluxWriter(spec({"type": "influx", "url": services.influxdb_url}, name=name), SHAPE).measurement == name
    d = spec({"type": "influx", "url": services.influxdb_url, "version": 1, "time_column": "closed_at"}, name=name)
    with pytest.raises(SinkError, match=r"sink\.time_column: 'closed_at' is not an output column.*window_end"):
        InfluxWriter(d, SHAPE)


# A query aggregating without a window (update mode): a group's row is re-emitted at every update.
WINDOWLESS = (
    "SELECT city_id AS tag_city_id, count(1) AS bookings, max(rowtime) AS last_event_time "
    "FROM data_stream GROUP BY city_id"
)


def dagger_spec(sql: str, sink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"s-{uuid.uuid4().hex[:10]}",
        "team": "tests",
        "streams": [{"table": "data_stream", "topics": ["booking-log"], "proto": "daggers.events.BookingLog"}],
        "sql": sql,
        "sink": sink,
    }


def test_dagger_validate_refuses_influx_points_timed_at_write(tmp_path: Path) -> None:
    path = tmp_path / "windowless.yaml"
    path.write_text(json.dumps(dagger_spec(WINDOWLESS, {"type": "influx"})))
    dagger = Path(sys.executable).parent / "dagger"
    done = subprocess.run([str(dagger), "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())  # rich wraps long lines at the terminal width
    assert "sink.time_column: required here: the query aggregates without a window (update mode)" in message
    assert "set sink.time_column to one of its timestamp output columns: last_event_time" in message


@pytest.mark.parametrize(
    ("sql", "time_column", "error"),
    [
        # Every row once (append), but with no time: a replay adds its rows again at a new time.
        (
            "SELECT city_id AS tag_city_id, total_fare FROM data_stream",
            None,
            r"sink\.time_column: required here: the query's output has no window end.*it has none: select one",
        ),
        # Grouped by a window whose end is not selected.
        (
            "SELECT city_id AS tag_city_id, count(1) AS n FROM data_stream "
            "GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id",
            None,
            r"sink\.time_column: required here: the query's output has no window end",
        ),
        (WINDOWLESS, "closed_at", r"sink\.time_column: 'closed_at' is not an output column.*: last_event_time$"),
        (WINDOWLESS, "bookings", r"sink\.time_column: output column 'bookings' is BIGINT, not a timestamp"),
    ],
    ids=["rows-without-time", "window-end-not-selected", "not-an-output-column", "not-a-timestamp"],
)
def test_plan_refuses_influx_sink_without_a_row_time(sql: str, time_column: str | None, error: str) -> None:
    sink: dict[str, Any] = {"type": "influx"} | ({"time_column": time_column} if time_column else {})
    with pytest.raises(SpecError, match=error):
        plan_dagger(parse_spec(dagger_spec(sql, sink)))


def test_influx_writer_refuses_points_timed_at_write() -> None:
    """The writer, opened without the planner, refuses what the planner does: no time column, or not a timestamp."""
    no_time = OutputShape(("tag_city_id",), ("bookings",), None)
    with pytest.raises(SinkError, match=r"influx sink: sink\.time_column: required here.*tag_city_id, bookings"):
        open_sink(spec({"type": "influx"}), no_time)
    shape = OutputShape(("tag_city_id",), ("bookings", "at"), None)
    writer = InfluxWriter(spec({"type": "influx", "time_column": "at"}), shape)
    batch = pa.table({"tag_city_id": [1], "bookings": [2], "at": [1_700_000_000_000]})
    with pytest.raises(SinkError, match=r"sink\.time_column: column 'at' is int64, not a timestamp"):
        writer.write(batch, 0)
    assert writer.attempts_failed == 0  # a configuration error: not retried


def test_influx_time_column_on_a_windowless_aggregate_is_idempotent(services: Services) -> None:
    """With sink.time_column naming a timestamp output column, an update-mode dagger's points are keyed on it: a
    replayed batch rewrites the same points, an update adds a point at the group's new time."""
    url = services.victoria_metrics_url
    measurement = f"sink_{uuid.uuid4().hex[:8]}"
    sink = {"type": "influx", "url": url, "version": 2, "measurement": measurement}
    with pytest.raises(SpecError, match=r"sink\.time_column"):
        plan_dagger(parse_spec(dagger_spec(WINDOWLESS, sink)))
    plan = plan_dagger(parse_spec(dagger_spec(WINDOWLESS, {**sink, "time_column": "last_event_time"})))
    assert plan.output_mode == "update" and plan.shape.time_column is None
    assert plan.shape == OutputShape(("tag_city_id",), ("bookings", "last_event_time"), None)

    schema = pa.schema([("tag_city_id", pa.int32()), ("bookings", pa.int64()), ("last_event_time", TS)])
    t0 = W1 + timedelta(seconds=5)
    batch_0 = pa.Table.from_pylist(
        [
            {"tag_city_id": 1, "bookings": 3, "last_event_time": t0},
            {"tag_city_id": 2, "bookings": 1, "last_event_time": t0 + timedelta(seconds=10)},
        ],
        schema=schema,
    )
    batch_1 = pa.Table.from_pylist(
        [{"tag_city_id": 1, "bookings": 5, "last_event_time": t0 + timedelta(seconds=30)}], schema=schema
    )
    first = open_sink(plan.spec, plan.shape)
    assert first.write(batch_0, 0) == 2
    first.close()
    restarted = open_sink(plan.spec, plan.shape)  # a new driver: no batch record, the replay is written again
    assert restarted.write(batch_0, 0) == 2
    assert restarted.write(batch_1, 1) == 1
    restarted.close()

    def export() -> dict[str, list[tuple[int, float]]]:
        return {
            s["metric"]["tag_city_id"]: sorted(zip(s["timestamps"], s["values"], strict=True))
            for s in victoria.export(url, f"{measurement}_bookings")
        }

    want = {"1": [(ms(t0), 3), (ms(t0 + timedelta(seconds=30)), 5)], "2": [(ms(t0 + timedelta(seconds=10)), 1)]}
    assert poll(export, lambda got: got == want) == want  # one sample per point, the replay included


def test_influx_missing_secrets_are_named() -> None:
    v2 = spec({"type": "influx", "version": 2, "token_env": "DAGGER_TEST_NO_SUCH_TOKEN"})
    with pytest.raises(SinkError, match=r"sink\.token_env.*DAGGER_TEST_NO_SUCH_TOKEN"):
        open_sink(v2, SHAPE)
    v1 = spec({"type": "influx", "version": 1, "username_env": "DAGGER_TEST_NO_USER", "password_env": "X_PW"})
    with pytest.raises(SinkError, match="DAGGER_TEST_NO_USER"):
        open_sink(v1, SHAPE)


def test_influx_v2_sends_its_token_in_a_header_and_names_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """InfluxDB 2's write API takes the token in the Authorization header. A refusal (401) is not retried, and the
    error carries the server's words, never the token. (A local HTTP server stands in for InfluxDB 2.)"""
    seen: list[tuple[str, str | None, bytes]] = []

    class Refuse(Handler):
        def do_POST(self) -> None:
            seen.append((self.path, self.headers.get("Authorization"), self.body()))
            self.reply(401, {"code": "unauthorized", "message": "unauthorized access"})

    monkeypatch.setenv("DAGGER_TEST_INFLUX_TOKEN", "s3cret-token")
    with serving(Refuse) as url:
        sink = {"type": "influx", "version": 2, "url": url, "org": "team-a", "token_env": "DAGGER_TEST_INFLUX_TOKEN"}
        writer = InfluxWriter(spec(sink), SHAPE, RetryPolicy(5, 5))
        with pytest.raises(SinkError, match=r"after 1 attempt\(s\).*HTTP 401.*unauthorized access") as refused:
            writer.write(BATCH_0, 0)
        writer.close()
    assert "s3cret-token" not in str(refused.value)
    ((path, auth, body),) = seen
    assert path == "/api/v2/write?org=team-a&bucket=daggers&precision=ms"
    assert auth == "Token s3cret-token"
    assert len(body.splitlines()) == 2  # the batch's two points, in one request


def test_influx_errors_are_retried_then_raised(services: Services) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = InfluxWriter(spec({"type": "influx", "url": f"http://127.0.0.1:{port}", "version": 1}), SHAPE, FAST)
    with pytest.raises(SinkError, match=r"batch 0 failed after 2 attempt\(s\): ConnectError"):
        down.write(BATCH_0, 0)
    assert down.attempts_failed == 2
    # A refusal (unknown database: HTTP 404) is not worth retrying.
    no_db = spec({"type": "influx", "url": services.influxdb_url, "version": 1, "database": "no_such_db"})
    refused = InfluxWriter(no_db, SHAPE, RetryPolicy(attempts=5, initial_delay=5))
    with pytest.raises(SinkError, match=r"after 1 attempt\(s\).*HTTP 404.*database not found"):
        refused.write(BATCH_0, 0)


# -- kafka --------------------------------------------------------------------------------------------------------


def json_view(records: list[Any]) -> dict[tuple[int, str, str], tuple[Any, ...]]:
    view = {}
    for m in latest_by_key(records).values():
        v = json.loads(m.value())
        assert json.loads(m.key()) == {k: v[k] for k in SHAPE.key_columns}
        view[(v["tag_city_id"], v["label_service"], v["window_end"])] = (v["bookings"], v["fare"], v["surge"])
    return view


def test_kafka_json_sink_exactly_once(services: Services) -> None:
    topic = f"sink-{uuid.uuid4().hex[:8]}"
    d = spec({"type": "kafka", "bootstrap_servers": services.kafka_bootstrap, "topic": topic})
    first = open_sink(d, SHAPE)
    assert first.write(BATCH_0, 0) == 2
    assert first.write(BATCH_0, 0) == 0
    first.close()

    restarted = KafkaWriter(d, SHAPE)  # a new driver: the last batch is read back from the commit topic
    assert restarted.write(BATCH_0, 0) == 0
    assert restarted.batches_replayed == 1
    assert restarted.write(BATCH_1, 1) == 2
    restarted.close()

    records = consume_all(services.kafka_bootstrap, topic)
    assert len(records) == 4  # nothing duplicated
    assert sorted(dict(m.headers())["dagger.batch_id"] for m in records) == [b"0", b"0", b"1", b"1"]
    assert json_view(records) == {(c, s, iso(t)): v for (c, s, t), v in EXPECTED.items()}
    markers = [json.loads(m.value()) for m in consume_all(services.kafka_bootstrap, commit_topic(d))]
    assert [(m["batch_id"], m["rows"]) for m in markers] == [(0, 2), (1, 2)]


def test_kafka_sink_after_a_crash_mid_transaction(services: Services) -> None:
    """A driver died after sending rows of batch 1 but before its marker and commit: the restarted sink fences
    it and writes batch 1 again; the latest-per-key view is exact."""
    topic = f"sink-{uuid.uuid4().hex[:8]}"
    d = spec({"type": "kafka", "bootstrap_servers": services.kafka_bootstrap, "topic": topic})
    writer = open_sink(d, SHAPE)
    assert writer.write(BATCH_0, 0) == 2
    writer.close()

    zombie = Producer(
        {
            "bootstrap.servers": services.kafka_bootstrap,
            "transactional.id": transactional_id(d),
            "partitioner": "murmur2_random",  # as the sink's: the partial record lands in its key's partition
        }
    )
    zombie.init_transactions(30)
    zombie.begin_transaction()
    key = json.dumps(
        {"window_start": iso(W1), "window_end": iso(W2), "tag_city_id": 1, "label_service": "RIDE"},
        separators=(",", ":"),
    )
    zombie.produce(topic, key=key.encode(), value=b'{"partial": true}', headers=[("dagger.batch_id", b"1")])
    assert zombie.flush(10) == 0

    restarted = KafkaWriter(d, SHAPE)
    assert restarted.write(BATCH_1, 1) == 2  # no marker for batch 1: written again, not skipped
    restarted.close()
    del zombie  # fenced by now
    records = consume_all(services.kafka_bootstrap, topic)
    assert json_view([m for m in records if b"partial" not in m.value()]) == {
        (c, s, iso(t)): v for (c, s, t), v in EXPECTED.items()
    }
    assert json_view(records) == {(c, s, iso(t)): v for (c, s, t), v in EXPECTED.items()}  # the replay came later
    markers = [json.loads(m.value()) for m in consume_all(services.kafka_bootstrap, commit_topic(d))]
    assert [m["batch_id"] for m in markers] == [0, 1]


PROTO = """syntax = "proto3";
package daggers.test;
import "google/protobuf/timestamp.proto";
message CityWindow {
  int32 tag_city_id = 1;
  string label_service = 2;
  google.protobuf.Timestamp window_end = 3;
  int64 bookings = 4;
  double fare = 5;
}
"""


def test_kafka_proto_sink(services: Services, tmp_path: Path) -> None:
    (tmp_path / "city_window.proto").write_text(PROTO)
    topic = f"sink-{uuid.uuid4().hex[:8]}"
    d = spec(
        {
            "type": "kafka",
            "bootstrap_servers": services.kafka_bootstrap,
            "topic": topic,
            "format": "proto",
            "proto": "daggers.test.CityWindow",
        },
        schemas=[str(tmp_path / "city_window.proto")],
    )
    writer = KafkaWriter(d, SHAPE)
    assert writer.unmatched_columns == ("window_start", "surge")
    assert writer.write(BATCH_0, 0) == 2
    assert writer.write(BATCH_0, 0) == 0
    assert writer.write(BATCH_1, 1) == 2
    writer.close()

    cls: type[Message] = type(writer._message())  # type: ignore[misc]
    records = consume_all(services.kafka_bootstrap, topic)
    assert len(records) == 4
    view = {}
    for m in latest_by_key(records).values():
        msg = cls.FromString(m.value())
        end = msg.window_end.ToDatetime(tzinfo=UTC)  # type: ignore[attr-defined]
        view[(msg.tag_city_id, msg.label_service, end)] = (msg.bookings, msg.fare)  # type: ignore[attr-defined]
    assert view == {k: v[:2] for k, v in EXPECTED.items()}


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("transactional.id", "exactly-once writes depend on it"),
        ("acks", "exactly-once writes depend on it"),
        ("request.required.acks", "exactly-once writes depend on it"),
        ("enable.idempotence", "exactly-once writes depend on it"),
        ("sasl.password", "secrets do not go in the spec.*sink.password_env"),
    ],
)
def test_kafka_sink_config_may_not_override_exactly_once_settings_or_carry_secrets(key: str, why: str) -> None:
    with pytest.raises(SpecError, match=rf"sink\.config\.{key}: .*{why}"):
        spec({"type": "kafka", "topic": "x", "config": {key: "1"}})
    spec({"type": "kafka", "topic": "x", "config": {"security.protocol": "SASL_SSL", "sasl.username": "u"}})


def test_kafka_sink_password_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """There is no SASL broker here: the password's way into every client config the sink builds is checked."""
    sink = {
        "type": "kafka",
        "topic": "x",
        "password_env": "DAGGER_TEST_KAFKA_PASSWORD",
        "config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"},
    }
    d = spec(sink)
    monkeypatch.delenv("DAGGER_TEST_KAFKA_PASSWORD", raising=False)
    with pytest.raises(SinkError, match=r"kafka sink: sink\.password_env.*DAGGER_TEST_KAFKA_PASSWORD.*not set"):
        open_sink(d, SHAPE)
    monkeypatch.setenv("DAGGER_TEST_KAFKA_PASSWORD", "s3cret")
    writer = KafkaWriter(d, SHAPE)
    client = writer._client_config()  # the admin client (topics) and the commit-marker consumer
    assert client["sasl.password"] == "s3cret" and client["sasl.username"] == "u"
    producer = writer.producer_config()
    assert producer["sasl.password"] == "s3cret" and producer["security.protocol"] == "SASL_PLAINTEXT"
    assert (producer["transactional.id"], producer["acks"], producer["enable.idempotence"]) == (
        transactional_id(d),
        "all",
        True,
    )
    assert "s3cret" not in d.model_dump_json()


def test_kafka_unknown_proto_is_a_sink_error() -> None:
    d = spec({"type": "kafka", "topic": "x", "format": "proto", "proto": "daggers.events.NoSuchThing"})
    with pytest.raises(SinkError, match=r"sink\.proto 'daggers\.events\.NoSuchThing'.*unknown protobuf message"):
        open_sink(d, SHAPE)
    assert protos.DESCRIPTOR_SET.exists()


# -- postgres -----------------------------------------------------------------------------------------------------


def pg_rows(db: TeamDb, name: str) -> dict[tuple[int, str, datetime], tuple[Any, ...]]:
    with db.connect() as conn:
        got = conn.execute(
            f"SELECT tag_city_id, label_service, window_end, bookings, fare, surge FROM {name}"
        ).fetchall()
    return {(c, s, t): (b, f, su) for c, s, t, b, f, su in got}


def test_postgres_sink_upserts_exactly_once(team_db: TeamDb) -> None:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    d = spec(team_db.sink(name))
    first = open_sink(d, SHAPE)
    assert first.write(BATCH_0, 0) == 2
    assert first.write(BATCH_0, 0) == 0
    first.close()
    restarted = PostgresWriter(d, SHAPE)
    assert restarted.write(BATCH_0, 0) == 0  # found in the batch record table
    assert restarted.batches_replayed == 1
    assert restarted.write(BATCH_1, 1) == 2
    # A repeated key within a batch: the last row wins. A null key cannot be stored: skipped, counted.
    dup = table(
        row(W2, 2, "CAR", 1, 1.0), row(W2, 2, "CAR", 8, 8.0), {**row(W2, 3, "FOOD", 1, 1.0), "tag_city_id": None}
    )
    assert restarted.write(dup, 2) == 1
    assert restarted.rows_skipped == 1
    restarted.close()

    expected = {**EXPECTED, (2, "CAR", W2 + timedelta(minutes=1)): (8, 8.0, None)}
    assert pg_rows(team_db, name) == expected
    with team_db.connect() as conn:
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s", (name,)
            ).fetchall()
        )
        pk = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (name,),
        ).fetchall()
        batch = conn.execute(
            "SELECT batch_id, rows FROM _dagger_sink_commits WHERE target = %s AND dagger = %s",
            (name, d.qualified_name),
        ).fetchone()
    assert types == {
        "window_start": "timestamp with time zone",
        "window_end": "timestamp with time zone",
        "tag_city_id": "integer",
        "label_service": "text",
        "bookings": "bigint",
        "fare": "double precision",
        "surge": "double precision",
    }
    assert sorted(a for (a,) in pk) == sorted(SHAPE.key_columns)
    assert batch == (2, 1)


def test_postgres_sink_adds_new_columns_and_nested_values(team_db: TeamDb) -> None:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    d = spec(team_db.sink(f"public.{name}"))
    writer = PostgresWriter(d, SHAPE)
    assert writer.write(BATCH_0, 0) == 2
    wider = BATCH_1.append_column("drivers", pa.array([["d1", "d2"], None], pa.list_(pa.string())))
    assert writer.write(wider, 1) == 2
    writer.close()
    with team_db.connect() as conn:
        got = conn.execute(f"SELECT drivers FROM {name} WHERE drivers IS NOT NULL").fetchall()
    assert got == [(["d1", "d2"],)]
    assert pg_rows(team_db, name) == EXPECTED


def test_postgres_password_from_env(team_db: TeamDb, monkeypatch: pytest.MonkeyPatch) -> None:
    """The team database's password comes from the variable the spec names; the server checks it (scram)."""
    name = f"sink_{uuid.uuid4().hex[:8]}"
    sink = {**team_db.sink(name), "password_env": "DAGGER_TEST_PG_PASSWORD"}
    with pytest.raises(SinkError, match=r"sink\.password_env.*DAGGER_TEST_PG_PASSWORD"):
        open_sink(spec(sink), SHAPE)
    monkeypatch.setenv("DAGGER_TEST_PG_PASSWORD", "not-the-password")
    refused = PostgresWriter(spec(sink), SHAPE, FAST)
    with pytest.raises(SinkError, match="password authentication failed") as caught:
        refused.write(BATCH_0, 0)
    assert "not-the-password" not in str(caught.value)
    monkeypatch.setenv("DAGGER_TEST_PG_PASSWORD", team_db.password)
    writer = open_sink(spec(sink), SHAPE)
    assert writer.write(BATCH_0, 0) == 2
    writer.close()
    assert len(pg_rows(team_db, name)) == 2


def test_postgres_connection_errors_are_retried_then_raised() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = spec({"type": "postgres", "dsn": f"postgresql://postgres@127.0.0.1:{port}/daggers", "table": "t"})
    writer = PostgresWriter(d, SHAPE, FAST)
    with pytest.raises(SinkError, match=r"postgres sink of tests\.s-\w+: batch 3 failed after 2 attempt\(s\)"):
        writer.write(BATCH_0, 3)
    assert writer.stats()["attempts_failed"] == 2 and writer.rows_written == 0


# -- a real Spark batch -------------------------------------------------------------------------------------------


def test_sinks_take_spark_arrow_batches(
    services: Services, team_db: TeamDb, spark: SparkSession, tmp_path: Path
) -> None:
    """What foreachBatch hands over: DataFrame.toArrow() with Spark's types (decimals, lists, maps, NTZ)."""
    start = W1.strftime("%Y-%m-%d %H:%M:%S")
    frame = spark.sql(
        f"""SELECT window.start AS window_start, window.end AS window_end, city, count(*) AS n, sum(f) AS fare,
                   collect_list(d) AS drivers, map('a', 1) AS m, TIMESTAMP_NTZ'2026-01-01 00:00:00' AS ntz
            FROM VALUES (TIMESTAMP'{start}' + INTERVAL 5 SECONDS, 'jkt', 1.5, 'd1'),
                        (TIMESTAMP'{start}' + INTERVAL 35 SECONDS, 'jkt', 2.0, 'd2') AS t(ts, city, f, d)
            GROUP BY window(ts, '1 minute'), city"""
    )
    batch = frame.toArrow()
    shape = OutputShape(("window_start", "window_end", "city"), ("n", "fare", "drivers", "m", "ntz"), "window_end")
    end = W1 + timedelta(minutes=1)
    as_json = {
        "window_start": iso(W1),
        "window_end": iso(end),
        "city": "jkt",
        "n": 2,
        "fare": 3.5,
        "drivers": ["d1", "d2"],
        "m": {"a": 1},
        "ntz": "2026-01-01T00:00:00Z",
    }

    path = tmp_path / "spark.jsonl"
    name = f"spark_{uuid.uuid4().hex[:8]}"
    sinks: list[dict[str, Any]] = [
        {"type": "log", "path": str(path)},
        team_db.sink(name),
        {"type": "influx", "url": services.influxdb_url, "version": 1, "measurement": name},
        {"type": "kafka", "bootstrap_servers": services.kafka_bootstrap, "topic": name},
    ]
    for sink in sinks:
        writer = open_sink(spec(sink), shape)
        assert writer.write(batch, 0) == 1, sink["type"]
        assert writer.write(batch, 0) == 0, sink["type"]
        writer.close()

    assert list(read_log(path).values()) == [as_json]
    with team_db.connect() as conn:
        got = conn.execute(f"SELECT window_end, city, n, fare, drivers, m, ntz FROM {name}").fetchall()
    assert got == [(end, "jkt", 2, Decimal("3.5"), ["d1", "d2"], {"a": 1}, datetime(2026, 1, 1, tzinfo=UTC))]
    q = http_client.get(
        f"{services.influxdb_url}/query", params={"db": "daggers", "epoch": "ms", "q": f'SELECT * FROM "{name}"'}
    ).json()["results"][0]["series"][0]
    assert dict(zip(q["columns"], q["values"][0], strict=True)) == {"time": ms(end), "city": "jkt", "n": 2, "fare": 3.5}
    assert [json.loads(m.value()) for m in consume_all(services.kafka_bootstrap, name)] == [as_json]
