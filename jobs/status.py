"""What a dagger's driver says of itself: a small JSON file beside its checkpoint, rewritten at each progress.

The driver runs on a worker the platform does not choose; the checkpoint's directory is the one place both reach
(shared storage on a real deployment), so the lifecycle, its Airflow trigger and `dagger list` read the driver's
state there: started, its first progress, its rates and lag, and how it ended.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobs.telemetry import event_rows, partition_lags, rates

STATUS_FILE = "status.json"
DriverPhase = Literal["starting", "running", "stopped", "failed"]


class DaggerStatus(BaseModel):
    phase: DriverPhase
    run: str = Field(description="Which deployment wrote it: the submission's run id (see jobs/lifecycle.py).")
    started_at: datetime
    updated_at: datetime
    batches: int = 0  # progress reports seen (Spark reports idle triggers too, every 10 s)
    last_batch: int | None = None
    events: int = 0
    input_rate: float = 0.0
    processed_rate: float = 0.0
    lag: int = 0  # events beyond the last batch's end, summed over partitions
    error: str = ""

    def progressed(self, progress: dict[str, Any]) -> DaggerStatus:
        input_rate, processed_rate = rates(progress)
        return self.model_copy(
            update={
                "phase": "running",
                "updated_at": datetime.now(UTC),
                "batches": self.batches + 1,
                "last_batch": progress.get("batchId"),
                "events": self.events + event_rows(progress),
                "input_rate": input_rate,
                "processed_rate": processed_rate,
                "lag": sum(partition_lags(progress).values()),
            }
        )

    def ended(self, phase: DriverPhase, error: str = "") -> DaggerStatus:
        return self.model_copy(update={"phase": phase, "updated_at": datetime.now(UTC), "error": error})


def status_path(checkpoint: Path) -> Path:
    return checkpoint.parent / STATUS_FILE


def write_status(path: Path, status: DaggerStatus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(status.model_dump_json(indent=2) + "\n")
    tmp.replace(path)  # atomic: readers never see half a file


def read_status(path: Path) -> DaggerStatus | None:
    try:
        return DaggerStatus.model_validate_json(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
