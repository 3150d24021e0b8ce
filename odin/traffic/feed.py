"""Live events for one catalog stream at a steady rate, stamped with the time they are sent: what the traffic node
runs for every stream, and `odin feed` for one.

Each stream's message gets its generator (odin/traffic/generator.py) by protobuf name; a feed spreads its events
round-robin over the stream's topics and lets Kafka pick the partition. Event times only grow in every partition, so
a dagger's watermark follows the clock and no event of this feed is ever late.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import KafkaError, Producer
from google.protobuf.message import Message

from odin.kafka.topics import ensure_topics
from odin.traffic.generator import booking, ping, request, stamp

# How each catalog message is made; a stream of another message is not fed (the node's health says so).
GENERATORS: dict[str, Callable[[random.Random, int, int], Message]] = {
    "daggers.events.BookingLog": lambda rng, i, seed: booking(rng, i, seed=seed),
    "daggers.events.DriverLocationPing": lambda rng, i, seed: ping(rng, i, seed=seed),
    "daggers.events.ApiLog": lambda rng, i, seed: request(rng, i, seed=seed),
}
PARTITIONS = 2  # of a topic the feed creates; an existing topic keeps its own
MAX_CATCH_UP_S = 5.0  # after a stall (broker down, machine busy), at most this much backlog is sent at once
MAX_RATE = 100_000.0


class NoGenerator(ValueError):
    pass


class Stream(Protocol):
    """A catalog stream, from the catalog file or the registry."""

    @property
    def name(self) -> str: ...
    @property
    def topics(self) -> list[str]: ...
    @property
    def proto(self) -> str: ...


def producer(bootstrap_servers: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 50,
            "enable.idempotence": True,  # retries keep each partition's order, so event times keep growing
            "queue.buffering.max.messages": 200_000,
            "message.timeout.ms": 60_000,
        }
    )


@dataclass
class Counts:
    delivered: int = 0
    failed: int = 0
    skipped: int = 0  # not sent: the producer's queue was full (the broker unreachable for a long time)
    last_delivery: float | None = None  # time.time()
    last_error: str = ""


@dataclass
class Feed:
    """Events of `stream` at `rate` per second; call `send_due()` often and `Producer.poll` to get deliveries."""

    stream: Stream
    rate: float
    bootstrap_servers: str
    producer: Producer
    seed: int = field(default_factory=lambda: random.randrange(1 << 30))
    counts: Counts = field(default_factory=Counts)

    def __post_init__(self) -> None:
        if self.stream.proto not in GENERATORS:
            raise NoGenerator(f"stream {self.stream.name}: no generator for {self.stream.proto}")
        if not 0 < self.rate <= MAX_RATE:
            raise ValueError(f"rate: {self.rate} events/s is outside (0, {MAX_RATE:,.0f}]")
        self._make = GENERATORS[self.stream.proto]
        self._rng = random.Random(self.seed)
        self._sent = 0
        self._started = time.monotonic()

    @property
    def sent(self) -> int:
        return self._sent

    def restart_clock(self) -> None:
        """The rate counts from now (the feed waited for its topics): no backlog from before."""
        self._started = time.monotonic() - self._sent / self.rate

    def create_topics(self) -> None:
        ensure_topics({"bootstrap.servers": self.bootstrap_servers}, dict.fromkeys(self.stream.topics, PARTITIONS))

    def send_due(self, total: int | None = None) -> int:
        """Send what the rate calls for since the feed started (never more than `total` in all); returns how many
        were queued."""
        due = int(self.rate * (time.monotonic() - self._started)) - self._sent
        if due > self.rate * MAX_CATCH_UP_S:  # a stall is not made up in one burst
            self._started += (due - self.rate * MAX_CATCH_UP_S) / self.rate
            due = int(self.rate * MAX_CATCH_UP_S)
        if total is not None:
            due = min(due, total - self._sent)
        topics = self.stream.topics
        for _ in range(max(0, due)):
            msg = self._make(self._rng, self._sent, self.seed)
            stamp(msg.event_timestamp, time.time())  # type: ignore[attr-defined]
            try:
                self.producer.produce(
                    topics[self._sent % len(topics)], msg.SerializeToString(), on_delivery=self._delivered
                )
            except BufferError:
                self.counts.skipped += 1
            self._sent += 1
        return max(0, due)

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is None:
            self.counts.delivered += 1
            self.counts.last_delivery = time.time()
        else:
            self.counts.failed += 1
            self.counts.last_error = str(err)
