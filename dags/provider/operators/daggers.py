"""The deploy and update tasks: they submit, then defer to DaggerStartedTrigger (dags/provider/triggers), which waits
for the query's first progress, so no worker slot is held while a driver starts (the Spark provider has no such thing).

The operators rebuild their request from the run's params and triggering user and check it again
(dags/provider/requests/daggers.py): nothing another task hands them (XCom, which other users can change) decides
what they do, and a run carries out its request once. What they do is jobs/lifecycle/daggers.py's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from dags.provider.triggers.daggers import DaggerStartedTrigger
from jobs.lifecycle import START_TIMEOUT_S

if TYPE_CHECKING:  # the lifecycle is imported when a task runs, not when a DAG file is parsed
    from jobs.lifecycle.daggers import Deployment


class _LifecycleOperator(BaseOperator):
    """Submit (deploy or update), defer until the first progress, then record the outcome in the registry."""

    def _submit(self, params: dict[str, Any], user: str | None, run_id: str) -> Deployment:
        raise NotImplementedError

    def execute(self, context: Any) -> None:
        from airflow.sdk.exceptions import AirflowFailException

        from odin.registry import Refused

        run = context["dag_run"]
        try:
            deployment = self._submit(dict(context["params"]), run.triggering_user_name, run.run_id)
        except Refused as e:
            raise AirflowFailException(f"refused: {e}") from None
        self.log.info("submitted %s; waiting for the query's first progress", deployment.submission_id)
        self.defer(
            trigger=DaggerStartedTrigger(deployment.to_dict()),
            method_name="execute_complete",
            timeout=timedelta(seconds=START_TIMEOUT_S + 60),
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from dags.provider.requests import daggers as requests
        from jobs.lifecycle.daggers import DeployError, Deployment, Started

        try:
            verdict = Started(True, bool(event["ok"]), str(event["reason"]))
            record = requests.conclude(Deployment(**event["deployment"]), verdict, self.log.info)
        except DeployError as e:
            raise AirflowFailException(str(e)) from None
        self.log.info("dagger %s runs on %s (driver %s)", record["name"], record["cluster"], record["submission_id"])
        return record


class DeployDaggerOperator(_LifecycleOperator):
    def _submit(self, params: dict[str, Any], user: str | None, run_id: str) -> Deployment:
        from dags.provider.requests import daggers as requests

        return requests.submit(params, user, self.log.info, run_id)


class UpdateDaggerOperator(_LifecycleOperator):
    def _submit(self, params: dict[str, Any], user: str | None, run_id: str) -> Deployment:
        from dags.provider.requests import daggers as requests

        return requests.redeploy(params, user, self.log.info, run_id)
