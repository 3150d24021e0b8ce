"""Opening an Odin environment: its registry and state directory, as every entry point (CLIs, Airflow tasks, Loki)
reaches them. The one place that knows the way there (Terraform's outputs -> endpoints -> registry), without
loading Terraform or Ansible: the many short processes that only open the registry pay for neither."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odin.endpoints import Endpoints, Node
from odin.paths import default_state_dir
from odin.provision import tfstate
from odin.registry import Registry


def nodes(environment: str = "local", state_dir: Path | None = None) -> dict[str, Node]:
    """The environment's nodes as its last `odin up` left them (Stack.nodes(), read the same way)."""
    tfstate.config_dir(environment)  # an environment Odin does not know is an error, not an empty one
    return tfstate.outputs(tfstate.work_dir(state_dir or default_state_dir(), environment)).get("nodes", {})


def connect_registry(nodes: dict[str, Node]) -> Registry:
    """The registry of the environment whose nodes these are (Stack.nodes()); the caller closes it. LookupError if
    the environment has no PostgreSQL."""
    return Registry.connect(Endpoints(nodes).registry_url)


@contextmanager
def opened(environment: str = "local", state_dir: Path | None = None) -> Iterator[tuple[Registry, Path]]:
    """The environment's registry (closed on exit) and its state directory."""
    state_dir = state_dir or default_state_dir()
    registry = connect_registry(nodes(environment, state_dir))
    try:
        yield registry, state_dir
    finally:
        registry.close()
