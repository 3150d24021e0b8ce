"""Catalog streams as an environment's registry has them: what `dagger` commands resolve `stream:` against."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from odin.endpoints import Endpoints
from odin.registry import Registry, RegistryError
from odin.registry.records import StreamRecord
from odin.stack import Stack


def registry_streams(environment: str = "local", state_dir: Path | None = None) -> Callable[[str], StreamRecord | None]:
    """A lookup of the environment's catalog streams by name; RegistryError says what to do when there is none."""
    try:
        url = Endpoints(Stack(environment, state_dir).nodes()).registry_url
    except LookupError:
        raise RegistryError(
            f"catalog streams are resolved in the platform registry, and environment {environment!r} has none: "
            "run `odin up` (or give the stream's topics and proto)"
        ) from None
    registry = Registry.connect(url)
    try:
        streams = {s.name: s for s in registry.streams()}
    finally:
        registry.close()
    return streams.get
