"""Kafka failover (seed 004's "Kafka failover", seed 000's "failover mirror cluster"): a catalog stream whose Kafka
cluster has a failover mirror (odin/kafka/mirror.py keeps every partition's offsets) switches to it when the primary is
down, and every dagger reading the stream is restarted on the mirror from its checkpoint: the checkpoint's offsets
mean the same there (jobs/engine/checkpoint.py treats the two as one source), so nothing is lost or counted twice.

Switching back is a person's decision (`dagger switch-stream STREAM --to primary`): a primary that lost its data
(Tansu keeps topics in memory) has other offsets now, and the mirror must first be copied back into it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from jobs.lifecycle.daggers import Daggers, DeployError
from jobs.lifecycle.submission import SubmissionError
from odin.registry import Refused
from odin.registry.records import DaggerRecord
from odin.teams.access import require_platform_engineer

READERS = ("deploying", "running", "failed")  # daggers that read the stream now (or are to, once restarted)
Side = Literal["primary", "failover"]


def reachable(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """Whether the cluster answers a metadata request within the timeout."""
    quiet = logging.getLogger("jobs.health.kafka_failover.probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000), "logger": quiet})
    try:
        admin.list_topics(timeout=timeout_s)
        return True
    except KafkaException:
        return False


def readers(daggers: Daggers, stream: str) -> list[DaggerRecord]:
    return [
        d
        for d in daggers.registry.daggers(states=READERS)
        if any(s.get("stream") == stream for s in d.spec.get("streams", []))
    ]


@dataclass
class StreamSwitch:
    stream: str
    to: Side
    bootstrap_servers: str
    moved: list[str] = field(default_factory=list)  # team/name
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def switch_stream(
    daggers: Daggers, stream: str, actor: str, reason: str, to: Side = "failover", *, authorize: bool = True
) -> StreamSwitch:
    """Serve `stream` from its failover mirror (or back from its primary) and restart its daggers there, resuming
    their checkpoints; one `stream_failover` history entry, one `dagger_failover` per dagger. `authorize`: the
    actor must be a platform engineer (the stream is every team's); the health check acts for the platform."""
    registry = daggers.registry
    with registry.action(actor, "stream_failover", f"stream:{stream}", reason=reason, to=to) as detail:
        if authorize:
            require_platform_engineer(registry, actor)
        record = registry.stream(stream)
        if record is None:
            raise Refused(f"no stream {stream!r} in the catalog (odin catalog list)")
        if not record.failover_bootstrap_servers:
            raise Refused(
                f"stream {stream} has no failover cluster: give its Kafka cluster {record.kafka_cluster!r} "
                "`failover_bootstrap_servers` in odin/catalog/streams.yaml and feed it with `odin mirror`"
            )
        registry.set_stream_failover(stream, to == "failover")
        servers = record.failover_bootstrap_servers if to == "failover" else record.bootstrap_servers
        switch = StreamSwitch(stream, to, servers)
        why = f"stream {stream} switched to its {to} Kafka cluster {servers}: {reason}"
        for d in readers(daggers, stream):
            daggers.end_driver(d.team, d.name, actor, timeout_s=5)
            try:
                daggers.restart(d.team, d.name, actor, why, action="dagger_failover")
                switch.moved.append(d.qualified_name)
            except (DeployError, Refused, SubmissionError) as e:
                switch.failed[d.qualified_name] = str(e)
        detail.update(bootstrap_servers=servers, moved=switch.moved, failed=switch.failed)
    return switch
