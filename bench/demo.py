"""`make demo`: bring up the embedded local stack with Odin, put booking events on Kafka, and show them land.

Until the dagger engine exists this demo stands in for it: events are read back and counted per service type
in plain Python, and the counts are written to VictoriaMetrics through the InfluxDB API and read back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import httpx
from confluent_kafka import Consumer, TopicPartition
from daggers.events import booking_log_pb2, common_pb2
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from rich.console import Console
from rich.table import Table

from jobs.generator import booking_logs, produce
from odin.endpoints import Endpoints
from odin.paths import BIN_DIR
from odin.stack import Stack

EVENTS = 20_000
console = Console()


def main() -> int:
    console.rule("1. odin up: Kafka (Tansu) and VictoriaMetrics")
    up = subprocess.run([str(BIN_DIR / "odin"), "up", "--only", "kafka_broker,victoria_metrics"], check=False)
    if up.returncode:
        return up.returncode
    where = Endpoints(Stack().nodes())
    kafka, vm = where.kafka_bootstrap, where.victoria_metrics_url

    topic = f"demo-booking-log-{int(time.time())}"
    console.rule(f"2. produce {EVENTS:,} BookingLog events to {topic}")
    started = time.perf_counter()
    produce(kafka, topic, booking_logs(EVENTS, seed=7), partitions=1)
    console.print(f"produced {EVENTS:,} events in {time.perf_counter() - started:.1f}s")

    console.rule("3. read them back and count per service type")
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    counts: Counter[str] = Counter()
    seen = 0
    deadline = time.monotonic() + 60
    while seen < EVENTS and time.monotonic() < deadline:
        for m in consumer.consume(10_000, timeout=1.0):
            if m.error() is None:
                event = booking_log_pb2.BookingLog.FromString(m.value())
                counts[common_pb2.ServiceType.Name(event.service_type)] += 1
                seen += 1
    consumer.close()

    console.rule("4. write the counts to VictoriaMetrics (InfluxDB line protocol) and read them back")
    with InfluxDBClient(url=vm, token="", org="") as client:
        lines = [f"demo_bookings,service_type={k} count={v}i" for k, v in counts.items()]
        client.write_api(write_options=SYNCHRONOUS).write(bucket="daggers", record=lines)
    httpx.get(f"{vm}/internal/force_flush", timeout=10)
    stored: dict[str, float] = {}
    for _ in range(20):
        r = httpx.get(f"{vm}/api/v1/query", params={"query": "demo_bookings_count"}, timeout=10).json()
        stored = {s["metric"]["service_type"]: float(s["value"][1]) for s in r["data"]["result"]}
        if len(stored) == len(counts):
            break
        time.sleep(1)

    table = Table(title=f"bookings per service type ({topic})")
    for col in ("service type", "read from Kafka", "stored in VictoriaMetrics"):
        table.add_column(col)
    for k, v in sorted(counts.items()):
        table.add_row(k, f"{v:,}", f"{stored.get(k, 0):,.0f}")
    console.print(table)
    ok = seen == EVENTS and all(stored.get(k) == v for k, v in counts.items())
    console.print(
        f"[{'green' if ok else 'red'}]demo {'ok' if ok else 'FAILED'}[/]: {seen:,}/{EVENTS:,} events read back; "
        f"query VictoriaMetrics at {vm}/vmui ; stop the stack with `make down`."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
