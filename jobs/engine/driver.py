"""A deployed dagger's driver: what a cluster's worker runs (Spark's PythonRunner, cluster mode) for
jobs/lifecycle/daggers.py.

    driver.py --spec-file <placed spec, JSON> --state-dir <dir> --run <id> [--reset-checkpoint]

The worker copies this file into the driver's work directory and runs it with the platform's Python runtime, which
every node has installed (Odin's platform_runtime role), packages included. The spec is the one the platform placed
(jobs/lifecycle/placement.py), in a file of the dagger's own, not on the command line that `ps` shows; the driver
needs no registry. Master, driver host and resources come from the submission. The driver keeps its status file
(jobs/engine/status.py) current; a failure is written there before the process exits non-zero, which makes a
supervised driver restart from its checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobs/engine/driver.py")
    parser.add_argument("--spec-file", required=True, type=Path, help="The placed dagger spec (JSON).")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--run", required=True, help="The deployment's id, stamped on the status file.")
    parser.add_argument("--reset-checkpoint", action="store_true")
    return parser.parse_args(argv)


def _start_session() -> Future[SparkSession]:
    """The cluster's SparkSession, created in a thread from now on: its SparkContext (the DriverWrapper's JVM
    registering the application, the master launching executors) takes seconds of mostly waiting, which the engine's
    imports and the plan no longer wait for."""
    started: Future[SparkSession] = Future()

    def create() -> None:
        try:
            from jobs.engine.session import spark_session

            logging.info("start: Spark session")
            started.set_result(spark_session(app_name=None, master=None))  # named by its submission
            logging.info("start: Spark session ready")
        except BaseException as e:  # the main thread raises it where it waits for the session
            started.set_exception(e)

    threading.Thread(target=create, name="spark-session", daemon=True).start()
    return started


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for chatty in ("httpx", "py4j"):  # a line per HTTP write and per Spark callback would bury the dagger's own
        logging.getLogger(chatty).setLevel(logging.WARNING)
    args = _args(argv)
    if not args.spec_file.exists():  # a run long superseded (jobs/lifecycle/daggers.py keeps the last runs' files)
        logging.info("run %s: its spec file %s is gone: superseded, not starting", args.run, args.spec_file)
        return 0  # exit 0: a supervised driver that exits non-zero is relaunched
    session = _start_session()  # a run that then finds itself superseded ends with it, as with any failure

    from jobs.engine.plan import plan_dagger
    from jobs.engine.runner import fitted, run
    from jobs.engine.session import root_cause
    from jobs.engine.status import (
        DaggerStatus,
        drain_requested,
        hold_run_lock,
        own_submission_id,
        owner,
        status_path,
        write_status,
    )
    from jobs.spec import DaggerSpec
    from odin.teams.secrets import TeamSecrets

    sent = json.loads(args.spec_file.read_text())
    spec = DaggerSpec.model_validate(sent["spec"])
    # the team's secrets, which the spec's sink names by environment variable (odin/teams/secrets.py)
    os.environ.update(TeamSecrets(args.state_dir).load(spec.team))
    plan = plan_dagger(spec, args.state_dir)
    if plan.fingerprint != sent["plan"]:  # this worker's code or schemas differ from the platform's that planned it
        why = (
            f"the plan on this worker ({plan.fingerprint}) is not the one deployed ({sent['plan']}): its code or "
            "protos differ from the platform's; update the worker (odin up / odin cluster heal), then deploy again"
        )
        logging.error("dagger %s: %s", spec.qualified_name, why)
        now = datetime.now(UTC)
        failed = DaggerStatus(phase="starting", run=args.run, started_at=now, updated_at=now)
        write_status(status_path(plan.checkpoint), failed.ended("failed", why))
        return 0  # exit 0: relaunching it would fail the same way

    def superseded() -> str | None:
        """The run that took the checkpoint over, if another did (jobs/engine/status.py claim)."""
        current = owner(plan.checkpoint)
        return current if current not in (None, args.run) else None

    if by := superseded():
        # exit 0: a supervised driver that exits non-zero is relaunched
        logging.info("dagger %s: run %s is superseded by run %s, not starting", spec.qualified_name, args.run, by)
        return 0
    hold_run_lock(plan.checkpoint, args.run)  # held until this process tree is gone: the OS then releases it
    path = status_path(plan.checkpoint)
    now = datetime.now(UTC)
    status = DaggerStatus(
        phase="starting",
        run=args.run,
        started_at=now,
        updated_at=now,
        submission_id=own_submission_id(),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    write_status(path, status)
    taken_over: list[str] = []
    draining: list[bool] = []

    def update(new: Callable[[DaggerStatus], DaggerStatus]) -> None:
        """Write this run's status, unless a newer run owns the dagger now: then stop. Asked to drain: drain."""
        nonlocal status
        if taken_over or (by := superseded()) is None:
            if not taken_over:
                status = new(status)
                write_status(path, status)
            if not draining and drain_requested(plan.checkpoint, args.run):
                logging.info("dagger %s: run %s asked to drain", spec.qualified_name, args.run)
                draining.append(True)
                os.kill(os.getpid(), signal.SIGUSR1)  # the engine reads what is left, closes every window, returns
            return
        logging.info("dagger %s: run %s is superseded by run %s, stopping", spec.qualified_name, args.run, by)
        taken_over.append(by)
        os.kill(os.getpid(), signal.SIGTERM)  # the engine stops after the current batch, as on any stop

    def on_progress(progress: dict[str, Any], sink_errors: int) -> None:
        update(lambda s: s.progressed(progress, sink_errors))

    def on_idle() -> None:  # alive with nothing to read: health tells a quiet query from a stalled one by it
        update(lambda s: s.model_copy(update={"updated_at": datetime.now(UTC)}))

    try:
        spark = fitted(session.result(), plan)
        reset = args.reset_checkpoint
        result = run(plan, spark, on_progress=on_progress, reset_checkpoint=reset, on_idle=on_idle, warm=True)
    except BaseException as e:
        if taken_over or superseded():
            return 0  # the new run's driver owns the status file now (and may be what failed this one's batch)
        traceback.print_exc()  # into the driver's stderr, in the worker's work directory
        write_status(path, status.ended("failed", str(root_cause(e))))
        return 1
    if taken_over:
        return 0
    write_status(path, status.ended("stopped"))
    logging.info("dagger %s stopped after %d batch(es)", spec.qualified_name, result.batches)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
