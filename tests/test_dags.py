"""Airflow DAGs load, and run against a real stack, without any Airflow server (SQLite in a temp AIRFLOW_HOME)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from odin.paths import BIN_DIR, REPO
from tests.conftest import Services


def test_dags_import_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert "platform_health" in bag.dags
    assert bag.dags["platform_health"].params["environment"] == "local"


def _airflow(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "airflow"), *args], env=env, capture_output=True, text=True, timeout=300)


def test_platform_health_dag_checks_a_running_stack(services: Services, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ODIN_HOME": str(services.stack.state_dir),
        "PATH": f"{BIN_DIR}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }
    assert _airflow(["db", "migrate"], env).returncode == 0
    run = _airflow(["dags", "test", "platform_health"], env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "state=success" in out or "success" in out.lower(), out[-3000:]


def test_platform_health_dag_fails_on_an_environment_never_brought_up(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "ODIN_HOME": str(tmp_path / "nothing-here"),
        "PYTHONPATH": str(REPO),
    }
    assert _airflow(["db", "migrate"], env).returncode == 0
    run = _airflow(["dags", "test", "platform_health"], env)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "was never brought up" in out, out[-3000:]
