"""Loki: a chaos or load experiment against perf streams, from a standard playbook (loki/playbooks) or one given
inline, aimed at a target. Validated and planned first (a playbook touching anything outside its blast radius,
or load on a non-perf topic, is refused before anything is touched); the run journals every step in the
simulation store, and its report (JSON + HTML with plots) lands in the reports location, recorded with the run.

Who may run what (loki/access.py): the run's triggering user, never a param. Platform engineers run any playbook;
a team's members run against one of that team's perf clusters (perf, perf-*, *-perf), with the blast radius the
platform fixes (the playbook's is replaced). Refusals fail the run with the reason in the task log and the
registry's history, before anything is touched.

Unscheduled by default; set LOKI_CHAOS_SCHEDULE (a cron expression) where this DAG is parsed to run it regularly
(the params' defaults then apply), and LOKI_CHAOS_SCHEDULE_USER to the user scheduled runs act as.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

from airflow.sdk import dag, task

from dags.provider.params.loki import form_fields
from dags.provider.tasks import START, failing_without_retries, form, run_params, triggering_user

log = logging.getLogger(__name__)
FIELDS = form_fields()  # loki/playbook.py's models and the standard playbooks' files: no registry when parsed


@dag(
    schedule=os.environ.get("LOKI_CHAOS_SCHEDULE") or None,
    start_date=START,
    catchup=False,
    max_active_runs=1,  # experiments on one environment never overlap
    tags=["loki", "chaos"],
    doc_md=__doc__,
    params=form(FIELDS, *FIELDS),
)
def loki_chaos() -> None:
    @task(execution_timeout=timedelta(hours=2))
    def simulate() -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from loki.playbook import STANDARD_DIR, PlaybookError
        from loki.runner import PlanRefused, playbook_from_params, run_playbook
        from odin.registry import Refused

        # The actor is the run's triggering user (Airflow's login), never a param. A scheduled run has none: it acts
        # as LOKI_CHAOS_SCHEDULE_USER, set beside LOKI_CHAOS_SCHEDULE by whoever runs the scheduler (and checked).
        user = triggering_user(scheduled_as=os.environ.get("LOKI_CHAOS_SCHEDULE_USER"))

        def actor(_registry: Any) -> str:
            if not user:
                raise Refused("no triggering user: a Loki run is triggered by a person or an API user")
            return str(user)

        with failing_without_retries((PlaybookError, PlanRefused), refused="refused:\n"):
            book = playbook_from_params(run_params(), STANDARD_DIR)
            report, html_path = run_playbook(book, None, actor, None, log.info)
        log.info("report: %s; verdict %s, score %s", html_path, report["verdict"], report["score"])
        if report["state"] != "finished":  # halted (loki halt, a safeguard) or failed: as `loki simulate` exits 1
            raise AirflowFailException(f"{report['state']}: {report['reason']}")
        if report["verdict"] != "pass":
            raise AirflowFailException(f"verdict {report['verdict']}: {[c for c in report['cases']]}")
        return {"run": report["run"], "verdict": report["verdict"], "score": report["score"], "report": str(html_path)}

    simulate()


loki_chaos()
