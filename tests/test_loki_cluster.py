"""Loki's team-cluster standard playbooks at small scale, aimed at the session's team cluster: a worker or a
dagger's driver killed under load, each report checked against the sink, the broker and the ground truth.
(master-loss runs inside tests/test_clusters.py's HA test, on a cluster of two masters.)"""

from __future__ import annotations

import pytest

from tests.support.loki_runs import assert_accounted, assert_exact, simulate
from tests.support.services import Services, TeamCluster

pytestmark = pytest.mark.slow


def _aimed(team_cluster: TeamCluster) -> list[str]:
    """At the session's team cluster (not a perf one: a platform engineer's run, as `simulate` runs them)."""
    return ["--team", team_cluster.team, "--cluster", team_cluster.cluster]


def test_a_killed_worker_is_converged_back_and_the_relaunched_driver_loses_nothing(
    services: Services, team_cluster: TeamCluster
) -> None:
    """The worker dies with the driver it ran; Odin converges it back and the master relaunches the supervised
    driver under a new submission id, which the lifecycle follows (Loki found it stopping the old one for ever)."""
    report, record = simulate(services, "worker-loss", *_aimed(team_cluster))
    assert_accounted(report, services, record)
    assert_exact(report)
    registry, team = team_cluster.registry, team_cluster.team
    healed = [e for e in registry.history(f"cluster:{team}/{team_cluster.cluster}") if e.action == "cluster_heal"]
    assert healed and record.id in str(healed[0].detail.get("reason")) and healed[0].outcome == "ok", healed[:2]
    relaunched = [e for e in registry.history(f"dagger:{team}/surge-{record.id}") if e.action == "dagger_relaunched"]
    assert relaunched, "the master relaunched the driver: its new submission is followed and recorded"


def test_a_killed_driver_is_relaunched_from_its_checkpoint_and_counts_nothing_twice(
    services: Services, team_cluster: TeamCluster
) -> None:
    report, record = simulate(services, "driver-loss", *_aimed(team_cluster))
    assert_accounted(report, services, record)
    assert_exact(report)
    [case] = report["cases"]
    assert case["detect_s"] is not None and case["recover_s"] is not None, report["timeline"][-3:]
    # the relaunched driver's own start-up (bench/loki_playbooks.py's relaunch figure): part of the recovery
    [start_up] = report["driver_start_up_s"].values()
    assert 0 < start_up <= case["recover_s"], (start_up, case)
