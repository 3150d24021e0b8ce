"""Create Kafka topics a dagger owns (dead letters, sink output, commit markers) if they do not exist yet."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
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
        meta = admin.list_topics(timeout=TIMEOUT_S).topics
        counts = {name: len(meta[name].partitions) for name in topics if name in meta and meta[name].error is None}
        if len(counts) == len(topics) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if missing := sorted(set(topics) - set(counts)):
        raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topics {missing} not in the metadata"))
    return counts
