"""plan → apply: run a dagger as a Spark Structured Streaming query, and preview it on recent events.

Each stream is read by the Kafka source (jobs/engine/kafka_source.py), given its watermark, and exposed to SQL as a
temp view named like the stream's table. Results go through foreachBatch to the sink, whose writes are
idempotent per batch id, so a crash and replay has an exactly-once effect.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import protos
from jobs.engine import checkpoint
from jobs.engine.kafka_source import (
    FORMAT,
    WARM_FORMAT,
    KafkaProtoSource,
    KafkaStreamReader,
    SourceOptions,
    WarmSource,
    kafka_config,
    read_tail,
    warm,
)
from jobs.engine.offsets import plan_batch
from jobs.engine.plan import DaggerPlan
from jobs.engine.session import SparkFailure, broken_by_signal, root_cause, ship_engine, spark_session
from jobs.engine.source_stream import SourceStream
from jobs.engine.telemetry import OBSERVED, Telemetry, dropped_by_watermark, event_rows, late_events
from jobs.events.protobuf import EVENTS, INTERNAL, LATE, ROWTIME, SENTINEL, WATERMARK
from jobs.sinks import open_sink
from jobs.udfs import register_udfs
from odin.kafka.topics import ensure_topics

log = logging.getLogger("dagger")
IDLE_BEAT_S = 10.0  # a quiet query says it is alive this often (Spark's own idle reports: every 10 s)
STATE_STORES = {  # spec.state_store -> Spark's provider (kept in the checkpoint: a restart uses the same one)
    "memory": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
# How often a running query's trigger fires (at most); its batches of events come at the spec's trigger_interval.
TICK_S = 0.25
# The closing sentinel's event time: later than any real event's window, so every open window is emitted.
CLOSING_TIME = datetime(9000, 1, 1, tzinfo=UTC)


@dataclass
class RunResult:
    batches: int = 0
    rows_written: int = 0
    input_rows: int = 0
    late_events: int = 0  # behind the watermark: sent to the dead-letter topic
    dropped_by_watermark: int = 0  # late rows Spark dropped (groups, after a partial aggregation): windows the reader
    # cannot tell (jobs/engine/plan.py late_rule), and hopping windows partly closed
    progress: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False  # by SIGTERM/SIGINT; a restart continues from the checkpoint


def session_for(
    plan: DaggerPlan,
    master: str | None = "local[2]",
    conf: dict[str, str] | None = None,
    log_file: Path | None = None,
) -> SparkSession:
    """`log_file`: Spark's driver log goes there, errors only, rather than to the console (jobs/engine/session.py).
    `master` None: the cluster's, for a driver it launched."""
    spec = plan.spec
    return fitted(spark_session(f"dagger-{spec.team}-{spec.name}", master, spec.parallelism, conf, log_file), plan)


def fitted(spark: SparkSession, plan: DaggerPlan) -> SparkSession:
    """What the plan needs of a session that may have started without it (a cluster's driver starts its session
    while it imports the engine and plans): the dagger's shuffle partitions and, on a cluster, the engine's files
    for the executors."""
    spark.conf.set("spark.sql.shuffle.partitions", str(plan.spec.parallelism))
    if not spark.sparkContext.master.startswith("local"):
        ship_engine(spark, [protos.DESCRIPTOR_SET, *plan.spec.schemas])
    return spark


def quiet_falling_behind(spark: SparkSession) -> None:
    """Spark warns of each batch longer than its trigger's interval: with TICK_S, of nearly every batch, while the
    interval that matters is the spec's (the source holds events to it)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    executor = "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor"
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(executor, jvm.org.apache.logging.log4j.Level.ERROR)


def _prepare(spark: SparkSession) -> None:
    """What every dagger query needs in its session: the Kafka source and the UDFs (re-registering is harmless)."""
    spark.dataSource.register(KafkaProtoSource)
    register_udfs(spark)


def _source_options(plan: DaggerPlan, i: int, flush_at: datetime | None, hold_s: float = 0.0) -> SourceOptions:
    micros = None if flush_at is None else int(flush_at.timestamp() * 1_000_000)
    sp = plan.streams[i]
    clock_dir = str((plan.checkpoint / "event_time" / str(i)).absolute())
    delay_us = int(plan.spec.watermark_delay.total_seconds() * 1_000_000)
    stream = SourceStream.of(plan.spec.streams[i])
    secrets = str(plan.secrets.absolute())
    return SourceOptions(
        stream,
        sp.columns,
        plan.schemas,
        micros,
        sp.computed,
        sp.filters,
        clock_dir,
        delay_us,
        plan.late_rule,
        secrets,
        plan.spec.parallelism,
        hold_s,
    )


def streaming_frame(
    spark: SparkSession, plan: DaggerPlan, flush_at: datetime | None = None, hold_s: float = 0.0
) -> DataFrame:
    """`hold_s`: each source asks its brokers for new events at most once per this many seconds (SourceOptions)."""
    _prepare(spark)
    log.info("start: source and UDFs registered")
    delay_ms = int(plan.spec.watermark_delay.total_seconds() * 1000)
    for i, sp in enumerate(plan.streams):
        opts = _source_options(plan, i, flush_at, hold_s)
        df = spark.readStream.format(FORMAT).option("dagger", opts.to_option()).load()
        log.info("start: stream %s loaded (the source's schema)", sp.table)
        # Spark's watermark is the source's own (the minimum over partitions, jobs/engine/event_time.py), carried by one
        # sentinel row per move; `rowtime` is marked as the event-time column below, so windows close by it.
        df = df.withWatermark(WATERMARK, "0 seconds")
        # Events, counted before anything drops rows: a row is one, a sentinel row the events it stands for.
        events = F.sum(F.coalesce(F.col(EVENTS), F.lit(1))).alias("events")
        df = df.observe(f"{OBSERVED}{i}", events, F.sum(F.col(LATE)).alias("late"))
        # Sentinel rows must reach the watermark before they are dropped, whatever the user's WHERE says. Spark pushes
        # filters below the watermark unless they read the event-time column, and pushes or merges filters through
        # deterministic ones: the leading nondeterministic term (spark_partition_id) makes this filter a barrier.
        df = df.where(f"spark_partition_id() >= 0 AND ({SENTINEL} IS NULL OR {ROWTIME} IS NULL)")
        df = df.drop(*INTERNAL)
        # What withWatermark(rowtime) would do, without Spark computing a watermark of its own from it.
        event_time = df[ROWTIME].alias(ROWTIME, metadata={"spark.watermarkDelayMs": delay_ms})
        df = df.select(*[event_time if c == ROWTIME else df[c] for c in df.columns])
        df.createOrReplaceTempView(sp.table)
        log.info("start: stream %s ready", sp.table)
    return spark.sql(plan.query.spark_sql)


def check_resumable(plan: DaggerPlan) -> None:
    """Fail at once, before Spark starts, when the checkpoint resumes where a stream's broker has no data (and the
    stream does not accept data loss): DataLossError names each partition and what to do."""
    for offsets in checkpoint.latest_offsets(plan.checkpoint):
        topics = {p.topic for p in offsets.positions}
        for i, stream in enumerate(plan.spec.streams):
            if topics and topics <= set(stream.topics) and stream.kafka.fail_on_data_loss:
                reader = KafkaStreamReader(_source_options(plan, i, None))
                try:
                    extents, unavailable = reader.extents()
                finally:
                    reader.stop()
                plan_batch(offsets, extents, unavailable)


WARM_SCHEMA_WAIT_S = 30.0  # past this, the query loads its stream in a planner process of its own
# Spark waits a fixed 10 s for the Python process that runs a streaming source to connect back (PythonWorkerFactory's
# simple worker: no setting changes it); on a busy host its start (a Python, pyspark's imports) can take longer. The
# query is started again from its checkpoint.
SLOW_WORKER = "Timed out while waiting for the Python worker to connect back"
WORKER_START_ATTEMPTS = 3


def run(
    plan: DaggerPlan,
    spark: SparkSession,
    once: bool = False,
    on_progress: Callable[[dict[str, Any], int], None] | None = None,
    reset_checkpoint: bool = False,
    on_idle: Callable[[], None] | None = None,
    warm: bool = False,
) -> RunResult:
    """Run until stopped (SIGTERM/SIGINT stop gracefully after the current batch), or with `once` read all that
    is available, close every window, and return. SIGUSR1 drains a running dagger: it stops taking triggers, then
    does what `once` does in the JVM it has (Loki's end of a run: no second start-up). The checkpoint must be this
    dagger's (jobs/engine/checkpoint.py); `reset_checkpoint` starts over from `kafka.start`. `on_idle` is called
    every IDLE_BEAT_S without progress while the query waits between triggers: Spark reports none while a stream is
    quiet, which is not a stall (while a batch runs, no beat: a hung one is). `warm`: a new session, whose Python
    processes the first batch needs are started beside the query's start (warm_planners; on a cluster,
    warm_executors too: a local session's tasks run in its own JVM, whose Python worker the planners' read starts)."""
    spec = plan.spec
    planners = None
    if warm:
        if not spark.sparkContext.master.startswith("local"):
            warm_executors(plan, spark)
        planners, _ = warm_planners(spark)
    # each start-up step in the log, with its time (a cluster driver's `stdout` file): where a slow (re)start goes
    identity = checkpoint.prepare(plan, reset_checkpoint)
    check_resumable(plan)
    log.info("start: checkpoint %s ready", plan.checkpoint)
    for stream in spec.streams:
        ensure_topics(kafka_config(stream), {stream.dead_letter_topic: 1})
    log.info("start: dead-letter topics ready")
    sink = open_sink(spec, plan.shape)
    log.info("start: %s sink open", spec.sink.type)
    telemetry = Telemetry(spec.qualified_name, spec.telemetry_url, team=spec.team)
    result = RunResult()

    def start(location: Path, closing_after: int | None = None) -> StreamingQuery:
        """The query on the checkpoint at `location`; `closing_after`: a closing run on a copy of the checkpoint
        whose last batch is that one: it reads no events, only a sentinel later than every open window."""

        def write_batch(df: DataFrame, batch_id: int) -> None:
            table: pa.Table = df.toArrow()
            result.rows_written += sink.write(table, checkpoint.sink_batch_id(identity, batch_id, closing_after))
            result.batches += 1

        spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES[spec.state_store])
        # With several stateful operators Spark drops late events by the previous batch's watermark, so events
        # between it and the current one reopen windows already emitted, and their partial row would replace the
        # whole one in an upserting sink. A query with one stateful operator drops them by the current watermark.
        single = plan.query.stateful_operators <= 1
        spark.conf.set("spark.sql.streaming.statefulOperator.allowMultiple", "false" if single else "true")
        flush_at = None if closing_after is None else CLOSING_TIME
        interval = spec.trigger_interval.total_seconds()
        if planners is not None:
            planners.wait(WARM_SCHEMA_WAIT_S)
        writer = (
            streaming_frame(spark, plan, flush_at, 0.0 if once or flush_at else interval)
            .writeStream.queryName(f"{spec.team}.{spec.name}".replace("-", "_"))
            .outputMode(plan.output_mode)
            .foreachBatch(write_batch)
            .option("checkpointLocation", str(location))
        )
        log.info("start: query planned")
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            # Spark runs the batch that emits what a watermark closed (no events: Spark's own) at its next trigger:
            # the query ticks every TICK_S, and the sources hold events back for the spec's interval (hold_s).
            writer = writer.trigger(processingTime=f"{int(min(interval, TICK_S) * 1000)} milliseconds")
            quiet_falling_behind(spark)
        query = writer.start()
        log.info("start: query started")
        return query

    drain = {"requested": False}

    def follow(q: StreamingQuery, closing: bool = False) -> None:
        seen: set[tuple[str, int]] = set()
        stop = {"requested": False}

        def on_signal(signum: int, _frame: Any) -> None:
            log.info("signal %s: stopping after the current batch", signum)
            stop["requested"] = True

        def on_drain(_signum: int, _frame: Any) -> None:
            if not once:
                log.info("drain asked: stopping the query to read what is left and close every window")
                drain["requested"] = True

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_drain)

        def take_progress() -> bool:
            """Account for the batches reported since the last look; whether there was one."""
            new = False
            for p in q.recentProgress:
                key = (p["runId"], p["batchId"])
                if key in seen:
                    continue
                if not seen:
                    took = ", ".join(f"{k} {v / 1000:.1f} s" for k, v in sorted(p.get("durationMs", {}).items()))
                    log.info("start: first progress, batch %s: %d events (%s)", p["batchId"], event_rows(p), took)
                seen.add(key)
                if not closing:  # a closing run reads no event and its batches are not the checkpoint's
                    _account(result, p)
                    telemetry.record(p, sink.attempts_failed)
                if on_progress:
                    on_progress(p, sink.attempts_failed)
                new = True
            return new

        beat = time.monotonic()
        try:
            while q.isActive and not stop["requested"] and not drain["requested"]:
                q.awaitTermination(0.5)
                if take_progress():
                    beat = time.monotonic()
                # Only between triggers: a batch hung in its sink or an executor reports no progress either, and
                # a beat then would hide the stall from health. Checked last: the status is a call into the JVM.
                if on_idle is not None and time.monotonic() - beat >= IDLE_BEAT_S and not q.status["isTriggerActive"]:
                    on_idle()  # after this round's progress, which would have written the status anyway
                    beat = time.monotonic()
            if stop["requested"] and q.isActive:
                q.stop()  # the batch under way is cancelled (replayed on restart), unless it failed on its own
            failure = q.exception()
            if failure is not None:
                raise failure
        except Exception as e:
            # A signal sent to the whole process group also reaches Spark's JVM and Python workers, which may fail
            # the query or drop the connection: that is the stop asked for, and sinks are idempotent per batch. A
            # failure of the dagger's own (a sink's, a reader's) is reported even then (broken_by_signal).
            if stop["requested"] and broken_by_signal(e):
                log.info("stopped by signal; the query ended with %s", root_cause(e).kind)
            else:
                raise SparkFailure(f"dagger {spec.qualified_name}", root_cause(e)) from e
        finally:
            result.stopped = stop["requested"]
            with contextlib.suppress(Exception if result.stopped else ()):
                if q.isActive:  # stop after the current batch; on our own error, never leave the query running
                    q.stop()
                # A batch that ended since the last look (a drain or stop asked meanwhile) is committed: the next
                # run starts after it, so its events are counted here or nowhere.
                take_progress()
            for s, h in previous.items():
                signal.signal(s, h)

    def started_and_followed(location: Path) -> None:
        for attempt in range(1, WORKER_START_ATTEMPTS + 1):
            try:
                follow(start(location))
                return
            except SparkFailure as e:
                if attempt == WORKER_START_ATTEMPTS or result.stopped or SLOW_WORKER not in str(e.cause):
                    raise
                log.warning(
                    "start: Spark's Python worker for the source did not connect back within Spark's fixed 10 s "
                    "(a busy host): starting the query again from its checkpoint (attempt %d of %d)",
                    attempt + 1,
                    WORKER_START_ATTEMPTS,
                )

    try:
        started_and_followed(plan.checkpoint)
        if drain["requested"] and not result.stopped:
            once = True  # `start` reads it: the query again on its checkpoint, now until it has read what is there
            drain["requested"] = False  # that run ends by itself; a drain asked during it changes nothing (on_drain)
            started_and_followed(plan.checkpoint)
        last = checkpoint.last_committed_batch(plan.checkpoint)
        if not once or result.stopped or last is None:
            return result
        # --once: every window still open is emitted by a sentinel event later than all of them, on a copy of the
        # checkpoint. The checkpoint itself keeps the open windows and the watermark the events gave, so a later
        # run over more events updates those windows (sinks upsert them) and drops nothing that was on time.
        with tempfile.TemporaryDirectory(prefix=".closing-", dir=plan.checkpoint.parent) as tmp:
            copy = Path(tmp) / "checkpoint"
            shutil.copytree(plan.checkpoint, copy)
            follow(start(copy, closing_after=last), closing=True)
        return result
    finally:
        sink.close()


def _account(result: RunResult, progress: dict[str, Any]) -> None:
    result.progress.append(progress)
    result.input_rows += event_rows(progress)
    result.late_events += late_events(progress)
    result.dropped_by_watermark += dropped_by_watermark(progress)


def preview(plan: DaggerPlan, spark: SparkSession, limit: int = 20, recent: int = 10_000) -> pa.Table:
    """Run the query as a batch over the most recent `recent` events of each partition (Datlantis' PREVIEW), read
    and decoded in this process and handed to Spark as Arrow (jobs/engine/kafka_source.py read_tail)."""
    register_udfs(spark)
    for i, sp in enumerate(plan.streams):
        table = read_tail(_source_options(plan, i, None), recent)
        _view(spark, table, sp.table)
    return spark.sql(plan.query.spark_sql).limit(limit).toArrow()


def _view(spark: SparkSession, table: pa.Table, name: str) -> None:
    """Decoded events as the query's table `name`: without the source's internal rows and columns."""
    spark.createDataFrame(table).where(f"{SENTINEL} IS NULL").drop(*INTERNAL).createOrReplaceTempView(name)


def warm_executors(plan: DaggerPlan, spark: SparkSession) -> threading.Thread:
    """Warm a new session's executors in the background while the driver starts the query. Their first tasks would
    otherwise boot a Python worker, import the engine, build the decoder, start Kafka's client and generate code
    inside the first batch (~16 s of a ~50 s relaunch, bench/RESULTS.md). One small SQL job does it: a task per
    core reads an event the way the reader does (jobs/engine/kafka_source.py warm) through an Arrow UDF, which runs
    in the same kind of Python worker as the source's read tasks (an RDD's would not: Spark keeps SQL's workers
    apart), so the query's first tasks find them warm, and an aggregation has each JVM generate code. It plans
    nothing in Python on the driver, so it starts at once. Best effort: a failure is logged.
    (Not mapInArrow: PySpark requires pandas for it, which the platform does not install, docs/decisions.md.)"""
    options = [_source_options(plan, i, None).to_option() for i in range(len(plan.streams))]
    tasks = plan.spec.parallelism

    @F.arrow_udf("long")
    def read_one(task_ids: Iterator[pa.Array]) -> Iterator[pa.Array]:
        for ids in task_ids:
            yield pa.array([sum(warm(o, i) for o in options) for i in ids.to_pylist()], pa.int64())

    def work() -> str:
        counted = spark.range(0, tasks, 1, tasks).select(read_one("id")).groupBy().sum().collect()
        return f"{counted[0][0]} events read"

    return _in_background("executors", work)


def warm_planners(spark: SparkSession) -> tuple[threading.Event, threading.Thread]:
    """Start the driver's Python planner processes a stream's schema and the plan of its reads take, and leave
    them for the query to reuse: Spark starts one, with the engine's imports, whenever none is idle (1-2 s each on
    a busy host, one after the other inside the query's start and first batch). A batch read of the warm-up source
    (jobs/engine/kafka_source.py WarmSource) does it: its schema first, then its read plan, while the query starts.
    Returns an event set once the schema's process is idle again (loading the query's stream before then would
    start a second one), and the thread, which ends with the rest. Best effort: a failure is logged."""
    schema_done = threading.Event()

    def work() -> str:
        try:
            spark.dataSource.register(WarmSource)
            frame = spark.read.format(WARM_FORMAT).load()
        finally:
            schema_done.set()
        frame.collect()
        return "read planned"

    return schema_done, _in_background("planners", work)


def _in_background(what: str, work: Callable[[], str]) -> threading.Thread:
    def logged() -> None:
        began = time.monotonic()
        try:
            done = work()
        except Exception as e:  # whatever failed, the query itself reports it if it matters
            log.warning("start: the %s' warm-up failed, the query goes on cold: %s", what, root_cause(e))
        else:
            log.info("start: %s warm (%.1f s, %s)", what, time.monotonic() - began, done)

    thread = threading.Thread(target=logged, name=f"dagger-warm-{what}", daemon=True)
    thread.start()
    return thread


def batch_over(plan: DaggerPlan, spark: SparkSession, payloads: list[list[bytes]]) -> pa.Table:
    """The query as a batch over exactly these events (one list of serialized messages per stream), decoded as the
    dagger's reader decodes them: what the dagger must output for them. Loki's ground truth."""
    register_udfs(spark)  # the source is not read: its events are given
    for i, sp in enumerate(plan.streams):
        decoder = _source_options(plan, i, None).decoder()
        batches = [decoder.decode(payloads[i][n : n + 50_000]).batch for n in range(0, len(payloads[i]), 50_000)]
        _view(spark, pa.Table.from_batches(batches or [decoder.decode([]).batch]), sp.table)
    return spark.sql(plan.query.spark_sql).toArrow()
