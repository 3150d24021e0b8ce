"""The registry's rows as typed records: what the store takes and returns."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ClusterState = Literal["provisioning", "ready", "failed", "destroying", "destroyed"]
DaggerState = Literal["deploying", "running", "stopping", "stopped", "failed", "crashlooping"]
Outcome = Literal["ok", "refused", "failed"]
AlertStatus = Literal["firing", "resolved"]


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ClusterRecord(Record):
    team: str
    name: str
    environment: str
    masters: int
    workers: int
    worker_cores: int
    worker_memory: str
    state: ClusterState
    terraform_state: str
    addresses: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.team}/{self.name}"


class DaggerRecord(Record):
    team: str
    name: str
    spec: dict[str, Any]
    spec_version: int
    checkpoint: str
    state: DaggerState
    cluster: str | None = None
    submission_id: str | None = None
    schema_versions: dict[str, int] = Field(default_factory=dict)  # stream name -> schema version locked to
    since: datetime | None = None
    created_at: datetime | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.team}/{self.name}"


class StreamRecord(Record):
    name: str
    kafka_cluster: str
    bootstrap_servers: str
    topics: list[str]
    failover_bootstrap_servers: str | None = None
    on_failover: bool = False  # set by a failover only (Registry.set_stream_failover), never by a catalog sync
    proto: str
    schema_version: int
    description: str = ""
    perf_twin_of: str | None = None
    updated_at: datetime | None = None

    @property
    def serving_bootstrap_servers(self) -> str:
        """Where daggers read it now: the mirror once the stream failed over."""
        if self.on_failover and self.failover_bootstrap_servers:
            return self.failover_bootstrap_servers
        return self.bootstrap_servers


class SchemaVersion(Record):
    stream: str
    version: int
    fingerprint: str
    proto: str
    descriptor_set: str  # base64
    created_at: datetime | None = None


class HistoryEntry(Record):
    id: int
    at: datetime
    actor: str
    action: str
    subject: str
    outcome: Outcome
    message: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


class AlertRecord(Record):
    """One alert as a notification of Alertmanager's webhook delivered it (odin/alerting/receiver.py)."""

    fingerprint: str
    status: AlertStatus
    alertname: str
    team: str | None = None
    subject: str = ""  # "dagger:team/name", "cluster:team/name" or ""
    receiver: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    received_at: datetime | None = None
    id: int | None = None
