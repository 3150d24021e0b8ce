"""Daggers, self-serve: teams deploy, update, stop and list their daggers by filling a form (the seeds' Datlantis);
CI pipelines send the same fields, or a whole `spec`, through Airflow's REST API.

Deploy: check (fields, who asks, which cluster, the catalog stream, the SQL) → submit to the team's cluster and
wait, deferred, for the query's first progress → a preview on the stream's latest events (logged as a table). The
preview gates nothing there (a query that fails on the stream's events fails the deploy's wait, with the dagger's
own error, and a new dagger replaces nothing), so it comes after: its JVM beside the new driver's start took the
CPU the driver needed (docs/decisions.md). An update's preview comes before it stops the running dagger.
Runs are refused before anything is touched unless the triggering user is a member of the dagger's team.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param, dag, task

from dags.provider.operators.daggers import DeployDaggerOperator, UpdateDaggerOperator
from dags.provider.params.daggers import form_fields
from dags.provider.tasks import ON_DEMAND, form, run_request, this_run_id
from odin import form_choices
from odin.paths import default_state_dir

FIELDS = form_fields(form_choices.read(default_state_dir()))  # a file: no registry when the DAG is parsed
FORM = tuple(FIELDS)  # the form's fields, in its order
TAGS = ["daggers"]


@dag(dag_id="dagger_deploy", **ON_DEMAND, tags=TAGS, doc_md=__doc__, params=form(FIELDS, *FORM))
def dagger_deploy() -> None:
    @task
    def check() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return run_request(requests.check)

    @task
    def preview() -> int:
        from dags.provider.requests import daggers as requests

        return run_request(requests.preview)

    check() >> DeployDaggerOperator(task_id="deploy") >> preview()


@dag(
    dag_id="dagger_update",
    **ON_DEMAND,
    tags=TAGS,
    doc_md="Update a running dagger: stop it, redeploy on its checkpoint when the new spec can resume it; "
    "otherwise refused unless `reset_state` (it reads its streams again from `start`).",
    params=form(
        FIELDS,
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

        return run_request(requests.check, update=True)

    @task
    def preview() -> int:
        from dags.provider.requests import daggers as requests

        return run_request(requests.preview, update=True)

    check() >> preview() >> UpdateDaggerOperator(task_id="update")


@dag(
    dag_id="dagger_stop",
    **ON_DEMAND,
    tags=TAGS,
    doc_md="Stop a dagger: its driver is killed and ends; its checkpoint stays for a later deploy.",
    params=form(FIELDS, "team", name=Param(type="string", section="Dagger", description="The dagger's name.")),
)
def dagger_stop() -> None:
    @task
    def stop() -> dict[str, Any]:
        from dags.provider.requests import daggers as requests

        return run_request(requests.stop, run_id=this_run_id())

    stop()


@dag(
    dag_id="dagger_failover",
    **ON_DEMAND,
    tags=[*TAGS, "health"],
    doc_md="Seed 004's cluster failover: every dagger of a team cluster moves to another cluster of the team and "
    "resumes from its checkpoint (nothing lost or counted twice). The health check does it on its own, for teams "
    "that allow it, when a cluster stays down.",
    params=form(
        FIELDS,
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

        return run_request(requests.failover, run_id=this_run_id())

    failover()


@dag(
    dag_id="dagger_list",
    **ON_DEMAND,
    tags=TAGS,
    doc_md="Daggers with their cluster, state, since when, input rate and lag (a table in the task log): the "
    "triggering user's teams' (a platform engineer's: every team's).",
    params={"team": Param(None, type=["null", "string"], description="Only this team's (default: all yours).")},
)
def dagger_list() -> None:
    @task
    def listing() -> list[dict[str, Any]]:
        from dags.provider.requests import daggers as requests

        return run_request(requests.listing)

    listing()


dagger_deploy()
dagger_update()
dagger_stop()
dagger_failover()
dagger_list()
