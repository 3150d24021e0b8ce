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
from loki.cli import PLAYBOOKS_DIR
from loki.feeder import due
from loki.plan import plan
from loki.playbook import PlaybookError, Ramp, Spike, Steady, load, parse
from loki.resources import Resource
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


def test_bound_playbooks_fill_the_target_into_blast_radius_and_targets() -> None:
    book = parse(_book()).bound(team="pricing", cluster="blue")
    assert "spark/pricing/blue/worker-*" in book.blast_radius
    assert book.cases[0].target == "spark/pricing/blue/worker-1"


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
    assert {t.resource for t in ok.touches} == {"topic/b-perf", "dagger/surge", "spark/pricing/blue/worker-1"}
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
