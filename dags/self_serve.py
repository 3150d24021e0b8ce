"""Daggers, self-serve: teams deploy, update, stop and list their daggers by filling a form (the seeds' Datlantis);
CI pipelines send the same fields, or a whole `spec`, through Airflow's REST API.

Deploy: check (fields, who asks, which cluster, the catalog stream, the SQL) → preview on the stream's latest
events (logged as a table) → submit to the team's cluster and wait, deferred, for the query's first progress.
Runs are refused before anything is touched unless the triggering user is a member of the dagger's team.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from dags.provider.operators.daggers import DeployDaggerOperator, UpdateDaggerOperator
from dags.provider.params.daggers import form_fields
from odin import form_choices
from odin.paths import default_state_dir

log = logging.getLogger(__name__)
FIELDS = form_fields(form_choices.read(default_state_dir()))  # a file: no registry when the DAG is parsed
TAGS = ["daggers"]


def _params(*names: str, **extra: Param) -> dict[str, Param]:
    return {n: Param(**FIELDS[n]) for n in names} | extra


FORM = tuple(FIELDS)  # the form's fields, in its order


def _run(action: Callable[..., Any], **kwargs: Any) -> Any:
    """Call dags.provider.requests.daggers with the run's params and triggering user (never anything another task
    handed over);
    refusals fail the run without retries."""
    from airflow.sdk.exceptions import AirflowFailException

    from odin.registry import Refused

    context = get_current_context()
    user = getattr(context["dag_run"], "triggering_user_name", None)
    try:
        return action(dict(context["params"]), user, log.info, **kwargs)
    except Refused as e:
        raise AirflowFailException(f"refused: {e}") from None


@dag(
    dag_id="dagger_deploy",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md=__doc__,
    params=_params(*FORM),
)
def dagger_deploy() -> None:
    @task
    def check() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return _run(requests.check)

    @task
    def preview() -> int:
        from dags.provider.requests import daggers as requests

        return _run(requests.preview)

    check() >> preview() >> DeployDaggerOperator(task_id="deploy")


@dag(
    dag_id="dagger_update",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md="Update a running dagger: stop it, redeploy on its checkpoint when the new spec can resume it; "
    "otherwise refused unless `reset_state` (it reads its streams again from `start`).",
    params=_params(
        *FORM,
        reset_state=Param(
            False,
            type="boolean",
            section="Advanced",
            description="Start over when the checkpoint cannot serve the new spec.",
        ),
    ),
)
def dagger_update() -> None:
    @task
    def check() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return _run(requests.check, update=True)

    @task
    def preview() -> int:
        from dags.provider.requests import daggers as requests

        return _run(requests.preview, update=True)

    check() >> preview() >> UpdateDaggerOperator(task_id="update")


@dag(
    dag_id="dagger_stop",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md="Stop a dagger: its driver is killed and ends; its checkpoint stays for a later deploy.",
    params=_params("team", name=Param(type="string", section="Dagger", description="The dagger's name.")),
)
def dagger_stop() -> None:
    @task
    def stop() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return _run(requests.stop, run_id=get_current_context()["dag_run"].run_id)

    stop()


@dag(
    dag_id="dagger_failover",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=[*TAGS, "health"],
    doc_md="Seed 004's cluster failover: every dagger of a team cluster moves to another cluster of the team and "
    "resumes from its checkpoint (nothing lost or counted twice). The health check does it on its own, for teams "
    "that allow it, when a cluster stays down.",
    params=_params(
        "team",
        "cluster",
        to=Param(None, type=["null", "string"], description="The team cluster to move to (default: its healthiest)."),
        reason=Param("", type="string", description="Why, for the registry's history."),
    ),
)
def dagger_failover() -> None:
    @task
    def failover() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return _run(requests.failover, run_id=get_current_context()["dag_run"].run_id)

    failover()


@dag(
    dag_id="dagger_list",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md="Daggers with their cluster, state, since when, input rate and lag (a table in the task log): the "
    "triggering user's teams' (a platform engineer's: every team's).",
    params={"team": Param(None, type=["null", "string"], description="Only this team's (default: all yours).")},
)
def dagger_list() -> None:
    @task
    def listing() -> list[dict[str, Any]]:
        from dags.provider.requests import daggers as requests

        return _run(requests.listing)

    listing()


dagger_deploy()
dagger_update()
dagger_stop()
dagger_failover()
dagger_list()
