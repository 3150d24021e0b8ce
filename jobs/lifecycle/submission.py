"""Spark standalone's REST submission API (the master's port `rest`): submit a Python driver in cluster mode,
ask its state, kill it. Requests carry a token signed with the cluster's secret (odin/cluster/secret.py).

A cluster with standby masters lists several REST URLs: only the active master accepts submissions, so each call
tries them in turn, as spark-submit does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import httpx

from odin.apis import http_client

MAIN_CLASS = "org.apache.spark.deploy.PythonRunner"
FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED", "ERROR"})
TIMEOUT_S = 15.0
KILL_AGAIN_S = 10.0


class SubmissionError(RuntimeError):
    """The cluster refused or could not be reached; the message has the master's own words."""


@dataclass(frozen=True)
class DriverStatus:
    submission_id: str
    state: str  # SUBMITTED, RUNNING, RELAUNCHING, FINISHED, FAILED, KILLED, ERROR, UNKNOWN
    worker: str | None = None
    message: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


# How a standby (or recovering) master answers any request, with HTTP 200 (Spark's BACKUP_STANDALONE_MASTER_PREFIX):
# the request goes to the next master. A status answer wraps these words in a formatted exception, so they are
# looked for anywhere in the message.
NOT_ALIVE = "Current state is not alive"


def _gist(message: str) -> str:
    """A master's words without the stack a status answer carries ("Exception from the cluster:", the exception,
    then one line per frame)."""
    lines = [line.strip() for line in message.splitlines() if line.strip() and not line.startswith("\t")]
    return " ".join(lines[:2])[:300]


class SparkRest:
    def __init__(self, rest_urls: list[str], token: Callable[[], str]) -> None:
        if not rest_urls:
            raise SubmissionError("the cluster has no REST submission URL (odin cluster list)")
        self.rest_urls = rest_urls
        self.token = token

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        problems = []
        for url in self.rest_urls:
            try:
                r = http_client.request(
                    method,
                    f"{url}/v1/submissions/{path}",
                    json=body,
                    headers={"Authorization": f"Bearer {self.token()}"},
                    timeout=TIMEOUT_S,
                )
            except httpx.HTTPError as e:
                problems.append(f"{url}: {type(e).__name__}: {e}")
                continue
            if r.status_code == 403:
                raise SubmissionError(f"{url} refused the token (403): is the cluster's secret the one it runs with?")
            try:
                doc = r.json()
            except ValueError:
                problems.append(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
                continue
            standby = not doc.get("success") and NOT_ALIVE in str(doc.get("message", ""))
            if standby or doc.get("action") == "ErrorResponse" or (r.status_code >= 400 and not doc.get("success")):
                problems.append(f"{url}: {_gist(str(doc.get('message') or r.text))}")
                continue
            return doc
        raise SubmissionError("; ".join(problems))

    def submit(
        self,
        app: str,
        args: list[str],
        properties: dict[str, str],
        environment: dict[str, str] | None = None,
    ) -> str:
        """Run `app` (a Python file on every worker's file system) as a driver; its submission id."""
        body = {
            "action": "CreateSubmissionRequest",
            "appResource": app,
            "mainClass": MAIN_CLASS,
            "appArgs": [app, "", *args],  # PythonRunner: the file, extra Python files, then the app's arguments
            "clientSparkVersion": version("pyspark"),
            "environmentVariables": {"SPARK_ENV_LOADED": "1", **(environment or {})},
            "sparkProperties": {"spark.submit.deployMode": "cluster", **properties},
        }
        doc = self._call("POST", "create", body)
        if not doc.get("success") or not doc.get("submissionId"):
            raise SubmissionError(f"submission refused: {doc.get('message') or doc}")
        return str(doc["submissionId"])

    def status(self, submission_id: str) -> DriverStatus:
        doc = self._call("GET", f"status/{submission_id}")
        return DriverStatus(
            submission_id,
            str(doc.get("driverState") or "UNKNOWN"),
            doc.get("workerHostPort"),
            str(doc.get("message") or ""),
        )

    def kill(self, submission_id: str) -> tuple[bool, str]:
        """Ask the master to kill the driver: whether it accepted (a driver already ended is not an error), and its
        words ("Kill request for ... submitted" says only that it was passed to the driver's worker)."""
        doc = self._call("POST", f"kill/{submission_id}")
        return bool(doc.get("success")), str(doc.get("message") or "")

    def end(
        self,
        submission_id: str,
        timeout_s: float,
        say: Callable[[str], None],
        poll_s: float = 1.0,
        again_s: float = KILL_AGAIN_S,
    ) -> str | None:
        """Kill the driver and wait until a master reports it ended: its final state, or None after `timeout_s`.
        The kill is asked again every `again_s` until then: a master taking over after a failover answers "not
        alive" while it recovers (up to spark.worker.timeout), and a kill it accepts before the driver's worker has
        re-registered reaches no worker. Every new answer of the masters is said, so a wait that ends in None shows
        where it stuck."""
        deadline = time.monotonic() + timeout_s
        kill_at = 0.0
        last: dict[str, str] = {}  # the masters' latest answer to each question

        def heard(question: str, answer: str) -> None:
            if last.get(question) != answer:
                last[question] = answer
                say(f"{question} {submission_id}: {answer}")

        while time.monotonic() < deadline:
            if time.monotonic() >= kill_at:
                kill_at = time.monotonic() + again_s
                try:
                    heard("kill", self.kill(submission_id)[1])
                except SubmissionError as e:
                    heard("kill", str(e))
            try:
                status = self.status(submission_id)
            except SubmissionError as e:
                heard("status of", str(e))
            else:
                if status.final:
                    return status.state
                heard("status of", f"{status.state} on {status.worker or 'no worker'} {_gist(status.message)}".rstrip())
            time.sleep(poll_s)
        return None
