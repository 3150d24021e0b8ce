"""Airflow glue for the dagger lifecycle: the deploy and update tasks submit, then defer to a trigger that waits for
the query's first progress, so no worker slot is held while a driver starts (the Spark provider has no such thing).

The operators rebuild their request from the run's params and triggering user and check it again
(dags/provider/requests/daggers.py):
nothing another task hands them (XCom, which other users can change) decides what they do, and a run carries out its
request once. What they do is jobs/lifecycle/daggers.py's. The trigger polls `lifecycle.verdict` in a thread of the
triggerer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from jobs.lifecycle.daggers import START_TIMEOUT_S, Deployment, verdict

POLL_S = 2.0


class DaggerStartedTrigger(BaseTrigger):
    """Fires once the deployment's query reported progress, or its driver failed, or `timeout_s` passed."""

    def __init__(self, deployment: dict[str, Any], timeout_s: float = START_TIMEOUT_S) -> None:
        super().__init__()
        self.deployment = deployment
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {
            "deployment": self.deployment,
            "timeout_s": self.timeout_s,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deployment = Deployment(**self.deployment)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            now = await asyncio.to_thread(verdict, deployment)
            if now.done:
                yield TriggerEvent({"ok": now.ok, "reason": now.reason, "deployment": self.deployment})
                return
            await asyncio.sleep(POLL_S)
        reason = f"no progress within {self.timeout_s:.0f} s"
        yield TriggerEvent({"ok": False, "reason": reason, "deployment": self.deployment})


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
        from jobs.lifecycle.daggers import DeployError, Started

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
