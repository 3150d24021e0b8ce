"""What a deployed dagger reads and writes is the platform's to decide: a team asks, the platform places.

A deploy request names catalog streams and an output of its team's; the platform fills in every address, credential,
path and topic from what it reviews and provisions: the stream catalog for inputs; for outputs, the team's own
PostgreSQL database, topics under `<team>.` on the Kafka clusters the catalog opens to teams, measurements under
`<team>_` in the platform's time-series DB with a `team` tag it sets; and, under the dagger's own name, its
checkpoint, dead-letter topic and telemetry. `confine` checks a request against that before anything is touched,
naming each field and what is allowed, and returns the spec the driver runs.

A value a request leaves at its default, or gives as the platform would, passes: `confine` of its own result is
that result, so a restart, a move or an update of a recorded dagger goes through the same check. `dagger run` on a
developer's own machine is not confined; everything that runs on the platform is (deploy, update, failover, health).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from jobs.spec import (
    CatalogEntry,
    DaggerSpec,
    InfluxSink,
    KafkaSink,
    LogSink,
    PostgresSink,
    SpecError,
    StreamSpec,
    resolve_streams,
)
from odin.teams.databases import TeamDatabase
from odin.teams.secrets import TeamSecrets

# librdkafka settings a request may tune: none says where to connect, as whom, or how the platform's exactly-once
# writes work (the catalog's clusters' own settings come from the platform)
CONSUMER_TUNING = frozenset(
    {"fetch.min.bytes", "fetch.wait.max.ms", "fetch.max.bytes", "max.partition.fetch.bytes", "queued.min.messages",
     "queued.max.messages.kbytes", "receive.message.max.bytes"}
)  # fmt: skip
PRODUCER_TUNING = frozenset(
    {"linger.ms", "queue.buffering.max.ms", "batch.size", "batch.num.messages", "compression.type",
     "compression.codec", "queue.buffering.max.messages", "queue.buffering.max.kbytes", "message.max.bytes"}
)  # fmt: skip


@dataclass(frozen=True)
class Places:
    """What the platform provides daggers in one environment."""

    state_dir: Path
    streams: Callable[[str], CatalogEntry | None]  # the catalog (the registry's streams)
    catalog_topics: frozenset[str]  # every catalog stream's topics: never a sink's
    tsdb_url: str | None  # the platform's time-series DB (InfluxDB write API)
    kafka_outputs: dict[str, str]  # catalog Kafka clusters open to teams' outputs -> their bootstrap servers
    database: Callable[[str], TeamDatabase]  # where a team's database is
    provision_database: Callable[[str], object]  # make it (or bring it up to date): for a request that passed

    def dagger_dir(self, team: str, name: str) -> Path:
        return self.state_dir / "daggers" / team / name

    def checkpoint(self, team: str, name: str) -> Path:
        return self.dagger_dir(team, name) / "checkpoint"


def dead_letter_topic(team: str, name: str, topic: str) -> str:
    """Under the team's prefix, and named for the stream's (first) topic: a perf stream's stays a perf topic
    (`...-perf.dlq`), so a broker holding it is still the perf cluster's alone (Loki's broker faults)."""
    return f"{team}.{name}.{topic}.dlq"


def measurement_prefix(team: str) -> str:
    """`<team>_`: a team slug has no `_`, so no team's prefix starts another's."""
    return f"{team}_"


def _default(model: type[BaseModel], field: str) -> Any:
    return model.model_fields[field].get_default(call_default_factory=True)


def _chosen(model: BaseModel, field: str, *allowed: Any) -> bool:
    """Whether the request set `field` to something other than its default or what the platform would."""
    value = getattr(model, field)
    return value != _default(type(model), field) and value not in allowed


def _keys(config: dict[str, str], allowed: Iterable[str], where: str) -> list[str]:
    refused = sorted(k for k in config if k.strip().lower() not in allowed)
    if not refused:
        return []
    return [f"{where}: {', '.join(refused)} may not be set on the platform (it decides where and how daggers connect); "
            f"tuning allowed: {', '.join(sorted(allowed))}"]  # fmt: skip


def _stream_problems(i: int, s: StreamSpec, team: str, name: str, places: Places) -> list[str]:
    at = f"streams.{i}"
    if s.stream is None:
        return [f"{at}.stream: required: a deployed dagger reads streams of the platform's catalog only (odin catalog "
                "list), not topics it names"]  # fmt: skip
    errors = []
    entry = places.streams(s.stream)
    if entry is not None:
        where = {entry.serving_bootstrap_servers, getattr(entry, "bootstrap_servers", None)}
        if _chosen(s.kafka, "bootstrap_servers", *where):
            errors.append(f"{at}.kafka.bootstrap_servers: the catalog says where {s.stream} is; leave it out")
        if _chosen(s.kafka, "cluster", entry.kafka_cluster):
            errors.append(f"{at}.kafka.cluster: {s.stream} is on {entry.kafka_cluster}; leave it out")
    errors += _keys(s.kafka.config, CONSUMER_TUNING, f"{at}.kafka.config")
    if s.kafka.password_env is not None:
        errors.append(f"{at}.kafka.password_env: the platform holds the catalog clusters' credentials; leave it out")
    if s.kafka.consumer_group is not None and not s.kafka.consumer_group.startswith(f"{team}."):
        errors.append(f"{at}.kafka.consumer_group: {s.kafka.consumer_group!r} is not under team {team}'s prefix "
                      f"'{team}.'; e.g. {team}.{name}")  # fmt: skip
    placed = dead_letter_topic(team, name, entry.topics[0]) if entry is not None else None
    if s.dlq_topic is not None and s.dlq_topic != placed:
        errors.append(f"{at}.dlq_topic: the platform places the dead-letter topic (<team>.<name>.<topic>.dlq); "
                      "leave it out")  # fmt: skip
    return errors


def _sink_problems(spec: DaggerSpec, places: Places) -> list[str]:
    team, sink = spec.team, spec.sink
    if isinstance(sink, LogSink):
        return ["sink.path: a deployed dagger's log sink writes to its driver's log; leave it out"] if sink.path else []
    if isinstance(sink, InfluxSink):
        if places.tsdb_url is None:
            return ["sink.type: influx: this environment has no time-series DB; pick another sink"]
        errors = []
        if _chosen(sink, "url", places.tsdb_url):
            errors.append(f"sink.url: a deployed dagger writes to the platform's time-series DB ({places.tsdb_url}); "
                          "leave it out")  # fmt: skip
        errors += [f"sink.{f}: the platform's time-series DB takes no credentials from a spec; leave it out"
                   for f in ("token_env", "username_env", "password_env") if getattr(sink, f)]  # fmt: skip
        measurement, prefix = sink.measurement or f"{team}_{spec.name}", measurement_prefix(team)
        if not measurement.startswith(prefix) or len(measurement) == len(prefix):
            errors.append(f"sink.measurement: {measurement!r} is not under team {team}'s prefix {prefix!r}; name it "
                          f"{prefix}<something>")  # fmt: skip
        if _chosen(sink, "tags", {"team": team}):
            errors.append(f"sink.tags: the platform sets them (team={team}); leave them out")
        return errors
    if isinstance(sink, KafkaSink):
        if not places.kafka_outputs:
            return ["sink.type: kafka: no catalog Kafka cluster takes teams' outputs here; pick another sink"]
        errors = []
        cluster = sink.cluster or next(iter(places.kafka_outputs))
        if cluster not in places.kafka_outputs:
            errors.append(
                f"sink.cluster: {cluster!r} takes no teams' outputs; one of {', '.join(places.kafka_outputs)}"
            )
        elif _chosen(sink, "bootstrap_servers", places.kafka_outputs[cluster]):
            errors.append("sink.bootstrap_servers: the platform says where its clusters are; name the catalog's "
                          f"cluster in sink.cluster ({', '.join(places.kafka_outputs)}) and leave it out")  # fmt: skip
        if not sink.topic.startswith(f"{team}.") or sink.topic in places.catalog_topics:
            errors.append(f"sink.topic: {sink.topic!r}: a team writes to topics under its prefix '{team}.' only, "
                          f"never a catalog stream's; e.g. {team}.{spec.name}")  # fmt: skip
        errors += _keys(sink.config, PRODUCER_TUNING, "sink.config")
        if sink.password_env is not None:
            errors.append("sink.password_env: the platform holds its Kafka clusters' credentials; leave it out")
        return errors
    assert isinstance(sink, PostgresSink)
    if (sink.target or team) != team:
        return [f"sink.target: {sink.target!r}: team {team} writes to its own database only (target {team})"]
    return []


def placed_sink(spec: DaggerSpec, places: Places) -> Any:
    """Where the platform puts the spec's sink (for a spec `confine` let through)."""
    team, sink = spec.team, spec.sink
    if isinstance(sink, InfluxSink):
        measurement = sink.measurement or f"{team}_{spec.name}"
        return sink.model_copy(update={"url": places.tsdb_url, "measurement": measurement, "tags": {"team": team}})
    if isinstance(sink, KafkaSink):
        cluster = sink.cluster or next(iter(places.kafka_outputs))
        return sink.model_copy(update={"cluster": cluster, "bootstrap_servers": places.kafka_outputs[cluster]})
    if isinstance(sink, PostgresSink):
        db = places.database(team)
        return sink.model_copy(update={"target": team, "dsn": db.dsn, "password_env": db.password_env})
    return sink


def _postgres_problems(spec: DaggerSpec, db: TeamDatabase) -> list[str]:
    sink = spec.sink
    if not isinstance(sink, PostgresSink):
        return []
    errors = []
    if _chosen(sink, "dsn", db.dsn):
        errors.append("sink.dsn: the platform connects a deployed dagger to its team's database (sink.target); "
                      "leave it out")  # fmt: skip
    if _chosen(sink, "password_env", db.password_env):
        errors.append("sink.password_env: the platform gives a deployed dagger its team database's password; "
                      "leave it out")  # fmt: skip
    return errors


def confine(spec: DaggerSpec, places: Places) -> DaggerSpec:
    """The spec as the platform runs it, or SpecError naming every field a deploy request may not choose."""
    team, name = spec.team, spec.name
    errors = []
    if spec.schemas:
        errors.append("schemas: a deployed dagger decodes its catalog streams' messages (protos/); leave it out")
    if _chosen(spec, "checkpoint_dir", places.checkpoint(team, name)):
        errors.append(f"checkpoint_dir: the platform places a dagger's checkpoint ({places.checkpoint(team, name)}); "
                      "leave it out")  # fmt: skip
    if _chosen(spec, "telemetry_url", places.tsdb_url):
        errors.append("telemetry_url: the platform sends a deployed dagger's metrics to its time-series DB; leave it "
                      "out")  # fmt: skip
    for i, s in enumerate(spec.streams):
        errors += _stream_problems(i, s, team, name, places)
    errors += _sink_problems(spec, places)
    if errors:
        raise SpecError("\n".join(errors))
    resolved = resolve_streams(spec, places.streams)  # SpecError: a stream not in the catalog
    db = places.database(team) if isinstance(spec.sink, PostgresSink) else None
    if db is not None and (problems := _postgres_problems(spec, db)):
        raise SpecError("\n".join(problems))
    if db is not None:  # provisioned on first use, and only for a request that passed
        places.provision_database(team)
    streams = [s.model_copy(update={"dlq_topic": dead_letter_topic(team, name, s.topics[0])}) for s in resolved.streams]
    return resolved.model_copy(
        update={
            "schemas": [],
            "checkpoint_dir": places.checkpoint(team, name),
            "telemetry_url": places.tsdb_url,
            "streams": streams,
            "sink": placed_sink(spec, places),
        }
    )


def required(spec: DaggerSpec) -> dict[str, str]:
    """The environment variables the spec's sink and streams name, by the field that names each."""
    out = {f"streams.{i}.kafka.password_env": s.kafka.password_env for i, s in enumerate(spec.streams)}
    out = {k: v for k, v in out.items() if v}
    for field in ("password_env", "token_env", "username_env"):
        name = getattr(spec.sink, field, None)
        if name:
            out[f"sink.{field}"] = name
    return out


def missing(spec: DaggerSpec, secrets: TeamSecrets) -> list[str]:
    """One line per secret the spec needs that its team does not have, saying how to add it."""
    have = set(secrets.names(spec.team))
    return [
        f"{field}: {name} is not a secret of team {spec.team}: add it with `odin secret set {spec.team} {name}`"
        for field, name in required(spec).items()
        if name not in have
    ]
