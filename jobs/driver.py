"""A deployed dagger's driver: what a cluster's worker runs (Spark's PythonRunner, cluster mode) for jobs/lifecycle.py.

    driver.py --spec <base64 JSON> --state-dir <dir> --run <id> [--reset-checkpoint]

The worker copies this file into the driver's work directory and runs it with the platform's Python runtime, which
every node has installed (Odin's platform_runtime role), packages included. The spec comes inline and already
resolved (catalog streams filled in), so the driver needs neither the spec file nor the registry. Master, driver
host and resources come from the submission. The driver keeps its status file (jobs/status.py) current; a failure
is written there before the process exits non-zero, which makes a supervised driver restart from its checkpoint.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="jobs/driver.py")
    parser.add_argument("--spec", required=True, help="The dagger spec: JSON, base64url.")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--run", required=True, help="The deployment's id, stamped on the status file.")
    parser.add_argument("--reset-checkpoint", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    from jobs.engine import run, session_for
    from jobs.plan import plan_dagger
    from jobs.session import root_cause
    from jobs.spec import DaggerSpec
    from jobs.status import DaggerStatus, status_path, write_status
    from odin.team_secrets import TeamSecrets

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = _args(argv)
    spec = DaggerSpec.model_validate_json(base64.urlsafe_b64decode(args.spec))
    # the team's secrets, which the spec's sink names by environment variable (odin/team_secrets.py)
    os.environ.update(TeamSecrets(args.state_dir).load(spec.team))
    plan = plan_dagger(spec, args.state_dir)
    path = status_path(plan.checkpoint)
    now = datetime.now(UTC)
    status = DaggerStatus(phase="starting", run=args.run, started_at=now, updated_at=now)
    write_status(path, status)

    def on_progress(progress: dict[str, Any], sink_errors: int) -> None:
        nonlocal status
        status = status.progressed(progress, sink_errors)
        write_status(path, status)

    try:
        spark = session_for(plan, master=None)
        result = run(plan, spark, on_progress=on_progress, reset_checkpoint=args.reset_checkpoint)
    except BaseException as e:
        traceback.print_exc()  # into the driver's stderr, in the worker's work directory
        write_status(path, status.ended("failed", str(root_cause(e))))
        return 1
    write_status(path, status.ended("stopped"))
    logging.info("dagger %s stopped after %d batch(es)", spec.qualified_name, result.batches)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
