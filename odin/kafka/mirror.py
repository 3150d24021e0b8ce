"""The platform's mirror job: copies topics of one Kafka cluster into another, keeping every partition's offsets, as
Confluent's Cluster Linking does, so a dagger's checkpoint (offsets per partition) means the same on both and daggers
switch to the mirror when the primary is down (jobs/health/kafka_failover.py) without translating anything.

Record for record, in order, into the same partition of a topic with as many partitions; each delivery's offset is
checked against the source's. The mirror resumes where the target ends, so it keeps no state of its own. A source
whose offsets have holes (transaction markers, compaction) cannot be mirrored this way: the mirror stops at the
hole with what to do, rather than shift offsets (MirrorMaker 2 would keep an offset mapping instead).

`odin mirror --from A --to B TOPIC...` runs it until SIGTERM.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from odin.kafka.ends import fetched_end
from odin.kafka.topics import ensure_topics, partition_counts

TIMEOUT_S = 10.0
Key = tuple[str, int]


class MirrorError(RuntimeError):
    """The mirror cannot keep offsets: says where and what to do."""


@dataclass
class MirrorStats:
    copied: int = 0
    ends: dict[Key, int] = field(default_factory=dict)  # next offset to copy per partition (= the target's end)


class Mirror:
    def __init__(
        self,
        source: str,
        target: str,
        topics: list[str],
        *,
        batch: int = 10_000,
        suffix: str = "",
        say: Callable[[str], None] | None = None,
    ) -> None:
        """`suffix`: each topic's copy is named `<topic><suffix>` (`-perf`: a data stream into its perf twin)."""
        self.source, self.target, self.topics, self.batch, self.suffix = source, target, topics, batch, suffix
        self.say = say or (lambda _m: None)
        self.stats = MirrorStats()
        base = {"socket.timeout.ms": int(TIMEOUT_S * 1000)}
        self.consumer = Consumer(
            {**base, "bootstrap.servers": source, "group.id": "daggers-mirror", "enable.auto.commit": False}
        )
        self.producer = Producer(
            {**base, "bootstrap.servers": target, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        self._failed: list[str] = []

    def prepare(self) -> dict[Key, int]:
        """Topics on the target with the source's partition counts; where each partition resumes (its end there)."""
        partitions = partition_counts(self.consumer, self.topics, TIMEOUT_S)
        for topic in self.topics:
            if topic not in partitions:
                raise MirrorError(f"topic {topic} is not on the source cluster {self.source}")
        try:  # the copies, where missing, with the source's partition counts
            copies = ensure_topics(
                {"bootstrap.servers": self.target}, {t + self.suffix: n for t, n in partitions.items()}
            )
        except KafkaException as e:
            raise MirrorError(f"cannot create the mirror's topics on {self.target}: {e}") from e
        for topic, count in partitions.items():
            copy = topic + self.suffix
            if copies[copy] != count:
                raise MirrorError(
                    f"topic {copy} has {copies[copy]} partition(s) on {self.target} and {count} on "
                    f"{self.source}: offsets cannot be kept; delete it on {self.target} and mirror again"
                )
        probe = Consumer({"bootstrap.servers": self.target, "group.id": "daggers-mirror-probe"})
        try:
            for topic, count in partitions.items():
                for p in range(count):
                    tp = TopicPartition(topic + self.suffix, p)
                    low, high = probe.get_watermark_offsets(tp, timeout=TIMEOUT_S)
                    end = fetched_end(probe, tp, low, high, TIMEOUT_S)
                    if end > 0:
                        self._same_last(probe, TopicPartition(topic, p), end)
                    self.stats.ends[(topic, p)] = end
        finally:
            probe.close()
        self.consumer.assign([TopicPartition(t, p, end) for (t, p), end in self.stats.ends.items()])
        self.say(f"mirror {self.source} -> {self.target}: {len(self.stats.ends)} partition(s) from {self.stats.ends}")
        return dict(self.stats.ends)

    def _same_last(self, target: Consumer, tp: TopicPartition, end: int) -> None:
        """Resume only where the target is an exact prefix of the source: its last record is the source's."""
        copy = _record_at(target, TopicPartition(tp.topic + self.suffix, tp.partition), end - 1)
        original = _record_at(self.consumer, tp, end - 1)
        where = f"{tp.topic}[{tp.partition}] offset {end - 1}"
        if original is None:
            raise MirrorError(
                f"{where} is on {self.target} but not on {self.source}: the source lost data (a broker that came back "
                "empty?); mirroring on would shift offsets. Fail over to the mirror, or mirror into a new topic"
            )
        if copy is None or (copy.key(), copy.value()) != (original.key(), original.value()):
            raise MirrorError(
                f"{where} differs between {self.source} and {self.target}: something else wrote to the mirror's topic; "
                "delete it there and mirror again"
            )

    def _delivered(self, expected: int) -> Callable[[KafkaError | None, Message], None]:
        def check(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self._failed.append(f"{msg.topic()}[{msg.partition()}] offset {expected}: {err}")
            elif msg.offset() != expected:
                self._failed.append(
                    f"{msg.topic()}[{msg.partition()}]: the copy of offset {expected} landed at {msg.offset()} "
                    f"(something else writes to the topic on {self.target})"
                )

        return check

    def copy(self, timeout_s: float = 1.0) -> int:
        """Copy what the source has now (up to `batch` records), delivered and checked; how many."""
        msgs = self.consumer.consume(self.batch, timeout=timeout_s)
        copied = 0
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise MirrorError(f"reading {self.source}: {err}")
            key = (m.topic(), m.partition())
            if m.offset() != self.stats.ends[key]:
                raise MirrorError(
                    f"{key[0]}[{key[1]}] on {self.source} skips from offset {self.stats.ends[key]} to {m.offset()} "
                    "(transaction markers or compaction): a mirror that keeps offsets cannot copy it. Mirror a topic "
                    "written without transactions, or fail over with an offset mapping instead"
                )
            extra = {"headers": m.headers()} if m.headers() else {}
            self.producer.produce(
                m.topic() + self.suffix,
                value=m.value(),
                key=m.key(),
                partition=m.partition(),
                timestamp=max(0, m.timestamp()[1]),  # the source's, so event time and retention carry over
                on_delivery=self._delivered(m.offset()),
                **extra,
            )
            self.producer.poll(0)
            self.stats.ends[key] = m.offset() + 1
            copied += 1
        if copied:
            left = self.producer.flush(TIMEOUT_S)
            if left or self._failed:
                raise MirrorError("; ".join(self._failed) or f"{left} record(s) not acknowledged by {self.target}")
            self.stats.copied += copied
        return copied

    def run(self, stop: threading.Event, timeout_s: float = 0.5) -> None:
        """Copy until `stop` is set."""
        self.prepare()
        while not stop.is_set():
            self.copy(timeout_s)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(TIMEOUT_S)


def _record_at(consumer: Consumer, tp: TopicPartition, offset: int) -> Message | None:
    """The record at `offset`, or None when the partition has none there (within the timeout)."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, offset)])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for m in consumer.consume(1, timeout=0.2):
                if m.error() is None:
                    return m if m.offset() == offset else None
            high = consumer.get_watermark_offsets(tp, cached=True)[1]
            if 0 <= high <= offset:
                return None  # a fetch answered: the partition ends before it
        return None
    finally:
        consumer.unassign()
