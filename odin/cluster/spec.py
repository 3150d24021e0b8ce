"""A team cluster's spec: what `odin cluster create|scale` and the provisioning DAGs are asked for."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from odin.models import SLUG

Environment = Literal["local", "gcp"]


class GcpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str = Field(min_length=1, description="GCP project of the instances and network.")
    region: str = "asia-southeast2"
    zone: str = "asia-southeast2-a"
    machine_type: str = "e2-standard-4"
    admin_cidr: str = Field(description="Where Odin connects from (SSH, REST), e.g. 203.0.113.7/32.")
    ssh_public_key: str = Field(description="Public key Ansible logs in with.")


class ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    team: str = Field(pattern=SLUG, description="The team the cluster belongs to; only its daggers run there.")
    name: str = Field(pattern=SLUG, description="The cluster's name, unique per team.")
    environment: Environment = Field("local", description="Where: local (processes on 127.0.0.1) or gcp.")
    masters: int = Field(
        1, ge=1, le=5, description="1: FILESYSTEM recovery; 2 or more: ZooKeeper recovery with standby masters."
    )
    workers: int = Field(1, ge=1, le=16, description="Spark workers.")
    worker_cores: int = Field(1, ge=1, le=64, description="Cores each worker offers.")
    worker_memory: str = Field("1g", pattern=r"^[0-9]+[mg]$", description="Memory each worker offers: 512m, 2g.")
    gcp: GcpSettings | None = Field(None, description="Required for environment gcp.")

    @model_validator(mode="after")
    def _environment(self) -> ClusterSpec:
        if self.environment == "gcp" and self.gcp is None:
            raise ValueError("gcp: required for environment gcp (project, admin_cidr, ssh_public_key)")
        if self.environment != "gcp" and self.gcp is not None:
            raise ValueError(f"gcp: only for environment gcp, not {self.environment}")
        return self

    @property
    def qualified_name(self) -> str:
        return f"{self.team}/{self.name}"
