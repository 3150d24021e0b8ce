"""The REST client of a cluster with standby masters: a standby answers every request with `success: false`
("Current state is not alive: STANDBY"), so the client asks the next master. The masters here are stand-ins that
answer as Spark's do (a unit test of the client; the HA test runs it against real masters)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from jobs.lifecycle.submission import SparkRest
from tests.support.http_stub import Handler, serving

STANDBY = {
    "action": "CreateSubmissionResponse",
    "success": False,
    "message": "Current state is not alive: STANDBY. Can only accept driver submissions in ALIVE state.",
}
ALIVE = {"action": "CreateSubmissionResponse", "success": True, "submissionId": "driver-1"}
# A standby asked for a driver's status wraps the same words in the exception it formats, stack and all.
STANDBY_STATUS = {
    "action": "SubmissionStatusResponse",
    "success": False,
    "submissionId": "driver-1",
    "message": "Exception from the cluster:\njava.lang.Exception: Current state is not alive: STANDBY. Can only "
    "request driver status in ALIVE state.\n\torg.apache.spark.deploy.master.Master$$anonfun$receiveAndReply$1",
}
ALIVE_STATUS = {
    "action": "SubmissionStatusResponse",
    "success": True,
    "submissionId": "driver-1",
    "driverState": "KILLED",
}


def _master(reply: dict, status: dict) -> type[Handler]:
    """Answers as Spark's REST server does: HTTP 200 with a JSON document, success or not."""

    class Master(Handler):
        def do_POST(self) -> None:
            self.body()
            self.reply(200, reply)

        def do_GET(self) -> None:
            self.reply(200, status)

    return Master


@pytest.fixture
def masters() -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(serving(_master(*m))) for m in ((STANDBY, STANDBY_STATUS), (ALIVE, ALIVE_STATUS))]


def test_a_standby_master_passes_the_request_to_the_next(masters: list[str]) -> None:
    rest = SparkRest(masters, lambda: "token")
    assert rest.submit("/app.py", [], {}) == "driver-1"


def test_a_standby_asked_for_a_status_passes_it_to_the_next(masters: list[str]) -> None:
    """A master restarted after a failover is a standby listed first: its status answer is not the driver's
    (the HA test's stop waited 90 s on 'UNKNOWN' for a driver the active master had killed)."""
    assert SparkRest(masters, lambda: "token").status("driver-1").state == "KILLED"


class _RecoveringMaster(Handler):
    """A master that took over after a failover: 'not alive' while it recovers, then it knows the driver again, and
    only a kill asked after that reaches the driver's worker."""

    recovered_at = 0.0
    killed = False

    def _recovering(self) -> bool:
        if time.monotonic() < type(self).recovered_at:
            self.reply(
                200, {"action": "ErrorResponse", "success": False, "message": "Current state is not alive: RECOVERING"}
            )
            return True
        return False

    def do_POST(self) -> None:
        self.body()
        if not self._recovering():
            type(self).killed = True
            self.reply(200, {"action": "KillSubmissionResponse", "success": True, "submissionId": "driver-1"})

    def do_GET(self) -> None:
        if not self._recovering():
            state = "KILLED" if type(self).killed else "RUNNING"
            self.reply(200, {"action": "SubmissionStatusResponse", "success": True, "driverState": state})


def test_a_kill_asked_while_the_new_master_recovers_is_asked_again_until_the_driver_ends() -> None:
    _RecoveringMaster.recovered_at, _RecoveringMaster.killed = time.monotonic() + 1.0, False
    said: list[str] = []
    with serving(_RecoveringMaster) as url:
        rest = SparkRest([url], lambda: "token")
        assert rest.end("driver-1", timeout_s=10, say=said.append, poll_s=0.1, again_s=0.5) == "KILLED"
        assert any("not alive: RECOVERING" in s for s in said), said
        _RecoveringMaster.killed = False  # a driver that does not end: None when the time is up
        _RecoveringMaster.recovered_at = time.monotonic() + 60
        assert rest.end("driver-1", timeout_s=1, say=said.append, poll_s=0.1, again_s=0.5) is None
