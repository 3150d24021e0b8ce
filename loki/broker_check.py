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
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from loki.load.feeder import Digest

TIMEOUT_S = 30.0  # the read stalls no longer than this
CHUNK = 10_000


@dataclass
class BrokerCheck:
    acknowledged: int = 0
    gone: int = 0
    duplicated: int = 0
    gone_by_partition: dict[str, int] = field(default_factory=dict)
    failed_but_stored: int = 0
    gone_hashes: set[int] = field(default_factory=set)  # payload hashes (this process's) of the events gone
    stored_hashes: set[int] = field(default_factory=set)  # ... of the events said failed that the broker stored

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if not k.endswith("_hashes")}


def _stored(consumer: Consumer, starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], list[int]]:
    """Per partition, the hashes of the payloads stored from its start offset (from its low watermark if that is gone)
    to its end. Every partition is read at once and ends at the client's end-of-partition event, which knows the true
    end: one partition after another, each with its own watermark requests, took 7.7 s for 75,000 events."""
    hashes: dict[tuple[str, int], list[int]] = {tp: [] for tp in starts}
    left = set(starts)
    consumer.assign([TopicPartition(topic, partition, start) for (topic, partition), start in starts.items()])
    try:
        last_progress = time.monotonic()
        while left:
            msgs = consumer.consume(CHUNK, timeout=0.2)
            if msgs:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > TIMEOUT_S:
                stalled = ", ".join(f"{t}[{p}]" for t, p in sorted(left))
                raise KafkaException(f"{stalled}: no records for {TIMEOUT_S:.0f}s")
            for m in msgs:
                tp, err = (m.topic(), m.partition()), m.error()
                if err is None and m.offset() >= starts[tp]:
                    hashes[tp].append(hash(m.value()))
                elif err is not None and err.code() == KafkaError._PARTITION_EOF:
                    left.discard(tp)
    finally:
        consumer.unassign()
    return hashes


def check(bootstrap: dict[str, str], digests: list[Digest]) -> BrokerCheck:
    """`bootstrap`: each topic's broker; `digests`: the run's feeds."""
    acked: dict[tuple[str, int], list[tuple[int, int]]] = {}
    failed: dict[tuple[str, int], list[int]] = {}
    for d in digests:
        for tp, events in d.acked.items():
            acked.setdefault(tp, []).extend(events)
        for tp, hashes in d.failed.items():
            failed.setdefault(tp, []).extend(hashes)
    out = BrokerCheck()
    by_broker: dict[str, dict[tuple[str, int], int]] = {}
    for (topic, partition), events in acked.items():
        by_broker.setdefault(bootstrap[topic], {})[(topic, partition)] = min(o for o, _ in events)
    # A failed event has no offset: such a partition is read from its earliest (one written before the run's first
    # acknowledged event would be missed otherwise). Few runs have any: a broker back empty has no history to read.
    for topic, partition in failed:
        by_broker.setdefault(bootstrap[topic], {})[(topic, partition)] = 0
    stored: dict[tuple[str, int], list[int]] = {}
    for servers, starts in by_broker.items():
        consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": "loki-broker-check",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",  # a start the broker no longer has: from what it has
            }
        )
        try:
            stored |= _stored(consumer, starts)
        finally:
            consumer.close()
    for (topic, partition), events in sorted(acked.items()):
        sent = np.array([h for _, h in events], np.int64)
        keys, sent_n = np.unique(sent, return_counts=True)
        found, found_n = np.unique(np.array(stored[(topic, partition)], np.int64), return_counts=True)
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
    # A producer's error is not always the broker's: an event it said failed (e.g. purged from a producer renewed
    # after a fatal error) may have been written all the same. A dagger reading the topic counts it: so does the truth.
    for tp, hashes in failed.items():
        on_broker = set(stored[tp])
        written = [h for h in hashes if h in on_broker]
        out.failed_but_stored += len(written)
        out.stored_hashes |= set(written)
    return out
