"""Kafka as the tests read it: every committed record of a topic, the latest per key, a fresh topic."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from odin.kafka.topics import ensure_topics
from tests.support.services import Services


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every committed record of the topic, read to each partition's end (Tansu under-reports the end)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        partitions = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Any] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
            else:
                at_end.discard(msg.partition())
                out.append(msg)
        assert len(at_end) == len(partitions), "did not reach the end of every partition"
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        c.close()


def latest_by_key(records: list[Any]) -> dict[bytes, Any]:
    return {m.key(): m for m in records}  # in offset order per partition; one key lives in one partition


def new_topic(services: Services, partitions: int = 2) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    ensure_topics({"bootstrap.servers": services.kafka_bootstrap}, {name: partitions})
    return name
