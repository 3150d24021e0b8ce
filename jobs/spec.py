"""The dagger spec: everything a dagger is (streams, SQL, sink), as a typed model with a JSON schema.

The same model backs `dagger validate/preview/run`, the Airflow trigger form and the tests. Secrets are never
inline: a spec names the environment variable that holds them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from odin.models import (
    ENV_VAR,
    IDENTIFIER,
    MAX_SPEC_BYTES,
    SLUG,
    Duration,
    Model,
    format_errors,
    read_mapping,
)

MIN_TRIGGER_INTERVAL = timedelta(seconds=1)


class KafkaSettings(Model):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port].")
    cluster: str | None = Field(
        None,
        pattern=SLUG,
        description="The catalog's name of the Kafka cluster (set from the catalog for a `stream`): its failover "
        "mirror keeps the same offsets, so a checkpoint made on one resumes on the other.",
    )
    start: Literal["earliest", "latest"] = Field("earliest", description="Where a new dagger starts reading.")
    max_events_per_trigger: int | None = Field(
        200_000, ge=1, description="At most this many events per micro-batch (all partitions together)."
    )
    fail_on_data_loss: bool = Field(
        True,
        description="When the checkpoint resumes where the broker has no data (a recreated topic, another cluster, "
        "retention): true fails with what happened and what to do; false continues from the earliest offset the "
        "broker has and counts the skipped events as `lost_events`.",
    )
    outage_tolerance: Duration = Field(
        timedelta(minutes=5),
        description="How long a running dagger waits for a broker that does not answer (a network partition, a "
        "broker restart) before it fails; meanwhile it plans no batch. A dagger that cannot reach Kafka at start "
        "fails at once.",
    )
    consumer_group: str | None = Field(
        None, description="If set, processed offsets are also committed to this group (for lag tools only)."
    )
    high_watermark: Literal["auto", "reported", "probe"] = Field(
        "auto",
        description="How a partition's end is found. `reported`: the broker's high watermark (real Kafka). "
        "`probe`: read the partition's tail (brokers that under-report it, e.g. Tansu). `auto`: probe once and "
        "keep probing only if the broker under-reports.",
    )
    config: dict[str, str] = Field(
        default_factory=dict, description="Extra librdkafka settings (e.g. security.protocol); no secrets."
    )
    password_env: str | None = Field(
        None, pattern=ENV_VAR, description="Environment variable holding sasl.password, if the cluster needs one."
    )


class StreamSpec(Model):
    table: str = Field(pattern=IDENTIFIER, description="The table name the SQL uses for this stream.")
    stream: str | None = Field(
        None,
        pattern=SLUG,
        description="A stream of the platform's catalog (`odin catalog list`), e.g. booking-log: its topics, message "
        "and Kafka cluster come from there, and a deployed dagger is locked to its schema version. Otherwise give "
        "`topics` and `proto`.",
    )
    topics: list[str] = Field(default_factory=list, description="Topics sharing one schema (unless `stream`).")
    proto: str = Field("", description="Full protobuf message name, e.g. daggers.events.BookingLog (unless `stream`).")
    timestamp_field: str = Field(
        "event_timestamp",
        description="Field giving event time (google.protobuf.Timestamp, or epoch seconds/milliseconds); "
        "exposed to SQL as `rowtime`. Nested fields with dots.",
    )
    kafka: KafkaSettings = Field(default_factory=KafkaSettings, description="How the stream is read from Kafka.")  # type: ignore[arg-type]
    idle_timeout: Duration = Field(
        timedelta(seconds=60),
        description="A partition without new events for this long no longer holds the stream's watermark back "
        "(the watermark is the minimum over partitions, as Flink's per-partition watermarks with idleness).",
    )
    dlq_topic: str | None = Field(
        None, description="Where undecodable and late events go (default: `<first topic>.dlq`)."
    )

    @model_validator(mode="after")
    def _source(self) -> StreamSpec:
        if self.stream is None and not (self.topics and self.proto):
            missing = " and ".join(f for f in ("topics", "proto") if not getattr(self, f))
            raise ValueError(f"{missing}: required unless `stream` names a stream of the catalog (odin catalog list)")
        return self

    @property
    def resolved(self) -> bool:
        """Whether topics and message are known (a catalog stream is, once resolve_streams has looked it up)."""
        return bool(self.topics and self.proto)

    @property
    def dead_letter_topic(self) -> str:
        return self.dlq_topic or f"{self.topics[0]}.dlq"


class CatalogEntry(Protocol):
    """What resolving a catalog stream needs (odin.registry.records.StreamRecord has it)."""

    topics: list[str]
    proto: str
    kafka_cluster: str

    @property
    def serving_bootstrap_servers(self) -> str: ...


class LogSink(Model):
    type: Literal["log"] = "log"
    path: Path | None = Field(None, description="JSON-lines file to append to; stdout if unset.")


class InfluxSink(Model):
    type: Literal["influx"] = "influx"
    url: str = Field("http://127.0.0.1:8428", description="InfluxDB (or VictoriaMetrics) base URL.")
    version: Literal[1, 2] = Field(2, description="2: API v2 (`/api/v2/write`); 1: InfluxDB 1.x `/write`.")
    measurement: str | None = Field(None, description="Measurement name (default: the dagger's name).")
    database: str = Field("daggers", description="Database (v1) or bucket (v2).")
    org: str = Field("", description="Organisation (v2).")
    token_env: str | None = Field(None, pattern=ENV_VAR, description="Env var holding the API token (v2).")
    username_env: str | None = Field(None, pattern=ENV_VAR, description="Env var holding the user name (v1).")
    password_env: str | None = Field(None, pattern=ENV_VAR, description="Env var holding the password (v1).")
    time_column: str | None = Field(
        None,
        description="Timestamp output column giving each point's time (default: the window end). Required when the "
        "query selects no window end: a point's time would otherwise be the write time, and replays would add points.",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Tags added to every point, over any column's tag of the same name. On the platform it holds the "
        "dagger's `team`, which the platform sets.",
    )


class KafkaSink(Model):
    type: Literal["kafka"] = "kafka"
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Where `dagger run` writes; the platform sets it.")
    cluster: str | None = Field(
        None,
        pattern=SLUG,
        description="On the platform: the catalog's Kafka cluster to write to (one that takes teams' outputs; "
        "default: the first). The topic must start with `<team>.`.",
    )
    topic: str = Field(description="The topic to write; on the platform one under `<team>.`.")
    format: Literal["json", "proto"] = Field("json", description="One record per row: JSON, or the `proto` message.")
    proto: str | None = Field(None, description="Message class for format=proto; fields matched by column name.")
    config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka producer settings; connection ones (security.*, sasl.*, ssl.*, socket.*) also "
        "reach the sink's admin and consumer clients. Not transactional.id, acks or enable.idempotence; no secrets.",
    )
    password_env: str | None = Field(
        None, pattern=ENV_VAR, description="Env var holding sasl.password, read when the sink opens."
    )

    @model_validator(mode="after")
    def _proto_given(self) -> KafkaSink:
        if self.format == "proto" and not self.proto:
            raise ValueError("sink.proto: required when sink.format is 'proto'")
        return self

    @model_validator(mode="after")
    def _no_unsafe_config(self) -> KafkaSink:
        # Producer settings the sink fixes itself (alias included): overriding one would break exactly-once.
        fixed = {
            "transactional.id": "it is daggers.<team>.<name>, so a restarted dagger fences the previous instance",
            "acks": "transactions need acks=all",
            "request.required.acks": "an alias of acks; transactions need acks=all",
            "enable.idempotence": "transactions need the idempotent producer",
        }
        for key in self.config:
            name = key.strip().lower()
            if name in fixed:
                raise ValueError(
                    f"sink.config.{key}: may not be set: the sink's exactly-once writes depend on it ({fixed[name]}); "
                    "remove it"
                )
            if name == "sasl.password":
                raise ValueError(
                    f"sink.config.{key}: secrets do not go in the spec; put the password in an environment variable "
                    "and name it in sink.password_env"
                )
        return self


class PostgresSink(Model):
    type: Literal["postgres"] = "postgres"
    target: str | None = Field(
        None,
        pattern=SLUG,
        description="On the platform: the database it provisions for a team (the team's name, the default); the "
        "platform sets dsn and password_env from it.",
    )
    dsn: str = Field(
        "postgresql://postgres@127.0.0.1:5432/daggers",
        description="libpq DSN without a password, for `dagger run`; the platform sets it from `target`.",
    )
    password_env: str | None = Field(None, pattern=ENV_VAR, description="Env var holding the password.")
    table: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$",
        description="The table to upsert into ([schema.]name), made with the output's columns if missing.",
    )

    @model_validator(mode="after")
    def _no_inline_password(self) -> PostgresSink:
        if re.search(r"://[^/@]*:[^/@]*@|password=", self.dsn):
            raise ValueError("sink.dsn: must not contain a password; name an environment variable in password_env")
        return self


Sink = Annotated[LogSink | InfluxSink | KafkaSink | PostgresSink, Field(discriminator="type")]


class DaggerSpec(Model):
    name: str = Field(pattern=SLUG, description="Slug, unique per team.")
    team: str = Field(pattern=SLUG, description="The team that owns the dagger (on the platform: one of yours).")
    schemas: list[Path] = Field(
        default_factory=list, description="Extra .proto files or descriptor sets, besides protos/."
    )
    streams: list[StreamSpec] = Field(min_length=1, max_length=2, description="The streams the SQL reads, as tables.")
    sql: str = Field(min_length=1, description="Dagger SQL (Flink-style TUMBLE/HOP) or Spark SQL.")
    watermark_delay: Duration = Field(timedelta(seconds=60), description="How late an event may be.")
    trigger_interval: Duration = Field(
        timedelta(seconds=10), description="How often the dagger looks for new events (a micro-batch), at least 1s."
    )
    parallelism: int = Field(2, ge=1, le=256, description="Spark tasks per stage (shuffle partitions).")
    state_store: Literal["memory", "rocksdb"] = Field(
        "memory",
        description="Where open windows and aggregates live between batches: `memory` (Spark's default store, "
        "fastest) or `rocksdb` (on local disk, for state larger than executors' memory).",
    )
    sink: Sink = Field(default_factory=LogSink, description="Where the rows go, by `type`.")  # type: ignore[arg-type]
    checkpoint_dir: Path | None = Field(None, description="Default: <state>/daggers/<team>/<name>/checkpoint.")
    telemetry_url: str | None = Field(
        None, description="InfluxDB-compatible URL (e.g. VictoriaMetrics) for `dagger_metrics`; unset: log only."
    )

    @field_validator("trigger_interval")
    @classmethod
    def _trigger_at_most_every_second(cls, v: timedelta) -> timedelta:
        # Each trigger may ask the stream's brokers for their offsets, and every team's daggers share them.
        if v < MIN_TRIGGER_INTERVAL:
            raise ValueError(
                f"at least {MIN_TRIGGER_INTERVAL.total_seconds():g}s (each trigger may ask the stream's brokers, "
                f"which other daggers share), got {v.total_seconds():g}s"
            )
        return v

    @model_validator(mode="after")
    def _unique_tables(self) -> DaggerSpec:
        tables = [s.table.lower() for s in self.streams]
        if len(set(tables)) != len(tables):
            raise ValueError(f"streams: table names must be unique, got {tables}")
        for i, s in enumerate(self.streams):
            if s.idle_timeout <= self.trigger_interval:
                raise ValueError(
                    f"streams.{i}.idle_timeout ({s.idle_timeout}) must be longer than trigger_interval "
                    f"({self.trigger_interval}): a partition would count as idle between two batches"
                )
        return self

    @property
    def qualified_name(self) -> str:
        return f"{self.team}.{self.name}"


class SpecError(ValueError):
    """A spec that does not validate: the message names each bad field."""


def resolve_streams(spec: DaggerSpec, lookup: Callable[[str], CatalogEntry | None]) -> DaggerSpec:
    """The spec with each catalog stream's topics, message and bootstrap servers filled in from `lookup` (the
    registry). Topics or a message a spec gives for a catalog stream must be the catalog's."""
    streams, errors = [], []
    for i, s in enumerate(spec.streams):
        if s.stream is None:
            streams.append(s)
            continue
        entry = lookup(s.stream)
        if entry is None:
            errors.append(f"streams.{i}.stream: no stream {s.stream!r} in the catalog (odin catalog list)")
            continue
        for field, given, known in (("topics", s.topics, entry.topics), ("proto", s.proto, entry.proto)):
            if given and given != known:
                errors.append(
                    f"streams.{i}.{field}: {given!r} is not the catalog's {known!r} for {s.stream}; leave it out"
                )
        kafka = s.kafka.model_copy(
            update={"bootstrap_servers": entry.serving_bootstrap_servers, "cluster": entry.kafka_cluster}
        )
        streams.append(s.model_copy(update={"topics": list(entry.topics), "proto": entry.proto, "kafka": kafka}))
    if errors:
        raise SpecError("\n".join(errors))
    return spec.model_copy(update={"streams": streams})


def parse_spec(data: dict[str, Any]) -> DaggerSpec:
    try:
        return DaggerSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_errors(e)) from None


def check_size(size: int, what: str) -> None:
    if size > MAX_SPEC_BYTES:
        raise SpecError(f"{what}: {size:,} bytes; a spec may have at most {MAX_SPEC_BYTES:,}")


def load_spec(path: Path) -> DaggerSpec:
    """A spec from a YAML or JSON file; relative `schemas` and sink paths resolve against the file's folder."""
    data = read_mapping(path, SpecError)
    base = path.resolve().parent
    data["schemas"] = [str(base / p) for p in data.get("schemas") or []]
    return parse_spec(data)


def json_schema() -> str:
    return json.dumps(DaggerSpec.model_json_schema(), indent=2)
