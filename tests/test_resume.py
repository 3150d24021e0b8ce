"""Daggers resumed from their checkpoints, as the platform does all day: re-runs over appended events, a broker that
was replaced, uneven backlogs, one dagger's Kafka sink read by another, a checkpoint reused for another query; and
the source's Kafka clients resuming as soon as a network partition heals."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from copy import deepcopy
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

from jobs.engine.checkpoint import CheckpointError, last_committed_batch
from jobs.engine.kafka_source import range_reader_config
from jobs.engine.offsets import DataLossError
from jobs.engine.plan import DaggerPlan, plan_dagger
from jobs.engine.runner import run
from jobs.engine.source_stream import SourceStream
from jobs.spec import KafkaSettings, StreamSpec, parse_spec
from loki.faults.network import Link, remove_rules
from odin.apis import victoria
from odin.kafka.topics import ensure_topics
from odin.paths import BIN_DIR
from odin.spec import StackSpec
from odin.stack import Stack
from odin.traffic.generator import booking_logs, produce
from tests.support.events import START, surge_truth, window_end
from tests.support.kafka import consume_all, new_topic
from tests.support.services import Services
from tests.support.sinks import log_rows, surge_rows, utc_iso
from tests.support.specs import spec_dict, spec_file, surge_spec


def plan_for(spec: dict[str, Any], tmp_path: Path) -> DaggerPlan:
    return plan_dagger(parse_spec({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))


def test_a_second_once_run_over_appended_events_equals_one_run_over_all(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """`--once` over events A, then again after events B were appended: the sink equals one aggregation over A and
    the on-time events of B. B's first events fall into windows the first run emitted (within the watermark delay)
    and update them; a few events far behind the watermark are late: dropped, and counted as late_events."""
    topic = new_topic(services)
    a = list(booking_logs(6_000, seed=70, start=START, rate=50))  # 120 s
    last_a = max(e.event_timestamp.seconds for e in a)
    b = list(booking_logs(6_000, seed=71, start=START + timedelta(seconds=last_a - START.timestamp() - 4), rate=50))
    late = list(booking_logs(30, seed=72, start=START + timedelta(seconds=20), rate=10))
    for e in late:
        e.status = 4  # COMPLETED: they would be counted if they were not dropped
    out = tmp_path / "surge.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    spec["telemetry_url"] = services.victoria_metrics_url
    plan = plan_for(spec, tmp_path)

    produce(services.kafka_bootstrap, topic, iter(a), partitions=2)
    first = run(plan, spark, once=True)
    assert surge_rows(out) == surge_truth(a)  # every window closed, the last ones included
    assert first.late_events == 0

    produce(services.kafka_bootstrap, topic, iter(b + late), partitions=2)
    second = run(plan, spark, once=True)
    assert second.input_rows == len(b) + len(late)
    assert surge_rows(out) == surge_truth(a + b)
    # The reader drops the others (WHERE status). Spark counts late groups (window and key), and these late events
    # have distinct keys, so the count is theirs.
    assert second.late_events == sum(e.status == 4 for e in late)
    dagger = f'{{dagger="tests.{spec["name"]}"}}'
    counted = victoria.export(services.victoria_metrics_url, f"dagger_metrics_late_events{dagger}")
    assert sum(sum(s["values"]) for s in counted) == second.late_events


def test_a_replaced_broker_is_data_loss_unless_the_stream_allows_it(
    own_broker: tuple, services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    stack, stack_spec = own_broker
    bootstrap = f"127.0.0.1:{stack_spec.ports['kafka']}"
    topic = f"t-{uuid.uuid4().hex[:10]}"
    events = list(booking_logs(4_000, seed=80, start=START, rate=50))
    out = tmp_path / "surge.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    spec["streams"][0]["kafka"]["bootstrap_servers"] = bootstrap
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 2})
    produce(bootstrap, topic, iter(events), partitions=2)
    run(plan_for(spec, tmp_path), spark, once=True)
    assert surge_rows(out) == surge_truth(events)

    # The broker is replaced: same address, the topic recreated with fewer events than the checkpoint has read.
    stack.down()
    assert stack.up(stack_spec).ok
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 2})
    fresh = list(booking_logs(1_000, seed=81, start=START + timedelta(hours=1), rate=50))
    produce(bootstrap, topic, iter(fresh), partitions=2)

    with pytest.raises(DataLossError) as e:
        run(plan_for(spec, tmp_path), spark, once=True)
    assert f"{topic}[0]: the checkpoint resumes at offset 2000, the broker holds [0, 500)" in str(e.value)
    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "run", "--once", str(spec_file(spec, tmp_path))], capture_output=True, text=True
    )
    assert r.returncode == 1 and "--reset-checkpoint" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]

    spec["streams"][0]["kafka"]["fail_on_data_loss"] = False
    result = run(plan_for(spec, tmp_path), spark, once=True)
    assert result.input_rows == len(fresh)
    assert surge_rows(out) == surge_truth(events) + surge_truth(fresh)  # distinct windows: an hour apart


def test_a_batch_planned_before_its_broker_lost_the_data_replays_without_it_when_loss_is_allowed(
    own_broker: tuple, services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """A batch was planned, then its broker lost the data (Tansu restarted: Loki's broker-loss). With
    fail_on_data_loss: false its replay once waited a minute for the records, failed, and failed again on every
    restart: a crashloop. Now the replay asks the broker and skips what is gone, as Spark's Kafka source does."""
    stack, stack_spec = own_broker
    bootstrap = f"127.0.0.1:{stack_spec.ports['kafka']}"
    topic = f"t-{uuid.uuid4().hex[:10]}"
    spec = surge_spec(services, topic, {"type": "log", "path": str(tmp_path / "surge.jsonl")})
    spec["streams"][0]["kafka"]["bootstrap_servers"] = bootstrap
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 2})
    produce(bootstrap, topic, booking_logs(2_000, seed=82, start=START, rate=50), partitions=2)
    plan = plan_for(spec, tmp_path)
    run(plan, spark, once=True)
    last = last_committed_batch(plan.checkpoint)
    (plan.checkpoint / "commits" / str(last)).unlink()  # planned, not committed: the next run replays it
    (plan.checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)

    stack.down()
    assert stack.up(stack_spec).ok
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 2})
    with pytest.raises(DataLossError, match=rf"{topic}\[[01]\]: the checkpoint resumes at offset \d+"):
        run(plan_for(spec, tmp_path), spark, once=True)

    spec["streams"][0]["kafka"]["fail_on_data_loss"] = False
    # a sink of its own: the first run's closing batches (later batch ids) are in the first one's record
    spec["sink"] = {"type": "log", "path": str(tmp_path / "after-loss.jsonl")}
    run(plan_for(spec, tmp_path), spark, once=True)  # the replay skips what is gone
    fresh = list(booking_logs(1_000, seed=83, start=START + timedelta(hours=1), rate=50))
    produce(bootstrap, topic, iter(fresh), partitions=2)
    assert run(plan_for(spec, tmp_path), spark, once=True).input_rows == len(fresh)


def test_three_partitions_with_uneven_backlogs_and_a_small_limit_are_exact(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """The planner once put the limit's rounding remainder on the largest partition whatever its backlog, planned
    past a partition's end, and the reader waited for offsets that do not exist."""
    topic = new_topic(services, partitions=3)
    events = list(booking_logs(3_003, seed=90, start=START, rate=50))
    produce(services.kafka_bootstrap, topic, iter(events[:3_000]), partitions=3)  # 1000 each
    produce(services.kafka_bootstrap, topic, iter(events[3_000:]), partitions=1)  # partition 0: 1 more
    out = tmp_path / "surge.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 1_000
    run(plan_for(spec, tmp_path), spark, once=True)
    assert surge_rows(out) == surge_truth(events)


def test_a_checkpoint_is_refused_for_another_query_and_kept_for_another_sink(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic(services)
    events = list(booking_logs(2_000, seed=95, start=START, rate=50))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    spec = surge_spec(services, topic, {"type": "log", "path": str(tmp_path / "a.jsonl")})
    run(plan_for(spec, tmp_path), spark, once=True)

    other = {**spec, "sql": spec["sql"].replace("count(1) AS", "sum(total_fare) AS")}
    with pytest.raises(CheckpointError) as e:
        run(plan_for(other, tmp_path), spark, once=True)
    message = str(e.value)
    assert "the query keeps other state: was aggregate by" in message and "SUM(total_fare)" in message
    assert "--reset-checkpoint" in message and "new name" in message

    moved = {**spec, "streams": [{**spec["streams"][0], "topics": [new_topic(services)]}]}
    with pytest.raises(CheckpointError, match="topics"):
        run(plan_for(moved, tmp_path), spark, once=True)

    # Another sink and trigger interval: the checkpoint is kept. Only new events are read; the new sink gets the
    # windows the checkpoint held open (the first run emitted them on closing, the checkpoint finalises them now).
    later = list(booking_logs(500, seed=96, start=START + timedelta(hours=1), rate=50))
    produce(services.kafka_bootstrap, topic, iter(later), partitions=2)
    kept = {**spec, "trigger_interval": "3s", "sink": {"type": "log", "path": str(tmp_path / "b.jsonl")}}
    result = run(plan_for(kept, tmp_path), spark, once=True)
    assert result.input_rows == len(later)
    assert surge_rows(tmp_path / "b.jsonl") == surge_truth(events + later)

    # --reset-checkpoint reads everything again; the sink takes the new batches as new.
    result = run(plan_for(spec, tmp_path), spark, once=True, reset_checkpoint=True)
    assert result.input_rows == len(events) + len(later)
    assert surge_rows(tmp_path / "a.jsonl") == surge_truth(events + later)


SURGE_WINDOW_PROTO = """syntax = "proto3";
package tests.chain;
import "google/protobuf/timestamp.proto";
message SurgeWindow {
  int64 tag_city_id = 1;
  string tag_s2id = 2;
  string tag_vehicle_type = 3;
  int64 num_of_bookings = 4;
  google.protobuf.Timestamp window_timestamp = 5;
}
"""
CITY_SQL = """SELECT tag_city_id, sum(num_of_bookings) AS bookings,
       TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end
FROM `surge` GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), tag_city_id"""


def test_a_dagger_reads_another_daggers_kafka_sink_exactly(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """Teams chain daggers: B aggregates the protobuf records A's Kafka sink wrote. A's sink is transactional, so its
    topic ends in a transaction marker, which once crashed the reader's probe of a partition's end."""
    topic = new_topic(services)
    events = list(booking_logs(6_000, seed=97, start=START, rate=20))  # 5 minutes
    produce(services.kafka_bootstrap, topic, iter(events), partitions=2)
    proto = tmp_path / "surge_window.proto"
    proto.write_text(SURGE_WINDOW_PROTO)
    chained = f"surge-{uuid.uuid4().hex[:8]}"
    sink = {"type": "kafka", "bootstrap_servers": services.kafka_bootstrap, "topic": chained}
    a = surge_spec(services, topic, {**sink, "format": "proto", "proto": "tests.chain.SurgeWindow"})
    a["schemas"] = [str(proto)]
    run(plan_for(a, tmp_path / "a"), spark, once=True)

    out = tmp_path / "city.jsonl"
    b = spec_dict(services, "surge", chained, "tests.chain.SurgeWindow", CITY_SQL, {"type": "log", "path": str(out)})
    b["schemas"] = [str(proto)]
    b["streams"][0]["timestamp_field"] = "window_timestamp"
    run(plan_for(b, tmp_path / "b"), spark, once=True)
    truth: Counter[tuple[int, str]] = Counter()
    for (city, _s2, _vehicle, end), n in surge_truth(events).items():
        truth[(city, window_end(int(datetime.fromisoformat(end).timestamp()), 300))] += n
    got = {(r["tag_city_id"], utc_iso(r["window_end"])): r["bookings"] for r in log_rows(out)}
    assert got == dict(truth)


def test_a_partition_far_ahead_makes_no_other_event_late_and_late_events_are_dead_letters(
    services: Services, spark: SparkSession, tmp_path: Path
) -> None:
    """Partition 0 ends in markers a day ahead while partition 1 is a minute behind. Spark's own watermark (the
    latest event time of the stream) jumped to the markers and dropped every later event of partition 1; the
    stream's watermark is the minimum over partitions, so none is late. Events that really are late go to the
    dead-letter topic with reason `late` and are counted one by one (Spark counts groups)."""
    topic = new_topic(services)
    ahead = list(booking_logs(3_000, seed=100, start=START, rate=25))  # 120 s
    markers = list(booking_logs(3, seed=101, start=START + timedelta(days=1), rate=1))
    behind = list(booking_logs(1_500, seed=102, start=START, rate=25))  # 60 s
    catching_up = list(booking_logs(1_500, seed=103, start=START + timedelta(seconds=60), rate=25))
    for e in markers:
        e.status = 4
    out = tmp_path / "surge.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)})
    plan = plan_for(spec, tmp_path)

    produce(services.kafka_bootstrap, topic, iter(ahead + markers), partition=0)
    produce(services.kafka_bootstrap, topic, iter(behind), partition=1)
    first = run(plan, spark, once=True)
    produce(services.kafka_bootstrap, topic, iter(catching_up), partition=1)
    second = run(plan, spark, once=True)
    assert surge_rows(out) == surge_truth(ahead + markers + behind + catching_up)
    assert (first.late_events, second.late_events, first.dropped_by_watermark, second.dropped_by_watermark) == (0,) * 4
    assert not consume_all(services.kafka_bootstrap, f"{topic}.dlq")

    # Partition 1 is at 120 s now: the watermark is 60 s (the delay), and the first minute's windows are closed.
    late = [deepcopy(behind[0]) for _ in range(4)] + [deepcopy(behind[1]) for _ in range(3)]
    for e in late:
        e.status = 4  # COMPLETED: they would be counted if they were not late
    produce(services.kafka_bootstrap, topic, iter(late), partition=1)
    third = run(plan, spark, once=True)
    assert (third.input_rows, third.late_events, third.dropped_by_watermark) == (len(late), len(late), 0)
    assert surge_rows(out) == surge_truth(ahead + markers + behind + catching_up)
    dead = consume_all(services.kafka_bootstrap, f"{topic}.dlq")
    assert len(dead) == len(late)
    for m in dead:
        headers = dict(m.headers())
        assert headers["dagger.error"].startswith(b"late: ") and headers["dagger.partition"] == b"1", headers


def test_a_partition_of_many_small_batches_is_read_on_tansu(own_broker: tuple[Stack, StackSpec]) -> None:
    """Tansu's memory storage looks an offset up through every batch of the partition, and a fetch it cannot
    answer within the consumer's wait comes back empty, every time: with a 10 ms wait, a perf stream of 60,000
    batches (20,000 events/s for a few minutes) stalled the dagger's reads for good in a full-scale Loki run."""
    _, spec = own_broker
    bootstrap = f"127.0.0.1:{spec.ports['kafka']}"
    topic = f"small-batches-{uuid.uuid4().hex[:8]}"
    ensure_topics({"bootstrap.servers": bootstrap}, {topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 10,
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    for _ in range(600_000):
        producer.produce(topic, b"x" * 80, partition=0)
        producer.poll(0)
    assert producer.flush(120) == 0
    stream = StreamSpec(table="t", topics=[topic], proto="daggers.events.BookingLog",
                        kafka=KafkaSettings(bootstrap_servers=bootstrap))  # fmt: skip
    # configured as the dagger's reads of planned ranges are
    consumer = Consumer(range_reader_config(SourceStream.of(stream), topic))
    try:
        consumer.assign([TopicPartition(topic, 0, 300_000)])
        deadline, got = time.monotonic() + 20, []
        while not got and time.monotonic() < deadline:
            got = consumer.consume(1000, timeout=0.5)
        assert got and got[0].error() is None and got[0].offset() == 300_000
    finally:
        consumer.close()


PLANNER_IN_NAMESPACE = """
import sys, time
from confluent_kafka import KafkaException
from jobs.engine.kafka_source import KafkaStreamReader, SourceOptions
from jobs.engine.offsets import Partition
from jobs.engine.source_stream import SourceStream
from jobs.spec import KafkaSettings, StreamSpec
bootstrap, topic = sys.argv[1:]
stream = StreamSpec(table="t", topics=[topic], proto="daggers.events.BookingLog",
                    kafka=KafkaSettings(bootstrap_servers=bootstrap))
planner = KafkaStreamReader(SourceOptions(SourceStream.of(stream), None, []))
print("connecting", time.time(), flush=True)
deadline, seen = time.monotonic() + 90, 0
while time.monotonic() < deadline:
    try:
        extents, _ = planner.extents()  # as each planning of a batch asks: one client for the query's life
    except KafkaException:
        continue
    end = extents[Partition(topic, 0)].end if extents else 0
    if end != seen:
        print(end, time.time(), flush=True)
        seen = end
"""


@dataclass
class Partitionable:
    """A topic, a link to Kafka (loki/faults/network.py) and a planner-like client behind it: one client for its life,
    asking where the topic ends, as a dagger's planner does."""

    link: Link
    bootstrap: str
    topic: str
    planner: subprocess.Popen[str] | None = None

    def start(self) -> float:
        """Starts the planner; returns when it began connecting."""
        command = [sys.executable, "-c", PLANNER_IN_NAMESPACE, self.bootstrap, self.topic]
        self.planner = subprocess.Popen(self.link.wrap(command), stdout=subprocess.PIPE, text=True)
        return float(self._line()[1])

    def _line(self) -> list[str]:
        assert self.planner is not None and self.planner.stdout is not None
        line = self.planner.stdout.readline().split()
        assert line, "the planner stopped: it saw nothing new for 90 s"
        return line

    def seen(self, end: int) -> float:
        """When the planner saw the topic end at `end`."""
        while (line := self._line())[0] != str(end):
            pass
        return float(line[1])

    def add_event(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap})  # from the host, not through the link
        producer.produce(self.topic, b"x", partition=0)
        assert producer.flush(30) == 0


@pytest.fixture
def partitionable(services: Services) -> Iterator[Partitionable]:
    port = int(services.kafka_bootstrap.rsplit(":", 1)[1])
    link = Link.create(f"t-heal-{uuid.uuid4().hex[:6]}", [port], [])
    setup = Partitionable(link, services.kafka_bootstrap, new_topic(services, partitions=1))
    try:
        setup.add_event()
        yield setup
    finally:
        if setup.planner is not None:
            setup.planner.kill()
            setup.planner.wait()
        link.close()


def test_a_client_that_connects_during_a_partition_reaches_kafka_soon_after_it_heals(
    partitionable: Partitionable,
) -> None:
    """A partition drops the SYN of a connection opened while it lasts; the kernel sends it again 1, 2, 3, 4, 5, 7,
    11.4, 19.6 and 35.7 s after the connect, and librdkafka gives up on it after `socket.connection.setup.timeout.ms`
    (30 s by default). A heal 21 s after the connect then waited 9 s for the next attempt: a Loki network-partition's
    batch went on for 25 s after its heal."""
    rules = partitionable.link.rules()
    partitionable.link.add(rules)
    connecting = partitionable.start()
    time.sleep(max(0.0, connecting + 21 - time.time()))  # the point: the heal comes 21 s after the connect
    remove_rules(partitionable.link.netns, rules)
    healed = time.time()
    assert partitionable.seen(1) - healed < 5


def test_a_client_connected_before_a_partition_reaches_kafka_soon_after_it_heals(
    partitionable: Partitionable,
) -> None:
    """Packets a partition dropped are sent again when the kernel's retry timer says, doubling each time: what a
    connection sent as a 16 s partition began goes again at 12.6 and 25.4 s, and librdkafka ends a connection only
    once a request has gone unanswered for `socket.timeout.ms` (60 s by default). The planner then saw nothing new
    for 11.5 s after the heal (23 s after a 30 s partition, as in Loki's network-partition)."""
    partitionable.start()
    partitionable.seen(1)
    rules = partitionable.link.rules()
    partitionable.link.add(rules)
    time.sleep(16)  # the point: a 16 s partition
    remove_rules(partitionable.link.netns, rules)
    healed = time.time()
    partitionable.add_event()
    assert partitionable.seen(2) - healed < 5
