"""Airflow DAGs load, and run against a real stack, without any Airflow server (SQLite in a temp AIRFLOW_HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

from odin.access import PLATFORM_TEAM
from odin.paths import BIN_DIR, REPO
from odin.registry import Registry
from tests.conftest import Services


def test_dags_import_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert {"platform_health", "odin_provision_cluster", "odin_scale_cluster", "odin_destroy_cluster"} <= set(bag.dags)
    assert bag.dags["odin_provision_cluster"].params["environment"] == "local"
    assert bag.dags["platform_health"].params["environment"] == "local"


def test_dags_use_only_airflow_3_apis() -> None:
    run = subprocess.run(
        [str(BIN_DIR / "ruff"), "check", "--select", "AIR3", str(REPO / "dags")], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _airflow(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "airflow"), *args], env=env, capture_output=True, text=True, timeout=300)


def _airflow_home(home: Path, odin_home: Path) -> dict[str, str]:
    """The environment of an Airflow with a migrated SQLite database in `home`, acting on Odin's `odin_home`."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ODIN_HOME": str(odin_home),
        "PATH": f"{BIN_DIR}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }
    assert _airflow(["db", "migrate"], env).returncode == 0
    return env


def test_platform_health_dag_checks_a_running_stack(services: Services, tmp_path: Path) -> None:
    assert services.stack is not None
    env = _airflow_home(tmp_path, services.stack.state_dir)
    run = _airflow(["dags", "test", "platform_health"], env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "state=success" in out or "success" in out.lower(), out[-3000:]


def test_platform_health_dag_fails_on_an_environment_never_brought_up(tmp_path: Path) -> None:
    env = _airflow_home(tmp_path / "airflow", tmp_path / "nothing-here")
    run = _airflow(["dags", "test", "platform_health"], env)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "was never brought up" in out, out[-3000:]


def test_cluster_dags_refuse_then_provision_and_destroy_a_team_cluster(services: Services, tmp_path: Path) -> None:
    """`airflow dags test` runs as user `dag_test`: refused until it is a platform engineer."""
    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team = f"t{uuid.uuid4().hex[:8]}"
    registry.ensure_team(team)
    env = _airflow_home(tmp_path, services.stack.state_dir)
    conf = json.dumps({"team": team, "cluster": "main", "workers": 1, "worker_memory": "512m"})
    try:
        if "dag_test" not in registry.members(PLATFORM_TEAM):  # another test may have added it
            refused = _airflow(["dags", "test", "odin_provision_cluster", "-c", conf], env)
            out = refused.stdout + refused.stderr
            assert refused.returncode != 0 and "dag_test is not a platform engineer" in out, out[-3000:]
            assert registry.cluster(team, "main") is None
        registry.ensure_team(PLATFORM_TEAM)
        registry.add_member(PLATFORM_TEAM, "dag_test")

        bad = _airflow(
            ["dags", "test", "odin_provision_cluster", "-c", json.dumps({"team": team, "cluster": "Main"})], env
        )
        assert bad.returncode != 0 and "cluster" in (bad.stdout + bad.stderr), (bad.stdout + bad.stderr)[-3000:]

        run = _airflow(["dags", "test", "odin_provision_cluster", "-c", conf], env)
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
        gone = _airflow(
            ["dags", "test", "odin_destroy_cluster", "-c", json.dumps({"team": team, "cluster": "main"})], env
        )
        registry.close()
    assert gone.returncode == 0, (gone.stdout + gone.stderr)[-3000:]
