"""Health of every team cluster and dagger, every minute, and the self-healing it calls for (jobs/health/checkup.py): a
failed dagger is restarted from its checkpoint within its restart budget, then marked crashlooping and paged; a
cluster with dead masters or workers is converged by Odin. Verdicts and reasons go to the task log as tables, to the
TSDB (`dagger_health`, `cluster_health`) and to a JSON report per run; every action to the registry's history.
`dagger status` shows the same without acting."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from dags.provider.tasks import START, environment_param, run_params

log = logging.getLogger(__name__)


@dag(
    schedule=timedelta(minutes=1),
    start_date=START,
    catchup=False,
    max_active_runs=1,  # a check that restarts daggers can outlast the minute: the next one waits
    tags=["daggers", "health"],
    params={
        "environment": environment_param(),
        "heal": Param(True, type="boolean", description="Restart failed daggers and converge broken clusters."),
    },
    doc_md=__doc__,
)
def dagger_health() -> None:
    @task(execution_timeout=timedelta(minutes=15))
    def check() -> dict[str, Any]:
        from dags.provider.requests.daggers import check_health

        params = run_params()
        return check_health(params["environment"], bool(params["heal"]), log.info)

    check()


dagger_health()
