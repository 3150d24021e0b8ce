"""The platform's reports on one page, daily (and at the end of `make demo`): every Loki run, the health checks and
the benchmarks' figures, gathered into `reports/index.html` (self-contained, plots inlined: it opens offline) and
`reports/index.json` under the environment's state directory (loki/reports_index.py)."""

from __future__ import annotations

import logging

from airflow.sdk import dag, task

from dags.provider.tasks import START, environment_param, run_params

log = logging.getLogger(__name__)


@dag(
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["platform", "reports", "loki", "health"],
    params={"environment": environment_param()},
    doc_md=__doc__,
)
def reports_gather() -> None:
    @task
    def gather() -> dict[str, str]:
        from loki.reports_index import write
        from odin.environment import opened

        with opened(run_params()["environment"]) as (registry, state_dir):
            json_path, html_path = write(registry, state_dir)
        log.info("reports: %s (data: %s)", html_path, json_path)
        return {"html": str(html_path), "json": str(json_path)}

    gather()


reports_gather()
