"""Shared fixtures. Services are real (Tansu, VictoriaMetrics, InfluxDB, PostgreSQL, Spark standalone), started
by Odin itself on free 127.0.0.1 ports in a temp dir, and stopped by PID at the end of the session."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Airflow reads AIRFLOW_HOME when first imported: point it at a temp dir before any test imports it.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="daggers-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from pyspark.sql import SparkSession

from jobs.session import spark_session
from odin.endpoints import Endpoints
from odin.paths import temporary_state_dir as state_dir
from odin.ports import stack_ports
from odin.spec import Service
from odin.stack import Stack, UpReport


@dataclass(frozen=True)
class Services(Endpoints):
    """A running test stack: where each service is (Endpoints), and the stack itself."""

    stack: Stack | None = None
    report: UpReport | None = None


def start_stack(state_dir: Path, services: set[Service], workers: int = 1) -> tuple[Stack, UpReport]:
    stack = Stack("local", state_dir)
    spec = stack.resolve(workers, services, stack_ports())
    report = stack.up(spec)
    if not report.ok:
        stack.down()
        failures = "\n".join(f"{f.host}/{f.task}: {f.message}" for f in report.playbook.failures)
        unhealthy = ", ".join(f"{n.name}: {n.health.detail}" for n in report.nodes if not n.health.ok)
        pytest.fail(f"test stack did not come up: {failures} {unhealthy}")
    return stack, report


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """Kafka (Tansu), VictoriaMetrics, InfluxDB 1.x, PostgreSQL and Spark master + 1 worker."""
    wanted = {Service.kafka_broker, Service.victoria_metrics, Service.influxdb, Service.postgres, Service.spark_worker}
    with state_dir("services") as path:
        stack, report = start_stack(path, wanted)
        all_nodes = stack.nodes()
        try:
            yield Services({n.name: all_nodes[n.name] for n in report.nodes}, stack, report)
        finally:
            stack.down()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] Spark session for the whole test run (starting one costs seconds)."""
    session = spark_session("daggers-tests")
    try:
        yield session
    finally:
        session.stop()
