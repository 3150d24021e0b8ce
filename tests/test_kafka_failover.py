"""Kafka failover with two real brokers (odin/kafka/mirror.py, jobs/health/kafka_failover.py): the mirror job copies a
catalog
stream's topic into the failover broker with every offset kept; the primary broker is killed (Tansu keeps topics in
memory: its data is gone); the health check switches the stream to the mirror and restarts its dagger there, which
resumes its checkpoint: the sink stays exact."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer

from jobs.engine.checkpoint import Identity, StreamIdentity, differences
from jobs.health.checkup import Checkup
from jobs.health.judge import HealthPolicy
from jobs.health.kafka_failover import reachable
from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.catalog import Catalog
from odin.catalog import sync as catalog_sync
from odin.endpoints import DATA_BROKER, Endpoints
from odin.kafka.mirror import Mirror, MirrorError
from odin.kafka.topics import ensure_topics
from odin.paths import temporary_state_dir
from odin.ports import stack_ports
from odin.processes import of_node
from odin.spec import Service
from odin.stack import Stack
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import closing_markers
from tests.support.events import surge_truth
from tests.support.services import Services, TeamCluster
from tests.support.sinks import influx_surge, sink_reaches
from tests.support.specs import surge_spec


@pytest.fixture
def two_brokers() -> Iterator[tuple[Stack, Stack]]:
    """A primary and a failover broker of this test's own (the primary gets killed)."""
    with temporary_state_dir("primary") as p, temporary_state_dir("mirror") as m:
        stacks = (Stack("local", p), Stack("local", m))
        try:
            for stack in stacks:
                assert stack.up(stack.resolve(1, {Service.kafka_broker}, stack_ports())).ok
            yield stacks
        finally:
            for stack in stacks:
                stack.down()


def test_a_checkpoint_resumes_on_the_mirror_of_its_catalog_cluster_and_nowhere_else() -> None:
    def made_for(servers: str, cluster: str | None) -> Identity:
        stream = StreamIdentity(table="t", bootstrap_servers=servers, topics=["a"], proto="p.M", offsets=cluster)
        return Identity(dagger="x.y", streams=[stream], state=[], state_store="memory", spec_version="0")

    assert differences(made_for("primary:9092", "mainstream"), made_for("mirror:9092", "mainstream")) == []
    moved = differences(made_for("primary:9092", None), made_for("mirror:9092", None))  # not a catalog stream
    assert moved == ["stream t: it was made for bootstrap_servers primary:9092, the spec says mirror:9092"]
    other = differences(made_for("primary:9092", "mainstream"), made_for("mirror:9092", "other"))
    assert other and "bootstrap_servers" in other[0]


def _bootstrap(stack: Stack) -> str:
    return Endpoints(stack.nodes()).kafka_bootstrap


def _mirrored(job: Mirror, want: int, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while job.stats.copied < want and time.monotonic() < deadline:
        time.sleep(0.2)
    return job.stats.copied


def test_the_mirror_keeps_offsets_and_refuses_a_topic_it_cannot_keep_them_for(
    two_brokers: tuple[Stack, Stack],
) -> None:
    primary, mirror = (_bootstrap(s) for s in two_brokers)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    events = list(booking_logs(500, seed=80, start=datetime(2026, 1, 1, tzinfo=UTC), rate=10))
    ensure_topics({"bootstrap.servers": primary}, {topic: 2})
    produce(primary, topic, iter(events), partitions=2)
    job = Mirror(primary, mirror, [topic])
    try:
        ends = job.prepare()
        assert ends == {(topic, 0): 0, (topic, 1): 0}
        copied = 0
        for _ in range(50):
            copied += job.copy(timeout_s=0.5)
            if copied == len(events):
                break
        assert copied == len(events) and sum(job.stats.ends.values()) == len(events)
    finally:
        job.close()
    again = Mirror(primary, mirror, [topic])  # resumes where the target ends: nothing twice
    try:
        assert again.prepare() == job.stats.ends and again.copy(timeout_s=1) == 0
    finally:
        again.close()
    stray = Producer({"bootstrap.servers": mirror})  # something else writes to the mirror's topic
    stray.produce(topic, b"x", partition=0)
    stray.flush(10)
    produce(primary, topic, iter(events[:10]), partitions=2)
    third = Mirror(primary, mirror, [topic])
    try:
        with pytest.raises(MirrorError, match=r"\[0\] offset \d+ differs between"):
            third.prepare()
    finally:
        third.close()


def test_a_dead_primary_broker_switches_the_stream_to_its_mirror_and_the_sink_stays_exact(
    two_brokers: tuple[Stack, Stack], services: Services, team_cluster: TeamCluster
) -> None:
    primary, mirror = (_bootstrap(s) for s in two_brokers)
    registry, team = team_cluster.registry, team_cluster.team
    name, cluster = f"fo-{uuid.uuid4().hex[:6]}", f"k{uuid.uuid4().hex[:6]}"
    topic = f"{name}-bookings"
    catalog = Catalog.model_validate(
        {
            "kafka_clusters": {
                cluster: {"bootstrap_servers": {"local": primary}, "failover_bootstrap_servers": {"local": mirror}}
            },
            "streams": [
                {"name": name, "kafka_cluster": cluster, "topics": [topic], "proto": "daggers.events.BookingLog"}
            ],
        }
    )
    catalog_sync.sync(registry, catalog, "local", primary, actor="tests")
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    first = [*booking_logs(1_500, seed=81, start=start, rate=10), *closing_markers(start + timedelta(minutes=5))]
    ensure_topics({"bootstrap.servers": primary}, {topic: 2})
    produce(primary, topic, iter(first), partitions=2)
    job, stop = Mirror(primary, mirror, [topic]), threading.Event()
    copier = threading.Thread(target=job.run, args=(stop,), daemon=True)
    copier.start()

    measurement = f"{team}_surge_kfo_{uuid.uuid4().hex[:6]}"
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement}
    fields = surge_spec(services, topic, sink) | {"team": team, "name": "surge-kfo", "parallelism": 1}
    fields["streams"] = [{"table": "data_stream", "stream": name, "kafka": {"max_events_per_trigger": 20_000}}]
    daggers = Daggers(registry, team_cluster.state_dir)
    daggers.deploy(parse_spec(fields), team_cluster.cluster, team_cluster.member)
    truth = surge_truth(first)
    assert sink_reaches(measurement, services, truth) == truth
    assert _mirrored(job, len(first)) == len(first)
    stop.set()
    copier.join(timeout=10)
    job.close()

    [process] = of_node(two_brokers[0].nodes()[DATA_BROKER])
    assert process.pid is not None
    os.killpg(process.pid, signal.SIGKILL)  # the primary is gone, and with it (in memory) every event it had
    fault = datetime.now(UTC)
    assert not reachable(primary, timeout_s=2)
    second = [*booking_logs(1_500, seed=82, start=start + timedelta(minutes=10), rate=10)]
    second += closing_markers(start + timedelta(minutes=15))
    produce(mirror, topic, iter(second), partitions=2)  # producers failed over too

    policy = HealthPolicy(kafka_failover_after_checks=1)  # the default waits for a second check
    checkup = Checkup(registry, team_cluster.state_dir, policy=policy, teams=[team])
    report = checkup.run()
    [entry] = [s for s in report.streams if s.name == name]
    assert (entry.serving, entry.reachable, entry.switched_to) == ("primary", False, "failover"), report
    switched = registry.stream(name)
    assert switched is not None and switched.on_failover and switched.serving_bootstrap_servers == mirror
    moved = registry.dagger(team, "surge-kfo")
    assert moved is not None and moved.state == "running"
    both = truth + surge_truth(second)
    deadline = time.monotonic() + 120
    while influx_surge(services, 2, measurement) == truth and time.monotonic() < deadline:
        time.sleep(1)
    first_new_row = datetime.now(UTC)
    assert sink_reaches(measurement, services, both) == both  # resumed on the mirror: nothing lost or twice

    history = registry.history(f"stream:{name}", limit=5)
    assert history[0].action == "stream_failover" and history[0].detail["moved"] == [f"{team}/surge-kfo"]
    [entry_] = [e for e in registry.history(f"dagger:{team}/surge-kfo", limit=10) if e.action == "dagger_failover"]
    detected, switched_at, row = ((t - fault).total_seconds() for t in (report.checked_at, entry_.at, first_new_row))
    print(f"\nKafka failover: detected {detected:.1f} s, switched {switched_at:.1f} s, first new row {row:.1f} s")
    daggers.stop(team, "surge-kfo", team_cluster.member)
