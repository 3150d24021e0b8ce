"""The choices the trigger forms offer (teams, ready clusters, catalog streams), as a file in the environment's
state directory. Airflow parses DAG files often and must not touch a database or the network to do it, so the forms
read this file; whatever changes a choice writes it again (`odin team add`, a cluster created or destroyed, and every
health check, which catches the rest). A missing file leaves free text, which the first task checks either way.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from odin.registry import Registry

FILE = "form-choices.json"


@dataclass(frozen=True)
class Choices:
    streams: list[str] = field(default_factory=list)
    teams: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)


def path(state_dir: Path) -> Path:
    return state_dir / "airflow" / FILE


def refresh(registry: Registry, state_dir: Path) -> Choices:
    """Write the registry's choices now (atomically: a parse never reads half a file)."""
    choices = Choices(
        streams=sorted(s.name for s in registry.streams()),
        teams=registry.teams(),
        clusters=sorted({c.name for c in registry.clusters(states=("ready",))}),
    )
    target = path(state_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp") as f:
        json.dump(asdict(choices), f)
    os.replace(f.name, target)
    return choices


def read(state_dir: Path) -> Choices:
    """The choices last written; none (free text) if there are none or the file is unreadable."""
    try:
        data = json.loads(path(state_dir).read_text())
        return Choices(**{k: [str(v) for v in data.get(k, [])] for k in ("streams", "teams", "clusters")})
    except (OSError, ValueError, TypeError, AttributeError):
        return Choices()
