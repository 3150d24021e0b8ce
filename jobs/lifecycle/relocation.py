"""Moving a cluster's daggers off it when it is destroyed: the lifecycle's job, which Odin calls through its
`odin.cluster_tenants` entry point (pyproject.toml) without importing the dagger lifecycle."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.cluster.lifecycle import Relocate
from odin.registry import Registry
from odin.registry.records import DaggerRecord

Log = Callable[[str], None]


def relocation(registry: Registry, state_dir: Path, actor: str, log: Log) -> Relocate:
    """What destroy does with the daggers still on the cluster: stop them, or redeploy each on another cluster of
    the team, resuming its checkpoint (the spec is unchanged, so the checkpoint can serve it)."""
    daggers = Daggers(registry, state_dir, log)

    def relocate(running: list[DaggerRecord], target: str | None) -> None:
        for d in running:
            if target is None:
                daggers.stop(d.team, d.name, actor)
            else:
                daggers.update(parse_spec(d.spec), actor, cluster=target)

    return relocate
