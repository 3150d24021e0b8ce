"""Running a standard playbook at small scale through `loki simulate`, and checking its report against what is
really there: the consumer's sink table, the broker, and the feeders' ground truth beside the report."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from loki.store import Simulation, SimulationStore
from odin.paths import BIN_DIR, REPO
from odin.registry import Registry
from odin.teams.access import PLATFORM_TEAM
from odin.teams.actor import login
from odin.teams.databases import team_database
from odin.teams.secrets import TeamSecrets
from tests.support.services import Services

ENV = {**os.environ, "COLUMNS": "250", "PATH": f"{BIN_DIR}:{os.environ['PATH']}"}
REPORTS = REPO / ".local" / "artifacts" / "loki"  # kept after the run's stack is gone: HTML reports with plots


def as_platform_engineer(services: Services) -> None:
    """The OS user running the tests brought the stack up: the platform's first engineer (issue 28), who alone runs
    Loki against shared brokers and the host. Idempotent."""
    registry = Registry.connect(services.registry_url)
    try:
        registry.ensure_team(PLATFORM_TEAM)
        if login() not in registry.members(PLATFORM_TEAM):
            registry.add_member(PLATFORM_TEAM, login())
    finally:
        registry.close()


def state_args(services: Services) -> list[str]:
    assert services.stack is not None
    return ["--state-dir", str(services.stack.state_dir)]


def simulate(
    services: Services, playbook: str, *args: str, rate: float = 0.1, time_scale: float = 0.25
) -> tuple[dict[str, Any], Simulation]:
    """`loki simulate` as a person runs it; its report and its record in the simulation store. The steady state has
    5 minutes to come back, not the playbook's 2: on CI's two busy cores a relaunched driver takes that long (CI saw
    a worker-loss not back after 150 s). How fast it comes back is bench/loki_playbooks.py's to measure."""
    as_platform_engineer(services)
    run = subprocess.run(
        [str(BIN_DIR / "loki"), "simulate", playbook, "--rate-scale", str(rate), "--time-scale", str(time_scale),
         "--settle", "300s", "--reports", str(REPORTS), *args, *state_args(services)],
        capture_output=True, text=True, env=ENV, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    print(run.stdout[-6000:])  # what it said (pytest shows it when a later assertion fails)
    run_id = re.search(r"loki run (\S+):", run.stdout)
    assert run_id is not None, run.stdout[-2000:]
    registry = Registry.connect(services.registry_url)
    try:
        record = SimulationStore(registry).get(run_id.group(1))
    finally:
        registry.close()
    assert record is not None and record.state == "finished", record
    return json.loads(Path(record.summary["json"]).read_text()), record


def _bookings(conn: psycopg.Connection[Any], table: str) -> int | None:
    exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    if exists is None or exists[0] is None:
        return None
    row = conn.execute(f"SELECT coalesce(sum(num_of_bookings), 0) FROM {table}").fetchone()
    return int(row[0]) if row is not None else None


def sink_events(services: Services, run_id: str, team: str) -> int:
    """The bookings the surge consumer's table counts (loki/playbooks/consumers/surge.yaml): in the scratch database
    of local consumers, or, for a cluster consumer placed like any deployed dagger, in its team's own database."""
    table = f"loki_surge_{run_id}"
    with psycopg.connect(services.postgres_dsn) as conn:
        found = _bookings(conn, table)
    if found is None:
        assert services.stack is not None
        db = team_database(team, services.stack.state_dir)
        password = TeamSecrets(services.stack.state_dir).load(team)[db.password_env]
        with psycopg.connect(db.dsn, password=password) as conn:
            found = _bookings(conn, table)
    assert found is not None, f"no table {table} in the scratch database nor in team {team}'s"
    return found


def assert_accounted(report: dict[str, Any], services: Services, record: Simulation) -> None:
    """The report's numbers are the world's: the sink holds what it says was output, the ground truth file adds up
    to what it says was acknowledged, failed or indeterminate, and the broker check read every acknowledged event."""
    events, surge = report["events"], report["consumers"]["surge"]
    assert sink_events(services, record.id, report["target"]["team"]) == surge["events_output"]
    assert surge["events_lost"] == events["lost"] and surge["events_duplicated"] == events["duplicated"]
    assert surge["events_expected"] - events["lost"] + events["duplicated"] <= surge["events_output"]
    with (Path(record.summary["json"]).parent / report["ground_truth"]).open() as f:
        rows = list(csv.DictReader(f))
    for fate in ("acknowledged", "failed", "indeterminate"):
        assert sum(int(r[fate]) for r in rows) == events[fate], fate
    assert report["broker"]["acknowledged"] == events["acknowledged"] - events["malformed"]
    assert events["acknowledged"] > 0 and surge["events_expected"] > 0
    html = Path(record.report or "").read_text()
    assert html.count("data:image/png;base64") >= 2  # the timeline, and the windows against the ground truth


def assert_exact(report: dict[str, Any]) -> None:
    """Nothing lost, nothing counted twice, nothing gone from the broker, every case passed."""
    events = report["events"]
    assert (events["lost"], events["duplicated"], events["gone_from_broker"]) == (0, 0, 0), report["consumers"]
    assert report["consumers"]["surge"]["events_output"] == report["consumers"]["surge"]["events_expected"]
    assert [c["verdict"] for c in report["cases"]] == ["pass"] * len(report["cases"]), report["cases"]
    assert report["verdict"] == "pass" and report["score"] == 100.0
