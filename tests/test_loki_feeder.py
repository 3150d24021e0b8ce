"""A Loki feeder against a broker of the test's own that dies and comes back empty (Tansu keeps topics in memory):
the feed goes on with a new producer, and every event keeps its fate."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

from loki.broker_check import check
from loki.load.feeder import ACKED, FAILED, Feed, run_feed
from loki.playbook import Feeder, Steady
from odin.kafka.topics import ensure_topics
from odin.spec import StackSpec
from odin.stack import Stack
from tests.support.services import Services


def test_a_feed_goes_on_through_a_broker_that_came_back_empty(own_broker: tuple[Stack, StackSpec]) -> None:
    """The old producer waits on an id the new broker never gave (or fails with UNKNOWN_PRODUCER_ID, which CI saw
    raised from a poll, ending the feed): a new producer goes on, and the events after it are acknowledged."""
    stack, spec = own_broker
    bootstrap = f"127.0.0.1:{spec.ports['kafka']}"
    topic = f"feed-{uuid.uuid4().hex[:8]}-perf"
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 2})
    feeder = Feeder(stream="booking-log-perf", rate=Steady(events_per_s=100), duration=timedelta(seconds=90))
    stop, lost = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def feed() -> None:
        try:
            # a buffer of 200 events fills while the broker is away: sends wait for room, then go as they were made
            outcome["feed"] = run_feed(
                feeder,
                "daggers.events.BookingLog",
                [topic],
                bootstrap,
                stop,
                reset=lost,
                linger_s=10,
                buffer_events=200,
            )
        except Exception as e:  # the assertion below shows it
            outcome["error"] = e

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    time.sleep(5)  # the point, not a wait: the feed runs ~500 events at 100/s before its broker goes
    stack.down()  # the broker and everything it held are gone
    assert stack.up(spec).ok
    back = time.time()
    # Back with more partitions (3 asked; Tansu makes 4 if the old producer's retries create the topic first)
    partitions = ensure_topics({"bootstrap.servers": bootstrap}, {topic: 3})[topic]
    time.sleep(3)  # the old producer meets the new broker before the feeder is told (as in a Loki run)
    lost.set()
    told = time.time()
    time.sleep(12)  # the point, not a wait: the feed goes on for a while on its new producer
    stop.set()
    thread.join(60)
    assert not thread.is_alive() and "error" not in outcome, outcome
    result = outcome["feed"]
    assert isinstance(result, Feed)
    counts = result.counts()
    assert (
        counts["sent"] >= 1000 and counts["acknowledged"] + counts["failed"] + counts["indeterminate"] == counts["sent"]
    )
    assert result.errors.get("producer renewed: its broker lost its state") == 1, result.errors
    # What was sent after the renewal, the new broker acknowledged.
    late = result.times[: counts["sent"]] > told + 2
    acked_late = (result.fates[: counts["sent"]] == ACKED) & late
    assert acked_late.sum() >= 0.9 * late.sum() > 0, result.errors
    # The events the feed regenerates are those it sent, retries and renewals included: the broker holds every
    # event acknowledged after the loss, and only what it acknowledged before is gone (a feeder that made an event
    # anew for each retry had all of them "gone" in a full-scale broker-loss run).
    digest = result.digest(60.0)
    # What the feed kept is what it sent: the same digest as the events regenerated from the seed (a larger feed's)
    assert result.kept is not None and len(result.kept) >= counts["sent"]
    kept, result.kept = result.kept, None
    regenerated, result.kept = result.digest(60.0), kept
    assert vars(digest) == vars(regenerated)
    broker = check({topic: bootstrap}, [digest])
    acked = result.fates[: counts["sent"]] == ACKED
    assert 0 < broker.gone <= int((acked & (result.times[: counts["sent"]] < back)).sum()), broker.to_dict()
    late_hashes = {hash(m.SerializeToString()) for i, m in result.events() if m is not None and acked_late[i]}
    assert late_hashes and not late_hashes & broker.gone_hashes
    # ...and the renewed feed went to every partition the topic came back with (one left out would hold the
    # consumers' watermark until their idle timeout)
    fed_late = {result.targets[slot] for slot in result.slots[: counts["sent"]][acked_late]}
    assert partitions > 2 and fed_late == {(topic, n) for n in range(partitions)}


def test_every_partition_of_an_existing_topic_is_fed(services: Services) -> None:
    """A perf topic mirrored from a data stream has its partitions, not the feeder's: each one gets load (a
    partition without any held a full-scale run's watermark, and so its freshness probe, for a minute)."""
    topic = f"feed-{uuid.uuid4().hex[:8]}-perf"
    config = {"bootstrap.servers": services.kafka_bootstrap}
    ensure_topics(config, {topic: 4})
    counts = ensure_topics(config, {topic: 2})  # as a run asks for its feeder's topics: existing, so left as is
    assert counts == {topic: 4}
    feeder = Feeder(stream="booking-log-perf", rate=Steady(events_per_s=400), duration=timedelta(seconds=2))
    feed = run_feed(feeder, "daggers.events.BookingLog", [topic], services.kafka_bootstrap, threading.Event(),
                    linger_s=10)  # fmt: skip
    assert feed.counts()["acknowledged"] == feed.counts()["sent"] > 0
    assert sorted(feed.acked_ends()) == [(topic, p) for p in range(4)]


def test_events_the_producer_said_failed_but_the_broker_stored_are_found(services: Services) -> None:
    """A producer's error is not always the broker's: events purged from a producer renewed after a fatal error may
    have been written all the same (a CI broker-loss run had a dagger count 309 events beyond the truth). The broker
    check finds every such event, and only those; the truth then counts them (loki/verify.py)."""
    topic = f"feed-{uuid.uuid4().hex[:8]}-perf"
    feeder = Feeder(stream="booking-log-perf", rate=Steady(events_per_s=200), duration=timedelta(seconds=2))
    feed = run_feed(feeder, "daggers.events.BookingLog", [topic], services.kafka_bootstrap, threading.Event(),
                    linger_s=10)  # fmt: skip
    sent = feed.counts()["sent"]
    assert feed.counts()["acknowledged"] == sent > 100
    said_failed = list(range(0, sent, 7))  # the producer's verdict on these, though the broker acknowledged them
    feed.fates[said_failed], feed.offsets[said_failed] = FAILED, -1
    digest = feed.digest(60.0)
    broker = check({topic: services.kafka_bootstrap}, [digest])
    n = len(said_failed)
    assert (broker.failed_but_stored, broker.acknowledged, broker.gone) == (n, sent - n, 0), broker.to_dict()
    assert broker.stored_hashes == {h for hashes in digest.failed.values() for h in hashes}
