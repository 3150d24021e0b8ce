"""Load the catalog into the registry, with schema version locking.

Per stream: a new stream is registered at schema version 1. A stream whose message changed gets the next version
if `buf breaking` finds nothing (daggers keep the version they were deployed with: nothing running is touched);
if it finds a breaking change, the stream is refused: the registry keeps the old version, and the report names the
findings and the daggers that decode the old version (what would break if producers moved to the new one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import protos
from odin.catalog import Catalog, CatalogStream
from odin.catalog.schemas import Schema, breaking_changes
from odin.registry import Registry
from odin.registry.records import StreamRecord

Verdict = Literal["added", "unchanged", "updated", "new schema version", "refused"]


@dataclass(frozen=True)
class StreamSync:
    name: str
    verdict: Verdict
    schema_version: int  # the version the registry has for the stream after the sync
    findings: list[str] = field(default_factory=list)  # buf's, when refused
    daggers_on_old: list[str] = field(default_factory=list)  # team/name of daggers locked to an older version

    @property
    def ok(self) -> bool:
        return self.verdict != "refused"


def sync(
    registry: Registry,
    catalog: Catalog,
    environment: str,
    environment_kafka: str,
    actor: str = "odin",
    descriptor_sets: Iterable[Path] = (protos.DESCRIPTOR_SET,),
    environment_perf_kafka: str | None = None,
) -> list[StreamSync]:
    """Every stream of the catalog (perf twins included) into the registry; one history entry per change.
    `environment_kafka` / `environment_perf_kafka`: the environment's own brokers (Catalog.bootstrap_servers)."""
    sets = tuple(descriptor_sets)
    results = []
    for stream in sorted(catalog.all_streams(), key=lambda s: s.perf_twin_of is not None):  # twins after originals
        bootstrap = catalog.bootstrap_servers(stream, environment, environment_kafka, environment_perf_kafka)
        failover = catalog.failover_bootstrap_servers(stream, environment)
        results.append(_sync_stream(registry, stream, (bootstrap, failover), Schema.of(stream.proto, sets), actor))
    return results


def stream_record(stream: CatalogStream, servers: tuple[str, str | None], version: int) -> StreamRecord:
    """The registry's row of a catalog stream: `servers` are its bootstrap and failover servers in the environment."""
    bootstrap, failover = servers
    return StreamRecord(
        name=stream.name,
        description=stream.description,
        kafka_cluster=stream.kafka_cluster,
        bootstrap_servers=bootstrap,
        failover_bootstrap_servers=failover,
        topics=stream.topics,
        proto=stream.proto,
        perf_twin_of=stream.perf_twin_of,
        schema_version=version,
    )


def _sync_stream(
    registry: Registry, stream: CatalogStream, servers: tuple[str, str | None], schema: Schema, actor: str
) -> StreamSync:
    bootstrap = servers[0]  # recorded with an update
    subject = f"stream:{stream.name}"
    known = registry.stream(stream.name)
    versions = registry.schema_versions(stream.name) if known else []
    current = next((v for v in versions if known and v.version == known.schema_version), None)

    def record(version: int) -> StreamRecord:
        return stream_record(stream, servers, version)

    if known is None or current is None:
        with registry.action(actor, "catalog_add", subject, fingerprint=schema.fingerprint) as detail:
            registry.put_stream(record(0))  # the version row refers to the stream
            version = registry.add_schema_version(
                stream.name, schema.fingerprint, schema.proto, schema.descriptor_set_b64
            )
            registry.put_stream(record(version))
            detail["schema_version"] = version
        return StreamSync(stream.name, "added", version)

    if current.fingerprint == schema.fingerprint and current.proto == schema.proto:
        same = {"updated_at": known.updated_at, "on_failover": known.on_failover}  # a failover is not the catalog's
        if known == record(known.schema_version).model_copy(update=same):
            return StreamSync(stream.name, "unchanged", known.schema_version)
        with registry.action(actor, "catalog_update", subject, topics=stream.topics, bootstrap=bootstrap):
            registry.put_stream(record(known.schema_version))
        return StreamSync(stream.name, "updated", known.schema_version)

    old = Schema.stored(current.proto, current.fingerprint, current.descriptor_set)
    findings = breaking_changes(old, schema) if current.proto == schema.proto else [
        f"the stream's message changed from {current.proto} to {schema.proto}: a different message is a new stream"
    ]  # fmt: skip
    # Every dagger reading the stream decodes a version up to the current one, so all are on an older version.
    running = registry.daggers(states=("deploying", "running"))
    locked = [
        f"{d.qualified_name} (v{d.schema_versions[stream.name]})" for d in running if stream.name in d.schema_versions
    ]
    if findings:
        registry.record(
            actor,
            "catalog_schema_change",
            subject,
            "refused",
            f"not wire-compatible with schema version {known.schema_version}: " + "; ".join(findings),
            {"findings": findings, "daggers_on_old": locked, "fingerprint": schema.fingerprint},
        )
        return StreamSync(stream.name, "refused", known.schema_version, findings, locked)
    with registry.action(actor, "catalog_schema_change", subject, fingerprint=schema.fingerprint) as detail:
        version = registry.add_schema_version(stream.name, schema.fingerprint, schema.proto, schema.descriptor_set_b64)
        registry.put_stream(record(version))
        detail.update(schema_version=version, previous=known.schema_version, daggers_on_old=locked)
    return StreamSync(stream.name, "new schema version", version, daggers_on_old=locked)
