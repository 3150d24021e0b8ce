"""The stream catalog (streams.yaml): named streams, each a Kafka cluster, topics and one protobuf message.

`load()` validates the file (names, topics, messages that exist in protos/); `odin.catalog.sync` loads it into the
registry with schema version locking; `jobs.spec` resolves a dagger's `stream: <name>` against what was loaded.
Every stream has a `-perf` twin (same message, topics suffixed `-perf`) for Loki's load and chaos experiments.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from odin.models import SLUG, format_errors

CATALOG_FILE = Path(__file__).resolve().parent / "streams.yaml"
PERF_SUFFIX = "-perf"
TOPIC = r"^[A-Za-z0-9._-]{1,249}$"  # Kafka's own rule for topic names


class CatalogError(ValueError):
    """The catalog file does not validate: the message names each bad field."""


class KafkaCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    bootstrap_servers: dict[str, str] = Field(
        default_factory=dict,
        description="Bootstrap servers per Odin environment; an environment not listed uses its own Kafka broker.",
    )
    failover_bootstrap_servers: dict[str, str] = Field(
        default_factory=dict,
        description="Per Odin environment, the cluster's failover: a mirror fed by `odin mirror`, which keeps every "
        "partition's offsets, so daggers switch to it and resume their checkpoints when this cluster is down.",
    )
    team_outputs: bool = Field(
        False,
        description="Whether deployed daggers' Kafka sinks may write here, each team to topics under `<team>.` only.",
    )


class CatalogStream(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SLUG)
    description: str = ""
    kafka_cluster: str
    topics: list[str] = Field(min_length=1)
    proto: str = Field(description="Full name of the protobuf message every topic carries.")
    perf_twin_of: str | None = Field(None, description="Set on the `-perf` twins the catalog adds.")

    @model_validator(mode="after")
    def _topics(self) -> CatalogStream:
        bad = [t for t in self.topics if not re.fullmatch(TOPIC, t)]
        if bad:
            raise ValueError(f"topics: {bad} are not Kafka topic names (letters, digits, '.', '_', '-')")
        return self

    def perf_twin(self, perf_cluster: str | None = None) -> CatalogStream:
        return self.model_copy(
            update={
                "name": f"{self.name}{PERF_SUFFIX}",
                "kafka_cluster": perf_cluster or self.kafka_cluster,
                "description": f"Perf twin of {self.name} (Loki's experiments): {self.description}",
                "topics": [f"{t}{PERF_SUFFIX}" for t in self.topics],
                "perf_twin_of": self.name,
            }
        )


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kafka_clusters: dict[str, KafkaCluster] = Field(min_length=1)
    perf_kafka_cluster: str | None = Field(
        None,
        description="The Kafka cluster of every `-perf` twin (seed 000's perf streams): a cluster of their own, so "
        "Loki's broker faults and load never reach a data stream. Unset: each twin is on its stream's cluster.",
    )
    streams: list[CatalogStream] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Catalog:
        if self.perf_kafka_cluster is not None and self.perf_kafka_cluster not in self.kafka_clusters:
            raise ValueError(f"perf_kafka_cluster: {self.perf_kafka_cluster!r} is not in kafka_clusters")
        for i, s in enumerate(self.streams):
            if s.kafka_cluster not in self.kafka_clusters:
                raise ValueError(
                    f"streams.{i}.kafka_cluster: {s.kafka_cluster!r} is not in kafka_clusters "
                    f"({', '.join(sorted(self.kafka_clusters))})"
                )
            if s.name.endswith(PERF_SUFFIX) or s.perf_twin_of:
                raise ValueError(f"streams.{i}.name: {s.name!r}: `-perf` twins are added by the catalog itself")
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"streams: names must be unique, got {names}")
        topics = [t for s in self.all_streams() for t in s.topics]
        if len(set(topics)) != len(topics):
            twice = sorted({t for t in topics if topics.count(t) > 1})
            raise ValueError(f"streams: a topic belongs to one stream; in more than one: {twice}")
        return self

    def all_streams(self) -> list[CatalogStream]:
        """The streams and their perf twins."""
        return [t for s in self.streams for t in (s, s.perf_twin(self.perf_kafka_cluster))]

    def bootstrap_servers(
        self, stream: CatalogStream, environment: str, environment_kafka: str, environment_perf_kafka: str | None = None
    ) -> str:
        """Where the stream's Kafka cluster is in `environment`. When the catalog names none, the environment's own
        broker: `environment_perf_kafka` (Odin's kafka-perf node) for perf twins, if it has one, else
        `environment_kafka` (its kafka-broker node)."""
        own = environment_perf_kafka if stream.perf_twin_of and environment_perf_kafka else environment_kafka
        return self.kafka_clusters[stream.kafka_cluster].bootstrap_servers.get(environment, own)

    def output_clusters(self) -> list[str]:
        """The Kafka clusters that take teams' outputs (deployed Kafka sinks), in the catalog's order."""
        return [name for name, cluster in self.kafka_clusters.items() if cluster.team_outputs]

    def failover_bootstrap_servers(self, stream: CatalogStream, environment: str) -> str | None:
        return self.kafka_clusters[stream.kafka_cluster].failover_bootstrap_servers.get(environment)


def load(path: Path = CATALOG_FILE) -> Catalog:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise CatalogError(f"{path}: {e}") from None
    try:
        catalog = Catalog.model_validate(data)
    except ValidationError as e:
        raise CatalogError(f"{path}:\n{format_errors(e)}") from None
    from odin.catalog.schemas import find  # the messages must exist: a typo is found here, not at a deploy

    for i, s in enumerate(catalog.streams):
        try:
            find(s.proto)
        except KeyError as e:
            raise CatalogError(f"{path}: streams.{i}.proto: {e.args[0]}") from None
    return catalog
