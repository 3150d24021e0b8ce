"""Create Kafka topics a dagger owns (dead letters, sink output, commit markers) if they do not exist yet."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def ensure_topics(client_config: dict[str, Any], topics: dict[str, int | None]) -> dict[str, int]:
    """`topics` maps a name to its partition count (None: the broker's default). Existing topics are left as
    they are. Returns each topic's partition count as the broker has it (an existing topic's may differ)."""
    admin = AdminClient(client_config)
    new = [NewTopic(name) if n is None else NewTopic(name, num_partitions=n) for name, n in topics.items()]
    for fut in admin.create_topics(new).values():
        try:
            fut.result(TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # a topic just created can be missing from the metadata for a moment
        counts = partition_counts(admin, topics)
        if len(counts) == len(topics) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if missing := sorted(set(topics) - set(counts)):
        raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topics {missing} not in the metadata"))
    return counts


def partition_counts(
    client: AdminClient | Consumer | Producer, topics: Iterable[str], timeout_s: float = TIMEOUT_S
) -> dict[str, int]:
    """The partition count of each of `topics` the broker has (one missing, or in error, is left out)."""
    meta = client.list_topics(timeout=timeout_s).topics
    return {t: len(meta[t].partitions) for t in topics if t in meta and meta[t].error is None}
