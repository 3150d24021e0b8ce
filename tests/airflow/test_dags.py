"""Airflow DAGs load, and run against a real stack, without any Airflow server (SQLite in a temp AIRFLOW_HOME)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odin.paths import BIN_DIR, REPO
from odin.registry import Registry
from odin.teams.access import PLATFORM_TEAM
from odin.traffic.generator import booking_logs
from tests.support.airflow import deploy_form
from tests.support.airflow_cli import AirflowCli
from tests.support.catalog import CLOSE, PERF_STREAM, START, catalog_events, produce_to_stream
from tests.support.events import surge_truth
from tests.support.services import Services, TeamCluster
from tests.support.sinks import sink_reaches


def test_dags_import_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    dags = {"platform_health", "dagger_health", "dagger_failover", "odin_provision_cluster", "odin_destroy_cluster"}
    assert dags | {"reports_gather"} <= set(bag.dags)
    scheduled = {d for d, dag in bag.dags.items() if dag.timetable.can_be_scheduled}
    assert scheduled == {"platform_health", "dagger_health", "reports_gather"}  # what `odin up` leaves unpaused
    assert set(bag.dags["dagger_failover"].params) == {"team", "cluster", "to", "reason"}
    assert bag.dags["odin_provision_cluster"].params["environment"] == "local"
    assert bag.dags["platform_health"].params["environment"] == "local"
    chaos = bag.dags["loki_chaos"].params
    assert chaos["playbook"] == "broker-pause" and {"rate_scale", "time_scale", "settle", "playbook_spec"} <= set(chaos)


def test_parsing_the_dags_touches_no_database_or_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow parses DAG files every few seconds: their dropdowns come from the choices file the platform writes
    (odin/form_choices.py), never from the registry, which here does not even exist."""
    from airflow.dag_processing.dagbag import DagBag

    Path(tmp_path / "airflow").mkdir()
    choices = {"streams": ["booking-log"], "teams": ["pricing", "surge"], "clusters": ["main"]}
    (tmp_path / "airflow" / "form-choices.json").write_text(json.dumps(choices))
    monkeypatch.setenv("ODIN_HOME", str(tmp_path))
    connections: list[object] = []

    def refuse(sock: socket.socket, address: object) -> None:
        connections.append(address)
        raise OSError(f"a DAG file connected to {address} while being parsed")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {} and connections == []
    form = bag.dags["dagger_deploy"].params
    assert form.get_param("team").schema["enum"] == ["pricing", "surge"]
    assert form.get_param("cluster").schema["enum"] == ["main"]


def test_dags_use_only_airflow_3_apis() -> None:
    run = subprocess.run(
        [str(BIN_DIR / "ruff"), "check", "--select", "AIR3", str(REPO / "dags")], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _airflow(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "airflow"), *args], env=env, capture_output=True, text=True, timeout=300)


def _airflow_env(home: Path, odin_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ODIN_HOME": str(odin_home),
        "PATH": f"{BIN_DIR}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }


@pytest.fixture(scope="module")
def airflow_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowCli]:
    """Airflow's CLI on a SQLite metadata database migrated once for the module (a migration takes tens of
    seconds), served by one process (tests/support/airflow_cli.py): each test says which Odin home it acts on."""
    home = tmp_path_factory.mktemp("airflow-migrated")
    env = _airflow_env(home, home / "no-odin")
    run = _airflow(["db", "migrate"], env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    cli = AirflowCli(env)
    try:
        yield cli
    finally:
        cli.close()


def test_platform_health_dag_checks_a_running_stack(services: Services, airflow_cli: AirflowCli) -> None:
    """The `airflow` command itself, once (the other tests send their commands to airflow_cli's process)."""
    assert services.stack is not None
    run = _airflow(["dags", "test", "platform_health"], airflow_cli.env | {"ODIN_HOME": str(services.stack.state_dir)})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "state=success" in out or "success" in out.lower(), out[-3000:]


def test_platform_health_dag_fails_on_an_environment_never_brought_up(tmp_path: Path, airflow_cli: AirflowCli) -> None:
    run = airflow_cli.run(["dags", "test", "platform_health"], tmp_path / "nothing-here")
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "was never brought up" in out, out[-3000:]


def test_cluster_dags_refuse_then_provision_and_destroy_a_team_cluster(
    services: Services, airflow_cli: AirflowCli
) -> None:
    """`airflow dags test` runs as user `dag_test`: refused until it is a platform engineer."""
    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team = f"t{uuid.uuid4().hex[:8]}"
    registry.ensure_team(team)
    home = services.stack.state_dir
    conf = json.dumps({"team": team, "cluster": "main", "workers": 1, "worker_memory": "512m"})
    try:
        if "dag_test" not in registry.members(PLATFORM_TEAM):  # another test may have added it
            refused = airflow_cli.run(["dags", "test", "odin_provision_cluster", "-c", conf], home)
            out = refused.stdout + refused.stderr
            assert refused.returncode != 0 and "dag_test is not a platform engineer" in out, out[-3000:]
            assert registry.cluster(team, "main") is None
        registry.ensure_team(PLATFORM_TEAM)
        registry.add_member(PLATFORM_TEAM, "dag_test")

        bad = airflow_cli.run(
            ["dags", "test", "odin_provision_cluster", "-c", json.dumps({"team": team, "cluster": "Main"})], home
        )
        assert bad.returncode != 0 and "cluster" in (bad.stdout + bad.stderr), (bad.stdout + bad.stderr)[-3000:]

        run = airflow_cli.run(["dags", "test", "odin_provision_cluster", "-c", conf], home)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-4000:]
        assert "terraform plan: 2 to add, 0 to change, 0 to destroy" in out
        record = registry.cluster(team, "main")
        assert record is not None and record.state == "ready" and record.workers == 1
        created = [
            (e.actor, e.outcome) for e in registry.history(f"cluster:{team}/main") if e.action == "cluster_create"
        ]
        assert created[0] == ("dag_test", "ok")  # newest first; refusals before it are recorded too
    finally:
        gone = airflow_cli.run(
            ["dags", "test", "odin_destroy_cluster", "-c", json.dumps({"team": team, "cluster": "main"})], home
        )
        registry.close()
    assert gone.returncode == 0, (gone.stdout + gone.stderr)[-3000:]


def test_a_team_deploys_lists_and_stops_a_dagger_through_the_dags(
    services: Services,
    team_cluster: TeamCluster,
    airflow_cli: AirflowCli,
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    registry.add_member(team, "dag_test")  # who `airflow dags test` runs as
    events = list(booking_logs(2_000, seed=31, start=START, rate=10))
    produce_to_stream(services, registry, events, CLOSE, PERF_STREAM)
    home = team_cluster.state_dir
    measurement = f"{team}_surge_form_{uuid.uuid4().hex[:6]}"

    run = airflow_cli.run(
        ["dags", "test", "dagger_deploy", "-c", json.dumps(deploy_form(team, measurement, services))], home
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "preview of " in out and "tag_s2id" in out  # the preview's table, in the task log
    record = registry.dagger(team, "surge-form")
    assert record is not None and (record.state, record.cluster) == ("running", "main")
    assert record.schema_versions == {PERF_STREAM: registry.stream(PERF_STREAM).schema_version}  # type: ignore[union-attr]
    truth = surge_truth(catalog_events(services, registry, PERF_STREAM, before=CLOSE))
    assert sink_reaches(measurement, services, truth, until=CLOSE) == truth

    listed = airflow_cli.run(["dags", "test", "dagger_list", "-c", json.dumps({"team": team})], home)
    assert listed.returncode == 0 and "surge-form" in listed.stdout + listed.stderr

    checked = airflow_cli.run(["dags", "test", "dagger_health", "-c", json.dumps({"heal": False})], home)
    out = checked.stdout + checked.stderr
    assert checked.returncode == 0, out[-3000:]
    assert re.search(rf"{team}\s+.\s+surge-form\s+.\s+main\s+.\s+healthy", out), out[-4000:]  # the task log's table

    stopped = airflow_cli.run(
        ["dags", "test", "dagger_stop", "-c", json.dumps({"team": team, "name": "surge-form"})], home
    )
    assert stopped.returncode == 0, (stopped.stdout + stopped.stderr)[-3000:]
    assert registry.dagger(team, "surge-form").state == "stopped"  # type: ignore[union-attr]
    actors = {e.actor for e in registry.history(f"dagger:{team}/surge-form")}
    assert actors == {"dag_test"}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"name": "Surge Form"}, "name"),  # refused by the form's schema, before any task
        ({"stream": "no-such-stream"}, "stream"),
        ({"cluster": "elsewhere"}, "elsewhere"),  # not one of the form's choices
        ({"sql": "SELECT nope FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"}, "nope"),
        ({"parallelism": 0}, "parallelism"),
        ({"team": "nobody"}, "team"),  # not in the registry: not one of the form's choices
    ],
)
def test_bad_deploy_params_fail_before_anything_is_touched(
    services: Services,
    team_cluster: TeamCluster,
    airflow_cli: AirflowCli,
    changes: dict[str, Any],
    says: str,
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    registry.add_member(team, "dag_test")
    home = team_cluster.state_dir
    conf = deploy_form(team, f"{team}_m", services, name=f"bad-{uuid.uuid4().hex[:6]}") | changes
    run = airflow_cli.run(["dags", "test", "dagger_deploy", "-c", json.dumps(conf)], home)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and says in out, out[-3000:]
    assert registry.dagger(conf["team"], conf["name"]) is None
