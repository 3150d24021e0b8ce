"""A PySpark streaming data source over confluent-kafka that yields decoded protobuf events as Arrow batches.

Deterministic by construction: every micro-batch is a fixed [start, end) offset range per Kafka partition,
planned on the driver and read in tasks with assign/seek (never a group subscription), so a replay after a
crash reads exactly the same events. Offsets live in Spark's checkpoint; optionally they are also committed to a
consumer group for lag tools. Undecodable events go to a dead-letter topic with where they came from and why.

Offsets are `{"<topic>": {"<partition>": next_offset}, "__flush": 0|1}`; `__flush` is the event time (µs) of
the last end-of-input sentinel row emitted: a `--once` run emits one with a later time after all input was read,
so that every window closes (see jobs/protobuf.py). The end offsets of a query's first batch also carry
`"__initial"`, where that batch started: Spark reports no start for it, and telemetry needs one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from jobs.predicates import Predicate
from jobs.protobuf import Computed, Decoder, find_message
from jobs.spec import StreamSpec

FORMAT = "dagger_kafka"
FLUSH = "__flush"
INITIAL = "__initial"  # in the first batch's end offsets: its start offsets
NEW = "__new"  # in the initial offsets only: no batch has run yet
RESERVED = frozenset({FLUSH, INITIAL, NEW})
DECODE_CHUNK = 50_000  # events decoded into one Arrow batch
METADATA_TIMEOUT_S = 10.0
STALL_TIMEOUT_S = 60.0  # a task that gets no record for this long while records are due fails (Spark retries)
AUTO_AGREEMENTS = 20  # `high_watermark: auto` trusts the broker after this many probes agreeing with it

Offsets = dict[str, dict[str, int]]


def topic_offsets(offsets: dict[str, Any]) -> Offsets:
    """The per-topic part of a source offset (without the source's own keys)."""
    return {t: parts for t, parts in offsets.items() if t not in RESERVED}


@dataclass(frozen=True)
class SourceOptions:
    """What the source needs, carried as one JSON option (Spark lower-cases option keys, not values)."""

    stream: StreamSpec
    columns: list[str] | None  # top-level fields the query uses; None = all
    schemas: list[str]  # extra descriptor sets
    flush_at_micros: int | None = None  # `--once` end of input: sentinel row time
    computed: tuple[Computed, ...] = ()  # UDF calls evaluated in the reader (jobs/sql/pushdown.py)
    filters: tuple[Predicate, ...] = ()  # WHERE conditions evaluated in the reader (jobs/predicates.py)

    def to_option(self) -> str:
        return json.dumps(
            {
                "stream": self.stream.model_dump(mode="json"),
                "columns": self.columns,
                "schemas": self.schemas,
                "flush_at_micros": self.flush_at_micros,
                "computed": [[c.name, c.function, c.args] for c in self.computed],
                "filters": [[f.column, f.op, f.values] for f in self.filters],
            }
        )

    @classmethod
    def from_option(cls, raw: str) -> SourceOptions:
        d = json.loads(raw)
        computed = tuple(Computed(n, f, tuple((k, v) for k, v in args)) for n, f, args in d["computed"])
        filters = tuple(Predicate(c, op, tuple(values)) for c, op, values in d["filters"])
        stream = StreamSpec.model_validate(d["stream"])
        return cls(stream, d["columns"], d["schemas"], d["flush_at_micros"], computed, filters)

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


def kafka_config(stream: StreamSpec, **extra: Any) -> dict[str, Any]:
    # A short fetch wait: we always know how much is due, and brokers (Tansu) hold a fetch for the whole wait.
    conf: dict[str, Any] = {"bootstrap.servers": stream.kafka.bootstrap_servers, "fetch.wait.max.ms": 10}
    conf |= {**stream.kafka.config, **extra}
    if stream.kafka.password_env:
        conf["sasl.password"] = os.environ.get(stream.kafka.password_env, "")
    return conf


@dataclass
class RangePartition(InputPartition):
    topic: str
    partition: int
    start: int
    end: int

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class SentinelPartition(InputPartition):
    def __init__(self, rowtime_micros: int) -> None:
        super().__init__(rowtime_micros)
        self.rowtime_micros = rowtime_micros


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

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch read of the last `tail` events of each partition (`dagger preview`)."""
        return KafkaTailReader(self.opts, int(self.options.get("tail", "10000")))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.stream = opts.stream
        self._consumer: Consumer | None = None
        self._committer: Consumer | None = None  # commits to `consumer_group`, if set
        self._available_now: Offsets | None = None
        # `auto`: probe until one partition with data shows whether the broker's high watermark can be trusted.
        self._probe: bool | None = {"reported": False, "probe": True}.get(self.stream.kafka.high_watermark)
        self._agreed = 0

    # -- driver side: planning -------------------------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                kafka_config(self.stream, **{"group.id": "dagger-planner", "enable.auto.commit": False})
            )
        return self._consumer

    def _partitions(self) -> list[TopicPartition]:
        meta = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        out = []
        for topic in self.stream.topics:
            t = meta.topics.get(topic)
            if t is None or t.error is not None:
                # A topic that does not exist yet is empty: reading starts when it appears.
                continue
            out += [TopicPartition(topic, p) for p in sorted(t.partitions)]
        return out

    def _true_end(self, tp: TopicPartition, low: int, reported: int) -> int:
        """The partition's end. Brokers that under-report the high watermark (Tansu) still return the right one
        with fetched data, so fetch the last reported record and read the watermark that came with it."""
        if reported <= low or self._probe is False:
            return reported
        c = self.consumer
        c.assign([TopicPartition(tp.topic, tp.partition, max(low, reported - 1))])
        try:
            msgs = c.consume(1, timeout=METADATA_TIMEOUT_S)
            end = max(reported, *(m.offset() + 1 for m in msgs if m.error() is None))
            end = max(end, c.get_watermark_offsets(tp, cached=True)[1])
        finally:
            c.unassign()
        if self._probe is None:  # auto: any under-report means probing stays on; agreement must be seen repeatedly
            if end != reported:
                self._probe = True
            else:
                self._agreed += 1
                self._probe = False if self._agreed >= AUTO_AGREEMENTS else None
        return end

    def _ends(self) -> tuple[Offsets, Offsets]:
        lows: Offsets = {}
        ends: Offsets = {}
        for tp in self._partitions():
            low, high = self.consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
            lows.setdefault(tp.topic, {})[str(tp.partition)] = low
            ends.setdefault(tp.topic, {})[str(tp.partition)] = self._true_end(tp, low, high)
        return lows, ends

    def initialOffset(self) -> dict:
        lows, ends = self._ends()
        first = lows if self.stream.kafka.start == "earliest" else ends
        return {**first, FLUSH: 0, NEW: 1}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.stream.kafka.max_events_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._ends()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        ends = self._available_now if self._available_now is not None else self._ends()[1]
        begin = {t: {p: start.get(t, {}).get(p, 0) for p in parts} for t, parts in ends.items()}
        backlog = {(t, p): max(0, ends[t][p] - begin[t][p]) for t in ends for p in ends[t]}
        total = sum(backlog.values())
        if isinstance(limit, ReadMaxRows) and total > limit.max_rows:
            # Share the limit in proportion to each partition's backlog, so partitions advance together in time.
            share = {k: (v * limit.max_rows) // total for k, v in backlog.items()}
            share[max(backlog, key=backlog.__getitem__)] += limit.max_rows - sum(share.values())
            end: dict[str, Any] = {t: {p: begin[t][p] + share[(t, p)] for p in ends[t]} for t in ends}
        else:
            end = {t: dict(parts) for t, parts in ends.items()}
        flush = start.get(FLUSH, 0)
        flush_at = self.opts.flush_at_micros
        if flush_at is not None and flush_at > flush and self._available_now is not None and total == 0:
            flush = flush_at  # one more batch after the last data: the sentinel that closes every open window
        end[FLUSH] = flush
        if start.get(NEW):
            if {k: v for k, v in start.items() if k != NEW} == end:
                return start  # nothing to read yet: no batch
            end[INITIAL] = topic_offsets(start)
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for topic, ends in topic_offsets(end).items():
            for p, stop in ends.items():
                begin = start.get(topic, {}).get(p, 0)
                if stop <= begin:
                    continue
                parts.append(RangePartition(topic, int(p), begin, stop))
        if end.get(FLUSH, 0) > start.get(FLUSH, 0):  # from the offsets, so a replayed batch is the same
            parts.append(SentinelPartition(end[FLUSH]))
        return parts

    def commit(self, end: dict) -> None:
        group = self.stream.kafka.consumer_group
        if not group:
            return
        offsets = [TopicPartition(t, int(p), o) for t, parts in topic_offsets(end).items() for p, o in parts.items()]
        if offsets:
            if self._committer is None:  # one client for the query's life, not one per batch
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
            yield decoder.sentinel(partition.rowtime_micros)
            return
        assert isinstance(partition, RangePartition)
        yield from read_range(self.stream, decoder, partition)


class KafkaTailReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, tail: int) -> None:
        self.opts, self.tail = opts, tail

    def partitions(self) -> list[InputPartition]:
        planner = KafkaStreamReader(self.opts)
        try:
            lows, ends = planner._ends()
        finally:
            planner.stop()
        return [
            RangePartition(t, int(p), max(lows[t][p], end - self.tail), end)
            for t, parts in ends.items()
            for p, end in parts.items()
            if end > lows[t][p]
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts.stream, self.opts.decoder(), partition)


def read_range(stream: StreamSpec, decoder: Decoder, part: RangePartition) -> Iterator[pa.RecordBatch]:
    consumer = Consumer(
        kafka_config(
            stream,
            **{
                "group.id": f"dagger-reader-{part.topic}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.max.bytes": 64 * 1024 * 1024,
                "queued.min.messages": 200_000,
            },
        )
    )
    dlq = DeadLetters(stream)
    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        pending: list[Any] = []
        last_progress = time.monotonic()
        position = part.start
        while position < part.end:
            msgs = consumer.consume(min(DECODE_CHUNK, part.end - position), timeout=0.2)
            if not msgs:
                # Control records (transactions) take offsets no consumer sees: trust the fetch position.
                pos = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if pos not in (OFFSET_END, -1001) and pos >= part.end:
                    break
                if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                    raise KafkaException(
                        f"{part.topic}[{part.partition}]: no records for {STALL_TIMEOUT_S:.0f}s at offset {position}, "
                        f"expected up to {part.end}"
                    )
                continue
            last_progress = time.monotonic()
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
                off = m.offset()
                if off >= part.end:
                    position = part.end
                    break
                pending.append(m)
                position = off + 1
            if len(pending) >= DECODE_CHUNK or position >= part.end:
                yield from _decode(decoder, pending, dlq)
                pending = []
        if pending:
            yield from _decode(decoder, pending, dlq)
        dlq.flush()
    finally:
        consumer.close()


def _decode(decoder: Decoder, msgs: list[Any], dlq: DeadLetters) -> list[pa.RecordBatch]:
    result = decoder.decode([m.value() for m in msgs])
    for i, reason in result.errors:
        dlq.send(msgs[i], reason)
    return [result.batch] if result.dropped is None else [result.batch, result.dropped]


class DeadLetters:
    """Undecodable events → `<topic>.dlq`, keyed `topic/partition/offset` (a replay re-sends the same keys)."""

    def __init__(self, stream: StreamSpec) -> None:
        self.stream = stream
        self.topic = stream.dead_letter_topic
        self._producer: Producer | None = None
        self.count = 0

    def send(self, msg: Any, reason: str) -> None:
        if self._producer is None:
            self._producer = Producer(kafka_config(self.stream, **{"enable.idempotence": True, "linger.ms": 50}))
        key = f"{msg.topic()}/{msg.partition()}/{msg.offset()}"
        headers = {
            "dagger.error": reason.encode(),
            "dagger.topic": msg.topic().encode(),
            "dagger.partition": str(msg.partition()).encode(),
            "dagger.offset": str(msg.offset()).encode(),
        }
        self._producer.produce(self.topic, msg.value(), key=key.encode(), headers=headers)
        self._producer.poll(0)
        self.count += 1

    def flush(self) -> None:
        if self._producer is not None:
            left = self._producer.flush(60)
            if left:
                raise KafkaException(f"dead-letter topic {self.topic}: {left} event(s) not acknowledged")
