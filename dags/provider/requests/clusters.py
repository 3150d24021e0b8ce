"""What the cluster DAGs do (dags/odin_clusters.py stays thin): validate a run's params through ClusterSpec,
check who triggered it, then create, scale or destroy through Clusters, logging each step to the task log.
Any refusal happens before anything is touched and is recorded in the registry's history."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from odin.cluster.lifecycle import Clusters
from odin.cluster.spec import ClusterSpec
from odin.environment import opened
from odin.models import format_errors
from odin.registry import Refused, Registry
from odin.teams.access import once, require_platform_engineer
from odin.teams.redaction import redacted

Log = Callable[[str], None]
SPEC_FIELDS = ("team", "environment", "masters", "workers", "worker_cores", "worker_memory")


def cluster_spec(params: Mapping[str, Any]) -> ClusterSpec:
    """A run's params (`cluster` is the spec's `name`) as a ClusterSpec; Refused names every bad field."""
    fields = {k: params[k] for k in SPEC_FIELDS if params.get(k) is not None}
    try:
        return ClusterSpec.model_validate({**fields, "name": params.get("cluster")})
    except ValidationError as e:
        raise Refused(format_errors(e).replace("name:", "cluster:")) from None


def _checked(registry: Registry, params: Mapping[str, Any], user: str | None, action: str) -> ClusterSpec:
    """Refusals of bad params or users go to the history too: who tried what."""
    subject = f"cluster:{params.get('team')}/{params.get('cluster')}"
    with registry.refusals(user, action, subject, {"params": redacted(dict(params))}):
        spec = cluster_spec(params)
        require_platform_engineer(registry, user)
    return spec


def create(params: Mapping[str, Any], user: str | None, log: Log, state_dir: Path | None = None) -> dict[str, Any]:
    with opened(state_dir=state_dir) as (registry, state):
        spec = _checked(registry, params, user, "cluster_create")
        report = Clusters(registry, state, log).create(spec, user or "?")
    return report.record.model_dump(mode="json")


def scale(params: Mapping[str, Any], user: str | None, log: Log, state_dir: Path | None = None) -> dict[str, Any]:
    with opened(state_dir=state_dir) as (registry, state):
        spec = _checked(registry, params, user, "cluster_scale")
        report = Clusters(registry, state, log).scale(spec.team, spec.name, spec.workers, user or "?")
    return report.record.model_dump(mode="json")


def destroy(
    params: Mapping[str, Any], user: str | None, log: Log, state_dir: Path | None = None, run_id: str | None = None
) -> dict[str, Any]:
    with opened(state_dir=state_dir) as (registry, state):
        spec = _checked(registry, params, user, "cluster_destroy")
        once(registry, f"cluster:{spec.qualified_name}", "cluster_destroy", user, run_id)
        Clusters(registry, state, log).destroy(
            spec.team,
            spec.name,
            user or "?",
            stop_daggers=bool(params.get("stop_daggers")),
            move_daggers_to=params.get("move_daggers_to") or None,
        )
    return {"cluster": spec.qualified_name, "state": "destroyed"}
