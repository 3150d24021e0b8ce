"""Airflow glue for the dagger lifecycle: the deploy and update tasks submit, then defer to a trigger that waits for
the query's first progress, so no worker slot is held while a driver starts (the Spark provider has no such thing).

The operators take a Request the DAG's first task made (jobs/form.py) and the triggering user; what they do is
jobs/lifecycle.py's. The trigger polls `lifecycle.verdict` in a thread of the triggerer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from jobs.lifecycle import START_TIMEOUT_S, Deployment, verdict

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

    template_fields = ("request",)

    def __init__(self, *, request: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request  # the first task's XCom: {"spec": ..., "cluster": ..., "reset_state": ...}

    def _submit(self, user: str, log: Callable[[str], None]) -> Deployment:
        raise NotImplementedError

    def execute(self, context: Any) -> None:
        user = str(getattr(context["dag_run"], "triggering_user_name", None) or "?")
        deployment = self._submit(user, self.log.info)
        self.log.info("submitted %s; waiting for the query's first progress", deployment.submission_id)
        self.defer(
            trigger=DaggerStartedTrigger(deployment.to_dict()),
            method_name="execute_complete",
            timeout=timedelta(seconds=START_TIMEOUT_S + 60),
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from jobs import requests
        from jobs.lifecycle import DeployError, Started

        try:
            verdict = Started(True, bool(event["ok"]), str(event["reason"]))
            record = requests.conclude(Deployment(**event["deployment"]), verdict, self.log.info)
        except DeployError as e:
            raise AirflowFailException(str(e)) from None
        self.log.info("dagger %s runs on %s (driver %s)", record["name"], record["cluster"], record["submission_id"])
        return record


class DeployDaggerOperator(_LifecycleOperator):
    def _submit(self, user: str, log: Callable[[str], None]) -> Deployment:
        from jobs import requests

        return requests.submit(self.request, user, log)


class UpdateDaggerOperator(_LifecycleOperator):
    def _submit(self, user: str, log: Callable[[str], None]) -> Deployment:
        from jobs import requests

        return requests.redeploy(self.request, user, log)
