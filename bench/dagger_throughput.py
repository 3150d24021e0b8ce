"""`make bench` (dagger part): the surge dagger against plain-Python baselines, its start-up and its latency.

1. Produce 2M BookingLog events (2 partitions) to an isolated Tansu broker; VictoriaMetrics is the sink.
2. Throughput: `dagger run --once` of the surge query (S2Id level 13 + DistinctCount per minute) on local[2],
   timed from process start to exit (JVM start, planning and the end-of-input flush included); then the same
   aggregation in one plain Python process: confluent-kafka consume + protobuf decode + S2 (the same vectorised
   numpy code) + dicts, in two variants: one consumer assigned both partitions (20k messages per consume), and what
   bytewax's KafkaSource does on one worker: one consumer per partition (assign), polled round-robin for 1,000
   messages each. All must agree exactly; the bench checks the TSDB against the first baseline, and the second
   baseline against the first (totals and a digest of every window).
3. Start-up: `dagger run` of the surge query on a fresh checkpoint and a small topic whose first batch already
   closes windows, until its first row is queryable in VictoriaMetrics: the time to (a) batch 0 planned (its
   offsets in the checkpoint) and (b) that first row, with a breakdown from bench/startup_probe.py (the CLI with
   timestamps around the engine's steps: SparkSession, data source registration, readStream.load, query start;
   batch timings from Spark's progress), and the peak RSS until then of its process tree (PySpark's daemons and
   workers included) and of its process group; against issue 31's targets (bench/targets.py).
4. Latency: the dagger runs continuously while events are produced at a fixed 20k events/s stamped with the
   wall clock; for every window, latency = first moment its rows are queryable in VictoriaMetrics - the window end
   (the age of the window's newest event when it becomes visible; it includes the watermark delay, which is a
   setting, so it is reported separately). 10 s windows here, to get a dozen windows in two minutes.

Prints two tables (recorded in bench/RESULTS.md) and ends with one line:
`dagger_events_per_s=<n> baseline_events_per_s=<n> ratio=<r> p99_latency_s=<s> bytewax_baseline_events_per_s=<n>
bytewax_ratio=<r> startup_first_batch_s=<s> startup_first_row_s=<s> peak_rss_mb=<n> peak_rss_group_mb=<n>
peak_pss_mb=<n>`, where
the dagger's rate is its steady rate (batches after the first; the end-to-end rate, JVM start included, is in the
table), the ratios are of that rate to each baseline's, and the peak RSS figures are the start-up run's (its whole
process tree, and its process group only).
"""

from __future__ import annotations

import argparse
import hashlib
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
from typing import Any, NamedTuple

import numpy as np
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from daggers.events import booking_log_pb2, common_pb2
from rich.console import Console
from rich.table import Table

from bench.record import record
from bench.targets import target
from jobs.udfs.s2 import s2_cell_ids
from odin.apis import http_client, victoria
from odin.endpoints import Endpoints
from odin.kafka.topics import ensure_topics
from odin.paths import BIN_DIR, temporary_state_dir
from odin.ports import stack_ports
from odin.spec import Service
from odin.stack import Stack
from odin.traffic.generator import booking_logs, produce

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


class Seen(NamedTuple):
    at_s: float  # started, seconds after the dagger's first process (clock ticks: 10 ms)
    mb: float  # peak RSS
    cpu_s: float  # CPU time used (user + system)


def rss_mb(pid: int, per_process: dict[str, Seen] | None = None) -> tuple[float, float, float]:
    """Resident memory of the dagger started as `pid` (a session leader): RSS of its process group, RSS of its
    process tree, and the tree's proportional set size (PSS).

    The group is the CLI's Python, Spark's JVM and the streaming source runner; PySpark's daemons (workers, data
    source planning and reading) put themselves in process groups of their own (os.setpgid in pyspark/daemon.py),
    so only the tree, every descendant of `pid`, has them and their forked workers. RSS counts a page shared by
    forked processes (or a file mapped by several) once per process; PSS shares it out, so the tree's PSS is the
    memory the dagger takes from the machine. `per_process`: each process's start and peak RSS so far, by `_role`."""
    procs: dict[int, _Proc] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat.read_text().rsplit(")", 1)[1].split()  # fields 4, 5, 14-15, 22, 24 of stat
            procs[int(stat.parent.name)] = _Proc(int(f[1]), int(f[2]), int(f[21]), int(f[19]), int(f[11]) + int(f[12]))
        except (OSError, IndexError, ValueError):
            continue
    children: dict[int, list[int]] = defaultdict(list)
    for child, proc in procs.items():
        children[proc.ppid].append(child)
    tree, todo = set(), [pid]
    while todo and len(tree) < 10_000:
        p = todo.pop()
        if p not in tree:
            tree.add(p)
            todo.extend(children.get(p, ()))
    for p in [p for p in tree if p in procs and _spawning(p, procs[p].ppid)]:
        tree.discard(p)
        procs.pop(p)
    page = resource.getpagesize() / 2**20
    group = sum(proc.rss for proc in procs.values() if proc.pgrp == pid) * page
    if per_process is not None:
        tick = os.sysconf("SC_CLK_TCK")
        for p in tree & procs.keys():  # a daemon is in the group until it makes its own: marked as last seen
            role = f"{_role(p)} [{p}]"
            seen = per_process.pop(role, per_process.pop(f"{role} (group)", Seen(0.0, 0.0, 0.0)))
            at = (procs[p].start - procs.get(pid, procs[p]).start) / tick
            mb, cpu = max(seen.mb, procs[p].rss * page), max(seen.cpu_s, procs[p].cpu / tick)
            per_process[f"{role} (group)" if procs[p].pgrp == pid else role] = Seen(at, mb, cpu)
    return group, sum(procs[p].rss for p in tree if p in procs) * page, sum(_pss_kb(p) for p in tree) / 1024


class _Proc(NamedTuple):
    """A process as /proc/PID/stat has it: parent, process group, resident pages, start and CPU in clock ticks."""

    ppid: int
    pgrp: int
    rss: int
    start: int
    cpu: int


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _spawning(pid: int, parent: int) -> bool:
    """A JVM's child between its fork and its exec (the JDK starts Python workers with posix_spawn, whose child
    shares the JVM's memory until it execs): it reports the JVM's command line and RSS, which is not a second JVM."""
    argv = _cmdline(pid)
    program = Path(argv.split(b"\0", 1)[0].decode(errors="replace")).name
    return program == "java" and argv == _cmdline(parent)


def _role(pid: int) -> str:
    """What a process of the dagger's tree is, from its command line."""
    raw = _cmdline(pid)
    if not raw:
        return "?"
    argv = raw.decode(errors="replace").split("\0")
    if Path(argv[0]).name == "java":
        return "JVM: Spark's launcher" if "org.apache.spark.launcher.Main" in argv else "JVM: Spark driver"
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        return f"Python: {module} {' '.join(argv[argv.index('-m') + 2 :])}".strip() if "daemon" in module else module
    return " ".join(argv)[:60]


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):  # the process ended
        pass
    return 0


def run_once(spec: Path, events: int, vm: str, dagger: str) -> Measured:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN_DIR / "dagger"), "run", "--once", str(spec)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = peak_tree = peak_pss = 0.0
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True)
    reader.start()
    with console.status("dagger run --once on local[2]"):
        while proc.poll() is None:
            group, tree, pss = rss_mb(proc.pid)
            peak, peak_tree, peak_pss = max(peak, group), max(peak_tree, tree), max(peak_pss, pss)
            time.sleep(0.2)
            if time.perf_counter() - started > 1800:
                os.killpg(proc.pid, signal.SIGKILL)
                raise SystemExit("dagger run --once took more than 30 minutes")
    seconds = time.perf_counter() - started
    reader.join(10)
    if proc.returncode:
        raise SystemExit(f"dagger run --once failed ({proc.returncode}):\n{''.join(out[-40:])}")
    batches = [line for line in out if line.startswith("batch ")]
    detail = (
        f"{len(batches)} batches; peak RSS of the whole process tree (PySpark's daemons too) {peak_tree:,.0f} MB, "
        f"its PSS {peak_pss:,.0f} MB"
    )
    return Measured(events, seconds, peak, steady_rate(vm, dagger), detail)


# -- the baselines ---------------------------------------------------------------------------------------------

BYTEWAX_BATCH = 1000  # bytewax's KafkaSource: `batch_size` messages per consume (its docs' value for throughput)
BASELINES = {
    "one-consumer": "baseline (1 process, one consumer on both partitions: consume + decode + same aggregation)",
    "per-partition": (
        f"baseline, bytewax-style (1 process, one consumer per partition (assign), round-robin "
        f"{BYTEWAX_BATCH:,} messages from each in turn: consume + decode + same aggregation)"
    ),
}


def baseline_consumer(kafka: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": group,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.min.messages": 200_000,
        }
    )


class Windows:
    """The baselines' aggregation: decode, filter, S2 (vectorised per chunk of messages), dict windows."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, int, str, int], int] = defaultdict(int)
        self.customers: dict[tuple[int, int, str, int], set[str]] = defaultdict(set)
        self.vehicle_names = {number: name for name, number in common_pb2.VehicleType.items()}

    def add(self, msgs: list[Any]) -> int:
        """Aggregate a chunk of consumed messages; returns how many were events (not errors)."""
        parse = booking_log_pb2.BookingLog.FromString
        events = 0
        keep = []
        for m in msgs:
            if m.error() is not None:
                continue
            events += 1
            e = parse(m.value())
            if e.status == COMPLETED:
                keep.append(e)
        if not keep:
            return events
        counts, customers, vehicle_names = self.counts, self.customers, self.vehicle_names
        cells = s2_cell_ids(np.array([e.lat for e in keep]), np.array([e.long for e in keep]), 13).view(np.int64)
        for e, cell in zip(keep, cells.tolist(), strict=True):
            key = (e.city_id, cell, vehicle_names[e.vehicle_type], e.event_timestamp.seconds // WINDOW_S)
            counts[key] += 1
            customers[key].add(e.customer_id)
        return events

    def result(self, seconds: float) -> dict[str, Any]:
        """Totals (as the TSDB check reads them) and a digest of every window's count and customers."""
        whole = sorted((k, n, sorted(self.customers[k])) for k, n in self.counts.items())
        return {
            "seconds": seconds,
            "rows": len(self.counts),
            "bookings": sum(self.counts.values()),
            "customers": sum(len(s) for s in self.customers.values()),
            "digest": hashlib.sha256(repr(whole).encode()).hexdigest()[:16],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


def baseline(kafka: str, topic: str, ends: dict[int, int]) -> dict[str, Any]:
    """One process, one consumer on both partitions, 20k messages per consume."""
    consumer = baseline_consumer(kafka, "bench-baseline")
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    windows = Windows()
    remaining = sum(ends.values())
    deadline = time.monotonic() + 1800
    started = time.perf_counter()
    while remaining > 0 and time.monotonic() < deadline:
        remaining -= windows.add(consumer.consume(20_000, timeout=0.5))
    seconds = time.perf_counter() - started
    consumer.close()
    if remaining > 0:
        raise SystemExit(f"baseline: {remaining} events not read in 30 minutes")
    return windows.result(seconds)


def baseline_per_partition(kafka: str, topic: str, ends: dict[int, int]) -> dict[str, Any]:
    """What a bytewax dataflow on one worker does with its KafkaSource: one consumer per partition, each assigned
    its partition (no group subscription), polled in turn for up to BYTEWAX_BATCH messages with a 1 ms timeout,
    all in one Python process; then the same decoding and aggregation as `baseline`."""
    consumers = {}
    for p in ends:
        consumers[p] = baseline_consumer(kafka, "bench-baseline-per-partition")
        consumers[p].assign([TopicPartition(topic, p, 0)])
    windows = Windows()
    remaining = dict(ends)
    deadline = time.monotonic() + 1800
    started = time.perf_counter()
    while any(n > 0 for n in remaining.values()) and time.monotonic() < deadline:
        for p, consumer in consumers.items():
            if remaining[p] > 0:
                remaining[p] -= windows.add(consumer.consume(BYTEWAX_BATCH, timeout=0.001))
    seconds = time.perf_counter() - started
    for consumer in consumers.values():
        consumer.close()
    if any(n > 0 for n in remaining.values()):
        raise SystemExit(f"per-partition baseline: {sum(remaining.values())} events not read in 30 minutes")
    return windows.result(seconds)


def run_baseline(kafka: str, topic: str, ends: dict[int, int], variant: str) -> tuple[Measured, dict[str, Any]]:
    """A baseline in its own process, so its memory is its own."""
    with console.status(f"{variant} baseline: one Python process"):
        argv = ["--baseline", kafka, topic, json.dumps(ends), "--baseline-variant", variant]
        r = subprocess.run(
            [sys.executable, "-m", "bench.dagger_throughput", *argv],
            capture_output=True,
            text=True,
            timeout=2000,
        )
    if r.returncode:
        raise SystemExit(f"{variant} baseline failed:\n{r.stderr[-3000:]}")
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
    r = http_client.get(
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


# How often the latency run looks for a new window in VictoriaMetrics: a window's latency is over-stated by up to this.
LATENCY_POLL_S = 0.05


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
                time.sleep(LATENCY_POLL_S)
        if proc.poll() is not None:
            raise SystemExit(f"the dagger exited during the latency run ({proc.returncode})")
    finally:
        stop.set()
        stop_group(proc)
    return samples


def stop_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to the dagger's process group (a clean stop), SIGKILL if it has not ended within a minute."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# -- start-up --------------------------------------------------------------------------------------------------

STARTUP_EVENTS = 20_000  # 50 per second of event time: 400 s, so the first batch closes ~5 of its 60 s windows
TARGET_FIRST_ROW_S = target("dagger_throughput", "startup_first_row_s").target
TARGET_GROUP_RSS_MB = target("dagger_throughput", "peak_rss_group_mb").target


@dataclass
class Startup:
    phases: list[tuple[str, float | None, float | None]]  # (phase, duration s, ends at s from process start)
    first_batch_s: float | None  # process start -> batch 0 planned (its offsets in the checkpoint)
    first_row_s: float | None  # process start -> first sample of the dagger's measurement in VictoriaMetrics
    peak_rss_mb: float  # the process tree's (rss_mb), until the first row
    peak_group_rss_mb: float  # the process group's
    per_process: dict[str, Seen]  # each process's start and peak RSS, by role
    peak_pss_mb: float  # the process tree's proportional set size


def _since(t0: float, t: float | None) -> float | None:
    return None if t is None else t - t0


def _spark_time(timestamp: str | None) -> float | None:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() if timestamp else None


def _batch_end(progress: dict[str, Any]) -> float | None:
    """When a batch ended (wall clock), from its progress as the probe marked it."""
    started = _spark_time(progress.get("timestamp"))
    return None if started is None else started + (progress.get("duration_ms") or {}).get("triggerExecution", 0) / 1000


def _timeline(path: Path) -> tuple[dict[str, list[float]], list[float], dict[int, dict[str, Any]]]:
    """bench/startup_probe.py's timeline: the times of each event, of each sink write with rows, and the first
    progress of each batch."""
    events: dict[str, list[float]] = defaultdict(list)
    writes: list[float] = []
    progress: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        e = json.loads(line)
        if e["event"] == "progress":
            progress.setdefault(e["batch"], e)
        elif e["event"] == "sink_write":
            if e.get("rows"):
                writes.append(e["t"])
        else:
            events[e["event"]].append(e["t"])
    return events, writes, progress


def startup(state: Path, kafka: str, vm: str) -> Startup:
    """`dagger run` (not --once) of the surge query on a fresh checkpoint and a small topic whose events already
    close windows in the first batch, timed by bench/startup_probe.py (the CLI with timestamps around each engine
    step), the checkpoint's files and VictoriaMetrics, until the first row of the dagger is queryable."""
    topic = f"bench-startup-{int(time.time())}"
    ensure_topics({"bootstrap.servers": kafka}, {topic: PARTITIONS})
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
    payloads = (e.SerializeToString() for e in booking_logs(STARTUP_EVENTS, seed=7, start=start, rate=50))
    produce(kafka, topic, payloads, partitions=PARTITIONS)
    spec = spec_file(state, "surge-startup", topic, kafka, vm, WINDOW_S, "60s", "1s")
    checkpoint_dir = Path(yaml.safe_load(spec.read_text())["checkpoint_dir"])
    metric = f"{measurement('surge-startup')}_num_of_bookings"
    timeline_path, log_path = state / "startup-timeline.jsonl", state / "startup.log"
    peak = [0.0, 0.0, 0.0]  # process group RSS, process tree RSS, process tree PSS
    per_process: dict[str, Seen] = {}
    first_row: float | None = None
    with log_path.open("w") as log:
        t0 = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.startup_probe", str(timeline_path), "run", str(spec)],
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        done = threading.Event()

        def sample_rss() -> None:
            while not done.is_set():
                sample = rss_mb(proc.pid, per_process)
                peak[:] = [max(a, b) for a, b in zip(peak, sample, strict=True)]
                done.wait(0.2)

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        try:
            with console.status("start-up: dagger run until its first row is in VictoriaMetrics"):
                while proc.poll() is None and time.time() - t0 < 300:
                    if victoria.export(vm, metric):
                        first_row = time.time() - t0
                        break
                    time.sleep(0.25)
                done.set()
                # The progress of the batch that wrote it (marked once the batch ended), for the breakdown.
                deadline = time.monotonic() + 15
                while first_row is not None and proc.poll() is None and time.monotonic() < deadline:
                    writes, progress = _timeline(timeline_path)[1:]
                    if writes and any((_batch_end(e) or 0.0) >= writes[0] for e in progress.values()):
                        break
                    time.sleep(0.25)
            if proc.poll() is not None:
                tail = log_path.read_text()[-3000:]
                raise SystemExit(f"start-up run: the dagger exited ({proc.returncode}):\n{tail}")
        finally:
            done.set()
            sampler.join(5)
            stop_group(proc)

    events, sink_writes, progress = _timeline(timeline_path)
    loads = sum(b - a for a, b in zip(events.get("load_start", []), events.get("load_end", []), strict=False))

    def at(event: str) -> float | None:
        """The first start, or the last end, of a phase (readStream…load() runs once per stream)."""
        times = events.get(event)
        return None if not times else _since(t0, times[-1] if event.endswith("_end") else times[0])

    def between(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    def file_time(path: Path) -> float | None:
        return _since(t0, path.stat().st_mtime) if path.exists() else None

    batch0, batch1 = progress.get(0, {}), progress.get(1, {})
    b0_start, b0_end = _since(t0, _spark_time(batch0.get("timestamp"))), _since(t0, _batch_end(batch0))
    b1_start, b1_end = _since(t0, _spark_time(batch1.get("timestamp"))), _since(t0, _batch_end(batch1))
    b0_ms = batch0.get("duration_ms") or {}
    planned = file_time(checkpoint_dir / "offsets" / "0")
    first_write = _since(t0, min(sink_writes)) if sink_writes else None
    in_batch = None  # the sink writes inside foreachBatch, so before its batch ends
    if first_write is not None:
        in_batch = next((n for n, end in ((0, b0_end), (1, b1_end)) if end is not None and first_write <= end), None)
    parts = ", ".join(f"{k} {v / 1000:.1f} s" for k, v in b0_ms.items() if k != "triggerExecution" and v >= 50)
    b0_total = b0_ms.get("triggerExecution", 0) / 1000
    b0_what = f"{batch0.get('input_rows', '?')} input rows; in all {b0_total:.1f} s: {parts}"
    phases = [
        ("Python start + imports (PySpark, the engine)", at("imported"), at("imported")),
        ("spec → plan, broker check", between(at("imported"), at("session_start")), at("session_start")),
        ("JVM + SparkSession ready (session_for)", between(at("session_start"), at("session_end")), at("session_end")),
        (
            "run set-up (checkpoint, DLQ topic, sink, telemetry)",
            between(at("session_end"), at("prepare_start")),
            at("prepare_start"),
        ),
        (
            "data source registration (spark.dataSource.register)",
            between(at("datasource_start"), at("datasource_end")),
            at("datasource_end"),
        ),
        ("UDF registration", between(at("udfs_start"), at("udfs_end")), at("udfs_end")),
        ("planning: readStream…load()", loads if "load_end" in events else None, at("load_end")),
        (
            "planning: the query's frame (watermark, views, spark.sql)",
            between(at("load_end"), at("frame_end")),
            at("frame_end"),
        ),
        ("planning: writeStream.start() (query start)", between(at("start_start"), at("start_end")), at("start_end")),
        ("query started → batch 0 triggered", between(at("start_end"), b0_start), b0_start),
        ("(a) batch 0 planned (its offsets in the checkpoint)", between(b0_start, planned), planned),
        (f"batch 0 runs ({b0_what})", between(planned, b0_end), b0_end),
        ("→ batch 1 (no data: the watermark advanced)", between(b0_end, b1_start), b1_start),
        ("batch 1 runs", between(b1_start, b1_end), b1_end),
        (f"first rows written by the sink (in batch {'?' if in_batch is None else in_batch})", None, first_write),
        ("(b) first row queryable in VictoriaMetrics", between(first_write, first_row), first_row),
    ]
    return Startup(phases, planned, first_row, peak[1], peak[0], per_process, peak[2])


def startup_table(s: Startup) -> Table:
    def sec(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    table = Table(title="Dagger start-up (`dagger run`, surge query, fresh checkpoint)", title_justify="left")
    table.add_column("phase")
    table.add_column("duration (s)", justify="right")
    table.add_column("at (s from process start)", justify="right")
    for what, duration, end in s.phases:
        table.add_row(what, sec(duration), sec(end))
    table.add_row(
        f"peak RSS of the process group (CLI, JVM, streaming source runner; target ≤ {TARGET_GROUP_RSS_MB:.0f} MB)",
        "",
        f"{s.peak_group_rss_mb:,.0f} MB: {'met' if s.peak_group_rss_mb <= TARGET_GROUP_RSS_MB else 'NOT met'}",
    )
    table.add_row("peak RSS of the process tree (+ PySpark's daemons and workers)", "", f"{s.peak_rss_mb:,.0f} MB")
    table.add_row(
        "peak PSS of the process tree (shared pages shared out: the memory it takes)", "", f"{s.peak_pss_mb:,.0f} MB"
    )
    row = s.first_row_s
    table.add_row(
        f"first row (target ≤ {TARGET_FIRST_ROW_S:.0f} s)",
        "",
        "none in 300 s" if row is None else f"{row:.1f} s: {'met' if row <= TARGET_FIRST_ROW_S else 'NOT met'}",
    )
    return table


def processes_table(s: Startup) -> Table:
    """Each process of the start-up run's tree in the order they started, with its peak RSS (processes of under
    10 MB left out): Spark's Python processes start one after the other, and this shows the chain."""
    table = Table(title="Its processes, by start: peak RSS and CPU until the first row", title_justify="left")
    table.add_column("process [pid]")
    table.add_column("started (s)", justify="right")
    table.add_column("peak RSS", justify="right")
    table.add_column("CPU (s)", justify="right")
    for role, seen in sorted(s.per_process.items(), key=lambda kv: kv[1].at_s):
        if seen.mb >= 10:
            table.add_row(role, f"{seen.at_s:.2f}", f"{seen.mb:,.0f} MB", f"{seen.cpu_s:.2f}")
    cpu = sum(seen.cpu_s for seen in s.per_process.values())
    table.add_row("all of them", "", "", f"{cpu:.1f}")
    return table


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
            base, truth = run_baseline(kafka, topic, ends, "one-consumer")
            rr, rr_truth = run_baseline(kafka, topic, ends, "per-partition")
            written = vm_totals(vm, measurement("surge"))
            exact = (written["rows"], written["bookings"], written["customers"]) == (
                truth["rows"],
                truth["bookings"],
                truth["customers"],
            )
            rr_exact = (rr_truth["rows"], rr_truth["bookings"], rr_truth["customers"], rr_truth["digest"]) == (
                truth["rows"],
                truth["bookings"],
                truth["customers"],
                truth["digest"],
            )
            steady = (
                f"{dagger.steady_rate:,.0f} events/s (batches after the first)"
                if dagger.steady_rate
                else "n/a (one batch of events: the rate below is end to end)"
            )
            # Like for like: both rates once running (the baselines' clocks start at their first consume).
            dagger_rate = dagger.steady_rate or dagger.rate
            versus = "steady" if dagger.steady_rate else "end to end"
            rows.append(
                (
                    "dagger run --once (local[2], S2Id 13 + DistinctCount, 60 s windows)",
                    f"steady {steady}; end to end "
                    f"{dagger.rate:,.0f} events/s ({dagger.seconds:.1f}s from process start to exit, JVM start "
                    f"and first batch included); peak RSS of its process group {dagger.peak_rss_mb:,.0f} MB; "
                    f"{dagger.detail}",
                )
            )
            for variant, measured in (("one-consumer", base), ("per-partition", rr)):
                rows.append(
                    (
                        BASELINES[variant],
                        f"{measured.rate:,.0f} events/s ({measured.seconds:.1f}s); peak RSS "
                        f"{measured.peak_rss_mb:,.0f} MB; ratio dagger ({versus}) / this baseline: "
                        f"{dagger_rate / measured.rate:.2f}",
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
            rows.append(
                (
                    "bytewax-style baseline == baseline",
                    f"{'exact' if rr_exact else 'MISMATCH'}: {rr_truth['rows']:,} rows, {rr_truth['bookings']:,} "
                    f"bookings, {rr_truth['customers']:,} distinct customers, every window's digest "
                    f"{rr_truth['digest']} (baseline {truth['rows']:,} / {truth['bookings']:,} / "
                    f"{truth['customers']:,} / {truth['digest']})",
                )
            )

            boot = startup(state, kafka, vm)

            samples: list[float] = []
            if latency_s > 0:
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
            f"max {max(samples, default=float('nan')):.1f}s (2 s of it is the watermark delay)"
            if latency_s > 0
            else "skipped (--latency-seconds 0)",
        )
    )
    table = Table(title="Dagger throughput and latency", title_justify="left")
    table.add_column("what")
    table.add_column("result")
    for what, result in rows:
        table.add_row(what, result)
    console.print(table)
    console.print(f"end-to-end ratio (dagger incl. start-up / baseline): {dagger.rate / base.rate:.2f}")
    console.print(startup_table(boot))
    console.print(processes_table(boot))

    def num(v: float | None, digits: int = 1) -> str:
        return "nan" if v is None else f"{v:.{digits}f}"

    record(
        "dagger_throughput",
        f"dagger_events_per_s={dagger_rate:.0f} baseline_events_per_s={base.rate:.0f} "
        f"ratio={dagger_rate / base.rate:.2f} p99_latency_s={p99:.1f} "
        f"bytewax_baseline_events_per_s={rr.rate:.0f} bytewax_ratio={dagger_rate / rr.rate:.2f} "
        f"startup_first_batch_s={num(boot.first_batch_s)} startup_first_row_s={num(boot.first_row_s)} "
        f"peak_rss_mb={boot.peak_rss_mb:.0f} peak_rss_group_mb={boot.peak_group_rss_mb:.0f} "
        f"peak_pss_mb={boot.peak_pss_mb:.0f}",
    )
    return 0 if exact and rr_exact else 1


def main_startup() -> int:
    with temporary_state_dir("bench-startup") as state:
        stack, where = start_stack(state)
        try:
            boot = startup(state, where.kafka_bootstrap, where.victoria_metrics_url)
        finally:
            stack.down()
    console.print(startup_table(boot))
    console.print(processes_table(boot))
    first_row = "nan" if boot.first_row_s is None else f"{boot.first_row_s:.1f}"
    record(
        "dagger_startup",
        f"startup_first_row_s={first_row} peak_rss_mb={boot.peak_rss_mb:.0f} peak_pss_mb={boot.peak_pss_mb:.0f}",
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=20_000, help="events/s during the latency run")
    parser.add_argument("--latency-seconds", type=float, default=150, help="0: no latency run")
    parser.add_argument("--startup-only", action="store_true", help="only the start-up measurement")
    parser.add_argument("--baseline", nargs=3, metavar=("KAFKA", "TOPIC", "ENDS"), help=argparse.SUPPRESS)
    parser.add_argument("--baseline-variant", choices=sorted(BASELINES), default="one-consumer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        kafka, topic, ends = args.baseline
        run = baseline_per_partition if args.baseline_variant == "per-partition" else baseline
        print(json.dumps(run(kafka, topic, {int(k): v for k, v in json.loads(ends).items()})))
        sys.exit(0)
    if args.startup_only:
        sys.exit(main_startup())
    sys.exit(main(args.events, args.rate, args.latency_seconds))
