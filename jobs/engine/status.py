"""What a dagger's driver says of itself: a small JSON file beside its checkpoint, rewritten at each progress.

The driver runs on a worker the platform does not choose; the checkpoint's directory is the one place both reach
(shared storage on a real deployment), so the lifecycle, its Airflow trigger, health and `dagger list` read the
driver's state there: started, its first progress, its rates, lag and counters, and how it ended. Beside it, the
run that owns the checkpoint (`claim`): a fencing token, so that only the latest deployment's driver runs.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobs.engine.telemetry import event_rows, late_events, malformed_and_lost, partition_lags, rates, watermark
from odin.paths import write_atomic

STATUS_FILE = "status.json"
OWNER_FILE = "owner"
DRAIN_FILE = "drain"  # the run the platform asked to drain (jobs/lifecycle/daggers.py stop --drain)
DriverPhase = Literal["starting", "running", "stopped", "failed"]


class DaggerStatus(BaseModel):
    phase: DriverPhase
    run: str = Field(description="Which deployment wrote it: the submission's run id (see jobs/lifecycle/daggers.py).")
    submission_id: str | None = Field(
        None, description="The driver's own Spark submission: a master that relaunches a supervised driver (its "
        "worker died) gives it a new one, which the lifecycle follows from here (jobs/lifecycle/daggers.py followed)."
    )  # fmt: skip
    started_at: datetime  # this driver's Python process (a relaunched driver writes a new status)
    updated_at: datetime
    first_progress_at: datetime | None = None  # this driver's first progress report: start-up is the time between
    batches: int = 0  # progress reports seen (Spark reports idle triggers too, every 10 s)
    last_batch: int | None = None
    events: int = 0
    input_rate: float = 0.0
    processed_rate: float = 0.0
    lag: int = 0  # events beyond the last batch's end, summed over partitions
    lags: dict[str, int] = Field(default_factory=dict)  # "topic/partition" -> its lag at the last batch
    # the query's event-time watermark after the last batch: windows ending at or before it are final once the next
    # batch has run (Spark emits what the watermark closed in the batch after the one that moved it)
    watermark: datetime | None = None
    # since the driver started (jobs/engine/telemetry.py): what health compares between two checks
    malformed: int = 0
    late: int = 0
    lost: int = 0
    sink_errors: int = 0  # failed sink write attempts (each retried)
    error: str = ""
    host: str | None = None  # where the driver's Python process runs, and its pid: what a stop ends if it lingers
    pid: int | None = None

    def progressed(self, progress: dict[str, Any], sink_errors: int = 0) -> DaggerStatus:
        input_rate, processed_rate = rates(progress)
        lags = partition_lags(progress)
        now = datetime.now(UTC)
        malformed, lost = malformed_and_lost(progress)
        return self.model_copy(
            update={
                "phase": "running",
                "updated_at": now,
                "first_progress_at": self.first_progress_at or now,
                "batches": self.batches + 1,
                "last_batch": progress.get("batchId"),
                "events": self.events + event_rows(progress),
                "input_rate": input_rate,
                "processed_rate": processed_rate,
                "lag": sum(lags.values()),
                "lags": {f"{topic}/{partition}": lag for (topic, partition), lag in sorted(lags.items())},
                "watermark": watermark(progress) or self.watermark,
                "malformed": self.malformed + malformed,
                "late": self.late + late_events(progress),
                "lost": self.lost + lost,
                "sink_errors": sink_errors,
            }
        )

    @property
    def start_up_s(self) -> float | None:
        """Seconds from this driver's start to its first progress: a relaunch's cost, after a fault."""
        if self.first_progress_at is None:
            return None
        return (self.first_progress_at - self.started_at).total_seconds()

    def ended(self, phase: DriverPhase, error: str = "") -> DaggerStatus:
        return self.model_copy(update={"phase": phase, "updated_at": datetime.now(UTC), "error": error})


def status_path(checkpoint: Path) -> Path:
    return checkpoint.parent / STATUS_FILE


def claim(checkpoint: Path, run: str) -> None:
    """Make `run` the deployment that owns the checkpoint, before its driver is submitted. A driver of any other
    run (one a master relaunches after its worker was lost, while the platform restarted the dagger) finds out and
    ends without touching the checkpoint, the sink or the status file: one writer, whatever Spark relaunches."""
    path = checkpoint.parent / OWNER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, run + "\n")


def owner(checkpoint: Path) -> str | None:
    """The run that owns the checkpoint; None before any claim (a dagger deployed before claims existed)."""
    try:
        return (checkpoint.parent / OWNER_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def request_drain(checkpoint: Path, run: str) -> None:
    """Ask `run`'s driver to drain: read what is left on its streams, close every window, then end (exit 0, which
    supervise does not relaunch). The driver looks at each progress or idle tick (jobs/engine/driver.py)."""
    write_atomic(checkpoint.parent / DRAIN_FILE, run + "\n")


def drain_requested(checkpoint: Path, run: str) -> bool:
    try:
        return (checkpoint.parent / DRAIN_FILE).read_text().strip() == run
    except FileNotFoundError:
        return False


def write_status(path: Path, status: DaggerStatus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, status.model_dump_json(indent=2) + "\n")


def read_status(path: Path) -> DaggerStatus | None:
    try:
        return DaggerStatus.model_validate_json(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


DRIVER_ID = re.compile(r"driver-\d{14}-\d{4,}")  # Spark standalone's: the worker runs a driver in work/<its id>


def own_submission_id() -> str | None:
    """This driver's submission id, from the work directory its worker runs it in (None outside a cluster)."""
    name = Path.cwd().name
    return name if DRIVER_ID.fullmatch(name) else None


def run_lock_path(checkpoint: Path, run: str) -> Path:
    return checkpoint.parent / "runs" / f"{run}.lock"


def hold_run_lock(checkpoint: Path, run: str, wait_s: float = 60.0) -> None:
    """Lock the run's lock file for as long as this process (and what it forks) lives: the OS releases it when the
    last of them is gone, which is how a stop knows the driver's whole process tree ended. Waits (bounded) for a
    previous launch of the same run to let go. The file stays open, unreferenced, until the process ends."""
    path = run_lock_path(checkpoint, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return  # run without it: a stop then waits its bound and says it could not confirm the end
            time.sleep(0.5)


def run_alive(checkpoint: Path, run: str) -> bool:
    """Whether a process of the run's driver still holds its lock (False once the last one is gone)."""
    try:
        fd = os.open(run_lock_path(checkpoint, run), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock this call took
