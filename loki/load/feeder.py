"""Feeders: a catalog stream's protobuf events produced to its perf topics at a target rate, with the fate of every
event recorded (Jepsen's history): acknowledged (with its offset), failed, or indeterminate (no answer before the
end: it may or may not be in Kafka, so it is neither lost nor expected).

Events are deterministic for the feeder's seed, so the ground truth keeps only each event's time, partition, offset
and fate, and regenerates the events themselves when the report needs them (`Feed.digest`). A small feed keeps what
it sent instead (`KEEP_EVENTS`): regenerating took ~6 s of a 75,000-event run's report.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from google.protobuf.message import Message as ProtoMessage

from loki.playbook import Feeder, Ramp, Spike, Steady
from odin.kafka.topics import partition_counts
from odin.traffic.generator import CITIES, booking, ping, request, stamp

PENDING, ACKED, FAILED = 0, 1, 2
FATES, FATE_NAMES = (ACKED, FAILED, PENDING), ("acknowledged", "failed", "indeterminate")
MALFORMED = b"\xff\xff\xff\xff\x0f"  # an unterminated varint: no protobuf message decodes from it
SLICE_S = 0.01
KEEP_EVENTS = 500_000  # a feed this small keeps each event's key and bytes (~150 B each); a larger one regenerates
# Delivery errors after which the event may still have been written: indeterminate, never counted as failed.
MAYBE_WRITTEN = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._FATAL, KafkaError._PURGE_INFLIGHT})
MAKERS: dict[str, Callable[..., ProtoMessage]] = {
    "daggers.events.BookingLog": booking,
    "daggers.events.DriverLocationPing": ping,
    "daggers.events.ApiLog": request,
}
KEY_ARGUMENT = {"daggers.events.BookingLog": "customers", "daggers.events.DriverLocationPing": "drivers"}


def rate_at(rate: Steady | Ramp | Spike, t: float, duration: float) -> float:
    """Events per second `t` seconds into the feed."""
    if isinstance(rate, Steady):
        return float(rate.events_per_s)
    if isinstance(rate, Ramp):
        share = min(1.0, max(0.0, t / duration)) if duration else 1.0
        return rate.from_events_per_s + (rate.to_events_per_s - rate.from_events_per_s) * share
    spike_from = rate.at.total_seconds()
    in_spike = spike_from <= t < spike_from + rate.length.total_seconds()
    return float(rate.peak_events_per_s if in_spike else rate.events_per_s)


def due(rate: Steady | Ramp | Spike, t: float, duration: float) -> int:
    """How many events should have been produced `t` seconds in (the integral of the rate)."""
    if isinstance(rate, Steady):
        return int(rate.events_per_s * t)
    if isinstance(rate, Ramp):
        t = min(t, duration)
        slope = (rate.to_events_per_s - rate.from_events_per_s) / duration if duration else 0.0
        return int(rate.from_events_per_s * t + slope * t * t / 2)
    start, length = rate.at.total_seconds(), rate.length.total_seconds()
    inside = max(0.0, min(t, start + length) - start)
    return int(rate.events_per_s * (t - inside) + rate.peak_events_per_s * inside)


@dataclass
class Feed:
    """One feeder's history: per event, its time, where it went and what became of it."""

    feeder: Feeder
    proto: str
    topics: list[str]
    capacity: int
    times: np.ndarray = field(init=False)  # event time, epoch seconds
    slots: np.ndarray = field(init=False)  # index into `targets` (topic, partition)
    offsets: np.ndarray = field(init=False)  # -1 unless acknowledged
    fates: np.ndarray = field(init=False)  # PENDING (indeterminate once the feed ended), ACKED, FAILED
    malformed: np.ndarray = field(init=False)
    targets: list[tuple[str, int]] = field(default_factory=list)
    sent: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # failure reasons, counted
    kept: list[tuple[str, bytes | None]] | None = field(init=False)  # per event: its key, its bytes (None: malformed)

    def __post_init__(self) -> None:
        self.kept = [] if self.capacity <= KEEP_EVENTS else None
        self.times = np.zeros(self.capacity, np.float64)
        self.slots = np.zeros(self.capacity, np.int32)
        self.offsets = np.full(self.capacity, -1, np.int64)
        self.fates = np.zeros(self.capacity, np.int8)
        self.malformed = np.zeros(self.capacity, np.bool_)

    def counts(self) -> dict[str, int]:
        fates = self.fates[: self.sent]
        return {
            "sent": self.sent,
            "acknowledged": int((fates == ACKED).sum()),
            "failed": int((fates == FAILED).sum()),
            "indeterminate": int((fates == PENDING).sum()),
            "malformed": int(self.malformed[: self.sent].sum()),
        }

    def events(self) -> Iterator[tuple[int, ProtoMessage | None]]:
        """Every event sent, regenerated from the seed, in order: (index, message) or (index, None) if malformed."""
        make = _maker(self.feeder, self.proto)
        rng = random.Random(self.feeder.seed)
        for i in range(self.sent):
            msg = make(rng, i)
            if self.malformed[i]:
                yield i, None
                continue
            stamp(msg.event_timestamp, float(self.times[i]))
            yield i, msg

    def acked_ends(self) -> dict[tuple[str, int], int]:
        """Per (topic, partition), the offset after the latest event acknowledged so far (the latest sent, not the
        highest offset: a broker back empty numbers from 0 again)."""
        offsets, slots = self.offsets[: self.sent], self.slots[: self.sent]
        out = {}
        for slot, target in enumerate(self.targets):
            acked = np.flatnonzero((slots == slot) & (offsets >= 0))
            if acked.size:
                out[target] = int(offsets[acked[-1]]) + 1
        return out

    def keep(self, msg: ProtoMessage, payload: bytes | None) -> None:
        """What event `len(kept)` was, if this feed keeps its events."""
        if self.kept is not None:
            self.kept.append(("(malformed)" if payload is None else key_of(msg, self.proto), payload))

    def _records(self) -> Iterator[tuple[int, str, bytes | None]]:
        """Every event sent, in order: (index, key, bytes or None if malformed), kept or regenerated."""
        if self.kept is not None and len(self.kept) >= self.sent:
            for i in range(self.sent):
                yield i, *self.kept[i]
            return
        for i, msg in self.events():
            yield (i, "(malformed)", None) if msg is None else (i, key_of(msg, self.proto), msg.SerializeToString())

    def digest(self, window_s: float) -> Digest:
        """Every event once, folded into what the checks after a run need (see Digest)."""
        out = Digest()
        for i, key, payload in self._records():
            fate = int(self.fates[i])
            window = float(np.floor(self.times[i] / window_s) * window_s)
            out.keys.setdefault((window, key), [0, 0, 0])[FATES.index(fate)] += 1
            if payload is None:
                continue
            topic, partition = self.targets[self.slots[i]]
            out.payloads.setdefault(fate, {}).setdefault(topic, []).append(payload)
            if fate == ACKED:
                out.acked.setdefault((topic, partition), []).append((int(self.offsets[i]), hash(payload)))
            elif fate == FAILED:
                out.failed.setdefault((topic, partition), []).append(hash(payload))
        return out


KEY_FIELD = {
    "daggers.events.BookingLog": "customer_id",
    "daggers.events.DriverLocationPing": "driver_id",
    "daggers.events.ApiLog": "path",
}


def key_of(msg: ProtoMessage, proto: str) -> str:
    """The ground truth's key of an event (its finest grain beside the window)."""
    field_name = KEY_FIELD.get(proto)
    return "(malformed)" if field_name is None else str(getattr(msg, field_name))


@dataclass
class Digest:
    """A feed's history as the checks after a run use it (payload hashes are this process's `hash`: compare them
    only within the run's process).

    payloads: decodable events, serialized, per fate and topic (the ground truth's input)
    acked: per topic-partition, (offset, payload hash) of every decodable acknowledged event (the broker check)
    failed: per topic-partition, the payload hashes of decodable events the producer said failed (the broker check
      finds those it stored all the same)
    keys: per (window start, key), events acknowledged, failed and indeterminate (the ground truth at its finest)
    """

    payloads: dict[int, dict[str, list[bytes]]] = field(default_factory=dict)
    acked: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    failed: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    keys: dict[tuple[float, str], list[int]] = field(default_factory=dict)

    def of(self, fates: tuple[int, ...], topics: list[str]) -> list[bytes]:
        return [p for f in fates for t in topics for p in self.payloads.get(f, {}).get(t, [])]


def _maker(feeder: Feeder, proto: str) -> Callable[[random.Random, int], ProtoMessage]:
    make = MAKERS.get(proto)
    if make is None:
        raise ValueError(f"no generator for {proto}: feeders know {', '.join(MAKERS)}")
    city = [c for c in CITIES if c.name == feeder.city]
    kwargs: dict[str, Any] = {"seed": feeder.seed}
    if proto in KEY_ARGUMENT:
        kwargs[KEY_ARGUMENT[proto]] = feeder.keys
        kwargs["cities"] = tuple(city)
    return partial(make, **kwargs)


def _fatal(e: KafkaException) -> bool:
    """Whether the producer that raised `e` is dead for good (it must be renewed)."""
    return bool(e.args[0].fatal() or e.args[0].code() == KafkaError._FATAL)


def run_feed(
    feeder: Feeder,
    proto: str,
    topics: list[str],
    bootstrap: str,
    stop: threading.Event,
    *,
    on_tick: Callable[[Feed], None] | None = None,
    linger_s: float = 30.0,
    reset: threading.Event | None = None,
    buffer_events: int = 1_000_000,
) -> Feed:
    """Produce the feeder's load until its duration ends or `stop` is set; then wait up to `linger_s` for the
    broker's answers. What is still unanswered stays indeterminate. `reset` says the broker came back from losing
    its state: the producer is renewed (the old one waits on a producer id the new broker never gave).
    `buffer_events`: how many events the producer holds unanswered; past it, an event waits for room (and is then
    sent as it was made). Every partition the broker has gets load, also one that came with a topic recreated
    after a broker loss: a partition without any would hold the consumers' watermark until their idle timeout."""
    duration = feeder.duration.total_seconds()
    capacity = due(feeder.rate, duration, duration) + 16
    feed = Feed(feeder, proto, topics, capacity)
    config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,  # a retried send is not a duplicate
        "acks": "all",
        "linger.ms": round(feeder.linger.total_seconds() * 1000),
        "queue.buffering.max.messages": buffer_events,
        "message.timeout.ms": 30_000,  # then the delivery report says failed... or the event is indeterminate
    }

    def new_producer() -> tuple[Producer, threading.Event]:
        """A producer and the flag its fatal error sets (its error callback, or `serve`) for the loop to renew it."""
        fatal = threading.Event()

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                fatal.set()

        return Producer({**config, "error_cb": on_error}), fatal

    (producer, fatal), retired = new_producer(), []
    active: list[int] = []  # the slots (indexes into feed.targets) events go to now

    def retarget(p: Producer) -> None:
        """Every partition of the topics as the broker has them now; a target once fed keeps its slot (the ground
        truth refers to it)."""
        try:
            counts = partition_counts(p, topics, timeout_s=10)
        except KafkaException:
            counts = {}
        if not counts and active:  # the broker does not answer yet: go on as before
            return
        wanted = [(t, n) for t in topics for n in range(counts.get(t, feeder.partitions))]
        feed.targets += [w for w in wanted if w not in feed.targets]
        active[:] = [feed.targets.index(w) for w in wanted]

    retarget(producer)
    if feeder.city not in {c.name for c in CITIES}:
        raise ValueError(f"city: {feeder.city!r} is not one of {', '.join(c.name for c in CITIES)}")
    make = _maker(feeder, proto)
    rng = random.Random(feeder.seed)
    bad = random.Random(feeder.seed + 1)  # its own generator: malformed events do not change the others

    def delivered(i: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            feed.fates[i], feed.offsets[i] = ACKED, msg.offset()
            return
        feed.errors[err.name()] = feed.errors.get(err.name(), 0) + 1
        if err.code() not in MAYBE_WRITTEN:
            feed.fates[i] = FAILED

    def renew(reason: str) -> None:
        """A new producer: what the old one held gets its delivery reports (purged: failed if never sent,
        indeterminate if in flight), as a service restarting its producer would."""
        nonlocal producer, fatal
        feed.errors[reason] = feed.errors.get(reason, 0) + 1
        with contextlib.suppress(KafkaException):
            producer.purge()
        serve(producer)
        retired.append(producer)
        producer, fatal = new_producer()
        retarget(producer)  # a broker back empty may have the topics with other partitions

    def serve(p: Producer, flush_s: float | None = None) -> None:
        """Serve `p`'s delivery reports (all of them within `flush_s`, or those ready). The client raises a
        producer's fatal error (UNKNOWN_PRODUCER_ID from a broker back from a loss) from a poll or flush that
        meets it, error callback or not: that flags the producer for renewal instead of ending the feed (CI's
        broker-loss run), and serving goes on."""
        deadline = time.monotonic() + (flush_s or 0.0)
        for _ in range(1000):
            try:
                if flush_s is None:
                    p.poll(0)
                else:
                    p.flush(max(0.0, deadline - time.monotonic()))
                return
            except KafkaException as e:
                if not _fatal(e):
                    raise
                if p is producer:
                    fatal.set()
                if flush_s is None or time.monotonic() >= deadline:
                    return

    def stage(i: int) -> tuple[str, int, bytes]:
        """Event `i` from the seed's generators (each draws once per event), stamped now: where it goes, and its
        bytes."""
        msg = make(rng, i)
        now = time.time()
        stamp(msg.event_timestamp, now)
        feed.times[i] = now
        feed.slots[i] = active[i % len(active)]
        malformed = feeder.malformed_ratio > 0 and bad.random() < feeder.malformed_ratio
        feed.malformed[i] = malformed
        topic, partition = feed.targets[feed.slots[i]]
        if malformed:
            feed.keep(msg, None)
            return topic, partition, MALFORMED
        payload = msg.SerializeToString()
        feed.keep(msg, payload)
        return topic, partition, payload

    staged: tuple[int, tuple[str, int, bytes]] | None = None
    started = time.monotonic()
    next_tick = started
    while not stop.is_set():
        if reset is not None and reset.is_set():
            reset.clear()
            renew("producer renewed: its broker lost its state")
        elif fatal.is_set():
            renew("producer renewed: fatal error")
        elapsed = time.monotonic() - started
        if elapsed >= duration:
            break
        target = min(due(feeder.rate, elapsed, duration), capacity)
        while feed.sent < target:
            i = feed.sent
            if staged is None or staged[0] != i:  # made once: a retried event is the same event (Feed.events)
                staged = (i, stage(i))
            topic, partition, value = staged[1]
            try:
                producer.produce(topic, value, partition=partition, on_delivery=partial(delivered, i))
            except BufferError:
                # The local queue is full: the broker is slow or away. The event is retried from the outer loop,
                # which first hears of a stop, a reset or a renewal (the producer holding the queue may be the one
                # the broker no longer knows).
                serve(producer)
                time.sleep(0.05)
                break
            except KafkaException as e:
                if not _fatal(e):
                    raise
                # An idempotent producer dies when its broker forgets it (a broker back from a data loss): what it
                # held gets its delivery reports, and a new producer goes on, as a service's would.
                renew("producer renewed: fatal error")
                continue
            feed.sent += 1
        serve(producer)
        if on_tick is not None and time.monotonic() >= next_tick:
            on_tick(feed)
            next_tick = time.monotonic() + 1.0
        time.sleep(SLICE_S)
    deadline = time.monotonic() + linger_s
    for p in (*retired, producer):
        serve(p, max(0.0, deadline - time.monotonic()))
    if on_tick is not None:
        on_tick(feed)
    return feed
