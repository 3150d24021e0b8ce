"""Create Kafka topics a dagger owns (dead letters, sink output, commit markers) if they do not exist yet."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def ensure_topics(client_config: dict[str, Any], topics: dict[str, int | None]) -> None:
    """`topics` maps a name to its partition count (None: the broker's default). Existing topics are left as
    they are."""
    admin = AdminClient(client_config)
    new = [NewTopic(name) if n is None else NewTopic(name, num_partitions=n) for name, n in topics.items()]
    for fut in admin.create_topics(new).values():
        try:
            fut.result(TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
