"""Loki's team-cluster standard playbooks at small scale, aimed at the session's team cluster: a worker or a
dagger's driver killed under load, each report checked against the sink, the broker and the ground truth."""

from __future__ import annotations

import pytest

from tests.conftest import Services, TeamCluster
from tests.loki_runs import assert_accounted, assert_exact, simulate

pytestmark = pytest.mark.slow


def _aimed(team_cluster: TeamCluster) -> list[str]:
    return ["--team", team_cluster.team, "--cluster", team_cluster.cluster, "--user", team_cluster.member]


def test_a_killed_worker_is_converged_back_and_the_dagger_loses_nothing(
    services: Services, team_cluster: TeamCluster
) -> None:
    report, record = simulate(services, "worker-loss", *_aimed(team_cluster))
    assert_accounted(report, services, record)
    assert_exact(report)
    history = team_cluster.registry.history(f"cluster:{team_cluster.team}/{team_cluster.cluster}")
    healed = [e for e in history if e.action == "cluster_heal" and record.id in str(e.detail.get("reason"))]
    assert healed and healed[0].outcome == "ok", history[:5]  # Odin brought the worker back (newest first)


def test_a_killed_driver_is_relaunched_from_its_checkpoint_and_counts_nothing_twice(
    services: Services, team_cluster: TeamCluster
) -> None:
    report, record = simulate(services, "driver-loss", *_aimed(team_cluster))
    assert_accounted(report, services, record)
    assert_exact(report)
    [case] = report["cases"]
    assert case["detect_s"] is not None and case["recover_s"] is not None, report["timeline"][-3:]
