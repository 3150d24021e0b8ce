"""A partition's true end offset. Some brokers under-report the high watermark in ListOffsets (Tansu reports the
first offset of the last stored batch + 1) but return the right one with fetched data: fetch from the last reported
offset and read the watermark that came with it. Shared by the dagger source (jobs/engine/kafka_source.py) and the
mirror (odin/kafka/mirror.py)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

POLL_S = 0.05


def fetched_end(consumer: Consumer, tp: TopicPartition, low: int, reported: int, timeout_s: float) -> int:
    """The end of `tp` from a fetch at its last reported offset (a fetch that finds only a transaction marker
    returns no record, but the watermark all the same). Leaves the consumer unassigned."""
    if reported <= low:
        return reported
    consumer.assign([TopicPartition(tp.topic, tp.partition, max(low, reported - 1))])
    end = reported
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msgs = consumer.consume(1, timeout=POLL_S)
            end = max(end, *(m.offset() + 1 for m in msgs if m.error() is None), 0)
            fetched = consumer.get_watermark_offsets(tp, cached=True)[1]
            if msgs or fetched >= 0:
                return max(end, fetched)
        raise KafkaException(f"{tp.topic}[{tp.partition}]: no fetch answered within {timeout_s:.0f}s")
    finally:
        consumer.unassign()
