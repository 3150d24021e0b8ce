"""Cluster failover (seed 004's "Flink failover"): every dagger of a team cluster that is down moves to another
healthy cluster of the same team and resumes from its checkpoint, so nothing is lost or counted twice.

Checkpoints live under the platform's state directory, which every local cluster reaches; on gcp they must be on
storage both clusters reach (docs/decisions.md). A driver of the failed cluster that Spark relaunches later (its
master recovers its drivers when it comes back) finds the checkpoint claimed by the moved run and ends itself
(jobs/engine/status.py), so the two never write together.

`dagger failover`, the `dagger_failover` DAG and the health check (for teams that allow it, after a cluster stayed
down for some checks) all call `fail_over`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jobs.lifecycle.daggers import Daggers, DeployError
from jobs.lifecycle.submission import SubmissionError
from odin.cluster.health import ClusterHealth
from odin.cluster.lifecycle import Clusters
from odin.registry import Refused
from odin.teams.access import require_member

MOVED = ("deploying", "running", "failed")  # crashlooping and stopped daggers stay where they are
Say = Callable[[str], None]


@dataclass
class FailoverReport:
    team: str
    cluster: str
    target: str
    moved: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # dagger -> why it did not move

    @property
    def ok(self) -> bool:
        return not self.failed


def is_down(health: ClusterHealth) -> bool:
    """It cannot run a dagger: no master leads it, or no worker is alive."""
    return health.active_master is None or not health.alive_workers


def choose_target(clusters: Clusters, team: str, failed: str) -> str:
    """The team's other ready cluster that is healthy and runs the fewest daggers; Refused if there is none."""
    candidates = []
    for record in clusters.registry.clusters(team=team, states=("ready",)):
        if record.name == failed:
            continue
        health = clusters.check(team, record.name)
        if health.ok:
            load = len(clusters.registry.daggers(team=team, cluster=record.name, states=MOVED))
            candidates.append((load, record.name))
    if not candidates:
        raise Refused(f"team {team} has no other healthy ready cluster to fail {failed} over to: create one first")
    return min(candidates)[1]


def fail_over(
    daggers: Daggers,
    clusters: Clusters,
    team: str,
    cluster: str,
    actor: str,
    reason: str,
    to: str | None = None,
    *,
    authorize: bool = True,
) -> FailoverReport:
    """Move every dagger of `cluster` to `to` (default: the team's healthiest other cluster); one `cluster_failover`
    entry in the history, one `dagger_failover` per dagger, each with the reason. `authorize`: the actor must be a
    member of the team (the health check acts for the platform)."""
    registry = daggers.registry
    with registry.action(actor, "cluster_failover", f"cluster:{team}/{cluster}", reason=reason) as detail:
        if authorize:
            require_member(registry, actor, team)
        if registry.cluster(team, cluster) is None:
            raise Refused(f"team {team} has no cluster {cluster!r}")
        if to == cluster:
            raise Refused(f"to: {cluster} is the cluster being failed over")
        if to is not None and (registry.cluster(team, to) is None or not clusters.check(team, to).ok):
            raise Refused(f"to: cluster {to!r} of team {team} is not ready and healthy")
        target = to or choose_target(clusters, team, cluster)
        report = FailoverReport(team, cluster, target)
        detail["to"] = target
        why = f"cluster {cluster} failed over to {target}: {reason}"
        for record in registry.daggers(team=team, cluster=cluster, states=MOVED):
            daggers.end_driver(team, record.name, actor, timeout_s=5)  # best effort: its master may be gone
            try:
                daggers.restart(team, record.name, actor, why, cluster=target, action="dagger_failover")
                report.moved.append(record.name)
            except (DeployError, Refused, SubmissionError) as e:
                report.failed[record.name] = str(e)
        detail.update(moved=report.moved, failed=report.failed)
    return report
