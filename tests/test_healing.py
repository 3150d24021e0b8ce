"""Health checks and self-healing on the real stack (jobs/health/checkup.py): a dagger whose driver is gone with the
worker
that would relaunch it is restarted from its checkpoint after Odin brings the worker back, exactly; a dagger that
crashes on start is restarted within its budget, then marked crashlooping and paged once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.engine.status import owner
from jobs.health.checkup import Checkup, Reports
from jobs.health.judge import DaggerHealth, HealthPolicy
from jobs.lifecycle.daggers import Daggers, DeployError
from jobs.spec import parse_spec
from odin.apis import http_client
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
from tests.support.services import Services, TeamCluster
from tests.support.sinks import influx_surge, sink_reaches
from tests.support.specs import deployable, surge_spec


def test_a_driver_killed_with_its_worker_is_restarted_by_health_exactly(
    own_team: tuple[Registry, Clusters, str], services: Services
) -> None:
    registry, clusters, team = own_team
    clusters.create(ClusterSpec(team=team, name="heal", workers=1, worker_cores=2, worker_memory="2g"), "alice")
    daggers = Daggers(registry, clusters.state_dir)
    topic, measurement = new_topic(services), f"{team}_surge_heal_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    first = list(booking_logs(1_500, seed=51, start=start, rate=10))
    produce(
        services.kafka_bootstrap, topic, iter([*first, *closing_markers(start + timedelta(minutes=5))]), partitions=2
    )
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    fields |= {"team": team, "name": "surge-heal", "parallelism": 1}
    deployed = daggers.deploy(parse_spec(fields), "heal", "alice")
    progress = Path(deployed.checkpoint)  # sink waits follow the dagger's own progress
    assert sink_reaches(measurement, services, surge_truth(first), checkpoint=progress) == surge_truth(first)
    checkup = Checkup(registry, clusters.state_dir, metrics_url=services.victoria_metrics_url, teams=[team])
    calm = checkup.run()
    assert calm.dagger(team, "surge-heal").verdict == "healthy", calm  # type: ignore[union-attr]
    assert [c.ok for c in calm.clusters] == [True] and calm.actions == []

    # The worker dies, and with it (its process group) the driver it launched and would have relaunched.
    [worker] = [n for n in clusters.nodes(team, "heal").values() if n["role"] == "spark_worker"]
    [process] = of_node(worker)
    assert process.pid is not None
    os.killpg(process.pid, signal.SIGKILL)
    fault = datetime.now(UTC)
    # Events keep coming while it is down: recovery ends with them in the sink.
    second = list(booking_logs(1_500, seed=52, start=start + timedelta(minutes=10), rate=10))
    produce(
        services.kafka_bootstrap, topic, iter([*second, *closing_markers(start + timedelta(minutes=15))]), partitions=2
    )

    report = checkup.run()
    verdict = report.dagger(team, "surge-heal")
    assert verdict is not None and verdict.verdict == "failed" and verdict.action == "restart", report
    # the master sees the worker's connection drop at once and queues the driver again (RELAUNCHING), or not yet
    assert "worker" in verdict.reasons[0] and ("not alive" in verdict.reasons[0] or "not running" in verdict.reasons[0])
    assert [c.healed for c in report.clusters] == [True], report
    restarted = registry.dagger(team, "surge-heal")
    assert restarted is not None and restarted.state == "running"
    assert restarted.submission_id != deployed.submission_id
    both = surge_truth(first) + surge_truth(second)
    deadline = time.monotonic() + 120
    while influx_surge(services, 2, measurement) == surge_truth(first) and time.monotonic() < deadline:
        time.sleep(1)
    first_new_row = datetime.now(UTC)
    assert (
        sink_reaches(measurement, services, both, checkpoint=progress) == both
    )  # resumed from its checkpoint: nothing lost or twice

    entries = registry.history(f"dagger:{team}/surge-heal", limit=10)
    [restart] = [e for e in entries if e.action == "dagger_restart"]
    assert (restart.outcome, restart.actor) == ("ok", "odin-health") and "worker" in restart.message
    assert owner(Path(restarted.checkpoint)) == restart.detail["run"]  # any relaunch of the old driver ends itself
    heals = registry.history(f"cluster:{team}/heal", limit=5)
    assert heals[0].action == "cluster_heal" and heals[0].outcome == "ok" and "not running" in heals[0].detail["reason"]
    after = checkup.run()
    assert after.dagger(team, "surge-heal").verdict == "healthy", after  # type: ignore[union-attr]
    assert Reports(clusters.state_dir).latest() == after
    assert health_levels(services, team) == [0, 0, 2]  # healthy, failed (the check that healed it), healthy
    # A check run at once; the DAG's checks come every minute, which adds up to 60 s to detection.
    seconds = [(t - fault).total_seconds() for t in (report.checked_at, restart.at, first_new_row)]
    print(
        "\nhealth, driver + worker killed: detected {:.1f} s, restarted {:.1f} s, first new row {:.1f} s".format(
            *seconds
        )
    )
    daggers.stop(team, "surge-heal", "alice")


def health_levels(services: Services, team: str, want: int = 3) -> list[int]:
    """The `dagger_health` levels the checks wrote, once `want` are searchable (VictoriaMetrics takes a moment)."""
    levels: list[int] = []
    deadline = time.monotonic() + 30
    while len(levels) < want and time.monotonic() < deadline:
        time.sleep(1)
        exported = http_client.get(
            f"{services.victoria_metrics_url}/api/v1/export",
            params={"match[]": f'dagger_health_level{{team="{team}"}}'},
            timeout=10,
        ).text
        levels = sorted(int(v) for line in exported.splitlines() for v in json.loads(line)["values"])
    return levels


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dagger_that_crashes_on_start_is_crashlooping_after_its_budget_with_one_page(
    services: Services, team_cluster: TeamCluster
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    daggers = Daggers(registry, team_cluster.state_dir)
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": f"{team}_never"}
    nowhere = catalog_stream(services, registry, "crash-topic", f"127.0.0.1:{closed_port()}")  # no broker: fails
    fields = deployable(surge_spec(services, "crash-topic", sink), nowhere) | {"team": team, "name": "crasher"}
    fields["parallelism"] = 1
    with pytest.raises(DeployError, match=r"failed on start|driver ended"):
        daggers.deploy(parse_spec(fields), team_cluster.cluster, team_cluster.member)
    pages: list[DaggerHealth] = []
    checkup = Checkup(
        registry, team_cluster.state_dir, policy=HealthPolicy(restart_budget=2), pager=pages.append, teams=[team]
    )
    seen = []
    try:
        for _ in range(4):
            report = checkup.run()
            crasher = report.dagger(team, "crasher")
            assert crasher is not None
            seen.append((crasher.verdict, crasher.action))
        assert seen == [
            ("failed", "restart"),
            ("failed", "restart"),
            ("crashlooping", "give_up"),
            ("crashlooping", "none"),
        ]
        assert [p.qualified_name for p in pages] == [f"{team}/crasher"]
        assert "restart budget spent (2 within 30 min)" in pages[0].reasons
        record = registry.dagger(team, "crasher")
        assert record is not None and record.state == "crashlooping"
        entries = list(reversed(registry.history(f"dagger:{team}/crasher", limit=20)))
        health = [(e.action, e.outcome) for e in entries if e.actor == "odin-health" and e.action != "dagger_submit"]
        assert health == [
            ("dagger_restart", "failed"),
            ("dagger_restart", "failed"),
            ("dagger_crashlooping", "ok"),
            ("dagger_page", "ok"),
        ]
        assert "its last deployment or restart failed" in entries[-1].message

        registry.add_member(team, login())  # who runs the CLI
        shown = subprocess.run(
            [str(BIN_DIR / "dagger"), "status", "--team", team, "--state-dir", str(team_cluster.state_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "250"},  # rich wraps a pipe at 80 columns
        )
        assert shown.returncode == 1, shown.stdout + shown.stderr  # a dagger is crashlooping
        assert re.search(r"crasher\s+.\s+main\s+.\s+crashlooping", shown.stdout), shown.stdout
        assert re.search(rf"{team}\s+.\s+main\s+.\s+yes", shown.stdout), shown.stdout  # its cluster is fine
    finally:
        registry.set_dagger_state(team, "crasher", "stopped")
