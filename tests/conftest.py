"""Shared fixtures. Services are real (Tansu, VictoriaMetrics, InfluxDB, PostgreSQL, Spark standalone), started
by Odin itself on free 127.0.0.1 ports in a temp dir, and stopped by PID at the end of the session."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from psycopg import sql
from sqlalchemy import create_engine, make_url

# Airflow reads AIRFLOW_HOME when first imported: point it at a temp dir before any test imports it.
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="daggers-airflow-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# Every JVM the suite starts (local sessions, Spark daemons, drivers and executors the workers launch, ZooKeeper)
# compiles with C1 only: the JVMs live minutes, and on CI's two cores C2's compiler threads took CPU from the tests
# (~40% of a short Spark job's CPU; docs/decisions.md). The daggers' own JVMs are given it by the platform too
# (jobs/engine/session.py DAGGER_JVM); this reaches the Spark daemons and ZooKeeper as well.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
# Stands for a secret in the shell of whoever runs `odin up`: no daemon Odin starts, nor a driver one of them
# launches, may inherit it (tests/test_daemon_env.py).
os.environ["ODIN_CALLER_CANARY"] = "a-secret-of-the-caller"

from pyspark.sql import SparkSession

from jobs.engine.session import spark_session
from odin import pg_roles
from odin.paths import REPO
from odin.paths import temporary_state_dir as state_dir
from odin.ports import stack_ports
from odin.registry import Registry, migrate
from odin.spec import Service, StackSpec
from odin.stack import Stack, UpReport
from tests.support import scheduling
from tests.support.services import Services, TeamCluster, TeamDb

if TYPE_CHECKING:
    from odin.cluster.lifecycle import Clusters


def start_stack(state_dir: Path, services: set[Service], workers: int = 1) -> tuple[Stack, UpReport]:
    stack = Stack("local", state_dir)
    spec = stack.resolve(workers, services, stack_ports())
    report = stack.up(spec)
    if not report.ok:
        stack.down()
        failures = "\n".join(f"{f.host}/{f.task}: {f.message}" for f in report.playbook.failures)
        unhealthy = ", ".join(f"{n.name}: {n.health.detail}" for n in report.nodes if not n.health.ok)
        pytest.fail(f"test stack did not come up: {failures} {unhealthy}")
    return stack, report


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """Kafka (Tansu), VictoriaMetrics, InfluxDB 1.x, PostgreSQL and Spark master + 1 worker."""
    wanted = {Service.kafka_broker, Service.victoria_metrics, Service.influxdb, Service.postgres, Service.spark_worker}
    with state_dir("services") as path:
        stack, report = start_stack(path, wanted)
        all_nodes = stack.nodes()
        try:
            yield Services({n.name: all_nodes[n.name] for n in report.nodes}, stack, report)
        finally:
            stack.down()


@pytest.fixture
def own_broker() -> Iterator[tuple[Stack, StackSpec]]:
    """A Kafka broker of this test's own, so it can be replaced (Tansu keeps topics in memory only)."""
    with state_dir("broker") as path:
        stack = Stack("local", path)
        spec = stack.resolve(1, {Service.kafka_broker}, stack_ports())
        try:
            assert stack.up(spec).ok
            yield stack, spec
        finally:
            stack.down()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] Spark session for the whole test run (starting one costs seconds)."""
    session = spark_session("daggers-tests")
    try:
        yield session
    finally:
        session.stop()


# -- the platform registry ---------------------------------------------------------------------------------


def _drop(services: Services, url: str) -> None:
    """As the administrator (the unix socket): the registry's role may create and drop no database."""
    with pg_roles.admin_connect(services.postgres_admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(make_url(url).database)))


@pytest.fixture
def empty_db(services: Services) -> Iterator[str]:
    """A database of its own on the stack's PostgreSQL (the registry's role owns it), dropped afterwards."""
    url = str(make_url(services.registry_url).set(database=f"registry_{uuid.uuid4().hex[:10]}"))
    migrate.ensure_database(url, services.postgres_admin)
    try:
        yield url
    finally:
        _drop(services, url)


@pytest.fixture(scope="session")
def team_database(services: Services) -> TeamDb:
    """One team's database for the session (made through odin/teams/databases.py, the platform's own way)."""
    from odin.teams.databases import ensure_team_database
    from odin.teams.secrets import TeamSecrets

    assert services.stack is not None
    team, secrets = f"t{uuid.uuid4().hex[:8]}", TeamSecrets(services.stack.state_dir)
    db = ensure_team_database(services, secrets, team)
    return TeamDb(team, db.dsn, db.password_env, secrets.load(team)[db.password_env])


@pytest.fixture
def team_db(team_database: TeamDb, monkeypatch: pytest.MonkeyPatch) -> TeamDb:
    """The session's team database, its password in the environment as a deployed driver has it."""
    monkeypatch.setenv(team_database.password_env, team_database.password)
    return team_database


@pytest.fixture
def registry(empty_db: str) -> Iterator[Registry]:
    engine = create_engine(empty_db)
    migrate.upgrade(engine)
    engine.dispose()
    reg = Registry.connect(empty_db)
    try:
        yield reg
    finally:
        reg.close()


@pytest.fixture
def ordinary_login(services: Services) -> Iterator[str]:
    """The OS login (what the CLIs act as) as an ordinary user for the test: not a platform engineer, which Loki's
    tests make it in the session's registry; restored afterwards."""
    from odin.teams.access import PLATFORM_TEAM
    from odin.teams.actor import login

    registry = Registry.connect(services.registry_url)
    was = login() in registry.members(PLATFORM_TEAM)
    registry.remove_member(PLATFORM_TEAM, login())
    try:
        yield login()
    finally:
        if was:
            registry.add_member(PLATFORM_TEAM, login())
        registry.close()


# -- a team and its Spark cluster ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def team_cluster(services: Services) -> Iterator[TeamCluster]:
    """A team of its own (member `alice`) on the stack's registry, with cluster `main`; shared by the lifecycle and
    DAG tests, as creating one takes ~20 s. Destroyed at the end, with whatever daggers still run on it."""
    from odin.cluster.lifecycle import Clusters
    from odin.cluster.spec import ClusterSpec

    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team, state = f"t{uuid.uuid4().hex[:8]}", services.stack.state_dir
    registry.ensure_team(team)
    registry.add_member(team, "alice")
    clusters = Clusters(registry, state)
    clusters.create(ClusterSpec(team=team, name="main", workers=1, worker_cores=4, worker_memory="4g"), "alice")
    try:
        yield TeamCluster(registry, state, team, "main", "alice")
    finally:
        for d in registry.daggers(team=team, states=("deploying", "running", "stopping")):
            registry.set_dagger_state(team, d.name, "stopped")  # its driver goes with the cluster's processes
        clusters.destroy(team, "main", "alice")
        registry.close()


@pytest.fixture
def leftovers_stopped(team_cluster: TeamCluster) -> Iterator[None]:
    """Stops the daggers a test left on the shared team cluster (one that failed before its own stop): the next test
    finds the cluster's cores free, and reports its own failure rather than this one's."""
    from jobs.lifecycle.daggers import Daggers

    registry, team = team_cluster.registry, team_cluster.team
    live = ("deploying", "running", "stopping")
    before = {d.name for d in registry.daggers(team=team, states=live)}
    yield
    for d in registry.daggers(team=team, states=live):
        if d.name not in before:
            Daggers(registry, team_cluster.state_dir).stop(team, d.name, team_cluster.member)


@pytest.fixture
def own_team(services: Services) -> Iterator[tuple[Registry, Clusters, str]]:
    """A team of its own (member `alice`) for a test that creates its clusters; destroyed with them after."""
    from odin.cluster.lifecycle import Clusters

    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team = f"t{uuid.uuid4().hex[:8]}"
    registry.ensure_team(team)
    registry.add_member(team, "alice")
    try:
        yield registry, Clusters(registry, services.stack.state_dir), team
    finally:
        for d in registry.daggers(team=team, states=("deploying", "running", "stopping", "failed", "crashlooping")):
            registry.set_dagger_state(team, d.name, "stopped")  # its driver goes with the cluster's processes
        for c in registry.clusters(team=team, states=("ready", "failed", "provisioning")):
            clusters = Clusters(registry, services.stack.state_dir)
            clusters.destroy(team, c.name, "alice")
        registry.close()


# The fixtures that start services (here and in test files), directly or through the fixtures they use: a test that
# uses any of them, even through another fixture, is marked `services`, so that `pytest -m "not services"` runs only
# the pure tests (a local Spark session is not a service). Files whose tests start services themselves say so with
# `pytestmark = pytest.mark.services`.
SERVICE_FIXTURES = frozenset(
    {
        "services",  # the session's stack; team_cluster, airflow, team_db, registry... all use it
        "team_cluster",
        "airflow",
        "own_broker",
        "own_team",
        "full_stack",  # tests/test_odin.py
        "two_brokers",  # tests/test_kafka_failover.py
        "airflow_cli",  # Airflow's CLI on its migrated database: tests/airflow/test_dags.py
        "spark",  # a local Spark JVM: no service to start, but seconds per test
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SERVICE_FIXTURES:
            item.add_marker(pytest.mark.services)
        if "spark" in fixtures:  # the local[2] session (-m "spark" selects them)
            item.add_marker(pytest.mark.spark)
    scheduling.order(items, scheduling.recorded_seconds())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> scheduling.UnitScheduling | None:
    return scheduling.UnitScheduling(config, log) if config.getoption("dist") == "loadfile" else None


# -- where the suite's time goes: seconds per file (setup, call and teardown), to balance the two xdist workers: a
# whole run's figures, copied to tests/file_seconds.json, order the next runs (tests/support/scheduling.py) ----------
_FILE_SECONDS: dict[str, float] = {}
RECORD = REPO / ".local" / "test-file-seconds.json"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::")[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FILE_SECONDS:
        terminalreporter.section("seconds per test file")
        for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:8.1f}s {path}")
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps({p: round(s, 1) for p, s in sorted(_FILE_SECONDS.items())}, indent=1) + "\n")
