"""Dagger specs of the tests: a query on a topic of a test's own (`spec_dict`, `surge_spec`), made deployable on a
catalog stream (`deployable`), the surge query on the catalog's booking log (`catalog_spec`), and a spec as a file."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.support.catalog import CATALOG
from tests.support.seeds import SURGE_SQL
from tests.support.services import Services


def spec_dict(services: Services, table: str, topic: str, proto: str, sql: str, sink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"d-{uuid.uuid4().hex[:8]}",
        "team": "tests",
        "streams": [
            {
                "table": table,
                "topics": [topic],
                "proto": proto,
                "kafka": {"bootstrap_servers": services.kafka_bootstrap, "max_events_per_trigger": 20_000},
            }
        ],
        "sql": sql,
        "watermark_delay": "10s",
        "trigger_interval": "1s",
        "parallelism": 2,
        "sink": sink,
    }


def surge_spec(services: Services, topic: str, sink: dict[str, Any]) -> dict[str, Any]:
    """The seed's surge query over BookingLog events of `topic`."""
    return spec_dict(services, "data_stream", topic, "daggers.events.BookingLog", SURGE_SQL, sink)


def deployable(spec: dict[str, Any], stream: str) -> dict[str, Any]:
    """A surge_spec for deploying: its stream from the catalog (topics, message and brokers are the catalog's)."""
    kafka = {k: v for k, v in spec["streams"][0].get("kafka", {}).items() if k != "bootstrap_servers"}
    return spec | {"streams": [{"table": "data_stream", "stream": stream, "kafka": kafka}]}


def spec_file(spec: dict[str, Any], tmp_path: Path) -> Path:
    """The spec as a file for the `dagger` CLI, its checkpoint in the test's temp dir."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**spec, "checkpoint_dir": str(tmp_path / "checkpoint")}))
    return path


def catalog_spec(team: str, measurement: str, services: Services, sql: str = SURGE_SQL) -> dict[str, Any]:
    """The surge query of `team` on the catalog's booking log, to the TSDB's `measurement`, as a team deploys it."""
    return {
        "name": "surge",
        "team": team,
        "streams": [
            {
                "table": "data_stream",
                "stream": CATALOG,
                "idle_timeout": "15s",
                "kafka": {"max_events_per_trigger": 20_000},
            }
        ],
        "sql": sql,
        "watermark_delay": "10s",
        "trigger_interval": "2s",
        "parallelism": 1,
        "sink": {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement},
    }
