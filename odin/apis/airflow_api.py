"""Airflow's REST API v2 as a CI pipeline uses it: log in as a user, trigger a DAG with `conf`, wait for the run.

The official client (`apache-airflow-client`) makes the calls; logging in is the auth manager's own endpoint
(`POST /auth/token`), which the client does not cover.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from airflow_client.client import ApiClient, Configuration
from airflow_client.client.api.dag_api import DAGApi
from airflow_client.client.api.dag_run_api import DagRunApi
from airflow_client.client.api.task_instance_api import TaskInstanceApi
from airflow_client.client.exceptions import NotFoundException
from airflow_client.client.models import DAGPatchBody, TriggerDAGRunPostBody

from odin.apis import http_client

FINISHED = ("success", "failed")


class AirflowApiError(RuntimeError):
    pass


def access_token(url: str, user: str, password: str) -> str:
    """A JWT for `user` from the simple auth manager (other auth managers have their own login)."""
    r = http_client.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
    if r.status_code != 201:
        raise AirflowApiError(f"login as {user} at {url} failed: HTTP {r.status_code} {r.text[:200]}")
    return str(r.json()["access_token"])


@dataclass(frozen=True)
class RunState:
    run_id: str
    state: str
    seconds: float  # since the trigger


class AirflowApi:
    def __init__(self, url: str, user: str, password: str) -> None:
        self.url, self.user = url, user
        self._client = ApiClient(Configuration(host=url, access_token=access_token(url, user, password)))

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> None:
        """Until the DAG processor has parsed `dag_id` (a fresh Airflow takes a while)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                DAGApi(self._client).get_dag(dag_id)
                return
            except NotFoundException:
                if time.monotonic() > deadline:
                    raise AirflowApiError(
                        f"DAG {dag_id} not parsed after {timeout:.0f}s: see the dag-processor log"
                    ) from None
                time.sleep(2)

    def unpause(self, dag_id: str) -> None:
        DAGApi(self._client).patch_dag(dag_id, DAGPatchBody(is_paused=False))

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        run = DagRunApi(self._client).trigger_dag_run(dag_id, TriggerDAGRunPostBody(conf=conf, logical_date=None))
        return str(run.dag_run_id)

    def state(self, dag_id: str, run_id: str) -> str:
        """queued, running, success or failed."""
        return str(DagRunApi(self._client).get_dag_run(dag_id, run_id).state.value)

    def wait(self, dag_id: str, run_id: str, timeout: float = 600, poll: float = 2) -> RunState:
        """Poll the run until it succeeds or fails (or `timeout`)."""
        start = time.monotonic()
        while True:
            state = self.state(dag_id, run_id)
            if state in FINISHED or time.monotonic() - start > timeout:
                return RunState(run_id, state, time.monotonic() - start)
            time.sleep(poll)

    def runs(self, dag_id: str, limit: int = 20) -> list[tuple[str, str, str]]:
        """The DAG's latest runs, newest first: (run id, run type (scheduled, manual, ...), state)."""
        found = DagRunApi(self._client).get_dag_runs(dag_id, limit=limit, order_by=["-run_after"]).dag_runs
        return [(str(r.dag_run_id), str(r.run_type.value), str(r.state.value)) for r in found]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """Each task's state, start and end."""
        tis = TaskInstanceApi(self._client).get_task_instances(dag_id, run_id).task_instances
        return {ti.task_id: ti for ti in tis}

    def log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task's log as text: each message, with its details (an exception's type and value among them)."""
        # raw: the client's model of a log message keeps only `event` and `timestamp`
        raw = TaskInstanceApi(self._client).get_log_without_preload_content(dag_id, run_id, task_id, try_number)
        lines = []
        for m in json.loads(raw.data)["content"]:
            if isinstance(m, dict):
                event, extra = m.pop("event", ""), {k: v for k, v in m.items() if k != "timestamp"}
                m = f"{event} {json.dumps(extra, default=str)}" if extra else event
            lines.append(str(m))
        return "\n".join(lines)
