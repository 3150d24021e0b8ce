"""Loki's playbooks, plans and ground-truth arithmetic, without services: validation names the path of each error,
a plan refuses what is outside the blast radius or not a perf topic, and the comparison counts events exactly."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.sinks.base import OutputShape
from loki.broker_check import BrokerCheck
from loki.cli import PLAYBOOKS_DIR
from loki.load.feeder import ACKED, FAILED, PENDING, Feed, due
from loki.load.truth import compare
from loki.plan import plan
from loki.playbook import Feeder, PlaybookError, Ramp, Spike, Steady, load, parse
from loki.report import verdicts
from loki.resources import Resource
from loki.runner import playbook_from_params
from loki.simulate import FaultRun, RunResult
from odin.paths import BIN_DIR
from odin.registry.records import StreamRecord

STANDARD = sorted(p.stem for p in PLAYBOOKS_DIR.glob("*.yaml"))


def _book(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load((PLAYBOOKS_DIR / "worker-loss.yaml").read_text())
    data["load"]["consumers"][0]["spec_file"] = str(PLAYBOOKS_DIR / "consumers" / "surge.yaml")
    data.update(changes)
    return data


def test_every_standard_playbook_validates() -> None:
    assert {"worker-loss"} <= set(STANDARD)
    for name in STANDARD:
        book = load(PLAYBOOKS_DIR / f"{name}.yaml")
        assert book.name == name and book.blast_radius
    listed = subprocess.run([str(BIN_DIR / "loki"), "list", "--json"], capture_output=True, text=True, check=True)
    assert {b["name"]: b["cases"] for b in json.loads(listed.stdout)["playbooks"]} == {
        name: [c.type for c in load(PLAYBOOKS_DIR / f"{name}.yaml").cases] for name in STANDARD
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"cases": [{"name": "x", "type": "kill", "target": "topic/a", "start": "1s", "duration": "1s"}]},
         "cases.0.target: a kill fault targets spark/..., driver/..., broker/..., not topic/..."),
        ({"cases": [{"name": "x", "type": "latency", "target": "link/surge", "start": "1s", "duration": "1s"}]},
         "cases.0.magnitude: required for latency (milliseconds, from 1 to 10000)"),
        ({"cases": [{"name": "x", "type": "memory_pressure", "target": "host/local", "start": "1s", "duration": "1s",
                     "magnitude": 100_000}]},
         "cases.0.magnitude: memory_pressure takes MiB from 1 to 2048, got 100000"),
        ({"cases": [{"name": "x", "type": "cpu_pressure", "target": "host/local", "start": "1s", "duration": "1s",
                     "magnitude": 64}]},
         "cases.0.magnitude: cpu_pressure takes CPU workers from 1 to 8, got 64"),
        ({"cases": [{"name": "x", "type": "pause", "target": "broker/kafka-perf", "start": "1s", "duration": "1s",
                     "magnitude": 3}]},
         "cases.0.magnitude: a pause fault takes none"),
        ({"cases": [{"name": "x", "type": "pause", "target": "broker/kafka-perf", "start": "1s", "duration": "2h"}]},
         "cases.0.duration: at most 600s, got 7200s"),
        ({"load": {"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 5},
                                "duration": "30h"}]}},
         "load.feeders.0.duration: at most 3600s, got 108000s"),
        ({"safeguards": {"max_duration": "24h"}}, "safeguards.max_duration: at most 7200s, got 86400s"),
        ({"steady_state": {"settle": "2h"}}, "steady_state.settle: at most 1800s, got 7200s"),
        ({"cases": [{"name": "x", "type": "kill", "target": "spark/a/b/w", "start": "170s", "duration": "30s"}]},
         "cases.0: start + duration (0:03:20) ends after the load does"),
        ({"cases": [{"name": "x", "type": "network_partition", "target": "link/surge", "start": "1s",
                     "duration": "1s"}]},
         "cases.0.target: link/surge is not a local consumer's link (local: [])"),
        ({"blast_radius": []}, "blast_radius: List should have at least 1 item"),
        ({"blast_radius": ["vm/x"]}, "blast_radius.0: String should match pattern"),
        ({"steady_state": {"probes": [{"type": "lag", "consumer": "nobody", "max": 5}]}},
         "steady_state.probes.0.consumer: no consumer 'nobody' in load.consumers"),
        ({"load": {"feeders": [{"stream": "booking-log", "rate": {"shape": "steady", "events_per_s": 5},
                                "duration": "10s"}]}},
         "load.feeders.0.stream: 'booking-log' is not a perf stream"),
        ({"load": {"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "warp"}, "duration": "10s"}]}},
         "load.feeders.0.rate: Input tag 'warp' found using 'shape' does not match"),
        ({"load": {"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 5},
                                "duration": "10s", "linger": "fast"}]}},
         "load.feeders.0.linger: 'fast' is not a duration"),
        ({"sheep": 1}, "sheep: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_invalid_playbooks_are_rejected_with_the_path_of_each_error(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(PlaybookError) as e:
        parse(_book(**change))
    assert expected in str(e.value), str(e.value)


def test_loki_validate_names_the_path_and_touches_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_book(cases=[{"name": "x", "type": "pause", "target": "host/local",
                                                "start": "1s", "duration": "1s"}])))  # fmt: skip
    env = {**os.environ, "COLUMNS": "250"}
    run = subprocess.run([str(BIN_DIR / "loki"), "validate", str(bad)], capture_output=True, text=True, env=env)
    assert run.returncode == 2
    assert "cases.0.target: a pause fault targets spark/..., driver/..., broker/..., not host/..." in run.stderr
    good = subprocess.run([str(BIN_DIR / "loki"), "validate", "worker-loss"], capture_output=True, text=True)
    assert good.returncode == 0 and "valid" in good.stdout
    settle = [str(BIN_DIR / "loki"), "simulate", "worker-loss", "--settle", "soon", "--state-dir", str(tmp_path)]
    run = subprocess.run(settle, capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "steady_state.settle: 'soon' is not a duration" in run.stderr, run.stderr
    assert list(tmp_path.iterdir()) == [bad]  # refused before the environment was read


def test_bound_playbooks_fill_the_target_into_blast_radius_and_targets() -> None:
    book = parse(_book()).bound(team="pricing", cluster="blue")
    assert "spark/pricing/blue/worker-*" in book.blast_radius
    assert book.cases[0].target == "spark/pricing/blue/worker-of/surge-*"


STREAMS = [
    StreamRecord(name="booking-log", kafka_cluster="mainstream", bootstrap_servers="127.0.0.1:1", topics=["b"],
                 proto="daggers.events.BookingLog", schema_version=1),
    StreamRecord(name="booking-log-perf", kafka_cluster="perfstream", bootstrap_servers="127.0.0.1:2",
                 topics=["b-perf"], proto="daggers.events.BookingLog", schema_version=1, perf_twin_of="booking-log"),
]  # fmt: skip
VALUES = {
    "run": "r1",
    "team": "pricing",
    "cluster": "blue",
    "postgres_dsn": "postgresql://postgres@127.0.0.1:1/daggers",
    "victoria_metrics_url": "http://127.0.0.1:2",
}
RESOURCES = [
    Resource("spark/pricing/blue/worker-1", "worker"),
    Resource("spark/pricing/blue/master-1", "master"),
    Resource("spark/search/green/worker-1", "worker"),
    Resource("broker/kafka-broker", "data", topics=frozenset({"b", "b-perf"}), address="127.0.0.1:1"),
    Resource("broker/kafka-perf", "perf", topics=frozenset({"b-perf", "b-perf.dlq"}), address="127.0.0.1:2"),
]  # fmt: skip


def test_a_plan_lists_what_it_touches_and_refuses_the_rest() -> None:
    book = parse(_book()).bound(team="pricing", cluster="blue")
    ok = plan(book, RESOURCES, STREAMS, VALUES)
    assert ok.ok, ok.refusals
    # the worker running the dagger's driver: known once the run has deployed it
    assert {t.resource for t in ok.touches} == {"topic/b-perf", "dagger/surge", "spark/pricing/blue/worker-of/surge-r1"}
    outside = _book(cases=[{"name": "x", "type": "kill", "target": "spark/*/*/worker-1", "start": "1s",
                            "duration": "1s"}])  # fmt: skip
    refused = plan(parse(outside).bound(team="pricing", cluster="blue"), RESOURCES, STREAMS, VALUES)
    assert refused.refusals == ["cases.0.target: spark/search/green/worker-1 is outside blast_radius"]


def test_broker_faults_only_on_a_broker_of_perf_topics_alone() -> None:
    data = _book(
        blast_radius=["broker/*", "dagger/surge", "topic/*-perf", "spark/pricing/blue/*"],
        cases=[{"name": "pause", "type": "pause", "target": "broker/*", "start": "10s", "duration": "5s"}],
    )
    refused = plan(parse(data).bound(team="pricing", cluster="blue"), RESOURCES, STREAMS, VALUES)
    assert refused.refusals == [
        "cases.0.target: broker/kafka-broker serves catalog data streams; a pause would harm them: aim broker faults "
        "at the perf broker"
    ]
    assert "broker/kafka-perf" in {t.resource for t in refused.touches}


def test_a_broker_that_does_not_answer_or_serves_data_streams_is_never_taken_for_a_perf_broker() -> None:
    """Failing closed: a broker that did not answer listed no topics, and passed as one holding only perf topics (a
    kill of the production broker then planned fine); the catalog says which brokers serve data streams."""
    data = _book(
        blast_radius=["broker/*", "dagger/surge", "topic/*-perf", "spark/pricing/blue/*"],
        cases=[{"name": "kill", "type": "kill", "target": "broker/kafka-broker", "start": "10s", "duration": "5s"}],
    )
    book = parse(data).bound(team="pricing", cluster="blue")
    silent = [r if r.name != "broker/kafka-broker" else Resource(r.name, "data", topics=None, address="127.0.0.1:1")
              for r in RESOURCES]  # fmt: skip
    assert plan(book, silent, STREAMS, VALUES).refusals == [
        "cases.0.target: broker/kafka-broker did not answer: what it holds is unknown, so a kill is refused (is it up?)"
    ]
    emptied = [r if r.name != "broker/kafka-broker" else Resource(r.name, "data", topics=frozenset(),
               address="127.0.0.1:1") for r in RESOURCES]  # fmt: skip
    assert plan(book, emptied, STREAMS, VALUES).refusals == [
        "cases.0.target: broker/kafka-broker serves catalog data streams; a kill would harm them: aim broker faults "
        "at the perf broker"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"sink": {"type": "postgres", "dsn": "postgresql://postgres@127.0.0.1:1/registry", "table": "members"}},
         "load.consumers.0.spec.sink.dsn: a Loki consumer writes to the environment's sink database "
         "(${postgres_dsn}: daggers) or its team's (pricing) on 127.0.0.1:1, not registry on 127.0.0.1:1"),
        ({"sink": {"type": "kafka", "bootstrap_servers": "127.0.0.1:1", "topic": "b"}},
         "load.consumers.0.spec.sink.topic: 'b': a team's output topic starts with pricing. and is no catalog "
         "stream's"),
        ({"sink": {"type": "kafka", "bootstrap_servers": "127.0.0.1:1", "topic": "pricing.out"}},
         "load.consumers.0.spec.sink.bootstrap_servers: 127.0.0.1:1: a Loki consumer writes to the perf brokers "
         "only (127.0.0.1:2)"),
        ({"sink": {"type": "log", "path": "/etc/cron.d/x"}},
         "load.consumers.0.spec.sink.path: a Loki consumer's log sink is its own log (leave path out)"),
        ({"sink": {"type": "influx", "url": "http://127.0.0.1:2", "measurement": "dagger_metrics_input_rows"}},
         "load.consumers.0.spec.sink.measurement: dagger_metrics* is the platform's telemetry"),
        ({"streams": [{"table": "t", "stream": "booking-log-perf", "dlq_topic": "b"}]},
         "load.consumers.0.spec.streams.0.dlq_topic: 'b': dead letters go to <perf topic>.dlq (b-perf.dlq) or a "
         "topic under pricing."),
        ({"streams": [{"table": "t", "topics": ["b-perf"], "proto": "daggers.events.BookingLog",
                       "kafka": {"bootstrap_servers": "127.0.0.1:1"}}]},
         "load.consumers.0.spec.streams.0.kafka.bootstrap_servers: 127.0.0.1:1 is not where perf stream "
         "booking-log-perf is (127.0.0.1:2)"),
        ({"streams": [{"table": "t", "topics": ["x-perf"], "proto": "daggers.events.BookingLog"}]},
         "load.consumers.0.spec.streams.0: topics ['x-perf'] are not a catalog perf stream's topics"),
        ({"team": "search"}, "load.consumers.0.spec.team: 'search': a run aimed at team pricing runs only that "
         "team's daggers"),
        ({"telemetry_url": "http://127.0.0.1:9"}, "load.consumers.0.spec.telemetry_url: http://127.0.0.1:9 is not "
         "the environment's metrics store"),
    ],
)  # fmt: skip
def test_a_local_consumer_reads_and_writes_only_its_teams_perf_places(change: dict[str, Any], expected: str) -> None:
    spec = {"name": "s", "team": "${team}", "sql": "SELECT 1 AS n FROM t", "telemetry_url": "http://127.0.0.1:2",
            "streams": [{"table": "t", "stream": "booking-log-perf"}],
            "sink": {"type": "postgres", "dsn": "${postgres_dsn}", "table": "t"}}  # fmt: skip
    data = _book(
        blast_radius=["dagger/surge", "topic/*-perf"],
        cases=[],
        target={"environment": "local"},
        load={"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 5},
                           "duration": "10s"}],
              "consumers": [{"name": "surge", "placement": "local", "spec": spec}]},
    )  # fmt: skip
    book = parse(data).bound(team="pricing")
    assert plan(book, RESOURCES, STREAMS, VALUES).ok, plan(book, RESOURCES, STREAMS, VALUES).refusals
    data["load"]["consumers"][0]["spec"] = {**spec, **change}
    refused = plan(parse(data).bound(team="pricing"), RESOURCES, STREAMS, VALUES)
    assert expected in refused.refusals, refused.refusals


def test_a_run_aimed_at_a_cluster_touches_no_other_clusters_nodes_or_drivers() -> None:
    resources = [*RESOURCES, Resource("driver/pricing/old", "driver", cluster="pricing/green")]
    data = _book(
        blast_radius=["driver/pricing/*", "dagger/surge", "topic/*-perf"],
        cases=[{"name": "x", "type": "kill", "target": "driver/pricing/old", "start": "1s", "duration": "1s"}],
    )
    refused = plan(parse(data).bound(team="pricing", cluster="blue"), resources, STREAMS, VALUES)
    assert refused.refusals == [
        "cases.0.target: driver/pricing/old runs on pricing/green, not the target cluster pricing/blue"
    ]


def test_a_consumer_of_a_data_stream_is_refused() -> None:
    data = _book()
    data["load"]["consumers"][0] = {
        "name": "surge", "placement": "cluster", "count_column": "n",
        "spec": {"name": "s", "team": "${team}", "sql": "SELECT 1 AS n FROM t",
                 "streams": [{"table": "t", "stream": "booking-log"}]},
    }  # fmt: skip
    refused = plan(parse(data).bound(team="pricing", cluster="blue"), RESOURCES, STREAMS, VALUES)
    assert "load.consumers.0.spec.streams.0: stream 'booking-log' is not a perf stream" in refused.refusals


def test_rates_integrate_to_the_events_due() -> None:
    assert due(Steady(events_per_s=100), 2.5, 10) == 250
    ramp = Ramp(from_events_per_s=100, to_events_per_s=300)
    assert due(ramp, 10, 10) == 2000  # the mean rate (200/s) over 10 s
    spike = Spike(events_per_s=10, peak_events_per_s=100, at=timedelta(seconds=2), length=timedelta(seconds=1))
    assert due(spike, 5, 5) == 10 * 4 + 100


def test_a_smaller_experiment_keeps_the_platform_its_whole_time_to_recover() -> None:
    """Scaling shortens the load and moves the faults, not the settle time: a relaunched driver's JVM takes as long
    in a short experiment (CI found the steady state judged broken 30 s after a worker came back)."""
    book = parse(_book())
    small = book.scaled(rate=0.1, time=0.25)
    assert small.load.duration == book.load.duration / 4 and small.cases[0].start == book.cases[0].start / 4
    assert small.steady_state.settle == book.steady_state.settle
    assert small.load.feeders[0].linger == book.load.feeders[0].linger  # how a producer batches is not scaled
    assert small.safeguards.max_duration >= small.load.duration + small.steady_state.settle
    assert parse(_book()).scaled(time=0.05).safeguards.max_duration >= book.steady_state.settle


def test_a_settle_time_given_by_the_caller_replaces_the_playbooks_before_scaling() -> None:
    """`loki simulate --settle` and the loki_chaos DAG's `settle` param (empty: the playbook's)."""
    given = playbook_from_params({"playbook": "worker-loss", "settle": "300s", "time_scale": 0.25}, PLAYBOOKS_DIR)
    assert given.steady_state.settle == timedelta(seconds=300)
    assert given.safeguards.max_duration >= given.load.duration + timedelta(seconds=300)
    default = playbook_from_params({"playbook": "worker-loss", "settle": ""}, PLAYBOOKS_DIR)
    assert default.steady_state.settle == load(PLAYBOOKS_DIR / "worker-loss.yaml").steady_state.settle
    with pytest.raises(PlaybookError, match=r"steady_state\.settle: 'soon' is not a duration"):
        playbook_from_params({"playbook": "worker-loss", "settle": "soon"}, PLAYBOOKS_DIR)


def test_the_comparison_counts_lost_and_duplicated_events_per_window() -> None:
    shape = OutputShape(("city", "window_end"), ("n",), "window_end")
    truth = [{"city": 1, "window_end": "w1", "n": 10}, {"city": 2, "window_end": "w1", "n": 5},
             {"city": 1, "window_end": "w2", "n": 7}]  # fmt: skip
    output = [{"city": 1, "window_end": "w1", "n": 10}, {"city": 2, "window_end": "w1", "n": 3},
              {"city": 1, "window_end": "w2", "n": 9}, {"city": 3, "window_end": "w2", "n": 1}]  # fmt: skip
    result = compare(truth, output, shape, "n")
    assert (result.lost, result.duplicated, result.exact) == (2, 3, False)
    w1, w2 = result.windows
    assert (w1.window, w1.lost, w1.different, w2.duplicated, w2.extra) == ("w1", 2, 1, 3, 1)
    upper = [*truth[:2], {"city": 1, "window_end": "w2", "n": 9}]  # two indeterminate events made it
    bounded = compare(truth, output[:3], shape, "n", upper)
    assert (bounded.lost, bounded.duplicated, bounded.indeterminate_counted) == (2, 0, 2)
    assert compare(truth, truth, shape, "n").exact


def test_a_fault_is_detected_and_recovered_by_what_the_steady_state_did_while_it_was_the_faults() -> None:
    """Samples every 5 s; the fault on from 45 to 90 s. A break more than ATTRIBUTION_S after its end is not its."""

    def run(broken: set[float], end_t: float | None = 90.0) -> tuple[float | None, float | None]:
        fr = FaultRun("cpu", "cpu_pressure", "host/local", 45.0)
        for t in range(0, 160, 5):
            fr.end_t = end_t if end_t is not None and t >= end_t else None
            fr.observe(float(t), t not in broken)
        return fr.detected_t, fr.recovered_t

    assert run({40.0}) == (None, None)  # broken before it: not its doing
    assert run({60.0, 65.0}) == (60.0, 70.0)
    assert run({60.0, 100.0, 105.0}) == (60.0, 110.0)  # broken again within its reach: not recovered until 110
    assert run({150.0}) == (None, None)  # the cpu-pressure run: kept up through the fault, a dip 60 s after its end
    assert run({60.0, 150.0}) == (60.0, 65.0)
    assert run({95.0, 150.0}, end_t=None) == (95.0, 155.0)  # still on (its revert under way): every break is its


def test_a_broker_loss_passes_only_when_the_sink_lost_no_more_than_the_broker() -> None:
    shape = OutputShape(("city", "window_end"), ("n",), "window_end")
    lost_three = {"surge": compare([{"city": 1, "window_end": "w1", "n": 10}],
                                   [{"city": 1, "window_end": "w1", "n": 7}], shape, "n")}  # fmt: skip
    data = yaml.safe_load((PLAYBOOKS_DIR / "broker-loss.yaml").read_text())
    data["load"]["consumers"][0]["spec_file"] = str(PLAYBOOKS_DIR / "consumers" / "surge.yaml")
    book = parse(data)
    [case] = book.cases
    result = RunResult("r", faults=[FaultRun(case.name, case.type, "broker/kafka-perf", 45.0, 55.0)])
    lost_three["surge"].lost_beyond_broker = 0  # the three were among what the broker lost
    [explained] = verdicts(book, result, lost_three, BrokerCheck(acknowledged=10, gone=5))
    assert explained.verdict == "pass", explained
    lost_three["surge"].lost_beyond_broker = 2
    [beyond] = verdicts(book, result, lost_three, BrokerCheck(acknowledged=10, gone=1))
    assert beyond.reasons == ["2 event(s) lost that the broker still had"]
    lost_three["surge"].lost_beyond_broker = None
    paused = parse({**data, "cases": [{**data["cases"][0], "type": "pause"}]})
    [strict] = verdicts(paused, result, lost_three, BrokerCheck(acknowledged=10, gone=1))
    assert strict.reasons == ["3 event(s) lost", "1 acknowledged event(s) gone from the broker"]


def test_a_feeds_digest_keeps_every_event_by_fate_window_and_key() -> None:
    feeder = Feeder.model_validate(
        {"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 10}, "duration": "1s", "keys": 3}
    )
    feed = Feed(feeder, "daggers.events.BookingLog", ["t"], capacity=6)
    feed.targets, feed.sent = [("t", 0), ("t", 1)], 6
    feed.times[:] = [0.0, 10.0, 59.0, 60.0, 61.0, 62.0]
    feed.slots[:] = [0, 1, 0, 1, 0, 1]
    feed.fates[:] = [ACKED, ACKED, FAILED, PENDING, ACKED, ACKED]
    feed.offsets[:] = [0, 0, -1, -1, 1, 1]
    feed.malformed[5] = True  # acknowledged, but no dagger decodes it: not in the truth's input
    digest = feed.digest(60.0)
    per_window: dict[float, list[int]] = {}
    for (window, _key), counts in digest.keys.items():
        per_window[window] = [a + b for a, b in zip(per_window.get(window, [0, 0, 0]), counts, strict=True)]
    assert per_window == {0.0: [2, 1, 0], 60.0: [2, 0, 1]}  # acknowledged, failed, indeterminate
    assert len(digest.of((ACKED,), ["t"])) == 3 and len(digest.of((ACKED, PENDING), ["t"])) == 4
    assert sorted(o for events in digest.acked.values() for o, _ in events) == [0, 0, 1]
