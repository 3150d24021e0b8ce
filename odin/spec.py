"""The stack spec: what `odin up` is asked to converge. Validated here, trusted everywhere after."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from odin.paths import default_state_dir


class Service(StrEnum):
    """A service role: one Ansible role and inventory group each."""

    kafka_broker = "kafka_broker"
    victoria_metrics = "victoria_metrics"
    influxdb = "influxdb"
    postgres = "postgres"
    spark_master = "spark_master"
    spark_worker = "spark_worker"
    airflow = "airflow"
    alertmanager = "alertmanager"  # with the platform's webhook receiver, which records alerts in the registry
    vmalert = "vmalert"
    traffic = "traffic"  # live events on every catalog data stream (odin/traffic/node.py)


# A service converged on its own also needs these running.
REQUIRES: dict[Service, frozenset[Service]] = {
    Service.spark_worker: frozenset({Service.spark_master}),
    Service.airflow: frozenset({Service.postgres}),  # its metadata database
    Service.alertmanager: frozenset({Service.postgres}),  # the receiver records alerts in the registry
    Service.vmalert: frozenset({Service.victoria_metrics, Service.alertmanager}),
    Service.traffic: frozenset({Service.kafka_broker}),
}

PortName = Literal[
    "kafka",
    "kafka_perf",
    "victoria_metrics",
    "influxdb",
    "influxdb_rpc",
    "spark_master",
    "spark_rest",
    "spark_master_ui",
    "spark_worker",
    "spark_worker_ui",
    "postgres",
    "airflow",
    "alertmanager",
    "alert_receiver",
    "vmalert",
    "traffic",
]
Port = Annotated[int, Field(ge=1024, le=65000)]
DEFAULT_WORKERS = 2
# Airflow's local users (simple auth manager): a name and one of its roles. The registry's teams decide what a user
# may do with clusters and daggers; the role decides what they see in Airflow (a `user` triggers DAGs).
AirflowUser = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.-]{0,62}$")]
AirflowRole = Literal["viewer", "user", "op", "admin"]
DEFAULT_AIRFLOW_USERS: dict[str, AirflowRole] = {"admin": "admin"}
# Events per second the traffic node sends on each data stream: enough for every minute's window to hold data,
# little enough for Tansu's memory (it keeps every message: ~145 MB per million, ~200 MB a day at 5/s on 3 streams).
DEFAULT_TRAFFIC_RATE = 5.0
TrafficRate = Annotated[float, Field(gt=0, le=10_000)]


class StackSpec(BaseModel):
    """One environment's desired state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    environment: Literal["local"] = Field("local", description="Terraform environment under terraform/environments/.")
    spark_workers: int = Field(DEFAULT_WORKERS, ge=1, le=16, description="Number of Spark standalone workers.")
    services: frozenset[Service] = Field(
        frozenset(Service), min_length=1, description="Services to converge (others are left as they are)."
    )
    ports: dict[PortName, Port] = Field(default_factory=dict, description="Overrides of the default ports.")
    airflow_users: dict[AirflowUser, AirflowRole] = Field(
        default_factory=lambda: dict(DEFAULT_AIRFLOW_USERS), min_length=1, description="Airflow's users and roles."
    )
    traffic_rate: TrafficRate = Field(
        DEFAULT_TRAFFIC_RATE, description="Events per second the traffic node sends on each catalog data stream."
    )
    airflow_dags_paused: bool = Field(
        False,
        description="Whether Airflow pauses DAGs it sees first (its own default). The platform's scheduled DAGs "
        "(health every minute, platform health, reports) run from the start unless this is set; the test suite "
        "sets it, so one test's Airflow never heals another test's daggers.",
    )
    state_dir: Path = Field(default_factory=default_state_dir, description="Where state, data, logs and pids live.")

    @property
    def selected(self) -> frozenset[Service]:
        """The requested services plus what they need."""
        needed = set(self.services)
        for s in self.services:
            needed |= REQUIRES.get(s, frozenset())
        return frozenset(needed)

    def terraform_vars(self) -> dict[str, object]:
        return {
            "base_dir": str(self.state_dir),
            "spark_workers": self.spark_workers,
            "ports": dict(self.ports),
            "airflow_users": dict(self.airflow_users),
            "traffic_rate": self.traffic_rate,
            "airflow_dags_paused": self.airflow_dags_paused,
        }


class AppliedStack(BaseModel):
    """What the last `odin up` applied, so a later `odin up` without flags keeps it (e.g. the worker count)."""

    spark_workers: int = DEFAULT_WORKERS
    ports: dict[PortName, Port] = Field(default_factory=dict)
    airflow_users: dict[AirflowUser, AirflowRole] = Field(default_factory=lambda: dict(DEFAULT_AIRFLOW_USERS))
    traffic_rate: TrafficRate = DEFAULT_TRAFFIC_RATE
    airflow_dags_paused: bool = False
    services: frozenset[Service] = Field(frozenset(), description="Every service converged so far (--only adds).")

    @staticmethod
    def path(state_dir: Path, environment: str) -> Path:
        return state_dir / "odin" / f"{environment}.json"

    @classmethod
    def load(cls, state_dir: Path, environment: str) -> AppliedStack | None:
        p = cls.path(state_dir, environment)
        return cls.model_validate(json.loads(p.read_text())) if p.exists() else None

    def save(self, state_dir: Path, environment: str) -> None:
        p = self.path(state_dir, environment)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.model_dump_json(indent=2))
