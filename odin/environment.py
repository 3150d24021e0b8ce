"""Opening an Odin environment: its registry and state directory, as every entry point (CLIs, Airflow tasks, Loki)
reaches them. The one place that knows the way there (stack -> endpoints -> registry)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odin.endpoints import Endpoints, Node
from odin.registry import Registry
from odin.stack import Stack


def connect_registry(nodes: dict[str, Node]) -> Registry:
    """The registry of the environment whose nodes these are (Stack.nodes()); the caller closes it. LookupError if
    the environment has no PostgreSQL."""
    return Registry.connect(Endpoints(nodes).registry_url)


@contextmanager
def opened(environment: str = "local", state_dir: Path | None = None) -> Iterator[tuple[Registry, Path]]:
    """The environment's registry (closed on exit) and its state directory."""
    stack = Stack(environment, state_dir)
    registry = connect_registry(stack.nodes())
    try:
        yield registry, stack.state_dir
    finally:
        registry.close()
