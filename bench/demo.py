"""`make demo`: the platform's story in one command, through Airflow's REST API v2 as its users act.

1. `odin up`: the whole local stack, its traffic node feeding the catalog's streams, Airflow with two users: you
   (the first platform engineer) and `alice` of team `pricing`.
2. As the platform engineer: the team and its member (`odin team add`), then two Spark clusters for the team through
   `odin_provision_cluster`: `main` for its daggers, `perf` for experiments.
3. As alice, from the trigger form's fields (`dagger_deploy`; `dagger_update` with reset_state on a re-run): the
   seed's surge dagger (completed bookings per S2 cell level 13, city and vehicle per minute, into the TSDB) and
   the API-health dagger (requests and worst latency per path and status per minute, into the team's database),
   on the live traffic.
4. As alice: the worker-loss playbook (`loki_chaos`) on her perf cluster, against the perf twin of the bookings.
5. The health check (`dagger_health`) and the reports (`reports_gather`).
6. Each dagger's output for every window it has closed, against a count in plain Python of the events on its
   stream (bench/demo_check.py); the chaos run's loss and recovery, against its feeders' acknowledged events.

Re-runnable; leaves the stack running (`make down` stops it, team clusters included).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import demo_check
from jobs.engine.status import DaggerStatus, read_status, status_path
from jobs.health.checkup import Reports
from loki.store import SimulationStore
from odin.apis.airflow_api import AirflowApi, RunState
from odin.cluster.lifecycle import Clusters
from odin.endpoints import Endpoints
from odin.environment import opened
from odin.paths import BIN_DIR
from odin.stack import Stack
from odin.teams.actor import login
from odin.teams.databases import team_database
from odin.teams.secrets import TeamSecrets

if not sys.stdout.isatty():  # piped (`make demo | tee`): tables as wide as a log reader's window, not rich's 80
    os.environ.setdefault("COLUMNS", "140")  # and the CLIs it runs inherit it
console = Console()
TEAM, MEMBER = "pricing", "alice"
CLUSTERS = {
    # a dagger takes 2 cores and 2 GB of a worker's (its driver and an executor): room for the demo's two and the two
    # the README's quickstart adds (cores Spark counts, not the host's: these daggers are mostly idle)
    "main": {"workers": 1, "worker_cores": 8, "worker_memory": "8g"},
    "perf": {"workers": 2, "worker_cores": 2, "worker_memory": "2g"},  # the worker-loss playbook kills one
}
SURGE_SQL = """SELECT city_id AS tag_city_id,
       S2Id(lat, long, 13) AS tag_s2id,
       vehicle_type AS tag_vehicle_type,
       count(1) AS num_of_bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
WHERE status = 'COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id, S2Id(lat, long, 13), vehicle_type"""
API_SQL = """SELECT path, status_code,
       count(1) AS requests,
       max(latency_ms) AS max_latency_ms,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), path, status_code"""
SURGE_MEASUREMENT, API_TABLE = f"{TEAM}_surge", "api_health"
FORMS: dict[str, dict[str, Any]] = {  # the trigger form's fields, as alice fills them
    "surge": {
        "stream": "booking-log",
        "sql": SURGE_SQL,
        "sink_type": "influx",
        "sink": {"measurement": SURGE_MEASUREMENT},
    },
    "api-health": {
        "stream": "api-log",
        "sql": API_SQL,
        "sink_type": "postgres",
        "sink": {"table": API_TABLE},
    },
}
COMMON = {"team": TEAM, "cluster": "main", "start": "earliest", "watermark_delay": "10s", "trigger_interval": "5s",
          "parallelism": 1}  # fmt: skip
# settle: how long the steady state may take to come back after the load; the run ends as soon as it has, and a
# driver relaunched on two cores that also run the stack, Airflow and two daggers took 150 s once (Loki's report
# shows how long it took against the 60 s target)
CHAOS = {"playbook": "worker-loss", "team": TEAM, "cluster": "perf", "rate_scale": 0.05, "time_scale": 0.5,
         "settle": "300s"}  # fmt: skip
CLOSED_WINDOWS = 2  # each dagger's check waits for this many closed windows after its stream's first minute
WAIT_S = 600
CHAOS_WAIT_S = 1200  # the consumer's deploy, the load, up to `settle` for the steady state, the report


def step(title: str) -> None:
    console.rule(f"[bold]{title}")


def run(*argv: str) -> None:
    done = subprocess.run([str(BIN_DIR / argv[0]), *argv[1:]], check=False)
    if done.returncode:
        raise SystemExit(f"`{' '.join(argv)}` failed (exit {done.returncode}): see above")


def finished(
    api: AirflowApi, dag: str, run_id: str, what: str, required: bool = True, timeout_s: float = WAIT_S
) -> RunState:
    """Wait for the run; on failure show its failed tasks' last log lines, and stop unless not `required`."""
    with console.status(f"{what}: {dag} run {run_id}"):
        state = api.wait(dag, run_id, timeout=timeout_s)
    if state.state == "success":
        console.print(f"[green]✓[/] {what} ({dag}, {state.seconds:.0f}s)")
        return state
    for task, ti in api.task_states(dag, run_id).items():
        if str(getattr(ti.state, "value", ti.state)) == "failed":
            tail = "\n".join(api.log(dag, run_id, task).splitlines()[-15:])
            console.print(f"--- {dag} / {task}:\n{tail}", markup=False, highlight=False)
    message = f"{what}: {dag} run {run_id} is {state.state} after {state.seconds:.0f}s (its log above)"
    if required:
        raise SystemExit(message)
    console.print(f"[red]✗[/] {message}")
    return state


def wait(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    with console.status(what):
        while not (value := condition()):
            if time.monotonic() > deadline:
                raise SystemExit(f"gave up after {timeout_s:.0f}s waiting for {what}")
            time.sleep(2)
    return value


def status_of(name: str) -> DaggerStatus | None:
    with opened() as (registry, _):
        record = registry.dagger(TEAM, name)
    return read_status(status_path(Path(record.checkpoint))) if record else None


def provision(engineer: AirflowApi) -> None:
    with opened() as (registry, state):
        ready = {c.name for c in registry.clusters(team=TEAM) if c.state == "ready"}
        down = [n for n in sorted(ready & CLUSTERS.keys()) if not Clusters(registry, state).check(TEAM, n).ok]
    if down:  # stopped with the stack (`make down`): the health check heals them, as it would at its next minute
        run_id = engineer.trigger("dagger_health", {})
        finished(engineer, "dagger_health", run_id, f"the health check brings back {', '.join(down)}")
    for name, size in CLUSTERS.items():
        if name in ready:
            console.print(f"cluster {TEAM}/{name} is ready")
            continue
        conf = {"team": TEAM, "cluster": name, **size}
        run_id = engineer.trigger("odin_provision_cluster", conf)
        finished(engineer, "odin_provision_cluster", run_id, f"cluster {TEAM}/{name}")


def deploy(alice: AirflowApi) -> None:
    runs = []
    with opened() as (registry, _):
        known = {d.name for d in registry.daggers(team=TEAM)}
    for name, fields in FORMS.items():
        conf = {**COMMON, "name": name, **fields}
        dag = "dagger_update" if name in known else "dagger_deploy"  # a re-run starts it over: a clean check
        conf |= {"reset_state": True} if dag == "dagger_update" else {}
        runs.append((dag, alice.trigger(dag, conf), name))
    for dag, run_id, name in runs:
        finished(alice, dag, run_id, f"dagger {TEAM}/{name} running")


def chaos(alice: AirflowApi) -> dict[str, Any]:
    """The run's report (a run that failed has one too, saying why), or what is known without one."""
    started = time.time()
    run_id = alice.trigger("loki_chaos", CHAOS)
    finished(alice, "loki_chaos", run_id, "worker-loss on the perf cluster", False, CHAOS_WAIT_S)
    with opened() as (registry, _):
        runs = SimulationStore(registry).runs(playbook="worker-loss")[:1]
    latest = runs[0] if runs and runs[0].started_at and runs[0].started_at.timestamp() >= started - 5 else None
    report = Path(latest.report).with_name("report.json") if latest and latest.report else None
    if latest is None or report is None or not report.exists():
        return {"run": latest.id if latest else "-", "html": None, "playbook": CHAOS["playbook"], "verdict": "fail",
                "events": {"acknowledged": 0, "lost": 0, "duplicated": 0}, "cases": []}  # fmt: skip
    return {"run": latest.id, "html": latest.report, **json.loads(report.read_text())}


def checked(name: str, truth: Callable[[bool], tuple[Any, float]], stored: Callable[[], Any],
            count: Callable[[Any], int]) -> tuple[demo_check.Comparison, DaggerStatus]:  # fmt: skip
    """Wait for closed windows, then compare them: read the watermark, let a later batch write what it closed."""
    _, first_event_s = truth(True)  # the stream's oldest events only
    enough = demo_check.window_end(int(first_event_s)) + (CLOSED_WINDOWS + 1) * demo_check.WINDOW_S

    def closed() -> DaggerStatus | None:
        s = status_of(name)
        ok = s and s.watermark and s.watermark.timestamp() >= enough and s.last_batch is not None
        return s if ok else None

    seen = wait(closed, f"{name}: {CLOSED_WINDOWS} closed windows (its watermark)")
    after = wait(lambda: (s := status_of(name)) and s.last_batch > seen.last_batch and s, f"{name}: the next batch")
    want, first_event_s = truth(False)  # everything up to now: a superset of what the closed windows hold
    return demo_check.compare(name, want, stored(), seen.watermark, first_event_s, count), after


def main() -> int:
    started = time.monotonic()
    engineer_name = login()
    step(f"1. odin up: the local stack, with Airflow users {engineer_name} (platform engineer) and {MEMBER}")
    run("odin", "up", "--airflow-user", f"{engineer_name}=admin", "--airflow-user", f"{MEMBER}=user")
    where = Endpoints(Stack().nodes())
    engineer = AirflowApi(where.airflow_url, engineer_name, where.airflow_password(engineer_name))
    alice = AirflowApi(where.airflow_url, MEMBER, where.airflow_password(MEMBER))
    for dag in ("odin_provision_cluster", "dagger_deploy", "dagger_update", "loki_chaos", "dagger_health",
                "reports_gather"):  # fmt: skip
        engineer.wait_for_dag(dag)

    step(f"2. platform engineer {engineer_name}: team {TEAM} (member {MEMBER}) and its clusters")
    run("odin", "team", "add", TEAM, "--member", MEMBER)
    provision(engineer)

    step(f"3. {MEMBER}: the surge and API-health daggers, from the trigger form's fields")
    deploy(alice)

    step(f"4. {MEMBER}: chaos on her perf cluster (worker-loss, the perf twin of booking-log)")
    loki = chaos(alice)

    step("5. each dagger's closed windows against a count of its stream's events in plain Python")
    with opened() as (registry, state):
        streams = {s.name: s for s in registry.streams()}
    db = team_database(TEAM)
    password = TeamSecrets(Stack().state_dir).load(TEAM)[db.password_env]

    def truth_of(stream: str, count: Callable[[list[Any]], Any]) -> Callable[[bool], tuple[Any, float]]:
        def read(first_only: bool) -> tuple[Any, float]:
            s = streams[stream]
            message = demo_check.MESSAGES[s.proto]
            events = demo_check.read_stream(s.serving_bootstrap_servers, s.topics, message, first_only=first_only)
            first = min((e.event_timestamp.seconds for e in events), default=time.time())
            return (None if first_only else count(events)), first

        return read

    surge, surge_status = checked(
        "surge",
        truth_of("booking-log", demo_check.surge_truth),
        lambda: demo_check.surge_stored(where.victoria_metrics_url, f"{SURGE_MEASUREMENT}_num_of_bookings"),
        int,
    )
    api, api_status = checked(
        "api-health",
        truth_of("api-log", demo_check.api_truth),
        lambda: demo_check.api_stored(db.dsn, password, API_TABLE),
        lambda v: v[0],
    )

    step("6. the health check and the reports")
    finished(engineer, "dagger_health", engineer.trigger("dagger_health", {}), "health check")
    finished(engineer, "reports_gather", engineer.trigger("reports_gather", {}), "reports gathered")
    health = Reports(state).latest()
    verdicts = {(d.team, d.name): d.verdict for d in health.daggers} if health else {}

    table = Table(title="daggers: closed windows against a count of the stream's events", title_justify="left")
    for col in ("dagger", "sink", "events in", "input rate", "lag", "windows", "rows out", "events in windows",
                "check", "health"):  # fmt: skip
        table.add_column(col)
    for c, s, sink in ((surge, surge_status, f"TSDB {SURGE_MEASUREMENT}_*"), (api, api_status, f"team DB {API_TABLE}")):
        table.add_row(c.dagger, sink, f"{s.events:,}", f"{s.input_rate:.1f}/s", f"{s.lag:,}", str(c.windows),
                      f"{c.rows:,}", f"{c.events:,}", "[green]exact[/]" if c.exact else f"[red]{len(c.missing)} "
                      f"differ, {len(c.unexpected)} extra[/]", verdicts.get((TEAM, c.dagger), "?"))  # fmt: skip
    console.print(table)
    events, cases = loki["events"], loki["cases"]
    chaos_table = Table(title=f"chaos: {loki['playbook']} (run {loki['run']})", title_justify="left")
    for col in ("acknowledged", "lost", "counted twice", "fault", "detected", "recovered", "verdict"):
        chaos_table.add_column(col)

    def secs(value: float | None, otherwise: str) -> str:
        return otherwise if value is None else f"{value:.1f}s"

    for case in cases:
        why = "" if case["verdict"] == "pass" else f": {'; '.join(case.get('reasons', []))}"
        chaos_table.add_row(f"{events['acknowledged']:,}", str(events["lost"]), str(events["duplicated"]),
                            case["case"], secs(case["detect_s"], "not seen"), secs(case["recover_s"], "not in the run"),
                            f"{case['verdict']}{why}")  # fmt: skip
    if not cases:
        why = loki.get("reason") or "the run failed (its log above)"
        chaos_table.add_row(f"{events['acknowledged']:,}", str(events["lost"]), str(events["duplicated"]), "-", "-",
                            "-", f"{loki['verdict']}: {why}")  # fmt: skip
    console.print(chaos_table)
    ok = surge.exact and api.exact and loki["verdict"] == "pass" and surge.windows > 0 and api.windows > 0
    for c in (surge, api):
        for key, value in list(c.missing.items())[:5]:
            console.print(f"[red]{c.dagger}[/] {key}: counted {value}, sink has another value or none")
    console.print(
        f"\nAirflow: {where.airflow_url} (you: {engineer_name}, alice: {MEMBER}; passwords in "
        f"{where.airflow_passwords})\nreports: {state / 'reports' / 'index.html'}; chaos run: {loki['html']}\n"
        f"TSDB: {where.victoria_metrics_url}/vmui ({SURGE_MEASUREMENT}_num_of_bookings, dagger_metrics_*); "
        f"team DB: {db.dsn} table {API_TABLE}\n"
        f"[{'green' if ok else 'red'}]demo {'ok' if ok else 'FAILED'}[/] in {time.monotonic() - started:.0f}s; "
        "the stack keeps running (`make down` stops it)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
