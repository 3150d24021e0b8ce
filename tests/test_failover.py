"""Cluster failover on the real stack (jobs/health/cluster_failover.py): a team's cluster loses its master and workers;
the
health check, which the team allows to fail over, moves the dagger to the team's other cluster, where it resumes
from its checkpoint and the sink stays exact. Refusals first: no other healthy cluster, and not a member."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobs.health.checkup import Checkup
from jobs.health.judge import HealthPolicy
from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.cluster.lifecycle import Clusters
from odin.cluster.spec import ClusterSpec
from odin.paths import BIN_DIR
from odin.processes import of_node
from odin.registry import Registry
from odin.teams.actor import login
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import catalog_stream, closing_markers
from tests.support.events import surge_truth
from tests.support.kafka import new_topic
from tests.support.services import Services
from tests.support.sinks import influx_surge, sink_reaches
from tests.support.specs import deployable, surge_spec


def _failover_cli(team: str, cluster: str, state_dir: str) -> subprocess.CompletedProcess[str]:
    """`dagger failover` as the login (odin/teams/actor.py)."""
    argv = [str(BIN_DIR / "dagger"), "failover", "--team", team, "--cluster", cluster]
    return subprocess.run([*argv, "--state-dir", state_dir], capture_output=True, text=True, timeout=300)


def test_a_cluster_that_loses_its_master_and_workers_fails_its_daggers_over_exactly(
    own_team: tuple[Registry, Clusters, str], services: Services, ordinary_login: str
) -> None:
    registry, clusters, team = own_team
    state = str(clusters.state_dir)
    for name in ("blue", "green"):
        clusters.create(ClusterSpec(team=team, name=name, workers=1, worker_cores=2, worker_memory="2g"), "alice")
    daggers = Daggers(registry, clusters.state_dir)
    topic, measurement = new_topic(services), f"{team}_surge_fo_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    first = list(booking_logs(1_500, seed=71, start=start, rate=10))
    produce(
        services.kafka_bootstrap, topic, iter([*first, *closing_markers(start + timedelta(minutes=5))]), partitions=2
    )
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    fields |= {"team": team, "name": "surge-fo", "parallelism": 1}
    progress = Path(daggers.deploy(parse_spec(fields), "blue", "alice").checkpoint)  # sink waits follow its progress
    assert sink_reaches(measurement, services, surge_truth(first), checkpoint=progress) == surge_truth(first)

    outsider = _failover_cli(team, "blue", state)
    assert outsider.returncode == 1 and f"{login()} is not a member of team" in outsider.stdout + outsider.stderr
    registry.add_member(team, login())
    registry.set_cluster_state(team, "green", "failed")  # not a ready cluster: nowhere to go
    nowhere = _failover_cli(team, "blue", state)
    assert nowhere.returncode == 1 and "no other healthy ready cluster" in nowhere.stdout + nowhere.stderr
    registry.set_cluster_state(team, "green", "ready")
    assert registry.dagger(team, "surge-fo").cluster == "blue"  # type: ignore[union-attr]  # nothing touched

    # Blue loses its master and its worker, and with the worker the driver it ran.
    for node in clusters.nodes(team, "blue").values():
        for process in of_node(node):
            assert process.pid is not None
            os.killpg(process.pid, signal.SIGKILL)
    fault = datetime.now(UTC)
    second = list(booking_logs(1_500, seed=72, start=start + timedelta(minutes=10), rate=10))
    produce(
        services.kafka_bootstrap, topic, iter([*second, *closing_markers(start + timedelta(minutes=15))]), partitions=2
    )

    registry.set_auto_failover(team, True)
    policy = HealthPolicy(failover_after_checks=1)  # the default gives healing a check first
    report = Checkup(registry, clusters.state_dir, policy=policy, teams=[team]).run()
    blue = next(c for c in report.clusters if c.name == "blue")
    assert (blue.ok, blue.down_checks, blue.failed_over_to, blue.healed) == (False, 1, "green", True), report
    moved = registry.dagger(team, "surge-fo")
    assert moved is not None and (moved.cluster, moved.state) == ("green", "running")
    both = surge_truth(first) + surge_truth(second)
    deadline = time.monotonic() + 120
    while influx_surge(services, 2, measurement) == surge_truth(first) and time.monotonic() < deadline:
        time.sleep(1)
    first_new_row = datetime.now(UTC)
    # resumed from its checkpoint on green; the driver blue's master relaunches after the heal ends itself (fencing)
    assert sink_reaches(measurement, services, both, checkpoint=progress) == both
    time.sleep(20)  # the point, not a wait: nothing more arrives (blue's relaunched driver ended itself)
    assert influx_surge(services, 2, measurement) == both

    failovers = [e for e in registry.history(f"cluster:{team}/blue", limit=10) if e.action == "cluster_failover"]
    assert [(e.actor, e.outcome) for e in failovers] == [
        ("odin-health", "ok"),
        (ordinary_login, "refused"),  # nowhere to go
        (ordinary_login, "refused"),  # not (yet) a member
    ]
    failover = failovers[0]
    assert failover.detail["to"] == "green" and "down for 1 checks" in failover.detail["reason"]
    assert failover.detail["moved"] == ["surge-fo"]
    [entry] = [e for e in registry.history(f"dagger:{team}/surge-fo", limit=10) if e.action == "dagger_failover"]
    assert entry.outcome == "ok" and "cluster blue failed over to green" in entry.message
    seconds = [(t - fault).total_seconds() for t in (report.checked_at, entry.at, first_new_row)]
    print(
        "\nfailover, master + worker killed: detected {:.1f} s, moved {:.1f} s, first new row {:.1f} s".format(*seconds)
    )
    daggers.stop(team, "surge-fo", "alice")
