"""Catalog streams as an environment has them: what `dagger` commands resolve `stream:` against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odin import catalog
from odin.catalog.sync import stream_record
from odin.endpoints import Endpoints
from odin.environment import nodes
from odin.registry import Registry, RegistryError
from odin.registry.records import StreamRecord

Lookup = Callable[[str], StreamRecord | None]


def registry_streams(environment: str = "local", state_dir: Path | None = None) -> Lookup:
    """A lookup of the environment's catalog streams by name; RegistryError says what to do when there is none."""
    try:
        url = Endpoints(nodes(environment, state_dir)).registry_url
    except LookupError:
        raise RegistryError(
            f"catalog streams are resolved in the platform registry, and environment {environment!r} has none: "
            "run `odin up` (or give the stream's topics and proto)"
        ) from None
    return _registry_lookup(url)


def _registry_lookup(url: str) -> Lookup:
    registry = Registry.connect(url)
    try:
        streams = {s.name: s for s in registry.streams()}
    finally:
        registry.close()
    return streams.get


def file_streams(environment: str, environment_kafka: str, environment_perf_kafka: str | None = None) -> Lookup:
    """The reviewed catalog file's streams, where they would be in `environment` (Catalog.bootstrap_servers), at
    schema version 0: no registry has locked one."""
    reviewed = catalog.load()
    streams = {
        s.name: stream_record(
            s,
            (
                reviewed.bootstrap_servers(s, environment, environment_kafka, environment_perf_kafka),
                reviewed.failover_bootstrap_servers(s, environment),
            ),
            0,
        )
        for s in reviewed.all_streams()
    }
    return streams.get


@dataclass(frozen=True)
class StreamSource:
    lookup: Lookup
    registry: bool  # False: the catalog file, because the environment runs no registry


def _or_none(address: Callable[[], str]) -> str | None:
    try:
        return address()
    except LookupError:  # the environment has no such node
        return None


def environment_streams(environment: str, state_dir: Path | None, default_kafka: str) -> StreamSource:
    """The registry's streams when the environment runs one; else the catalog file's, on the environment's own
    brokers (`default_kafka` where it has none yet), so a spec validates, previews and runs on a partial or no stack.
    Deploys always go through the registry (jobs.lifecycle), which locks each stream's schema version."""
    where = Endpoints(nodes(environment, state_dir))
    url = _or_none(lambda: where.registry_url)
    if url is not None:
        return StreamSource(_registry_lookup(url), registry=True)
    kafka = _or_none(lambda: where.kafka_bootstrap) or default_kafka
    lookup = file_streams(environment, kafka, _or_none(lambda: where.perf_kafka_bootstrap))
    return StreamSource(lookup, registry=False)
