"""A dagger's health: what the platform observed of it, and the verdict with its reasons and the action it calls for.

Pure: `judge` takes an Observation (the registry's record, the master's view of the driver, the driver's status
file, its cluster's health, the restarts already spent, the previous check) and returns DaggerHealth. Gathering
the observation and acting on the verdict are jobs/health/checkup.py's. Trends (lag growing, throughput against the
dagger's own normal, malformed/late/lost/sink-error spikes) compare with the previous check, carried in its report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from pydantic import BaseModel, Field

from jobs.engine.status import DaggerStatus
from jobs.lifecycle.submission import DriverStatus
from odin.cluster.health import ClusterHealth
from odin.registry.records import DaggerRecord

Verdict = Literal["healthy", "degraded", "failed", "crashlooping"]
# restart: end what is left of the driver, submit again on the checkpoint (the new run's claim ends any older
# driver Spark relaunches, jobs/engine/status.py); give_up: the restart budget is spent: crashlooping, page.
Action = Literal["none", "restart", "give_up"]
WAITING = ("SUBMITTED", "RELAUNCHING")  # the master has the driver queued for a worker
LEVEL: dict[Verdict, int] = {"healthy": 0, "degraded": 1, "failed": 2, "crashlooping": 3}
# What a check found, by name: the TSDB's `dagger_health` has a 0/1 field of each for the alert rules
# (odin/alerting/rules), so trends are judged once, here, and alerting routes what was judged.
Signal = Literal[
    "stalled", "lag_growing", "throughput_collapsed", "malformed_spike", "late_spike", "lost", "sink_errors"
]
SIGNALS: tuple[Signal, ...] = get_args(Signal)


class HealthPolicy(BaseModel):
    stall_after: timedelta = Field(
        timedelta(seconds=90),
        description="No progress for this long is a stalled query (Spark reports progress every trigger, and every "
        "10 s when idle).",
    )
    start_grace: timedelta = Field(
        timedelta(seconds=180), description="How long a driver may be starting or queued for a worker."
    )
    restart_budget: int = Field(3, ge=0, description="Restarts allowed within `budget_window`; then crashlooping.")
    budget_window: timedelta = Field(timedelta(minutes=30))
    lag_growth_checks: int = Field(3, ge=1, description="Lag grew this many checks in a row: degraded.")
    collapse_ratio: float = Field(
        0.2, gt=0, lt=1, description="Processed rate below this share of the dagger's normal, with input waiting."
    )
    spike_ratio: float = Field(0.01, gt=0, description="Malformed or late events above this share of those read.")
    kafka_failover_after_checks: int = Field(
        2,
        ge=1,
        description="A catalog stream's Kafka cluster unreachable this many checks in a row switches the stream to "
        "its failover mirror (when it has one that answers) and restarts its daggers there.",
    )
    failover_after_checks: int = Field(
        2,
        ge=1,
        description="A cluster down (no active master or no worker alive) this many checks in a row, healing "
        "notwithstanding, has its daggers moved to another cluster of its team, if the team allows it.",
    )


class DaggerHealth(BaseModel):
    """One dagger at one check: the verdict, why, and what was seen (the JSON report's entry, the TSDB's point)."""

    team: str
    name: str
    cluster: str | None
    checked_at: datetime
    state: str  # the registry's
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    signals: list[Signal] = Field(default_factory=list)
    action: Action = "none"
    run: str | None = None  # the driver run the status file is of
    driver_state: str | None = None
    driver_id: str | None = None  # the driver's submission id: the master's, else the registry's
    # where Spark shows the driver (jobs/lifecycle/logs.py), when its cluster's master answers
    app_ui: str | None = None
    driver_log_ui: str | None = None
    progress_age_s: float | None = None
    lag: int = 0
    lags: dict[str, int] = Field(default_factory=dict)
    lag_growth: int = 0  # checks in a row the lag grew
    input_rate: float = 0.0
    processed_rate: float = 0.0
    normal_rate: float | None = None  # the processed rate of its healthy checks, smoothed
    events: int = 0
    malformed: int = 0
    late: int = 0
    lost: int = 0
    sink_errors: int = 0
    restarts: int = 0  # within the budget window
    waiting_since: datetime | None = None  # first check that saw the driver queued for a worker

    @property
    def qualified_name(self) -> str:
        return f"{self.team}/{self.name}"


@dataclass(frozen=True)
class Observation:
    record: DaggerRecord
    now: datetime
    driver: DriverStatus | None = None
    driver_error: str = ""  # why `driver` is None
    status: DaggerStatus | None = None
    cluster: ClusterHealth | None = None
    restarts: int = 0
    previous: DaggerHealth | None = None


def _since(previous: DaggerHealth | None, status: DaggerStatus, field: str) -> int:
    """How much a cumulative counter grew since the previous check (all of it after a driver restart)."""
    now = int(getattr(status, field))
    if previous is None or previous.run != status.run:
        return now
    return max(0, now - int(getattr(previous, field)))


def _failures(o: Observation, policy: HealthPolicy) -> tuple[list[str], Action, list[Signal]]:
    """Why the dagger is not running, what to do, and what was seen; ([], "none", []) when it runs."""
    record, driver, status = o.record, o.driver, o.status
    if record.state == "failed":
        return ["its last deployment or restart failed"], "restart", []
    if driver is None:
        return [], "none", []  # no master answers: the cluster's health says why; the driver may well be running
    if driver.final:
        message = driver.message.strip().splitlines()[0] if driver.message.strip() else "no message"
        return [f"its driver ended {driver.state}: {message}"], "restart", []
    alive = o.cluster.alive_workers if o.cluster is not None and o.cluster.active_master is not None else None
    if driver.state == "RUNNING" and driver.worker and alive is not None and driver.worker not in alive:
        return [f"its driver's worker {driver.worker} is not alive"], "restart", []
    if status is not None and status.phase == "failed":
        return [f"its query failed: {status.error[:300]}"], "restart", []
    if driver.state in WAITING:
        # RELAUNCHING: the master has already made a new driver for it (Spark's Master.relaunchDriver), which the
        # lifecycle follows once it starts. With a live worker to run it, a restart would only race it for the
        # cluster's cores: it has `start_grace`, as a queued driver has. With none, it waits for the heal.
        relaunched_somewhere = driver.state == "RELAUNCHING" and o.cluster is not None and bool(o.cluster.alive_workers)
        if not relaunched_somewhere and o.cluster is not None and not o.cluster.ok:
            # queued for a worker of a cluster about to be healed: ended now, resubmitted after the heal, rather
            # than left for the master to relaunch at an unknown moment
            problems = "; ".join(o.cluster.problems)
            return [f"its driver is {driver.state} on a cluster with problems: {problems}"], "restart", []
        waiting_since = o.previous.waiting_since if o.previous is not None else None
        if waiting_since is not None and o.now - waiting_since > policy.start_grace:
            grace = policy.start_grace.total_seconds()
            return [f"its driver has been {driver.state} for over {grace:.0f} s"], "restart", []
    if status is not None and status.batches > 0 and o.now - status.updated_at > policy.stall_after:
        age = (o.now - status.updated_at).total_seconds()
        return [f"no progress for {age:.0f} s (query stalled)"], "restart", ["stalled"]
    return [], "none", []


def judge(o: Observation, policy: HealthPolicy) -> DaggerHealth:
    record, status, previous = o.record, o.status, o.previous
    health = DaggerHealth(
        team=record.team,
        name=record.name,
        cluster=record.cluster,
        checked_at=o.now,
        state=record.state,
        verdict="healthy",
        driver_state=o.driver.state if o.driver else None,
        driver_id=o.driver.submission_id if o.driver else record.submission_id,
        restarts=o.restarts,
        normal_rate=previous.normal_rate if previous else None,
    )
    if o.driver is not None and o.driver.state in WAITING:
        waiting = previous.waiting_since if previous is not None and previous.waiting_since else o.now
        health = health.model_copy(update={"waiting_since": waiting})
    if record.state == "crashlooping":
        return health.model_copy(
            update={"verdict": "crashlooping", "reasons": [f"{o.restarts} restart(s) within the budget window"]}
        )
    reasons, action, signals = _failures(o, policy)
    if reasons:
        if action == "restart" and o.restarts >= policy.restart_budget:
            window = policy.budget_window.total_seconds() / 60
            reasons.append(f"restart budget spent ({o.restarts} within {window:.0f} min)")
            verdict: dict[str, object] = {"verdict": "crashlooping", "reasons": reasons, "action": "give_up"}
        else:
            verdict = {"verdict": "failed", "reasons": reasons, "action": action}
        return health.model_copy(update={**verdict, "signals": signals})
    degraded = []
    if o.driver is None:
        degraded.append(f"no master answers for its driver: {o.driver_error}")
    elif o.driver.state in WAITING:
        degraded.append(f"its driver is {o.driver.state}")
    if status is None or status.batches == 0:
        if not degraded and record.state == "running":
            degraded.append("no progress reported yet")
        return health.model_copy(update={"verdict": "degraded" if degraded else "healthy", "reasons": degraded})
    fresh = previous is not None and previous.run == status.run
    growth = (previous.lag_growth + 1 if status.lag > previous.lag else 0) if fresh and previous else 0
    normal = health.normal_rate
    read = _since(previous, status, "events")
    malformed, late = _since(previous, status, "malformed"), _since(previous, status, "late")
    lost, sink_errors = _since(previous, status, "lost"), _since(previous, status, "sink_errors")
    seen: list[Signal] = []

    def found(signal: Signal, reason: str) -> None:
        seen.append(signal)
        degraded.append(reason)

    if growth >= policy.lag_growth_checks:
        found("lag_growing", f"lag grew {growth} checks in a row (now {status.lag})")
    if normal and status.lag > 0 and status.processed_rate < policy.collapse_ratio * normal:
        rate = status.processed_rate
        found("throughput_collapsed", f"throughput collapsed: {rate:.0f}/s against a normal {normal:.0f}/s")
    if malformed > policy.spike_ratio * max(read, 1):
        found("malformed_spike", f"{malformed} malformed events since the last check")
    if late > policy.spike_ratio * max(read, 1):
        found("late_spike", f"{late} late events since the last check")
    if lost:
        found("lost", f"{lost} events lost since the last check (gaps in the stream)")
    if sink_errors:
        found("sink_errors", f"{sink_errors} failed sink writes since the last check")
    if not degraded and status.processed_rate > 0:  # the normal is learnt from healthy, busy checks only
        normal = status.processed_rate if normal is None else 0.8 * normal + 0.2 * status.processed_rate
    return health.model_copy(
        update={
            "verdict": "degraded" if degraded else "healthy",
            "reasons": degraded,
            "signals": seen,
            "run": status.run,
            "progress_age_s": (o.now - status.updated_at).total_seconds(),
            "lag": status.lag,
            "lags": status.lags,
            "lag_growth": growth,
            "input_rate": status.input_rate,
            "processed_rate": status.processed_rate,
            "normal_rate": normal,
            "events": status.events,
            "malformed": status.malformed,
            "late": status.late,
            "lost": status.lost,
            "sink_errors": status.sink_errors,
        }
    )
