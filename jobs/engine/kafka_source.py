"""A PySpark streaming data source over confluent-kafka that yields decoded protobuf events as Arrow batches.

Deterministic by construction: every micro-batch is a fixed [start, end) offset range per Kafka partition,
planned on the driver and read in tasks with assign/seek (never a group subscription), so a replay after a
crash reads exactly the same events. Offsets live in Spark's checkpoint; optionally they are also committed to a
consumer group for lag tools. Undecodable events go to a dead-letter topic with where they came from and why.

Offsets and the planning of each batch's ranges are in jobs/engine/offsets.py. Event time is kept per partition and the
stream's watermark is their minimum (jobs/engine/event_time.py): events it makes late go to the dead-letter topic.
A checkpoint that resumes where the broker has no data (a recreated topic, another cluster, retention) fails the
query unless the stream allows data loss (`kafka.fail_on_data_loss: false`), like Spark's own Kafka source.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import astuple, dataclass, replace
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from jobs.engine.event_time import Bound, EventTimeLog, Record, WindowRule, advance, bounds
from jobs.engine.offsets import (
    Clock,
    DataLossError,
    Extent,
    Gap,
    Partition,
    SourceOffset,
    batch_ranges,
    plan_batch,
    task_groups,
)
from jobs.engine.source_stream import SourceStream
from jobs.events.predicates import Predicate
from jobs.events.protobuf import ROWTIME, Computed, Decoder, EventTime, find_message
from odin.kafka.ends import fetched_end
from odin.teams import secrets as team_secrets

if TYPE_CHECKING:
    from jobs.spec import StreamSpec

FORMAT = "dagger_kafka"
WARM_FORMAT = "dagger_warm"
DECODE_CHUNK = 50_000  # events decoded into one Arrow batch
METADATA_TIMEOUT_S = 10.0
_log = logging.getLogger(__name__)
GONE_CHECK_S = 5.0  # a range that gets no record for this long asks the broker whether its events still exist
STALL_TIMEOUT_S = 60.0  # a task that gets no record for this long while records are due fails (Spark retries)
AUTO_AGREEMENTS = 20  # `high_watermark: auto` trusts the broker after this many probes agreeing with it
PROBE_POLL_S = 0.05
WARM_WAIT_S = 5.0


@dataclass(frozen=True)
class SourceOptions:
    """What the source needs, carried as one JSON option (Spark lower-cases option keys, not values)."""

    stream: SourceStream
    columns: list[str] | None  # top-level fields the query uses; None = all
    schemas: list[str]  # extra descriptor sets
    flush_at_micros: int | None = None  # `--once` end of input: sentinel row time
    computed: tuple[Computed, ...] = ()  # UDF calls evaluated in the reader (jobs/sql/pushdown.py)
    filters: tuple[Predicate, ...] = ()  # WHERE conditions evaluated in the reader (jobs/events/predicates.py)
    clock_dir: str | None = None  # where read tasks record each range's latest event time (jobs/engine/event_time.py)
    delay_us: int = 0  # the dagger's watermark delay
    late_rule: WindowRule | None = None  # tells the events the watermark makes late; None: Spark drops them
    secrets_file: str | None = None  # the team's secrets (odin/teams/secrets.py): e.g. `kafka.password_env`'s value
    tasks: int = 1  # read tasks per batch at most: the dagger's parallelism (jobs/engine/offsets.py task_groups)
    # The brokers are asked for new events once per interval of this many seconds (the spec's trigger_interval), as
    # Spark's trigger did, while the query's own trigger ticks faster, so that the batch that emits what a watermark
    # closed runs at once (jobs/engine/runner.py); 0: at every trigger
    hold_s: float = 0.0

    def to_option(self) -> str:
        return json.dumps(
            {
                "stream": self.stream.to_json(),
                "columns": self.columns,
                "schemas": self.schemas,
                "flush_at_micros": self.flush_at_micros,
                "computed": [[c.name, c.function, c.args] for c in self.computed],
                "filters": [[f.column, f.op, f.values] for f in self.filters],
                "clock_dir": self.clock_dir,
                "delay_us": self.delay_us,
                "late_rule": None if self.late_rule is None else astuple(self.late_rule),
                "secrets_file": self.secrets_file,
                "tasks": self.tasks,
                "hold_s": self.hold_s,
            }
        )

    @classmethod
    def from_option(cls, raw: str) -> SourceOptions:
        d = json.loads(raw)
        computed = tuple(Computed(n, f, tuple((k, v) for k, v in args)) for n, f, args in d["computed"])
        filters = tuple(Predicate(c, op, tuple(values)) for c, op, values in d["filters"])
        stream = SourceStream.from_json(d["stream"])
        rule = None if d["late_rule"] is None else WindowRule(*d["late_rule"])
        flush_at, clock, delay, secrets = d["flush_at_micros"], d["clock_dir"], d["delay_us"], d["secrets_file"]
        return cls(
            stream,
            d["columns"],
            d["schemas"],
            flush_at,
            computed,
            filters,
            clock,
            delay,
            rule,
            secrets,
            d["tasks"],
            d["hold_s"],
        )

    def load_secrets(self) -> None:
        """Put the team's secrets into this process's environment, where kafka_config finds the stream's password.
        The source runs in Python processes Spark starts (the planner's on the driver, the read tasks' on
        executors), which do not inherit what the driver's own process loaded (jobs/engine/driver.py). Each of them
        serves one dagger's application only; re-read every time, so a rotated secret is used from the next batch."""
        if self.secrets_file is not None:
            os.environ.update(team_secrets.load(Path(self.secrets_file)))

    def event_time(self) -> EventTime:
        return _event_time(self.stream.proto, tuple(self.schemas), self.stream.timestamp_field)

    def decoder(self) -> Decoder:
        columns = None if self.columns is None else tuple(self.columns)
        s = self.stream
        return _decoder(s.proto, tuple(self.schemas), s.timestamp_field, columns, self.computed, self.filters)


@lru_cache(maxsize=32)
def _decoder(
    proto: str,
    schemas: tuple[str, ...],
    timestamp_field: str,
    columns: tuple[str, ...] | None,
    computed: tuple[Computed, ...],
    filters: tuple[Predicate, ...],
) -> Decoder:
    """One decoder per stream and worker process: every task of every batch reuses it (decoding is stateless)."""
    return Decoder(find_message(proto, schemas), timestamp_field, columns, computed, filters)


@lru_cache(maxsize=32)
def _event_time(proto: str, schemas: tuple[str, ...], timestamp_field: str) -> EventTime:
    return EventTime(find_message(proto, schemas), timestamp_field)


# A short fetch wait: we always know how much is due, and a broker holds a fetch that finds nothing (a probe at a
# partition's end) for the whole wait.
CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 10}
# ...except for reading a planned range, which asks only for offsets known to exist (answered as soon as the broker
# has found them): Tansu's memory storage finds an offset by going through every batch of the partition, and a
# fetch it cannot answer within the wait comes back empty, every time. 10 ms stalled a dagger for good on a perf
# stream of ~60,000 batches (20,000 events/s for a few minutes); librdkafka's default 500 ms reads it at once.
RANGE_FETCH_WAIT_MS = 500
GIVE_UP_ON_CONNECTION_MS = 10_000  # ample for TCP, TLS and SASL to a remote cluster, and for any request


# The brokers are asked this long after each boundary of the spec's interval, not at it. Window ends and watermark
# delays are whole seconds, so a window closes at a boundary, and the first event past it (of the many, the one with
# the least lag) reaches the brokers just after: asked at the boundary, it waited a whole interval for the next ask.
# With the query's tick (jobs/engine/runner.py TICK_S) the ask comes at the first tick past this.
ASK_AFTER_BOUNDARY_S = 0.2


def next_ask(asked: float, interval: float) -> float:
    """When a source that asked its brokers at `asked` (s since the epoch) asks them next: ASK_AFTER_BOUNDARY_S past
    the next multiple of `interval`. The same times for every source of a query: their events come in one batch."""
    return ((asked - ASK_AFTER_BOUNDARY_S) // interval + 1) * interval + ASK_AFTER_BOUNDARY_S


def for_spark(rule: WindowRule | None, watermark: int) -> int:
    """The watermark as Spark is given it: in whole windows (WindowRule.settled) when the reader knows the query's."""
    return watermark if rule is None else rule.settled(watermark)


def range_reader_config(stream: SourceStream, topic: str) -> dict[str, Any]:
    """librdkafka settings of the consumer that reads a planned range of `topic`."""
    return kafka_config(
        stream,
        consumer=True,
        **{
            "group.id": f"dagger-reader-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "error",  # never skip to wherever librdkafka's default would: that loses data
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.min.messages": 200_000,
            "fetch.wait.max.ms": RANGE_FETCH_WAIT_MS,
        },
    )


def kafka_config(stream: StreamSpec | SourceStream, *, consumer: bool | None = None, **extra: Any) -> dict[str, Any]:
    """librdkafka settings for a client of the stream's cluster. Consumer-only settings go to consumers only: a
    producer or admin client given one logs a CONFWARN line each time it starts. `consumer` says which client this
    is; by default, one given a `group.id` (every consumer has one, other clients none)."""
    if consumer is None:
        consumer = "group.id" in extra
    conf: dict[str, Any] = {
        "bootstrap.servers": stream.kafka.bootstrap_servers,
        # librdkafka's warnings and errors only: its info lines (e.g. an admin client purging its queue as it
        # closes) would land among the dagger's own; `kafka.config` may set `log_level` (and `debug`) for more.
        "log_level": 4,
        # After a network partition heals, a client waits for the kernel's next TCP retry of each connection, and
        # those come seconds apart: up to 10 s more for one being set up (librdkafka gives up on that after 30 s by
        # default), up to 25 s for one that was up (a request unanswered for socket.timeout.ms, 60 s by default,
        # ends it). Both are 10 s here: a dagger reconnects as soon as the path is back (tests/test_resume.py).
        "socket.connection.setup.timeout.ms": GIVE_UP_ON_CONNECTION_MS,
        "socket.timeout.ms": GIVE_UP_ON_CONNECTION_MS,
    }
    if consumer:
        conf |= CONSUMER_DEFAULTS
    conf |= {**stream.kafka.config, **extra}
    if name := stream.kafka.password_env:
        if name not in os.environ:  # an empty password would only show up as a broker refusing the client
            raise SourceError(
                f"kafka.password_env: {name} is not set (a deployed dagger reads it from its team's secrets: "
                f"`odin secret set <team> {name}`)"
            )
        conf["sasl.password"] = os.environ[name]
    return conf


class SourceError(RuntimeError):
    """The source cannot reach its stream as configured; the message names the field to fix."""


@dataclass
class RangePartition(InputPartition):
    topic: str
    partition: int
    start: int
    end: int
    late_before: int  # the watermark Spark applies in this batch (µs): events whose windows all end by then are late
    bound: Bound | None  # for the watermark this range makes (jobs/engine/event_time.py); None: a preview

    def __init__(
        self, topic: str, partition: int, start: int, end: int, late_before: int = 0, bound: Bound | None = None
    ) -> None:
        super().__init__((topic, partition, start, end, late_before, bound))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.late_before, self.bound = late_before, bound


class RangesPartition(InputPartition):
    """Several ranges read one after the other in one task (jobs/engine/offsets.py task_groups)."""

    def __init__(self, ranges: list[RangePartition]) -> None:
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges


class SentinelPartition(InputPartition):
    """One row that reads no event: the end of input (`--once`), or the stream's watermark where it moved."""

    def __init__(self, rowtime_micros: int, watermark: int) -> None:
        super().__init__((rowtime_micros, watermark))
        self.rowtime_micros, self.watermark = rowtime_micros, watermark


class KafkaProtoSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = SourceOptions.from_option(options["dagger"])

    def schema(self) -> StructType:
        return self.opts.decoder().spark_schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.opts)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.stream = opts.stream
        self._consumer: Consumer | None = None
        self._committer: Consumer | None = None  # commits to `consumer_group`, if set
        self._available_now: tuple[dict[Partition, Extent], frozenset[str]] | None = None
        # `auto`: probe until one partition with data shows whether the broker's high watermark can be trusted.
        self._probe: bool | None = {"reported": False, "probe": True}.get(self.stream.kafka.high_watermark)
        self._agreed = 0
        self._unreachable_since: float | None = None  # when planning last found the broker not answering
        self._held_until = 0.0  # the brokers are not asked again before this time (SourceOptions.hold_s)

    # -- driver side: planning -------------------------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self.opts.load_secrets()
            self._consumer = Consumer(
                kafka_config(self.stream, **{"group.id": "dagger-planner", "enable.auto.commit": False})
            )
        return self._consumer

    def _true_end(self, tp: TopicPartition, low: int, reported: int) -> int:
        """The partition's end: the reported one, or one fetched where brokers under-report it (odin/kafka/ends.py)."""
        if reported <= low or self._probe is False:
            return reported
        end = fetched_end(self.consumer, tp, low, reported, METADATA_TIMEOUT_S)
        if self._probe is None:  # auto: any under-report means probing stays on; agreement must be seen repeatedly
            if end != reported:
                self._probe = True
            else:
                self._agreed += 1
                self._probe = False if self._agreed >= AUTO_AGREEMENTS else None
        return end

    def extents(self) -> tuple[dict[Partition, Extent], frozenset[str]]:
        """What the broker holds of each partition of the stream's topics, and the topics whose metadata is not
        known right now. A topic that does not exist yet is empty: reading starts when it appears."""
        meta = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        extents: dict[Partition, Extent] = {}
        unavailable: set[str] = set()
        for topic in self.stream.topics:
            t = meta.topics.get(topic)
            if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                continue
            if t.error is not None:
                unavailable.add(topic)
                continue
            for p in sorted(t.partitions):
                tp = TopicPartition(topic, p)
                low, high = self.consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
                extents[Partition(topic, p)] = Extent(low, self._true_end(tp, low, high))
        return extents, frozenset(unavailable)

    def _outlasted(self, error: KafkaException) -> bool:
        """Whether the broker has not answered for longer than the stream tolerates (`kafka.outage_tolerance`):
        then the query fails (a supervised driver is restarted); before, each planning just finds nothing new."""
        now = time.monotonic()
        self._unreachable_since = self._unreachable_since or now
        waited, tolerance = now - self._unreachable_since, self.stream.kafka.outage_tolerance.total_seconds()
        if waited >= tolerance:
            return True
        _log.warning("Kafka does not answer (%s) for %.0fs; waiting up to %.0fs", error, waited, tolerance)
        return False

    def initialOffset(self) -> dict:
        extents, _ = self.extents()
        first = {p: e.low if self.stream.kafka.start == "earliest" else e.end for p, e in extents.items()}
        return SourceOffset(first, new=True).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.stream.kafka.max_events_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        if self.opts.flush_at_micros is None:
            self._available_now = self.extents()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        asked = time.time()
        if asked < self._held_until:  # first: a query that ticks every TICK_S asks this four times a second
            return start  # the brokers were asked in this trigger interval already
        begin = SourceOffset.from_json(start)
        flush_at = self.opts.flush_at_micros
        if flush_at is not None:  # `--once` closing every window (on a copy of the checkpoint): one sentinel, no events
            if begin.new or begin.flush >= flush_at:
                return start
            closing = max(begin.watermark, flush_at)
            return SourceOffset(begin.positions, flush=flush_at, clocks=begin.clocks, watermark=closing).to_json()
        if self.opts.hold_s:
            self._held_until = next_ask(asked, self.opts.hold_s)
        try:
            extents, unavailable = self._available_now or self.extents()
        except KafkaException as e:
            if self._outlasted(e):
                raise
            return start  # no batch until the broker answers: the query waits, as its consumers would
        self._unreachable_since = None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = plan_batch(begin, extents, unavailable, max_rows, self.stream.kafka.fail_on_data_loss)
        now = time.time()
        clocks, watermark, applied = self._event_time(begin, end, now)
        rule = self.opts.late_rule
        if end.positions == begin.positions and not end.gaps and for_spark(rule, watermark) <= for_spark(rule, applied):
            return start  # nothing to read, and Spark has the watermark: no batch
        initial = begin.positions if begin.new else None
        tails = self._tails(batch_ranges(begin, end)) if self.opts.clock_dir is not None else {}
        return replace(
            end,
            flush=begin.flush,
            initial=initial,
            clocks=clocks,
            watermark=watermark,
            applied=applied,
            planned_at=now,
            tails=tails,
        ).to_json()

    def _tails(self, ranges: dict[Partition, tuple[int, int]]) -> dict[Partition, int]:
        """The event time of each range's last event (when it has one): fetched, one event per partition, from all
        partitions at once (one fetch from each broker, not one per partition)."""
        out: dict[Partition, int] = {}
        event_time = self.opts.event_time()
        last = {p: stop - 1 for p, (_, stop) in ranges.items()}
        c = self.consumer
        c.assign([TopicPartition(p.topic, p.partition, offset) for p, offset in last.items()])
        try:
            pending = set(last)
            deadline = time.monotonic() + 1.0
            while pending and time.monotonic() < deadline:
                for m in c.consume(len(pending), timeout=PROBE_POLL_S):
                    p = Partition(m.topic(), m.partition())
                    if m.error() is not None or p not in pending:
                        continue
                    pending.discard(p)
                    if m.offset() == last[p]:  # a later offset: the last one is a transaction marker
                        latest = event_time.micros(m.value())
                        if latest is not None:
                            out[p] = latest
        finally:
            c.unassign()
        return out

    def _event_time(
        self, begin: SourceOffset, end: SourceOffset, now: float
    ) -> tuple[dict[Partition, Clock], int, int]:
        """Each partition's clock, the stream's watermark and the one Spark applies in the batch from `begin` to
        `end`."""
        if self.opts.clock_dir is None:
            return begin.clocks, begin.watermark, begin.applied
        log = EventTimeLog(Path(self.opts.clock_dir))
        for p, clock in begin.clocks.items():  # what `begin` folded in is in the offset log now
            log.prune(p, clock.through)
        starts = {p: end.begins.get(p, begin.positions.get(p, stop)) for p, stop in end.positions.items()}
        return advance(
            begin.clocks,
            starts,
            end.positions,
            log.recorded,
            (begin.watermark, begin.applied),
            now,
            self.opts.delay_us,
            self.stream.idle_timeout.total_seconds(),
        )

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        first, last = SourceOffset.from_json(start), SourceOffset.from_json(end)
        # All from the offsets, so a replayed batch is the same.
        idle_s = self.stream.idle_timeout.total_seconds()
        limits = bounds(last.clocks, last.watermark, last.planned_at, self.opts.delay_us, idle_s, last.tails)
        ranges = batch_ranges(first, last)
        parts: list[InputPartition] = []
        for group in task_groups(ranges, self.opts.tasks):
            reads = [RangePartition(p.topic, p.partition, *ranges[p], last.applied, limits.get(p)) for p in group]
            parts.append(reads[0] if len(reads) == 1 else RangesPartition(reads))
        given = for_spark(self.opts.late_rule, last.watermark)
        if last.flush > first.flush:
            parts.append(SentinelPartition(last.flush, given))
        elif not parts and given > for_spark(self.opts.late_rule, last.applied):  # moved without events (idleness)
            parts.append(SentinelPartition(last.watermark, given))
        return parts

    def commit(self, end: dict) -> None:
        group = self.stream.kafka.consumer_group
        if not group:
            return
        positions = SourceOffset.from_json(end).positions
        offsets = [TopicPartition(p.topic, p.partition, o) for p, o in sorted(positions.items())]
        if offsets:
            if self._committer is None:  # one client for the query's life, not one per batch
                self.opts.load_secrets()
                self._committer = Consumer(
                    kafka_config(self.stream, **{"group.id": group, "enable.auto.commit": False})
                )
            self._committer.commit(offsets=offsets, asynchronous=False)

    def stop(self) -> None:
        for client in (self._consumer, self._committer):
            if client is not None:
                client.close()
        self._consumer = self._committer = None

    # -- executor side: reading ------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        decoder = self.opts.decoder()
        if isinstance(partition, SentinelPartition):
            yield decoder.sentinel(partition.rowtime_micros, watermark=partition.watermark)
            return
        assert isinstance(partition, RangePartition | RangesPartition)
        self.opts.load_secrets()
        log = None if self.opts.clock_dir is None else EventTimeLog(Path(self.opts.clock_dir))
        for part in partition.ranges if isinstance(partition, RangesPartition) else [partition]:
            yield from read_range(self.stream, decoder, part, late_rule=self.opts.late_rule, log=log)


def read_tail(opts: SourceOptions, tail: int) -> pa.Table:
    """The last `tail` events of each partition, decoded as the streaming reader decodes them, read in this process
    (`dagger preview`): a preview's few thousand events take a fraction of a second here, against the Python
    processes Spark starts for a data source's batch read (its lookup, schema, plan and read workers, seconds each on
    two busy cores). Read-only: undecodable events are skipped, not sent to the dead-letter topic."""
    planner = KafkaStreamReader(opts)
    try:
        extents, _ = planner.extents()
    finally:
        planner.stop()
    opts.load_secrets()
    decoder = opts.decoder()
    ranges = [
        RangePartition(p.topic, p.partition, max(e.low, e.end - tail), e.end)
        for p, e in sorted(extents.items())
        if e.end > e.low
    ]
    batches = [b for r in ranges for b in read_range(opts.stream, decoder, r, dead_letters=False)]
    return pa.Table.from_batches(batches or [decoder.decode([]).batch])


class WarmSource(DataSource):
    """A batch source read once before a dagger's query plans its first batch (jobs/engine/runner.py warm_planners):
    the driver's Python process that plans its read imports this module, as the query's would, and Spark keeps it
    for the query's plan to reuse. It reads nothing."""

    @classmethod
    def name(cls) -> str:
        return WARM_FORMAT

    def schema(self) -> str:
        return "events long"

    def reader(self, schema: StructType) -> DataSourceReader:
        return WarmReader()


class WarmReader(DataSourceReader):
    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        return iter(())


def warm(option: str, task: int) -> int:
    """Executor side, before a (re)launched dagger's first batch: do once what its read tasks do first (import the
    engine, build the decoder, start Kafka's client, decode an event) in this Python worker, which Spark keeps and
    reuses for the next task. Reads at most one event of the `task`-th partition (modulo their number), from its
    earliest offset, and waits for it at most WARM_WAIT_S; an empty partition is not waited on (the warm-up's tasks
    hold the executors' slots, and the query's first batch queues behind them). Returns the events read."""
    opts = SourceOptions.from_option(option)
    opts.load_secrets()
    decoder = opts.decoder()
    if not opts.stream.topics:
        return 0
    topic = opts.stream.topics[task % len(opts.stream.topics)]
    consumer = Consumer(range_reader_config(opts.stream, topic) | {"auto.offset.reset": "earliest"})
    try:
        partitions = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics[topic].partitions
        if not partitions:
            return 0
        tp = TopicPartition(topic, sorted(partitions)[task % len(partitions)], OFFSET_BEGINNING)
        low, high = consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
        if high <= low:  # nothing to read: waiting for an event would hold the slot the query's first batch needs
            return 0
        consumer.assign([tp])
        msgs = [m for m in consumer.consume(1, timeout=WARM_WAIT_S) if m.error() is None]
        decoder.decode([m.value() for m in msgs])
        return len(msgs)
    finally:
        consumer.close()


def _gone(part: RangePartition, position: int, stream: SourceStream) -> bool:
    """Whether the rest of the planned range is no longer on the broker (retention deleted it after the batch was
    planned, or the broker lost its data): DataLossError, or with `fail_on_data_loss: false` the rest is skipped,
    as Spark's Kafka source does (logged; the next batch's plan reports the gap). Asked when the range stalls or the
    broker says the offset is out of range; a broker that does not answer is not a loss."""
    tp = TopicPartition(part.topic, part.partition)
    probe = Consumer(kafka_config(stream, consumer=True, **{"group.id": f"dagger-probe-{part.topic}"}))
    try:
        low, reported = probe.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
        end = fetched_end(probe, tp, low, reported, METADATA_TIMEOUT_S)
    except KafkaException:
        return False
    finally:
        probe.close()
    if low <= position < end:
        return False  # still there: only slow
    gap = Gap(Partition(part.topic, part.partition), position, low, end)
    if stream.kafka.fail_on_data_loss:
        raise DataLossError.of([gap])
    _log.warning("skipping the rest of a planned range, [%s, %s): %s", position, part.end, gap.describe())
    return True


def read_range(
    stream: SourceStream,
    decoder: Decoder,
    part: RangePartition,
    dead_letters: bool = True,
    late_rule: WindowRule | None = None,
    log: EventTimeLog | None = None,
) -> Iterator[pa.RecordBatch]:
    """The events of `part`, decoded. `dead_letters`: undecodable events go to the stream's dead-letter topic (the
    streaming reader); False only skips them (the preview, which must write nothing). With `late_rule`, events late
    for the batch's watermark go there too. With the range's `bound`, a last row gives Spark the watermark the range
    makes, and `log` records it with the range's latest event time."""
    consumer = Consumer(range_reader_config(stream, part.topic))
    dlq = DeadLetters(stream, write=dead_letters)
    late = Lateness(late_rule, part.late_before) if late_rule is not None and part.late_before else None
    latest: int | None = None

    def decode(msgs: list[Any]) -> list[pa.RecordBatch]:
        nonlocal latest
        batches, chunk_latest = _decode(decoder, msgs, dlq, late)
        if chunk_latest is not None:
            latest = chunk_latest if latest is None else max(latest, chunk_latest)
        return batches

    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        pending: list[Any] = []
        last_progress = time.monotonic()
        next_check = last_progress + GONE_CHECK_S
        position = part.start
        while position < part.end:
            msgs = consumer.consume(min(DECODE_CHUNK, part.end - position), timeout=0.2)
            if not msgs:
                # Control records (transactions) take offsets no consumer sees: trust the fetch position.
                pos = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if pos not in (OFFSET_END, -1001) and pos >= part.end:
                    break
                if time.monotonic() > next_check:  # asked at most every GONE_CHECK_S: a paused broker is slow
                    next_check = time.monotonic() + GONE_CHECK_S
                    if _gone(part, position, stream):
                        break
                if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                    raise KafkaException(
                        f"{part.topic}[{part.partition}]: no records for {STALL_TIMEOUT_S:.0f}s at offset {position}, "
                        f"expected up to {part.end}"
                    )
                continue
            last_progress = time.monotonic()
            next_check = last_progress + GONE_CHECK_S
            # The common case at a per-event cost of C calls only: no error, every offset in the range (they ascend).
            if not any(map(Message.error, msgs)) and msgs[-1].offset() < part.end:
                pending += msgs
                position = msgs[-1].offset() + 1
                msgs = []
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == KafkaError._AUTO_OFFSET_RESET and _gone(part, position, stream):
                        position = part.end
                        break
                    raise KafkaException(m.error())
                off = m.offset()
                if off >= part.end:
                    position = part.end
                    break
                pending.append(m)
                position = off + 1
            if len(pending) >= DECODE_CHUNK or position >= part.end:
                yield from decode(pending)
                pending = []
        if pending:
            yield from decode(pending)
        dlq.flush()
        if part.bound is not None:
            marker = for_spark(late_rule, part.bound.marker(latest))
            if log is not None:
                log.record(Partition(part.topic, part.partition), part.start, Record(part.end, latest, marker))
            yield decoder.sentinel(marker, watermark=marker)
    finally:
        consumer.close()


@dataclass(frozen=True)
class Lateness:
    rule: WindowRule
    watermark: int  # µs

    @cached_property  # one text for every late event of the range
    def reason(self) -> str:
        at = datetime.fromtimestamp(self.watermark / 1e6, UTC).isoformat()
        return f"late: every window of its event time ended by the stream's watermark {at}"


def _decode(
    decoder: Decoder, msgs: list[Any], dlq: DeadLetters, late: Lateness | None
) -> tuple[list[pa.RecordBatch], int | None]:
    """The Arrow batches of `msgs` and their latest event time. Undecodable and late events go to `dlq`; a sentinel
    row stands for the late ones, so they are counted."""
    result = decoder.decode(list(map(Message.value, msgs)))  # C calls only: no bytecode per event
    for i, reason in result.errors:
        dlq.send(msgs[i], reason)
    batches = [result.batch]
    if late is not None and result.batch.num_rows:
        rowtimes = result.batch.column(ROWTIME).cast(pa.int64()).to_numpy()
        closed = late.rule.closed(rowtimes, late.watermark)
        if closed.any():
            for i in np.flatnonzero(closed).tolist():
                dlq.send(msgs[result.rows[i]], late.reason)
            n = int(closed.sum())
            batches = [result.batch.filter(pa.array(~closed)), decoder.sentinel(late.watermark, events=n, late=n)]
    if result.dropped is not None:
        batches.append(result.dropped)
    return batches, result.latest


class DeadLetters:
    """Undecodable events, counted, and with `write` sent to `<topic>.dlq`, keyed `topic/partition/offset` (a replay
    re-sends the same keys)."""

    def __init__(self, stream: SourceStream, write: bool = True) -> None:
        self.stream = stream
        self.topic = stream.dead_letter_topic
        self.write = write
        self._producer: Producer | None = None
        self.count = 0

    def send(self, msg: Any, reason: str) -> None:
        self.count += 1
        if not self.write:
            return
        if self._producer is None:
            self._producer = Producer(
                kafka_config(self.stream, consumer=False, **{"enable.idempotence": True, "linger.ms": 50})
            )
        key = f"{msg.topic()}/{msg.partition()}/{msg.offset()}"
        headers = {
            "dagger.error": reason.encode(),
            "dagger.topic": msg.topic().encode(),
            "dagger.partition": str(msg.partition()).encode(),
            "dagger.offset": str(msg.offset()).encode(),
        }
        self._producer.produce(self.topic, msg.value(), key=key.encode(), headers=headers)
        self._producer.poll(0)

    def flush(self) -> None:
        if self._producer is not None:
            left = self._producer.flush(60)
            if left:
                raise KafkaException(f"dead-letter topic {self.topic}: {left} event(s) not acknowledged")
