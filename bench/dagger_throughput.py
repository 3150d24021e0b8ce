"""`make bench` (dagger part): the surge dagger against a plain-Python baseline, and its end-to-end latency.

1. Produce 2M BookingLog events (2 partitions) to an isolated Tansu broker; VictoriaMetrics is the sink.
2. Throughput: `dagger run --once` of the surge query (S2Id level 13 + DistinctCount per minute) on local[2],
   timed from process start to exit (JVM start, planning and the end-of-input flush included); then the same
   aggregation in one plain Python process: confluent-kafka consume + protobuf decode + S2 (the same vectorised
   numpy code) + dicts. Both must agree exactly; the bench checks the TSDB against the baseline.
3. Latency: the dagger runs continuously while events are produced at a fixed 20k events/s stamped with the
   wall clock; for every window, latency = first moment its rows are queryable in VictoriaMetrics - the window end
   (the age of the window's newest event when it becomes visible; it includes the watermark delay, which is a
   setting, so it is reported separately). 10 s windows here, to get a dozen windows in two minutes.

Prints a table (recorded in bench/RESULTS.md) and ends with one line:
`dagger_events_per_s=<n> baseline_events_per_s=<n> ratio=<r> p99_latency_s=<s>`, where the dagger's rate is its
steady rate (batches after the first) and the end-to-end rate (JVM start included) is in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from daggers.events import booking_log_pb2, common_pb2
from rich.console import Console
from rich.table import Table

from jobs.generator import booking_logs, produce
from jobs.topics import ensure_topics
from jobs.udfs.s2 import s2_cell_ids
from odin import victoria
from odin.endpoints import Endpoints
from odin.paths import BIN_DIR, temporary_state_dir
from odin.ports import stack_ports
from odin.spec import Service
from odin.stack import Stack

console = Console()
PARTITIONS = 2
WINDOW_S = 60
SURGE_SQL = """SELECT city_id AS tag_city_id,
       S2Id(lat,long,13) AS tag_s2id,
       vehicle_type AS tag_vehicle_type,
       count(1) AS num_of_bookings,
       DistinctCount(customer_id) AS unique_customers,
       TUMBLE_END(rowtime,INTERVAL '{w}' SECOND) AS window_timestamp
FROM `data_stream`
WHERE status='COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '{w}' SECOND),
       city_id,
       S2Id(lat, long, 13),
       vehicle_type
"""
COMPLETED = booking_log_pb2.BookingStatus.Value("COMPLETED")


@dataclass
class Measured:
    events: int
    seconds: float
    peak_rss_mb: float
    steady_rate: float | None  # events/s once running (the dagger: batches after the first; None: no such batch)
    detail: str = ""

    @property
    def rate(self) -> float:
        return self.events / self.seconds


# -- the stack -------------------------------------------------------------------------------------------------


def start_stack(state: Path) -> tuple[Stack, Endpoints]:
    stack = Stack("local", state)
    report = stack.up(stack.resolve(1, {Service.kafka_broker, Service.victoria_metrics}, stack_ports()))
    if not report.ok:
        stack.down()
        raise SystemExit(f"odin up failed: {report.playbook.failures}")
    return stack, Endpoints(stack.nodes())


# -- the dagger ------------------------------------------------------------------------------------------------


def spec_file(state: Path, name: str, topic: str, kafka: str, vm: str, window_s: int, delay: str, trigger: str) -> Path:
    spec = {
        "name": name,
        "team": "bench",
        "streams": [
            {
                "table": "data_stream",
                "topics": [topic],
                "proto": "daggers.events.BookingLog",
                "kafka": {"bootstrap_servers": kafka, "max_events_per_trigger": 500_000},
            }
        ],
        "sql": SURGE_SQL.format(w=window_s),
        "watermark_delay": delay,
        "trigger_interval": trigger,
        "parallelism": PARTITIONS,
        "sink": {"type": "influx", "url": vm, "measurement": measurement(name)},
        "checkpoint_dir": str(state / name / "checkpoint"),
        "telemetry_url": vm,
    }
    path = state / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def measurement(name: str) -> str:
    return name.replace("-", "_")  # a PromQL metric name has no '-'


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group (the dagger's JVM and its Python workers)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5 of stat: pgrp
                total += int(fields[21]) * resource.getpagesize()  # field 24: rss in pages
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


def run_once(spec: Path, events: int, vm: str, dagger: str) -> Measured:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN_DIR / "dagger"), "run", "--once", str(spec)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = 0.0
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True)
    reader.start()
    with console.status("dagger run --once on local[2]"):
        while proc.poll() is None:
            peak = max(peak, group_rss_mb(proc.pid))
            time.sleep(0.2)
            if time.perf_counter() - started > 1800:
                os.killpg(proc.pid, signal.SIGKILL)
                raise SystemExit("dagger run --once took more than 30 minutes")
    seconds = time.perf_counter() - started
    reader.join(10)
    if proc.returncode:
        raise SystemExit(f"dagger run --once failed ({proc.returncode}):\n{''.join(out[-40:])}")
    batches = [line for line in out if line.startswith("batch ")]
    return Measured(events, seconds, peak, steady_rate(vm, dagger), f"{len(batches)} batches")


# -- the baseline ----------------------------------------------------------------------------------------------


def baseline(kafka: str, topic: str, ends: dict[int, int]) -> dict[str, Any]:
    """One process, one consumer on both partitions: decode, filter, S2 (vectorised per chunk), dict windows."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": "bench-baseline",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.min.messages": 200_000,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    counts: dict[tuple[int, int, str, int], int] = defaultdict(int)
    customers: dict[tuple[int, int, str, int], set[str]] = defaultdict(set)
    vehicle_names = {number: name for name, number in common_pb2.VehicleType.items()}
    remaining = sum(ends.values())
    parse = booking_log_pb2.BookingLog.FromString
    deadline = time.monotonic() + 1800
    started = time.perf_counter()
    while remaining > 0 and time.monotonic() < deadline:
        msgs = consumer.consume(20_000, timeout=0.5)
        keep = []
        for m in msgs:
            if m.error() is not None:
                continue
            remaining -= 1
            e = parse(m.value())
            if e.status == COMPLETED:
                keep.append(e)
        if not keep:
            continue
        cells = s2_cell_ids(np.array([e.lat for e in keep]), np.array([e.long for e in keep]), 13).view(np.int64)
        for e, cell in zip(keep, cells.tolist(), strict=True):
            key = (e.city_id, cell, vehicle_names[e.vehicle_type], e.event_timestamp.seconds // WINDOW_S)
            counts[key] += 1
            customers[key].add(e.customer_id)
    seconds = time.perf_counter() - started
    consumer.close()
    if remaining > 0:
        raise SystemExit(f"baseline: {remaining} events not read in 30 minutes")
    return {
        "seconds": seconds,
        "rows": len(counts),
        "bookings": sum(counts.values()),
        "customers": sum(len(s) for s in customers.values()),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_baseline(kafka: str, topic: str, ends: dict[int, int]) -> tuple[Measured, dict[str, Any]]:
    """The baseline in its own process, so its memory is its own."""
    with console.status("baseline: one Python process"):
        r = subprocess.run(
            [sys.executable, "-m", "bench.dagger_throughput", "--baseline", kafka, topic, json.dumps(ends)],
            capture_output=True,
            text=True,
            timeout=2000,
        )
    if r.returncode:
        raise SystemExit(f"baseline failed:\n{r.stderr[-3000:]}")
    result = json.loads(r.stdout.strip().splitlines()[-1])
    events = sum(ends.values())
    rate = events / result["seconds"]
    return Measured(events, result["seconds"], result["peak_rss_mb"], rate), result


# -- the TSDB --------------------------------------------------------------------------------------------------


def vm_totals(vm: str, metric: str) -> dict[str, float]:
    """Rows, summed bookings and summed distinct customers the dagger wrote (every sample, every series)."""
    bookings = victoria.export(vm, f"{metric}_num_of_bookings")
    customers = victoria.export(vm, f"{metric}_unique_customers")
    return {
        "rows": float(sum(len(s["values"]) for s in bookings)),
        "bookings": float(sum(sum(s["values"]) for s in bookings)),
        "customers": float(sum(sum(s["values"]) for s in customers)),
    }


def steady_rate(vm: str, dagger: str) -> float | None:
    """Events/s over the batches after the first (which also starts Python workers and state stores), from the
    dagger's own telemetry (`dagger_metrics`); end-of-input batches (no events) left out."""

    def samples(field: str) -> list[float]:
        series = victoria.export(vm, f'dagger_metrics_{field}{{dagger="{dagger}"}}')
        return [v for _, v in sorted(zip(series[0]["timestamps"], series[0]["values"], strict=True))] if series else []

    batches = [(n, ms) for n, ms in zip(samples("input_rows"), samples("batch_duration_ms"), strict=True) if n][1:]
    return sum(n for n, _ in batches) / (sum(ms for _, ms in batches) / 1000) if batches else None


def newest_window(vm: str, metric: str) -> float | None:
    victoria.flush(vm)
    r = httpx.get(
        f"{vm}/api/v1/query", params={"query": f"max(timestamp({metric}_num_of_bookings))"}, timeout=10
    ).json()
    result = r.get("data", {}).get("result") or []
    return float(result[0]["value"][1]) if result else None


# -- latency ---------------------------------------------------------------------------------------------------


def paced_produce(kafka: str, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    """`rate` events/s stamped with the wall clock, in 50 ms ticks."""
    template = list(booking_logs(20_000, seed=99))
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 5, "enable.idempotence": True})
    per_tick = rate // 20
    sent = 0
    started = time.monotonic()
    tick = 0
    while not stop.is_set() and time.monotonic() - started < seconds:
        now = time.time()
        for k in range(per_tick):
            e = template[(sent + k) % len(template)]
            e.event_timestamp.seconds = int(now)
            e.event_timestamp.nanos = int((now % 1) * 1e6) * 1000
            producer.produce(topic, e.SerializeToString(), partition=(sent + k) % PARTITIONS)
        sent += per_tick
        producer.poll(0)
        tick += 1
        time.sleep(max(0.0, started + tick * 0.05 - time.monotonic()))
    producer.flush(60)
    return sent


def latency(spec: Path, kafka: str, vm: str, topic: str, rate: int, seconds: float) -> list[float]:
    dagger = yaml.safe_load(spec.read_text())
    checkpoint, metric = Path(dagger["checkpoint_dir"]), dagger["sink"]["measurement"]
    proc = subprocess.Popen(
        [str(BIN_DIR / "dagger"), "run", str(spec)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stop = threading.Event()
    samples: list[float] = []
    try:
        # Let the query start (it writes its checkpoint's metadata) before the clock starts.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (checkpoint / "metadata").exists() and proc.poll() is None:
            time.sleep(0.5)
        producer = threading.Thread(target=paced_produce, args=(kafka, topic, rate, seconds, stop), daemon=True)
        producer.start()
        seen: float | None = None
        with console.status(f"latency: {rate:,} events/s for {seconds:.0f} s"):
            while producer.is_alive() and proc.poll() is None:
                newest = newest_window(vm, metric)
                if newest is not None and newest != seen:
                    if seen is not None:  # the first window seen may have opened before production started
                        samples.append(time.time() - newest)
                    seen = newest
                time.sleep(0.25)
        if proc.poll() is not None:
            raise SystemExit(f"the dagger exited during the latency run ({proc.returncode})")
    finally:
        stop.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return samples


# -- main ------------------------------------------------------------------------------------------------------


def main(events: int, rate: int, latency_s: float) -> int:
    rows: list[tuple[str, str]] = []
    with temporary_state_dir("bench-dagger") as state:
        stack, where = start_stack(state)
        kafka, vm = where.kafka_bootstrap, where.victoria_metrics_url
        try:
            topic = f"bench-booking-{int(time.time())}"
            ensure_topics({"bootstrap.servers": kafka}, {topic: PARTITIONS})
            # Recent event times (VictoriaMetrics keeps 30 days), 5k events per second of event time.
            start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
            with console.status(f"producing {events:,} events"):
                t0 = time.perf_counter()
                payloads = [e.SerializeToString() for e in booking_logs(events, seed=1, start=start, rate=5000)]
                produce(kafka, topic, iter(payloads), partitions=PARTITIONS)
                produced_s = time.perf_counter() - t0
            del payloads
            ends = {p: events // PARTITIONS + (1 if p < events % PARTITIONS else 0) for p in range(PARTITIONS)}
            rows.append(("produce (generate + serialize + send)", f"{events:,} events in {produced_s:.1f}s"))

            spec = spec_file(state, "surge", topic, kafka, vm, WINDOW_S, "60s", "1s")
            dagger = run_once(spec, events, vm, "bench.surge")
            base, truth = run_baseline(kafka, topic, ends)
            written = vm_totals(vm, measurement("surge"))
            exact = (written["rows"], written["bookings"], written["customers"]) == (
                truth["rows"],
                truth["bookings"],
                truth["customers"],
            )
            steady = (
                f"{dagger.steady_rate:,.0f} events/s (batches after the first)"
                if dagger.steady_rate
                else "n/a (one batch of events: the rate below is end to end)"
            )
            rows.append(
                (
                    "dagger run --once (local[2], S2Id 13 + DistinctCount, 60 s windows)",
                    f"steady {steady}; end to end "
                    f"{dagger.rate:,.0f} events/s ({dagger.seconds:.1f}s from process start to exit, JVM start "
                    f"and first batch included); {dagger.detail}; peak RSS {dagger.peak_rss_mb:,.0f} MB",
                )
            )
            rows.append(
                (
                    "baseline (1 process: consume + decode + same aggregation)",
                    f"{base.rate:,.0f} events/s ({base.seconds:.1f}s); peak RSS {base.peak_rss_mb:,.0f} MB",
                )
            )
            rows.append(
                (
                    "TSDB == baseline",
                    f"{'exact' if exact else 'MISMATCH'}: {written['rows']:,.0f} rows, "
                    f"{written['bookings']:,.0f} bookings, {written['customers']:,.0f} distinct customers "
                    f"(baseline {truth['rows']:,} / {truth['bookings']:,} / {truth['customers']:,})",
                )
            )

            live_topic = f"bench-live-{int(time.time())}"
            ensure_topics({"bootstrap.servers": kafka}, {live_topic: PARTITIONS})
            live = spec_file(state, "surge-live", live_topic, kafka, vm, 10, "2s", "1s")
            samples = latency(live, kafka, vm, live_topic, rate, latency_s)
        finally:
            stack.down()

    p50 = statistics.median(samples) if samples else float("nan")
    p99 = float(np.percentile(samples, 99)) if samples else float("nan")
    rows.append(
        (
            f"latency at {rate:,} events/s (10 s windows, 2 s watermark delay, 1 s trigger)",
            f"{len(samples)} windows; window end → row in VictoriaMetrics p50 {p50:.1f}s, p99 {p99:.1f}s, "
            f"max {max(samples, default=float('nan')):.1f}s (2 s of it is the watermark delay)",
        )
    )
    table = Table(title="Dagger throughput and latency", title_justify="left")
    table.add_column("what")
    table.add_column("result")
    for what, result in rows:
        table.add_row(what, result)
    console.print(table)
    # Like for like: both rates once running (the baseline's clock starts at its first consume).
    console.print(f"end-to-end ratio (dagger incl. start-up / baseline): {dagger.rate / base.rate:.2f}")
    rate = dagger.steady_rate or dagger.rate
    print(
        f"dagger_events_per_s={rate:.0f} baseline_events_per_s={base.rate:.0f} "
        f"ratio={rate / base.rate:.2f} p99_latency_s={p99:.1f}"
    )
    return 0 if exact else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=20_000, help="events/s during the latency run")
    parser.add_argument("--latency-seconds", type=float, default=150)
    parser.add_argument("--baseline", nargs=3, metavar=("KAFKA", "TOPIC", "ENDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        kafka, topic, ends = args.baseline
        print(json.dumps(baseline(kafka, topic, {int(k): v for k, v in json.loads(ends).items()})))
        sys.exit(0)
    sys.exit(main(args.events, args.rate, args.latency_seconds))
