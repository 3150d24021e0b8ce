"""spec → plan, once: the SQL is parsed once per plan (translation, pushdown, the column pruning and the sinks' checks
share translate's tree), and a driver that plans again in its own process verifies it got the plan deployed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.engine.plan import plan_dagger
from jobs.engine.source_stream import SourceKafka, SourceStream
from jobs.engine.status import read_status, status_path
from jobs.spec import SpecError, parse_spec
from jobs.sql import parse
from odin.paths import REPO
from tests.support.seeds import SURGE_SQL

DRIVER = REPO / "jobs" / "engine" / "driver.py"


def _spec(tmp_path: Path, sink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "surge",
        "team": "tests",
        "streams": [{"table": "data_stream", "topics": ["bookings"], "proto": "daggers.events.BookingLog"}],
        "sql": SURGE_SQL,
        "sink": sink,
        "checkpoint_dir": str(tmp_path / "checkpoint"),
    }


@pytest.mark.parametrize(
    "sink",
    [
        {"type": "influx", "url": "http://127.0.0.1:9", "measurement": "tests_surge"},  # checks the output's types
        {"type": "log"},
    ],
)
def test_a_plan_parses_its_sql_once(sink: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original, parsed = parse.parse_query, []

    def counting(sql: str, udfs: Any = ()) -> Any:
        parsed.append(sql)
        return original(sql, udfs)

    for module in list(sys.modules.values()):  # every module that imported it by name
        if getattr(module, "parse_query", None) is original:
            monkeypatch.setattr(module, "parse_query", counting)
    plan = plan_dagger(parse_spec(_spec(tmp_path, sink)), tmp_path)
    assert parsed == [SURGE_SQL]
    assert plan.streams[0].computed and "S2Id" not in plan.query.spark_sql  # pushed into the reader all the same


def test_a_driver_refuses_a_plan_other_than_the_one_deployed(tmp_path: Path) -> None:
    """A worker whose code or protos differ from the platform's would run something else than was checked: its
    driver says so in the status the deploy waits on, and exits 0 (a supervised driver would be relaunched)."""
    plan = plan_dagger(parse_spec(_spec(tmp_path, {"type": "log"})), tmp_path)
    sent = tmp_path / "run.json"
    sent.write_text(json.dumps({"spec": plan.spec.model_dump(mode="json"), "plan": "0123456789abcdef"}))
    args = ["--spec-file", str(sent), "--state-dir", str(tmp_path), "--run", "r1"]
    done = subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    status = read_status(status_path(plan.checkpoint))
    assert status is not None and status.phase == "failed" and status.run == "r1"
    assert f"the plan on this worker ({plan.fingerprint}) is not the one deployed (0123456789abcdef)" in status.error


def test_the_stream_crosses_into_sparks_processes_whole(tmp_path: Path) -> None:
    """What the source's Spark processes get (plain data, jobs/engine/source_stream.py) is the validated spec's."""
    spec = _spec(tmp_path, {"type": "log"})
    spec["streams"][0] |= {
        "timestamp_field": "event_timestamp",
        "idle_timeout": "90s",
        "dlq_topic": "bookings.errors",
        "kafka": {
            "bootstrap_servers": "127.0.0.1:9092,127.0.0.1:9093",
            "start": "latest",
            "max_events_per_trigger": 5000,
            "fail_on_data_loss": False,
            "outage_tolerance": "2m",
            "consumer_group": "lag-tools",
            "high_watermark": "probe",
            "config": {"security.protocol": "SASL_PLAINTEXT"},
            "password_env": "KAFKA_PASSWORD",
        },
    }
    stream = parse_spec(spec).streams[0]
    seen = SourceStream.from_json(json.loads(json.dumps(SourceStream.of(stream).to_json())))
    assert seen == SourceStream.of(stream)
    assert (seen.topics, seen.proto, seen.dead_letter_topic) == (("bookings",), stream.proto, "bookings.errors")
    assert (seen.idle_timeout, seen.kafka.outage_tolerance) == (stream.idle_timeout, stream.kafka.outage_tolerance)
    assert seen.kafka == SourceKafka(**{k: v for k, v in stream.kafka if k != "cluster"})  # all but the catalog name


def test_a_trigger_interval_under_a_second_is_refused_naming_the_field() -> None:
    """Each trigger may ask the stream's brokers for their offsets, and every team's daggers share them: a team's spec
    cannot make its dagger ask many times a second."""
    spec = {
        "name": "fast",
        "team": "tests",
        "streams": [{"table": "booking", "topics": ["x"], "proto": "daggers.events.BookingLog"}],
        "sql": SURGE_SQL,
    }
    for interval in ("10ms", "0s", 0.5):
        with pytest.raises(SpecError, match=r"trigger_interval: .*at least 1s"):
            parse_spec({**spec, "trigger_interval": interval})
    assert parse_spec({**spec, "trigger_interval": "1s"}).trigger_interval.total_seconds() == 1
