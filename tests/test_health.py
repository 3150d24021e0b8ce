"""The health verdict of a dagger from what was observed of it: each rule, its reason and the action it calls for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.engine.status import DaggerStatus
from jobs.health.judge import DaggerHealth, HealthPolicy, Observation, judge
from jobs.lifecycle.submission import DriverStatus
from odin.cluster.health import ClusterHealth
from odin.registry.records import DaggerRecord

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
POLICY = HealthPolicy()
WORKER = "127.0.0.1:7078"
CLUSTER = ClusterHealth(masters=1, workers=1, active_master="master-0", alive_workers=frozenset({WORKER}))


def record(state: str = "running") -> DaggerRecord:
    return DaggerRecord(
        team="pricing",
        name="surge",
        spec={},
        spec_version=1,
        checkpoint="/x",
        state=state,  # type: ignore[arg-type]
        cluster="main",
        submission_id="driver-1",
    )


def status(**fields: Any) -> DaggerStatus:
    base = dict(phase="running", run="r1", started_at=NOW - timedelta(minutes=10), updated_at=NOW, batches=5)
    return DaggerStatus.model_validate(base | fields)


def observe(**fields: Any) -> Observation:
    base: dict[str, Any] = dict(
        record=record(), now=NOW, driver=DriverStatus("driver-1", "RUNNING", WORKER), status=status(), cluster=CLUSTER
    )
    return Observation(**(base | fields))


def previous(**fields: Any) -> DaggerHealth:
    base = dict(
        team="pricing",
        name="surge",
        cluster="main",
        checked_at=NOW - timedelta(minutes=1),
        state="running",
        verdict="healthy",
        run="r1",
    )
    return DaggerHealth.model_validate(base | fields)


def test_a_running_dagger_with_recent_progress_is_healthy_and_learns_its_normal_rate() -> None:
    h = judge(observe(status=status(processed_rate=1000.0, input_rate=1000.0)), POLICY)
    assert (h.verdict, h.reasons, h.action, h.normal_rate) == ("healthy", [], "none", 1000.0)


@pytest.mark.parametrize(
    ("fields", "reason", "action"),
    [
        (
            {"driver": DriverStatus("driver-1", "FAILED", WORKER, "exit 1")},
            "its driver ended FAILED: exit 1",
            "restart",
        ),
        ({"record": record("failed")}, "its last deployment or restart failed", "restart"),
        ({"status": status(phase="failed", error="sink refused")}, "its query failed: sink refused", "restart"),
        (
            {"status": status(updated_at=NOW - timedelta(seconds=200))},
            "no progress for 200 s (query stalled)",
            "restart",
        ),
        ({"driver": DriverStatus("driver-1", "RUNNING", "worker-gone")}, "worker worker-gone is not alive", "restart"),
        (
            {"driver": DriverStatus("driver-1", "SUBMITTED"), "cluster": ClusterHealth(1, 1, problems=("w: down",))},
            "SUBMITTED on a cluster with problems: w: down",
            "restart",
        ),
        (  # relaunched, but no live worker can run it: ended now, resubmitted after the heal
            {"driver": DriverStatus("driver-1", "RELAUNCHING"), "cluster": ClusterHealth(1, 1, problems=("w: down",))},
            "RELAUNCHING on a cluster with problems: w: down",
            "restart",
        ),
    ],
)
def test_a_failed_dagger_says_why_and_what_to_do(fields: dict[str, Any], reason: str, action: str) -> None:
    h = judge(observe(**fields), POLICY)
    assert h.verdict == "failed" and reason in h.reasons[0] and h.action == action
    assert h.signals == (["stalled"] if "stalled" in reason else [])


def test_a_driver_the_master_relaunched_is_left_to_start_within_the_grace() -> None:
    """A worker died: the master relaunched its driver as a new one (the old id says RELAUNCHING) before the health
    check saw the new one start. Restarting it then raced the relaunch for the cluster's cores (make demo's chaos run:
    the restart was refused for room, and the next check killed the relaunched driver as it was about to run)."""
    cluster = ClusterHealth(1, 2, "m", alive_workers=frozenset({"127.0.0.1:7101"}), problems=("worker-2: down",))
    relaunched = {"driver": DriverStatus("driver-1", "RELAUNCHING"), "cluster": cluster}
    first = judge(observe(**relaunched), POLICY)
    assert (first.verdict, first.action, first.reasons) == ("degraded", "none", ["its driver is RELAUNCHING"])
    later = judge(observe(**relaunched, previous=first, now=NOW + POLICY.start_grace + timedelta(seconds=1)), POLICY)
    assert (later.verdict, later.action) == ("failed", "restart") and "RELAUNCHING for over 180 s" in later.reasons[0]


def test_past_its_restart_budget_a_failed_dagger_is_crashlooping_once() -> None:
    failed = {"driver": DriverStatus("driver-1", "FAILED", WORKER)}
    h = judge(observe(**failed, restarts=3), POLICY)
    assert (h.verdict, h.action) == (
        "crashlooping",
        "give_up",
    ) and "restart budget spent (3 within 30 min)" in h.reasons
    marked = judge(observe(**failed, record=record("crashlooping"), restarts=3), POLICY)
    assert (marked.verdict, marked.action) == ("crashlooping", "none")  # paged already: no second page


def test_a_driver_queued_for_a_worker_is_degraded_until_the_grace_runs_out() -> None:
    queued = DriverStatus("driver-1", "SUBMITTED")
    first = judge(observe(driver=queued), POLICY)
    assert (first.verdict, first.reasons, first.waiting_since) == ("degraded", ["its driver is SUBMITTED"], NOW)
    later = judge(observe(driver=queued, now=NOW + timedelta(minutes=4), previous=first), POLICY)
    assert (later.verdict, later.action) == ("failed", "restart") and "SUBMITTED for over 180 s" in later.reasons[0]


def test_an_unreachable_master_degrades_without_a_restart() -> None:
    h = judge(observe(driver=None, driver_error="connection refused"), POLICY)
    assert (h.verdict, h.action) == ("degraded", "none") and "connection refused" in h.reasons[0]


def test_trends_against_the_previous_check() -> None:
    growing = judge(observe(status=status(lag=500), previous=previous(lag=400, lag_growth=2)), POLICY)
    assert growing.verdict == "degraded" and growing.reasons == ["lag grew 3 checks in a row (now 500)"]
    assert growing.signals == ["lag_growing"]  # what the alert rules read (dagger_health_lag_growing)

    slow = status(lag=10_000, processed_rate=50.0)
    collapsed = judge(observe(status=slow, previous=previous(normal_rate=1000.0, lag=20_000)), POLICY)
    assert collapsed.reasons == ["throughput collapsed: 50/s against a normal 1000/s"]
    assert collapsed.signals == ["throughput_collapsed"]

    spikes = status(events=10_000, malformed=500, late=20, lost=7, sink_errors=3)
    before = previous(events=5_000, malformed=100, late=10, lost=0, sink_errors=1)
    h = judge(observe(status=spikes, previous=before), POLICY)
    assert h.reasons == [
        "400 malformed events since the last check",
        "7 events lost since the last check (gaps in the stream)",
        "2 failed sink writes since the last check",
    ]  # 10 late events of 5000 read are under the spike ratio
    assert h.signals == ["malformed_spike", "lost", "sink_errors"]
    assert h.normal_rate is None  # a degraded check does not teach the normal


def test_counters_start_over_with_a_new_driver_run() -> None:
    h = judge(
        observe(status=status(run="r2", events=100, malformed=0), previous=previous(run="r1", malformed=50)), POLICY
    )
    assert h.verdict == "healthy"
