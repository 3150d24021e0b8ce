"""Team Spark clusters, for platform engineers: provision, scale, destroy (odin.cluster does the work).

Each run logs the Terraform plan before applying it, converges the nodes with Ansible, checks their health and
records the cluster and who asked in the platform registry. Runs triggered by anyone but a platform engineer (team
`platform`) are refused before anything is touched.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param, dag, task

from dags.provider.params import param_schemas
from dags.provider.tasks import ON_DEMAND, form, run_request, this_run_id
from odin.cluster.spec import ClusterSpec

SPEC = ["team", "name", "environment", "masters", "workers", "worker_cores", "worker_memory"]
# The form's fields: the spec's, its `name` as `cluster`.
FIELDS = {
    ("cluster" if n == "name" else n): {"section": "Cluster", **f} for n, f in param_schemas(ClusterSpec, SPEC).items()
}
TAGS = ["platform", "odin", "cluster"]


@dag(dag_id="odin_provision_cluster", **ON_DEMAND, tags=TAGS, doc_md=__doc__, params=form(FIELDS, *FIELDS))
def odin_provision_cluster() -> None:
    @task
    def provision() -> dict[str, Any]:
        from dags.provider.requests import clusters as requests
        from odin.cluster.lifecycle import ClusterError

        return run_request(requests.create, errors=(ClusterError,))

    provision()


@dag(
    dag_id="odin_scale_cluster",
    **ON_DEMAND,
    tags=TAGS,
    doc_md=__doc__,
    params=form(FIELDS, "team", "cluster", "workers"),
)
def odin_scale_cluster() -> None:
    @task
    def scale() -> dict[str, Any]:
        from dags.provider.requests import clusters as requests
        from odin.cluster.lifecycle import ClusterError

        return run_request(requests.scale, errors=(ClusterError,))

    scale()


@dag(
    dag_id="odin_destroy_cluster",
    **ON_DEMAND,
    tags=TAGS,
    doc_md=__doc__,
    params=form(
        FIELDS,
        "team",
        "cluster",
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
        from odin.cluster.lifecycle import ClusterError

        return run_request(requests.destroy, errors=(ClusterError,), run_id=this_run_id())

    destroy()


odin_provision_cluster()
odin_scale_cluster()
odin_destroy_cluster()
