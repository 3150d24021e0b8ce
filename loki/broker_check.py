"""After a run: are the events the broker acknowledged still on it? (Jepsen's question for the store itself.)

Each partition is read back from the run's first acknowledged offset to its end and matched, as a multiset of
payloads, against the events acknowledged there: `gone` were acknowledged and are no longer stored (a broker that
lost its data disk: Tansu's memory storage after a restart), `duplicated` are stored more often than they were
sent. A dagger cannot count what its broker lost, so the report separates that loss from the platform's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import Consumer, KafkaException, TopicPartition

from loki.load.feeder import Digest
from odin.kafka.ends import fetched_end

TIMEOUT_S = 30.0  # one partition's read stalls no longer than this
CHUNK = 10_000


@dataclass
class BrokerCheck:
    acknowledged: int = 0
    gone: int = 0
    duplicated: int = 0
    gone_by_partition: dict[str, int] = field(default_factory=dict)
    gone_hashes: set[int] = field(default_factory=set)  # payload hashes (this process's) of the events gone

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if k != "gone_hashes"}


def _stored(consumer: Consumer, topic: str, partition: int, start: int) -> np.ndarray:
    """Hashes of the payloads stored in [start, end) of the partition (from its low watermark if start is gone)."""
    tp = TopicPartition(topic, partition)
    low, reported = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
    end = fetched_end(consumer, tp, low, reported, TIMEOUT_S)
    position = max(start, low)
    hashes: list[int] = []
    if position >= end:
        return np.array(hashes, np.int64)
    consumer.assign([TopicPartition(topic, partition, position)])
    try:
        last_progress = time.monotonic()
        while position < end:
            msgs = consumer.consume(min(CHUNK, end - position), timeout=0.2)
            if not msgs:
                if time.monotonic() - last_progress > TIMEOUT_S:
                    raise KafkaException(f"{topic}[{partition}]: no records for {TIMEOUT_S:.0f}s at offset {position}")
                continue
            last_progress = time.monotonic()
            for m in msgs:
                if m.error() is None and m.offset() < end:
                    hashes.append(hash(m.value()))
                    position = m.offset() + 1
    finally:
        consumer.unassign()
    return np.array(hashes, np.int64)


def check(bootstrap: dict[str, str], digests: list[Digest]) -> BrokerCheck:
    """`bootstrap`: each topic's broker; `digests`: the run's feeds."""
    acked: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for d in digests:
        for tp, events in d.acked.items():
            acked.setdefault(tp, []).extend(events)
    out = BrokerCheck()
    consumers: dict[str, Consumer] = {}
    try:
        for (topic, partition), events in sorted(acked.items()):
            servers = bootstrap[topic]
            if servers not in consumers:
                consumers[servers] = Consumer(
                    {"bootstrap.servers": servers, "group.id": "loki-broker-check", "enable.auto.commit": False}
                )
            sent = np.array([h for _, h in events], np.int64)
            stored = _stored(consumers[servers], topic, partition, min(o for o, _ in events))
            keys, sent_n = np.unique(sent, return_counts=True)
            found, found_n = np.unique(stored, return_counts=True)
            on_broker = np.zeros(len(keys), np.int64)
            if len(found):
                at = np.minimum(np.searchsorted(found, keys), len(found) - 1)
                hit = found[at] == keys
                on_broker[hit] = found_n[at[hit]]
            missing = sent_n > on_broker
            out.gone_hashes |= set(keys[missing].tolist())
            gone = int((sent_n - on_broker)[missing].sum())
            out.acknowledged += len(sent)
            out.gone += gone
            out.duplicated += int(np.maximum(on_broker - sent_n, 0).sum())
            if gone:
                out.gone_by_partition[f"{topic}[{partition}]"] = gone
    finally:
        for c in consumers.values():
            c.close()
    return out
