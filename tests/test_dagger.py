"""The dagger engine end to end: seed queries on the real broker, checked against plain-Python ground truth."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from daggers.events import booking_log_pb2, driver_location_pb2
from pyspark.sql import SparkSession

from jobs.engine.plan import plan_dagger
from jobs.engine.runner import preview, run, warm_executors
from jobs.spec import parse_spec
from odin.apis import victoria
from odin.paths import BIN_DIR
from odin.traffic.generator import booking_logs, driver_pings, produce
from tests.support.events import START, s2id, surge_truth, window_end
from tests.support.http_stub import Handler, serving
from tests.support.kafka import consume_all, latest_by_key, new_topic
from tests.support.seeds import SUPPLY_SQL
from tests.support.services import Services, TeamDb
from tests.support.sinks import influx_surge, log_rows, surge_counts, surge_rows, utc_iso
from tests.support.specs import spec_dict, spec_file, surge_spec


def run_once(spark: SparkSession, spec: dict[str, Any], tmp_path: Path) -> None:
    plan = plan_dagger(parse_spec({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))
    run(plan, spark, once=True)


def test_seed_surge_query_runs_as_written(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    events = list(booking_logs(30_000, seed=11, start=START, rate=200))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    out = tmp_path / "surge.jsonl"
    run_once(spark, surge_spec(services, topic, {"type": "log", "path": str(out)}), tmp_path)
    assert surge_rows(out) == surge_truth(events)


def test_seed_supply_query_counts_distinct_drivers(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    pings = list(driver_pings(20_000, seed=5, start=START, rate=100, drivers=300))
    produce(services.kafka_bootstrap, topic, iter(pings), partitions=2)
    out = tmp_path / "supply.jsonl"
    spec = spec_dict(
        services,
        "supply_data",
        topic,
        "daggers.events.DriverLocationPing",
        SUPPLY_SQL,
        {"type": "log", "path": str(out)},
    )
    group = f"lag-{uuid.uuid4().hex[:8]}"
    spec["streams"][0]["kafka"]["consumer_group"] = group  # processed offsets also committed there, for lag tools
    run_once(spark, spec, tmp_path)
    truth: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for p in pings:
        status = driver_location_pb2.DriverStatus.Name(p.driver_status)
        truth[(s2id(p.latitude, p.longitude), status, window_end(p.event_timestamp.seconds))].add(p.driver_id)
    got = {
        (r["label_s2id"], r["label_driver_status"], utc_iso(r["window_timestamp"])): r["drivers"] for r in log_rows(out)
    }
    assert got == {k: len(v) for k, v in truth.items()}
    c = Consumer({"bootstrap.servers": services.kafka_bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    c.close()
    assert sorted(tp.offset for tp in committed) == [10_000, 10_000]


def test_malformed_events_go_to_the_dead_letter_topic(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services, partitions=1)
    events = list(booking_logs(10_000, seed=3, start=START, rate=200))
    payloads: list[bytes] = []
    bad_offsets = set()
    for i, e in enumerate(events):
        if i % 100 == 50:  # 1% garbage that no protobuf parser accepts
            bad_offsets.add(len(payloads))
            payloads.append(b"\xff\xff\xff\xff not a protobuf")
        payloads.append(e.SerializeToString())
    produce(services.kafka_bootstrap, topic, iter(payloads), partitions=1)
    out = tmp_path / "out.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    spec["telemetry_url"] = services.victoria_metrics_url
    run_once(spark, spec, tmp_path)
    assert surge_rows(out) == surge_truth(events)
    dlq = consume_all(services.kafka_bootstrap, f"{topic}.dlq")
    assert sorted(int(dict(m.headers())["dagger.offset"]) for m in dlq) == sorted(bad_offsets)
    assert all(dict(m.headers())["dagger.error"].startswith(b"not a valid daggers.events.BookingLog") for m in dlq)
    # Counted too, in the first batch as well (Spark reports no start offsets for it).
    dagger = f'{{dagger="tests.{spec["name"]}"}}'
    malformed = victoria.export(services.victoria_metrics_url, f"dagger_metrics_malformed{dagger}")
    assert sum(sum(s["values"]) for s in malformed) == len(bad_offsets)


def test_events_the_reader_drops_still_move_the_watermark(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """The reader evaluates the surge query's `status = 'COMPLETED'` and sends Spark only completed bookings. Batch 1
    ends with a cancelled booking ten minutes after the rest: the watermark must still pass it, so that batch 2's
    completed bookings from before it are late, as if Spark had seen every event: sent to the dead-letter topic and
    counted, not emitted as a partial row that would replace the window's whole one."""
    topic = new_topic(services, partitions=1)
    start_s = int(START.timestamp())
    events = list(booking_logs(200, seed=41, start=START, rate=4))  # the first 100 within 25 s
    for e in events:
        e.status = booking_log_pb2.COMPLETED
    events[99].status = booking_log_pb2.CUSTOMER_CANCELLED
    events[99].event_timestamp.seconds = start_s + 600
    for e in events[100:]:  # after batch 1's completed bookings, behind the watermark the cancelled one sets
        e.event_timestamp.seconds = start_s + 45
    produce(services.kafka_bootstrap, topic, iter(events), partitions=1)
    out = tmp_path / "out.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 100
    plan = plan_dagger(parse_spec({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))
    assert [f.describe() for f in plan.streams[0].filters] == ["status = 'COMPLETED'"]
    result = run(plan, spark, once=True)
    assert surge_rows(out) == surge_truth(events[:100])
    assert (result.input_rows, result.late_events, result.dropped_by_watermark) == (len(events), 100, 0)
    assert len(consume_all(services.kafka_bootstrap, f"{topic}.dlq")) == 100


def test_invalid_specs_are_refused_with_reasons(tmp_path: Path) -> None:
    cases = {
        "table": ("SELECT * FROM parquet.`/etc/x`", "parquet"),
        "column": ("SELECT lattitude FROM `booking`", "lattitude"),
        "function": ("SELECT NoSuchFn(lat) FROM `booking`", "NoSuchFn"),
        "ddl": ("DROP TABLE booking", "SELECT"),
    }
    for name, (sql, expected) in cases.items():
        spec = {
            "name": "bad",
            "team": "tests",
            "streams": [{"table": "booking", "topics": ["x"], "proto": "daggers.events.BookingLog"}],
            "sql": sql,
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        r = subprocess.run([str(BIN_DIR / "dagger"), "validate", str(path)], capture_output=True, text=True)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert expected.lower() in r.stderr.lower(), (name, r.stderr)
    bad = tmp_path / "fields.yaml"
    bad.write_text(yaml.safe_dump({"name": "Bad Name", "team": "t", "streams": [], "sql": "SELECT 1"}))
    r = subprocess.run([str(BIN_DIR / "dagger"), "validate", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and "name:" in r.stderr and "streams:" in r.stderr


@pytest.mark.parametrize(
    ("sig", "state_store"),
    [(signal.SIGKILL, "memory"), (signal.SIGTERM, "rocksdb")],
    ids=["kill-9-memory-state", "sigterm-rocksdb-state"],
)
def test_stopped_mid_run_then_restarted_is_exact(
    services: Services, team_db: TeamDb, tmp_path: Path, sig: signal.Signals, state_store: str
) -> None:
    """The whole process group is signalled, as a supervisor does: kill -9 mid-run, or SIGTERM (a clean exit 0);
    a restart with --once then leaves the sink equal to the ground truth: nothing lost, nothing counted twice.
    Both state stores keep open windows across the restart."""
    topic = new_topic(services)
    events = list(booking_logs(30_000, seed=21, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    table = f"surge_{uuid.uuid4().hex[:8]}"
    spec = surge_spec(services, topic, team_db.sink(table))  # its password: in the environment, as deployed
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 3_000  # ten batches: stopped after a few
    spec["state_store"] = state_store
    path = spec_file(spec, tmp_path)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "run.out"
    with out.open("w") as log:
        proc = subprocess.Popen(
            [str(BIN_DIR / "dagger"), "run", str(path)], start_new_session=True, env=env, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and _pg_rows(team_db, table) < 20:
            time.sleep(1)
        assert proc.poll() is None, "the dagger exited before it could be stopped"
        assert _pg_rows(team_db, table) >= 20
        os.killpg(proc.pid, sig)
        code = proc.wait(120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    if sig == signal.SIGTERM:
        assert code == 0 and "stopped by signal" in out.read_text(), out.read_text()[-3000:]
    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "run", "--once", str(path)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with team_db.connect() as conn:
        rows = conn.execute(
            f"SELECT tag_city_id, tag_s2id, tag_vehicle_type, window_timestamp, num_of_bookings FROM {table}"
        ).fetchall()
    got = Counter({(c, s, v, w.astimezone(UTC).isoformat()): n for c, s, v, w, n in rows})
    assert got == surge_truth(events)


def _pg_rows(db: TeamDb, table: str) -> int:
    try:
        with db.connect() as conn:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
    except psycopg.errors.UndefinedTable:
        return 0


def test_spec_json_schema_is_exported() -> None:
    r = subprocess.run([str(BIN_DIR / "dagger"), "schema"], capture_output=True, text=True)
    schema = json.loads(r.stdout)
    assert {"name", "team", "streams", "sql", "sink"} <= set(schema["properties"])


JOIN_SQL = """SELECT o.city_id AS tag_city_id,
       count(1) AS completed_in_10_min,
       TUMBLE_END(o.rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM `orders` AS o JOIN `completions` AS c
  ON o.order_number = c.order_number
 AND c.rowtime BETWEEN o.rowtime AND o.rowtime + INTERVAL '10' MINUTE
GROUP BY TUMBLE(o.rowtime, INTERVAL '60' SECOND), o.city_id"""


def test_two_stream_join_counts_orders_completed_in_time(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    orders = list(booking_logs(6_000, seed=8, start=START, rate=20))
    rng = random.Random(8)
    completions, truth = [], Counter()
    for o in orders:
        o.status = booking_log_pb2.BookingStatus.Value("CREATED")
        if rng.random() < 0.7:
            delay = rng.randrange(10, 900)  # seconds; both ends of BETWEEN are inclusive
            done = booking_log_pb2.BookingLog(order_number=o.order_number, status="COMPLETED", city_id=o.city_id)
            done.event_timestamp.seconds = o.event_timestamp.seconds + delay
            done.event_timestamp.nanos = o.event_timestamp.nanos
            completions.append(done)
            if delay <= 600:
                truth[(o.city_id, window_end(o.event_timestamp.seconds))] += 1
    assert sum(truth.values()) > 2000  # most orders complete in time: the check below is not vacuous
    completions.sort(key=lambda c: (c.event_timestamp.seconds, c.event_timestamp.nanos))
    order_topic, completion_topic = new_topic(services), new_topic(services)
    produce(services.kafka_bootstrap, order_topic, iter(orders), partitions=2)
    produce(services.kafka_bootstrap, completion_topic, iter(completions), partitions=2)
    out = tmp_path / "join.jsonl"
    spec = spec_dict(
        services, "orders", order_topic, "daggers.events.BookingLog", JOIN_SQL, {"type": "log", "path": str(out)}
    )
    spec["streams"].append({**spec["streams"][0], "table": "completions", "topics": [completion_topic]})
    spec["watermark_delay"] = "30s"
    run_once(spark, spec, tmp_path)
    got = {(r["tag_city_id"], utc_iso(r["window_timestamp"])): r["completed_in_10_min"] for r in log_rows(out)}
    assert got == dict(truth)


@pytest.mark.parametrize("version", [2, 1], ids=["v2-victoria-metrics", "v1-influxdb-1.6"])
def test_surge_to_influx_with_telemetry(services: Services, spark: SparkSession, tmp_path: Path, version: int) -> None:
    topic = new_topic(services)
    # VictoriaMetrics keeps 30 days: recent event times.
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=3)
    events = list(booking_logs(12_000, seed=30 + version, start=start, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    url = services.victoria_metrics_url if version == 2 else services.influxdb_url
    measurement = f"surge_{uuid.uuid4().hex[:8]}"
    spec = surge_spec(
        services,
        topic,
        {"type": "influx", "url": url, "version": version, "measurement": measurement},
    )
    spec["telemetry_url"] = services.victoria_metrics_url
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 5_000
    run_once(spark, spec, tmp_path)
    assert influx_surge(services, version, measurement) == surge_truth(events)

    dagger = f'{{dagger="tests.{spec["name"]}"}}'
    vm = services.victoria_metrics_url
    input_rows = sum(sum(s["values"]) for s in victoria.export(vm, f"dagger_metrics_input_rows{dagger}"))
    assert input_rows == len(events)  # end-of-input sentinels are not counted as events
    lags = victoria.export(vm, f"dagger_metrics_lag{dagger}")
    assert sorted(s["metric"]["partition"] for s in lags) == ["0", "1"]
    assert all(s["values"][-1] == 0 for s in lags)  # caught up at the end
    for metric in ("batch_duration_ms", "watermark_ms", "processed_rate"):
        assert victoria.export(vm, f"dagger_metrics_{metric}{dagger}"), metric
    for metric in ("malformed", "sink_errors"):
        assert sum(sum(s["values"]) for s in victoria.export(vm, f"dagger_metrics_{metric}{dagger}")) == 0, metric


def test_surge_to_kafka_json(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    events = list(booking_logs(10_000, seed=40, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    out_topic = f"surge-out-{uuid.uuid4().hex[:8]}"
    spec = surge_spec(
        services,
        topic,
        {"type": "kafka", "bootstrap_servers": services.kafka_bootstrap, "topic": out_topic},
    )
    run_once(spark, spec, tmp_path)
    rows = [json.loads(m.value()) for m in latest_by_key(consume_all(services.kafka_bootstrap, out_topic)).values()]
    assert surge_counts(rows) == surge_truth(events)


def test_surge_on_the_standalone_cluster(services: Services, tmp_path: Path) -> None:
    """`dagger run --master spark://...`: the driver here, executors on the Odin-provisioned Spark worker."""
    topic = new_topic(services)
    events = list(booking_logs(10_000, seed=50, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    out = tmp_path / "surge.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    path = spec_file(spec, tmp_path)
    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "run", "--once", "--master", services.spark_master_url, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert surge_rows(out) == surge_truth(events)


def test_preview_runs_the_query_on_the_latest_events(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    events = list(booking_logs(3_000, seed=60, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)  # event i goes to partition i % 2
    spec = surge_spec(services, topic, {"type": "log"})
    table = preview(plan_dagger(parse_spec(spec)), spark, limit=100_000, recent=400)
    latest = [e for p in (0, 1) for e in events[p::2][-400:]]
    assert surge_counts(table.to_pylist()) == surge_truth(latest)
    # `*` reads every field (plus rowtime); names are matched whatever their case.
    star = preview(plan_dagger(parse_spec({**spec, "sql": "SELECT * FROM data_stream"})), spark, 100_000, 400)
    assert star.column_names == [f.name for f in booking_log_pb2.BookingLog.DESCRIPTOR.fields] + ["rowtime"]
    assert sorted(star.column("order_number").to_pylist()) == sorted(e.order_number for e in latest)
    upper = preview(plan_dagger(parse_spec({**spec, "sql": "SELECT ORDER_NUMBER FROM data_stream"})), spark, 10, 400)
    assert len(upper) == 10 and all(n.startswith("ORD-") for n in upper.column(0).to_pylist())

    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "preview", "--limit", "5", str(spec_file(spec, tmp_path))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "(5 rows)" in r.stdout and "tag_s2id" in r.stdout


def test_preview_of_a_topic_without_events_is_empty(services: Services, spark: SparkSession) -> None:
    spec = surge_spec(services, new_topic(services), {"type": "log"})
    assert preview(plan_dagger(parse_spec(spec)), spark).num_rows == 0


def test_warming_executors_reads_an_event_per_task(
    services: Services, spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    """A (re)launched driver warms its executors beside the starting query: each of its tasks reads and decodes
    one event of a partition, committing nothing."""
    topic = new_topic(services)
    produce(services.kafka_bootstrap, topic, booking_logs(100, seed=61, start=START, rate=100), partitions=2)
    plan = plan_dagger(parse_spec(surge_spec(services, topic, {"type": "log"})))
    with caplog.at_level(logging.INFO, logger="dagger"):
        warm_executors(plan, spark).join(timeout=300)
    assert f"{plan.spec.parallelism} events read" in caplog.text, caplog.text
    # an empty topic: nothing to decode, still warm
    empty = plan_dagger(parse_spec(surge_spec(services, new_topic(services), {"type": "log"})))
    with caplog.at_level(logging.INFO, logger="dagger"):
        warm_executors(empty, spark).join(timeout=300)
    assert "0 events read" in caplog.text, caplog.text


PLANNERS_SCRIPT = """
import json, sys
import psutil
from jobs.engine.plan import plan_dagger
from jobs.engine.runner import run, session_for, warm_planners
from jobs.spec import parse_spec

def planners():  # a planner daemon and the workers it forked share its command line
    found = set()
    for p in psutil.Process().children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.Error:  # it ended meanwhile (a zombie until its parent reaps it)
            continue
        if "create_data_source" in line or "plan_data_source" in line:
            found.add(p.pid)
    return found

plan = plan_dagger(parse_spec(json.loads(sys.argv[1])))
spark = session_for(plan, "local[1]")
warm_planners(spark)[1].join(timeout=300)
warm = planners()
result = run(plan, spark, once=True)
print(json.dumps({"warm": len(warm), "new": len(planners() - warm), "events": result.input_rows}))
"""


def test_warmed_planners_are_the_ones_the_query_uses(services: Services, tmp_path: Path) -> None:
    """The query's schema and the plan of its first batch's reads run in the Python processes the warm-up started
    (each would otherwise start, with the engine's imports, inside the query's start and its first batch). A fresh
    Spark: a shared one already holds planners from other tests."""
    topic = new_topic(services)
    produce(services.kafka_bootstrap, topic, booking_logs(200, seed=62, start=START, rate=100), partitions=2)
    spec = {**surge_spec(services, topic, {"type": "log"}), "checkpoint_dir": str(tmp_path / "checkpoint")}
    r = subprocess.run(
        [sys.executable, "-c", PLANNERS_SCRIPT, json.dumps(spec)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen == {"warm": 4, "new": 0, "events": 200}, seen  # two daemons, a worker each


class _SlowInflux(Handler):
    """An InfluxDB 1.x write endpoint that holds every write until `answer` is set, then accepts it."""

    answer: ClassVar[threading.Event] = threading.Event()
    held: ClassVar[list[float]] = []

    def do_POST(self) -> None:
        self.body()
        self.held.append(time.monotonic())
        self.answer.wait(60)
        self.reply(204, b"")


def test_a_hung_batch_is_not_an_idle_query(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    """The idle beat tells health that a quiet query is alive; a batch stuck in its sink is not quiet, so no beat
    may hide it (health would never call the dagger stalled)."""
    topic = new_topic(services)
    produce(services.kafka_bootstrap, topic, booking_logs(200, seed=62, start=START, rate=100), partitions=2)
    beats: list[float] = []
    # the first write is held 15 s: longer than a beat (IDLE_BEAT_S), shorter than the sink's 30 s timeout

    def hold_then_answer() -> None:
        deadline = time.monotonic() + 300
        while not _SlowInflux.held and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(15)
        _SlowInflux.answer.set()

    with serving(_SlowInflux) as url:
        spec = surge_spec(services, topic, {"type": "influx", "url": url, "version": 1, "measurement": "surge"})
        plan = plan_dagger(parse_spec({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))
        threading.Thread(target=hold_then_answer, daemon=True).start()
        try:
            result = run(plan, spark, once=True, on_idle=lambda: beats.append(time.monotonic()))
        finally:
            _SlowInflux.answer.set()
    assert _SlowInflux.held and result.rows_written > 0
    first_write = _SlowInflux.held[0]
    assert not [b for b in beats if first_write < b < first_write + 15], (beats, first_write)


SHIPPED_PROBE = """
import json, sys
from pathlib import Path
from jobs.engine.runner import session_for
from jobs.engine.plan import plan_dagger
from jobs.spec import load_spec

spark = session_for(plan_dagger(load_spec(Path(sys.argv[1]))), sys.argv[2])

def probe(_):
    import jobs, protos
    elsewhere = protos.local_file(Path("/nowhere") / protos.DESCRIPTOR_SET.name)  # a driver path this host lacks
    return [jobs.__file__, str(elsewhere), elsewhere.exists()]

print(json.dumps(spark.sparkContext.parallelize([0], 1).map(probe).collect()[0]))
spark.stop()
"""


def test_cluster_executors_run_the_drivers_engine(services: Services, tmp_path: Path) -> None:
    """On a cluster, executors import the engine the driver shipped (never a stale install on their host) and find
    the compiled schemas among the files Spark shipped when the driver's path does not exist there."""
    spec = surge_spec(services, "unused", {"type": "log"})
    r = subprocess.run(
        [str(BIN_DIR / "python"), "-c", SHIPPED_PROBE, str(spec_file(spec, tmp_path)), services.spark_master_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    jobs_file, schemas, exists = json.loads(r.stdout.strip().splitlines()[-1])
    assert "dagger_engine.zip" in jobs_file
    assert exists and not schemas.startswith("/nowhere")
