"""The simulation store: Loki's runs and their journals, in the platform registry (tables `simulations` and
`simulation_journal`, migration 0004). Every step of a run is journaled as it happens, so a run that died can still
have its faults reverted (`loki halt`) and be read back."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import insert, select, update

from loki.faults.procs import start_time
from loki.playbook import Playbook
from odin.registry import Registry
from odin.registry.schema import simulation_journal, simulations

SimulationState = Literal["running", "finished", "halted", "failed"]
HALT_REQUESTED = "halt.requested"


class Simulation(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    playbook: str
    environment: str
    team: str | None = None
    cluster: str | None = None
    spec: dict[str, Any]
    state: SimulationState
    actor: str
    pid: int | None = None
    verdict: str | None = None
    score: float | None = None
    report: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime | None = None
    ended_at: datetime | None = None


class JournalEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    run_id: str
    at: datetime
    step: str
    detail: dict[str, Any] = Field(default_factory=dict)


def new_run_id() -> str:
    """Sortable by start, unique, and usable in names (topics, tables, dagger names): r<yyyymmddhhmmss><hex>."""
    return f"r{datetime.now(UTC):%Y%m%d%H%M%S}{uuid.uuid4().hex[:6]}"


class SimulationStore:
    def __init__(self, registry: Registry) -> None:
        self.engine = registry.engine

    def start(self, run_id: str, book: Playbook, actor: str) -> Simulation:
        values = dict(
            id=run_id,
            playbook=book.name,
            environment=book.target.environment,
            team=book.target.team,
            cluster=book.target.cluster,
            spec=book.model_dump(mode="json"),
            state="running",
            actor=actor,
            pid=os.getpid(),
            # with the pid's start time, `loki halt` never signals another process that got the pid since
            summary={"host": socket.gethostname(), "pid_started": start_time(os.getpid())},
        )
        with self.engine.begin() as conn:
            conn.execute(insert(simulations).values(**values))
        found = self.get(run_id)
        assert found is not None
        return found

    def journal(self, run_id: str, step: str, **detail: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(simulation_journal).values(run_id=run_id, step=step, detail=detail))

    def finish(
        self,
        run_id: str,
        state: SimulationState,
        *,
        verdict: str | None = None,
        score: float | None = None,
        report: str | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        values: dict[str, Any] = dict(state=state, pid=None, ended_at=datetime.now(UTC))
        values.update({k: v for k, v in dict(verdict=verdict, score=score, report=report).items() if v is not None})
        if summary is not None:
            values["summary"] = summary
        with self.engine.begin() as conn:
            conn.execute(update(simulations).where(simulations.c.id == run_id).values(**values))

    def request_halt(self, run_id: str, actor: str) -> None:
        """`loki halt`: the run stops at its next sample, wherever it runs (a signal reaches only this host)."""
        self.journal(run_id, HALT_REQUESTED, by=actor)

    def halt_requested(self, run_id: str) -> bool:
        query = select(simulation_journal.c.id).where(
            simulation_journal.c.run_id == run_id, simulation_journal.c.step == HALT_REQUESTED
        )
        with self.engine.connect() as conn:
            return conn.execute(query.limit(1)).first() is not None

    def get(self, run_id: str) -> Simulation | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(simulations).where(simulations.c.id == run_id)).mappings().first()
        return Simulation.model_validate(dict(row)) if row else None

    def runs(self, playbook: str | None = None, state: SimulationState | None = None) -> list[Simulation]:
        query = select(simulations).order_by(simulations.c.started_at.desc())
        if playbook is not None:
            query = query.where(simulations.c.playbook == playbook)
        if state is not None:
            query = query.where(simulations.c.state == state)
        with self.engine.connect() as conn:
            return [Simulation.model_validate(dict(r)) for r in conn.execute(query).mappings()]

    def entries(self, run_id: str) -> list[JournalEntry]:
        query = select(simulation_journal).where(simulation_journal.c.run_id == run_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(simulation_journal.c.id)).mappings()
            return [JournalEntry.model_validate(dict(r)) for r in rows]
