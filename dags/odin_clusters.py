"""Team Spark clusters, for platform engineers: provision, scale, destroy (odin.cluster does the work).

Each run logs the Terraform plan before applying it, converges the nodes with Ansible, checks their health and
records the cluster and who asked in the platform registry. Runs triggered by anyone but a platform engineer (team
`platform`) are refused before anything is touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from dags.provider.params import param_schemas
from odin.cluster.spec import ClusterSpec

log = logging.getLogger(__name__)
FIELDS = ["team", "name", "environment", "masters", "workers", "worker_cores", "worker_memory"]
SPEC = param_schemas(ClusterSpec, FIELDS)
TAGS = ["platform", "odin", "cluster"]


def _params(*names: str, **extra: Param) -> dict[str, Param]:
    out = {("cluster" if n == "name" else n): Param(section="Cluster", **SPEC[n]) for n in names}
    return out | extra


def _run(action: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    """Call dags.provider.requests.clusters with the run's params and user; refusals fail the run without retries."""
    from airflow.sdk.exceptions import AirflowFailException

    from odin.cluster.lifecycle import ClusterError
    from odin.registry import Refused

    context = get_current_context()
    user = getattr(context["dag_run"], "triggering_user_name", None)
    try:
        return action(dict(context["params"]), user, log.info, **kwargs)
    except Refused as e:
        raise AirflowFailException(f"refused: {e}") from None
    except ClusterError as e:
        raise AirflowFailException(str(e)) from None


@dag(
    dag_id="odin_provision_cluster",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md=__doc__,
    params=_params(*FIELDS),
)
def odin_provision_cluster() -> None:
    @task
    def provision() -> dict[str, Any]:
        from dags.provider.requests import clusters as requests

        return _run(requests.create)

    provision()


@dag(
    dag_id="odin_scale_cluster",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md=__doc__,
    params=_params("team", "name", "workers"),
)
def odin_scale_cluster() -> None:
    @task
    def scale() -> dict[str, Any]:
        from dags.provider.requests import clusters as requests

        return _run(requests.scale)

    scale()


@dag(
    dag_id="odin_destroy_cluster",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=TAGS,
    doc_md=__doc__,
    params=_params(
        "team",
        "name",
        stop_daggers=Param(False, type="boolean", section="Daggers on it", description="Stop them first."),
        move_daggers_to=Param(
            None, type=["null", "string"], section="Daggers on it", description="Another cluster of the team."
        ),
    ),
)
def odin_destroy_cluster() -> None:
    @task
    def destroy() -> dict[str, Any]:
        from dags.provider.requests import clusters as requests

        return _run(requests.destroy, run_id=get_current_context()["dag_run"].run_id)

    destroy()


odin_provision_cluster()
odin_scale_cluster()
odin_destroy_cluster()
