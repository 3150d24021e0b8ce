"""Shared fixtures. Services are real (Tansu, VictoriaMetrics, InfluxDB, PostgreSQL, Spark standalone), started
by Odin itself on free 127.0.0.1 ports in a temp dir, and stopped by PID at the end of the session."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Airflow reads AIRFLOW_HOME when first imported: point it at a temp dir before any test imports it.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="daggers-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from odin.spec import Service
from odin.stack import Stack, UpReport
from tests.ports import stack_ports

Node = dict[str, Any]


@dataclass
class Services:
    """A running stack as the tests need it: where each service is."""

    stack: Stack
    report: UpReport
    nodes: dict[str, Node]

    def _node(self, role: str) -> Node:
        return next(n for n in self.nodes.values() if n["role"] == role)

    @property
    def kafka_bootstrap(self) -> str:
        n = self._node("kafka_broker")
        return f"{n['host']}:{n['ports']['kafka']}"

    @property
    def victoria_metrics_url(self) -> str:
        n = self._node("victoria_metrics")
        return f"http://{n['host']}:{n['ports']['http']}"

    @property
    def influxdb_url(self) -> str:
        n = self._node("influxdb")
        return f"http://{n['host']}:{n['ports']['http']}"

    @property
    def postgres_dsn(self) -> str:
        n = self._node("postgres")
        return f"postgresql://postgres@{n['host']}:{n['ports']['postgres']}/daggers"

    @property
    def spark_master_url(self) -> str:
        n = self._node("spark_master")
        return f"spark://{n['host']}:{n['ports']['master']}"

    @property
    def spark_rest_url(self) -> str:
        n = self._node("spark_master")
        return f"http://{n['host']}:{n['ports']['rest']}"

    @property
    def spark_ui_url(self) -> str:
        n = self._node("spark_master")
        return f"http://{n['host']}:{n['ports']['ui']}"


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


@contextmanager
def state_dir(prefix: str) -> Iterator[Path]:
    """A temp state dir the services' own OS users can enter (PostgreSQL runs as `postgres`)."""
    path = Path(tempfile.mkdtemp(prefix=f"daggers-{prefix}-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """Kafka (Tansu), VictoriaMetrics, InfluxDB 1.x, PostgreSQL and Spark master + 1 worker."""
    wanted = {Service.kafka_broker, Service.victoria_metrics, Service.influxdb, Service.postgres, Service.spark_worker}
    with state_dir("services") as path:
        stack, report = start_stack(path, wanted)
        all_nodes = stack.nodes()
        try:
            yield Services(stack, report, {n.name: all_nodes[n.name] for n in report.nodes})
        finally:
            stack.down()
