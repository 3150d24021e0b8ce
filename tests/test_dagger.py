"""The dagger engine end to end: seed queries on the real broker, checked against plain-Python ground truth."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import s2sphere
import yaml
from confluent_kafka import Consumer, TopicPartition
from daggers.events import common_pb2, driver_location_pb2
from pyspark.sql import SparkSession

from jobs.engine import run
from jobs.generator import booking_logs, driver_pings, produce
from jobs.plan import plan_dagger
from jobs.sinks import read_log
from jobs.spec import parse_spec
from jobs.topics import ensure_topics
from odin.paths import BIN_DIR
from tests.conftest import Services
from tests.seeds import SUPPLY_SQL, SURGE_SQL

START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def s2id(lat: float, lng: float, level: int = 13) -> str:
    """Independent reference: s2sphere, as Java's signed Long.toString(S2CellId.id())."""
    cell = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return str(cell - (1 << 64) if cell >= 1 << 63 else cell)


def window_end(seconds: int, size: int = 60) -> str:
    return datetime.fromtimestamp((seconds // size + 1) * size, UTC).isoformat()


def new_topic(services: Services, partitions: int = 2) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    ensure_topics({"bootstrap.servers": services.kafka_bootstrap}, {name: partitions})
    return name


def spec_dict(services: Services, table: str, topic: str, proto: str, sql: str, sink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"d-{uuid.uuid4().hex[:8]}",
        "team": "tests",
        "streams": [
            {
                "table": table,
                "topics": [topic],
                "proto": proto,
                "kafka": {"bootstrap_servers": services.kafka_bootstrap, "max_events_per_trigger": 20_000},
            }
        ],
        "sql": sql,
        "watermark_delay": "10s",
        "trigger_interval": "1s",
        "parallelism": 2,
        "sink": sink,
    }


def run_once(spark: SparkSession, spec: dict[str, Any], tmp_path: Path) -> None:
    plan = plan_dagger(parse_spec({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))
    run(plan, spark, once=True)


def log_rows(path: Path) -> list[dict[str, Any]]:
    return list(read_log(path).values())


def surge_rows(path: Path) -> Counter[tuple[int, str, str, str]]:
    """The surge query's log sink output, keyed like `surge_truth`."""
    return Counter(
        {
            (r["tag_city_id"], r["tag_s2id"], r["tag_vehicle_type"], _iso(r["window_timestamp"])): r["num_of_bookings"]
            for r in log_rows(path)
        }
    )


def surge_truth(events: Iterable[Any]) -> Counter[tuple[int, str, str, str]]:
    truth: Counter[tuple[int, str, str, str]] = Counter()
    for e in events:
        if e.status == 4:  # COMPLETED
            vt = common_pb2.VehicleType.Name(e.vehicle_type)
            truth[(e.city_id, s2id(e.lat, e.long), vt, window_end(e.event_timestamp.seconds))] += 1
    return truth


def test_seed_surge_query_runs_as_written(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    events = list(booking_logs(30_000, seed=11, start=START, rate=200))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    out = tmp_path / "surge.jsonl"
    run_once(
        spark,
        spec_dict(
            services, "data_stream", topic, "daggers.events.BookingLog", SURGE_SQL, {"type": "log", "path": str(out)}
        ),
        tmp_path,
    )
    assert surge_rows(out) == surge_truth(events)


def _iso(value: str) -> str:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).isoformat()


def test_seed_supply_query_counts_distinct_drivers(services: Services, spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic(services)
    pings = list(driver_pings(20_000, seed=5, start=START, rate=100, drivers=300))
    produce(services.kafka_bootstrap, topic, iter(pings), partitions=2)
    out = tmp_path / "supply.jsonl"
    run_once(
        spark,
        spec_dict(
            services,
            "supply_data",
            topic,
            "daggers.events.DriverLocationPing",
            SUPPLY_SQL,
            {"type": "log", "path": str(out)},
        ),
        tmp_path,
    )
    truth: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for p in pings:
        status = driver_location_pb2.DriverStatus.Name(p.driver_status)
        truth[(s2id(p.latitude, p.longitude), status, window_end(p.event_timestamp.seconds))].add(p.driver_id)
    got = {
        (r["label_s2id"], r["label_driver_status"], _iso(r["window_timestamp"])): r["drivers"] for r in log_rows(out)
    }
    assert got == {k: len(v) for k, v in truth.items()}


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
    run_once(
        spark,
        spec_dict(
            services, "data_stream", topic, "daggers.events.BookingLog", SURGE_SQL, {"type": "log", "path": str(out)}
        ),
        tmp_path,
    )
    assert surge_rows(out) == surge_truth(events)
    dlq = consume_all(services, f"{topic}.dlq")
    assert sorted(int(dict(m.headers())["dagger.offset"]) for m in dlq) == sorted(bad_offsets)
    assert all(b"Wire format" in dict(m.headers())["dagger.error"] or dict(m.headers())["dagger.error"] for m in dlq)


def consume_all(services: Services, topic: str, timeout_s: float = 20) -> list[Any]:
    c = Consumer({"bootstrap.servers": services.kafka_bootstrap, "group.id": uuid.uuid4().hex, "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    idle = 0
    while time.monotonic() < deadline and idle < 5:
        msgs = [m for m in c.consume(10_000, timeout=0.3) if m.error() is None]
        idle = 0 if msgs else idle + 1
        out += msgs
    c.close()
    return out


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


def test_kill_9_mid_run_then_restart_is_exact(services: Services, tmp_path: Path) -> None:
    topic = new_topic(services)
    events = list(booking_logs(60_000, seed=21, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    table = f"surge_{uuid.uuid4().hex[:8]}"
    spec = spec_dict(
        services,
        "data_stream",
        topic,
        "daggers.events.BookingLog",
        SURGE_SQL,
        {"type": "postgres", "dsn": services.postgres_dsn, "table": table},
    )
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 4_000
    spec["checkpoint_dir"] = str(tmp_path / "checkpoint")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [str(BIN_DIR / "dagger"), "run", str(path)],
        start_new_session=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and _pg_rows(services, table) < 20:
            time.sleep(1)
        assert proc.poll() is None, "the dagger exited before it could be killed"
        assert _pg_rows(services, table) >= 20
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "run", "--once", str(path)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with psycopg.connect(services.postgres_dsn) as conn:
        rows = conn.execute(
            f"SELECT tag_city_id, tag_s2id, tag_vehicle_type, window_timestamp, num_of_bookings FROM {table}"
        ).fetchall()
    got = Counter({(c, s, v, w.astimezone(UTC).isoformat()): n for c, s, v, w, n in rows})
    assert got == surge_truth(events)


def _pg_rows(services: Services, table: str) -> int:
    try:
        with psycopg.connect(services.postgres_dsn) as conn:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
    except psycopg.errors.UndefinedTable:
        return 0


def test_spec_json_schema_is_exported() -> None:
    r = subprocess.run([str(BIN_DIR / "dagger"), "schema"], capture_output=True, text=True)
    schema = json.loads(r.stdout)
    assert {"name", "team", "streams", "sql", "sink"} <= set(schema["properties"])
