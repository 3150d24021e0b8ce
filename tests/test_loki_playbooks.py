"""Loki's playbooks, plans and ground-truth arithmetic, without services: validation names the path of each error,
a plan refuses what is outside the blast radius or not a perf topic, and the comparison counts events exactly."""

from __future__ import annotations

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
from loki.feeder import ACKED, FAILED, PENDING, Feed, due
from loki.plan import plan
from loki.playbook import Feeder, PlaybookError, Ramp, Spike, Steady, load, parse
from loki.report import verdicts
from loki.resources import Resource
from loki.runner import playbook_from_params
from loki.simulate import FaultRun, RunResult
from loki.truth import compare
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


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"cases": [{"name": "x", "type": "kill", "target": "topic/a", "start": "1s", "duration": "1s"}]},
         "cases.0.target: a kill fault targets spark/..., driver/..., broker/..., not topic/..."),
        ({"cases": [{"name": "x", "type": "latency", "target": "link/surge", "start": "1s", "duration": "1s"}]},
         "cases.0.magnitude: required for latency (milliseconds)"),
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
VALUES = {"run": "r1", "team": "pricing", "cluster": "blue", "postgres_dsn": "postgresql://postgres@127.0.0.1:1/d",
          "victoria_metrics_url": "http://127.0.0.1:2"}  # fmt: skip
RESOURCES = [
    Resource("spark/pricing/blue/worker-1", "worker"),
    Resource("spark/pricing/blue/master-1", "master"),
    Resource("spark/search/green/worker-1", "worker"),
    Resource("broker/kafka-broker", "data", topics=frozenset({"b", "b-perf"})),
    Resource("broker/kafka-perf", "perf", topics=frozenset({"b-perf", "b-perf.dlq"})),
]


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
        "cases.0.target: broker/kafka-broker also holds non-perf topics (b); a pause would harm them: aim broker "
        "faults at the perf cluster's broker"
    ]
    assert "broker/kafka-perf" in {t.resource for t in refused.touches}


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
