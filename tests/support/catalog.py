"""The catalog's streams in tests: a stream of a test's own synced into the registry, and events produced to and read
back from a catalog stream, with the closing markers that move its watermark."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from daggers.events import booking_log_pb2

from odin.kafka.topics import ensure_topics
from odin.traffic.generator import produce
from tests.support.kafka import consume_all
from tests.support.services import Services

# When the catalog streams' events start. Recent: VictoriaMetrics keeps 30 days (tests/support/events.py has the
# engine tests' fixed START).
START = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
CATALOG = "booking-log"
PERF_STREAM = "booking-log-perf"  # a stream of its own: the lifecycle tests' daggers read booking-log
CLOSE = START + timedelta(minutes=8)  # where the perf stream tests' closing markers move the watermark


def catalog_stream(services: Services, registry: Any, topic: str, bootstrap: str | None = None) -> str:
    """A catalog stream of the test's own over BookingLog `topic` (on `bootstrap`, default the stack's broker),
    synced into the registry as `odin catalog sync` does it: a deployed dagger reads catalog streams only."""
    from odin.catalog import Catalog
    from odin.catalog import sync as catalog_sync

    name, cluster = f"s{topic.lower().replace('_', '-')}"[:63], f"k{uuid.uuid4().hex[:6]}"
    catalog = Catalog.model_validate(
        {
            "kafka_clusters": {cluster: {"bootstrap_servers": {"local": bootstrap or services.kafka_bootstrap}}},
            "streams": [
                {"name": name, "kafka_cluster": cluster, "topics": [topic], "proto": "daggers.events.BookingLog"}
            ],
        }
    )
    catalog_sync.sync(registry, catalog, "local", services.kafka_bootstrap, actor="tests")
    return name


def ensure_catalog_topics(services: Services, registry: Any, stream: str = CATALOG) -> list[str]:
    known = registry.stream(stream)
    assert known is not None, "odin up syncs the catalog into the stack's registry"
    ensure_topics({"bootstrap.servers": known.bootstrap_servers}, dict.fromkeys(known.topics, 2))
    return list(known.topics)


def produce_to_stream(
    services: Services,
    registry: Any,
    events: list[booking_log_pb2.BookingLog],
    close_at: datetime,
    stream: str = CATALOG,
) -> None:
    """`events` to the stream's first topic, and closing markers at `close_at` to every partition of its topics, as
    a live stream's topics all carry events: a partition that has shown none holds the watermark back until it
    counts as idle (the stream's idle_timeout), which would delay every window by that much."""
    first, *others = ensure_catalog_topics(services, registry, stream)
    bootstrap = registry.stream(stream).bootstrap_servers  # a perf twin is on the perf cluster
    produce(bootstrap, first, iter([*events, *closing_markers(close_at)]), partitions=2)
    for topic in others:
        produce(bootstrap, topic, iter(closing_markers(close_at)), partitions=2)


def catalog_events(
    services: Services, registry: Any, stream: str = CATALOG, before: datetime | None = None
) -> list[booking_log_pb2.BookingLog]:
    """Every booking on the catalog stream's topics, or those before `before` (the closing markers' time): a perf
    stream also carries Loki's live load, whose windows no closing marker of a test closes."""
    out = []
    for topic in registry.stream(stream).topics:
        for m in consume_all(registry.stream(stream).bootstrap_servers, topic):
            e = booking_log_pb2.BookingLog()
            e.ParseFromString(m.value())
            if before is None or e.event_timestamp.seconds < before.timestamp():
                out.append(e)
    return out


def closing_markers(at: datetime) -> list[booking_log_pb2.BookingLog]:
    """One booking per partition that is not COMPLETED (the query drops it) but moves the watermark to `at`."""
    return [
        booking_log_pb2.BookingLog(
            order_number=f"marker-{at:%H%M}-{p}", status=1, event_timestamp={"seconds": int(at.timestamp())}
        )
        for p in range(2)
    ]
