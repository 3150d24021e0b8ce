"""Daemons Odin starts get a minimal, explicit environment, not that of whoever ran `odin up`: nothing of a
developer's shell (tokens, cloud keys) reaches a Spark worker, nor the drivers it launches for every team. And
every CPU: not the one Ansible's Mitogen leaves to what it starts."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psutil

from jobs.engine.status import read_status, status_path
from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.cluster.lifecycle import Clusters
from odin.processes import of_node
from tests.support.catalog import ensure_catalog_topics
from tests.support.services import Services, TeamCluster
from tests.support.specs import catalog_spec

CANARY = "ODIN_CALLER_CANARY"  # set by tests/conftest.py in the process that runs `odin up`


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode(errors="replace").split("\0") if "=" in entry)


def test_every_daemon_of_the_stack_starts_with_its_own_minimal_environment(services: Services) -> None:
    assert CANARY in os.environ
    seen = 0
    for node in services.nodes.values():
        for process in of_node(node):
            assert process.pid is not None, f"{node['name']}@{process.name} is not running"
            env = environ(process.pid)
            where = f"{node['name']}@{process.name}"
            assert CANARY not in env, f"{where} inherited the caller's environment"
            assert "PYTEST_CURRENT_TEST" not in env, where
            assert Path(env["HOME"]).is_relative_to(node["dirs"]["data"]), (where, env["HOME"])
            # What the stack passes on purpose still arrives: the suite's JVM options reach every JVM.
            assert env.get("JDK_JAVA_OPTIONS") == os.environ["JDK_JAVA_OPTIONS"], where
            # Every CPU, as the suite has: Ansible's Mitogen pins what it starts to all CPUs but one
            assert os.sched_getaffinity(process.pid) == os.sched_getaffinity(0), where
            seen += 1
    assert seen >= 6  # Kafka, VictoriaMetrics, InfluxDB, PostgreSQL, Spark master and worker


def test_a_deployed_driver_gets_nothing_of_the_callers_environment(
    services: Services, team_cluster: TeamCluster
) -> None:
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    [worker] = [n for n in Clusters(registry, state).nodes(team, "main").values() if n["role"] == "spark_worker"]
    [process] = of_node(worker)
    assert process.pid is not None and CANARY not in environ(process.pid)

    ensure_catalog_topics(services, registry)
    daggers = Daggers(registry, state)
    suffix = uuid.uuid4().hex[:6]
    name, measurement = f"env-{suffix}", f"{team}_env_{suffix}"  # under the team's prefix, as every sink is
    record = daggers.deploy(parse_spec(catalog_spec(team, measurement, services) | {"name": name}), "main", "alice")
    try:
        status = read_status(status_path(Path(record.checkpoint)))
        assert status is not None
        # The driver's JVM (DriverWrapper) and its Python process carry the run id on their command lines.
        driver = [p for p in psutil.process_iter(["cmdline"]) if status.run in (p.info["cmdline"] or [])]
        assert len(driver) >= 2, [p.info["cmdline"] for p in driver]
        for p in driver:
            env = environ(p.pid)
            assert CANARY not in env, p.info["cmdline"]
            assert env.get("JDK_JAVA_OPTIONS") == os.environ["JDK_JAVA_OPTIONS"]
            assert os.sched_getaffinity(p.pid) == os.sched_getaffinity(0), p.info["cmdline"]
    finally:
        daggers.stop(team, name, "alice")
