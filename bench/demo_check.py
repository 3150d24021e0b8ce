"""The demo's check: what each dagger wrote, against a count in plain Python of the events on its stream.

Exact, and the same whatever minute it runs in: only windows the dagger has closed are compared (their end at or
before its watermark, read once a later batch has run, so their rows are written), and only windows all of whose
events the broker still has (Tansu keeps topics in memory: a restarted stack starts them over, while the sinks keep
older windows). The count reads every partition of the stream's topics from its start, decodes with the generated
protobuf classes, and computes S2 cells with s2sphere: nothing of the dagger's engine.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import s2sphere
from confluent_kafka import Consumer, KafkaError, TopicPartition
from daggers.events import api_log_pb2, booking_log_pb2, common_pb2
from google.protobuf.message import Message

from odin.apis import victoria

WINDOW_S = 60
Key = tuple[Any, ...]  # group keys..., window end (epoch seconds)


@dataclass(frozen=True)
class Comparison:
    dagger: str
    windows: int  # closed windows compared
    rows: int  # sink rows in them
    events: int  # events in them, counted from the topics
    missing: dict[Key, Any]  # in the count, not (or different) in the sink
    unexpected: dict[Key, Any]  # in the sink, not in the count

    @property
    def exact(self) -> bool:
        return not self.missing and not self.unexpected


def read_stream(
    bootstrap: str, topics: list[str], message: type[Message], timeout_s: float = 120, first_only: bool = False
) -> list[Message]:
    """Every event of the topics, each partition read from its start to its end (as of now); or, `first_only`, the
    first event of each partition."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"demo-check-{uuid.uuid4().hex}", "enable.partition.eof": True}
    )
    try:
        meta = consumer.list_topics(timeout=30).topics
        assigned = [TopicPartition(t, p, 0) for t in topics if t in meta for p in meta[t].partitions]
        consumer.assign(assigned)
        events, at_end = [], set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(assigned) and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
                elif err is None and (msg.topic(), msg.partition()) not in at_end:
                    events.append(message.FromString(msg.value()))
                    if first_only:
                        at_end.add((msg.topic(), msg.partition()))
        if len(at_end) < len(assigned):
            raise RuntimeError(f"{topics}: not read to the end within {timeout_s:.0f}s")
        return events
    finally:
        consumer.close()


def window_end(seconds: int) -> int:
    return (seconds // WINDOW_S + 1) * WINDOW_S


def _s2_token(lat: float, long: float) -> str:
    cell = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, long)).parent(13).id()
    return str(cell - (1 << 64) if cell >= 1 << 63 else cell)  # as Java's signed long, as S2Id returns it


def surge_truth(events: list[Message]) -> Counter[Key]:
    """Completed bookings per (city, S2 cell level 13, vehicle type, window end)."""
    completed = booking_log_pb2.BookingStatus.Value("COMPLETED")
    out: Counter[Key] = Counter()
    for e in events:
        if e.status == completed:  # type: ignore[attr-defined]
            vehicle = common_pb2.VehicleType.Name(e.vehicle_type)  # type: ignore[attr-defined]
            key = (str(e.city_id), _s2_token(e.lat, e.long), vehicle)  # type: ignore[attr-defined]
            out[(*key, window_end(e.event_timestamp.seconds))] += 1  # type: ignore[attr-defined]
    return out


def api_truth(events: list[Message]) -> dict[Key, tuple[int, float]]:
    """(requests, max latency) per (path, status code, window end)."""
    out: dict[Key, tuple[int, float]] = {}
    for e in events:
        key = (e.path, e.status_code, window_end(e.event_timestamp.seconds))  # type: ignore[attr-defined]
        n, worst = out.get(key, (0, 0.0))
        out[key] = (n + 1, max(worst, e.latency_ms))  # type: ignore[attr-defined]
    return out


def surge_stored(vm: str, metric: str) -> Counter[Key]:
    victoria.flush(vm)
    out: Counter[Key] = Counter()
    for series in victoria.export(vm, metric):
        m = series["metric"]
        for ts, value in zip(series["timestamps"], series["values"], strict=True):
            out[(m["tag_city_id"], m["tag_s2id"], m["tag_vehicle_type"], ts // 1000)] = int(value)
    return out


def api_stored(dsn: str, password: str, table: str) -> dict[Key, tuple[int, float]]:
    with psycopg.connect(dsn, password=password) as conn:
        rows = conn.execute(f"SELECT path, status_code, requests, max_latency_ms, window_timestamp FROM {table}")
        return {(p, int(s), int(w.timestamp())): (int(n), float(lat)) for p, s, n, lat, w in rows}


def compare(
    dagger: str,
    want: dict[Key, Any],
    got: dict[Key, Any],
    watermark: datetime,
    first_event_s: float,
    events_of: Callable[[Any], int],
) -> Comparison:
    """The windows closed by `watermark` whose events are all on the broker, in the count and in the sink: from the
    one after the first event's (a restarted stack's first minute may share its window with the last one before)."""
    lowest = window_end(int(first_event_s)) + WINDOW_S
    closed = watermark.astimezone(UTC).timestamp()

    def within(key: Key) -> bool:
        return lowest <= key[-1] <= closed

    want = {k: v for k, v in want.items() if within(k)}
    got = {k: v for k, v in got.items() if within(k)}
    return Comparison(
        dagger,
        windows=len({k[-1] for k in want}),
        rows=len(got),
        events=sum(events_of(v) for v in want.values()),
        missing={k: v for k, v in want.items() if got.get(k) != v},
        unexpected={k: v for k, v in got.items() if k not in want},
    )


MESSAGES: dict[str, type[Message]] = {
    "daggers.events.BookingLog": booking_log_pb2.BookingLog,
    "daggers.events.ApiLog": api_log_pb2.ApiLog,
}
