"""`make bench` (self-serve part): from a CI pipeline's REST call to the dagger's first row, and a team cluster's birth.

On an isolated stack (temp state dir, free ports: Kafka, VictoriaMetrics, PostgreSQL, then Airflow):
1. `odin cluster create` of a team cluster with 1 master and 2 workers (Terraform plan + apply, Ansible, health,
   registry), timed.
2. The catalog's `booking-log-perf` stream gets 6,000 bookings over 10 minutes of event time, spread over its
   topics (2 partitions each).
3. `--runs` times: a team member triggers `dagger_deploy` through Airflow's REST API v2 with the form's fields (the
   seed's surge query, 10 s watermark, sink VictoriaMetrics) and the bench watches, every 0.25 s, the driver's
   status file (jobs/engine/status.py) and the sink until its first row is queryable; then the dagger is stopped.
   Steps: scheduling (trigger → `check` starts), validate (`check`), scheduling (→ `deploy` starts), submit +
   driver start (→ the driver's process writes its status: REST submission, the master placing the driver, Python
   and imports), query start (→ first progress: SparkSession, readStream, batch 0), first row (→ queryable in the
   sink), and when the run itself ends (the deferred trigger noticing the progress, then the preview).

Target (issue 31): first row <= 20 s after the trigger. Prints a table (recorded in bench/RESULTS.md) and one line:
`cluster_create_s=<s> deploy_first_row_s=<median> deploy_run_success_s=<median> target_ratio=<median / 20>`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from daggers.events import booking_log_pb2
from rich.console import Console
from rich.table import Table

from bench.record import record
from jobs.engine.status import read_status, status_path
from jobs.lifecycle.daggers import Daggers
from jobs.lifecycle.logs import LogType, tail
from odin.apis import victoria
from odin.apis.airflow_api import AirflowApi
from odin.cluster.lifecycle import Clusters
from odin.cluster.spec import ClusterSpec
from odin.endpoints import Endpoints
from odin.kafka.topics import ensure_topics
from odin.paths import temporary_state_dir
from odin.ports import stack_ports
from odin.registry.store import Registry
from odin.spec import Service
from odin.stack import Stack
from odin.traffic.generator import booking_logs, produce

console = Console()
TARGET_S = 20.0
TEAM, CLUSTER, MEMBER, STREAM = "bench", "main", "alice", "booking-log-perf"
SURGE_SQL = """SELECT city_id AS tag_city_id,
       S2Id(lat,long,13) AS tag_s2id,
       vehicle_type AS tag_vehicle_type,
       count(1) AS num_of_bookings,
       TUMBLE_END(rowtime,INTERVAL '60' SECOND) AS window_timestamp
FROM `data_stream`
WHERE status='COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id, S2Id(lat, long, 13), vehicle_type"""
POLL_S, RUN_TIMEOUT_S = 0.25, 600.0


def _up(
    stack: Stack, services: set[Service], ports: dict[str, int] | None, users: dict[str, str] | None = None
) -> None:
    """Converge `services`; ports: free ones the first time, then None (the applied ones: nothing else moves)."""
    report = stack.up(stack.resolve(None, services, ports, users))
    if not report.ok:
        raise SystemExit(f"odin up failed: {[(f.task, f.message) for f in report.playbook.failures]}")


def _bookings(registry: Registry) -> None:
    stream = registry.stream(STREAM)
    if stream is None:
        raise SystemExit(f"stream {STREAM} is not in the registry: odin up syncs the catalog")
    kafka = stream.serving_bootstrap_servers  # the perf stream's own broker, which the dagger reads, not the main one
    ensure_topics({"bootstrap.servers": kafka}, dict.fromkeys(stream.topics, 2))
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    events: list[booking_log_pb2.BookingLog] = list(booking_logs(6_000, seed=7, start=start, rate=10))
    # Every topic of the stream gets events, as in production: a partition that has shown none holds the watermark
    # until it counts as idle (the stream's idle_timeout, 60 s), which would be most of the figure.
    for i, topic in enumerate(stream.topics):
        produce(kafka, topic, iter(events[i :: len(stream.topics)]), partitions=2)


def _first_row(vm: str, measurement: str) -> bool:
    victoria.flush(vm)
    return bool(victoria.export(vm, f'{{__name__=~"{measurement}_.*"}}'))


def deploy_once(api: AirflowApi, daggers: Daggers, where: Endpoints, n: int) -> dict[str, float]:
    """One deploy through the REST API; seconds from the trigger to each step."""
    name, measurement = f"surge-{n}", f"{TEAM}_surge_{n}_{int(time.time())}"
    conf = {
        "team": TEAM,
        "name": name,
        "cluster": CLUSTER,
        "stream": STREAM,
        "sql": SURGE_SQL,
        "sink_type": "influx",
        "sink": {"url": where.victoria_metrics_url, "measurement": measurement},
        "watermark_delay": "10s",
        "trigger_interval": "2s",
        "parallelism": 1,
    }
    t0, vm = time.time(), where.victoria_metrics_url
    run_id = api.trigger("dagger_deploy", conf)
    seen: dict[str, float] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while not {"first_row", "run_end"} <= seen.keys() and time.monotonic() < deadline:
            record = daggers.registry.dagger(TEAM, name)
            status = read_status(status_path(Path(record.checkpoint))) if record else None
            now = time.time() - t0
            if status is not None:
                seen.setdefault("driver_up", status.started_at.timestamp() - t0)
                if status.batches:
                    seen.setdefault("first_progress", now)
                if status.phase == "failed":
                    raise SystemExit(f"{name}: the driver failed: {status.error}")
            if "first_progress" in seen and "first_row" not in seen and _first_row(vm, measurement):
                seen["first_row"] = now
            if "run_end" not in seen:
                state = api.state("dagger_deploy", run_id)
                if state == "failed":
                    raise SystemExit(f"{name}: dagger_deploy failed: see run {run_id} in Airflow")
                if state == "success":
                    seen["run_end"] = time.time() - t0
            time.sleep(POLL_S)
        if "first_row" not in seen:
            raise SystemExit(f"{name}: no row in the sink within {RUN_TIMEOUT_S:.0f}s ({seen})")
        tasks = api.task_states("dagger_deploy", run_id)
        for task in ("check", "preview", "deploy"):
            seen[f"{task}_start"] = tasks[task].start_date.timestamp() - t0
            seen[f"{task}_end"] = tasks[task].end_date.timestamp() - t0
        seen |= _driver_steps(daggers, name, t0)
        return seen
    finally:
        if daggers.registry.dagger(TEAM, name) is not None:
            daggers.stop(TEAM, name, MEMBER)


def _driver_steps(daggers: Daggers, name: str, t0: float) -> dict[str, float]:
    """When the driver logged each of its start's steps (`start: ...`, jobs/engine/runner.py), seconds after the
    trigger: where "query start + batch 0" goes."""
    log = daggers.driver_log(TEAM, name, MEMBER, LogType.stdout)  # PythonRunner puts Python's stderr there
    lines, _ = tail(log.source, 2000)
    steps: dict[str, float] = {}
    for line in lines:
        day, clock, _logger, message = ([*line.split(" ", 3), "", "", ""])[:4]  # `%(asctime)s %(name)s %(message)s`
        if message.startswith("start: ") and (at := _stamp(f"{day} {clock}")) is not None:
            step = message.removeprefix("start: ").split(",")[0].split(" (")[0].split(" /")[0]
            steps.setdefault(f"driver: {step}", at - t0)
            if step == "first progress":  # with Spark's durations of that batch, by phase
                console.print(f"{name}: {message}", soft_wrap=True, highlight=False)
    return steps


def _stamp(text: str) -> float | None:
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


STEPS: list[tuple[str, str, str]] = [
    ("scheduling (trigger → check starts)", "", "check_start"),
    ("validate (check task)", "check_start", "check_end"),
    ("scheduling (check ends → deploy starts)", "check_end", "deploy_start"),
    ("submit + driver start (→ driver process up)", "deploy_start", "driver_up"),
    ("query start + batch 0 (→ first progress)", "driver_up", "first_progress"),
    ("first row (→ queryable in the sink)", "first_progress", "first_row"),
]


def report(cluster_s: float, runs: list[dict[str, float]]) -> None:
    table = Table(title="dagger_deploy through the REST API → first row (seconds)")
    table.add_column("step")
    for i in range(len(runs)):
        table.add_column(f"run {i + 1}", justify="right")
    for label, start, end in STEPS:
        table.add_row(label, *(f"{r[end] - r.get(start, 0.0):.1f}" for r in runs))
    table.add_row("[bold]trigger → first row[/]", *(f"[bold]{r['first_row']:.1f}[/]" for r in runs))
    table.add_row("preview, after the deploy (check ends → preview ends)",
                  *(f"{r['preview_end'] - r['check_end']:.1f}" for r in runs))  # fmt: skip
    table.add_row("trigger → run success (deferred trigger)", *(f"{r['run_end']:.1f}" for r in runs))
    console.print(table)
    steps = sorted({k for r in runs for k in r if k.startswith("driver: ")}, key=lambda k: runs[0].get(k, 1e9))
    driver = Table(title="the driver's start: each step's log line, seconds after the trigger")
    driver.add_column("step")
    for i in range(len(runs)):
        driver.add_column(f"run {i + 1}", justify="right")
    for step in ["driver_up", *steps]:
        driver.add_row(step.removeprefix("driver: "), *(f"{r[step]:.1f}" if step in r else "-" for r in runs))
    console.print(driver)
    console.print(f"odin cluster create (1 master, 2 workers): {cluster_s:.1f} s")
    first_row = statistics.median(r["first_row"] for r in runs)
    run_end = statistics.median(r["run_end"] for r in runs)
    record(
        "deploy_latency",
        f"cluster_create_s={cluster_s:.1f} deploy_first_row_s={first_row:.1f} deploy_run_success_s={run_end:.1f} "
        f"target_ratio={first_row / TARGET_S:.2f}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.deploy_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="deploys to time (the first one is a cold start)")
    args = parser.parse_args(argv)
    with temporary_state_dir("bench-deploy") as state:
        stack = Stack("local", state)
        clusters: Clusters | None = None
        registry: Registry | None = None
        try:
            with console.status("odin up: Kafka, VictoriaMetrics, PostgreSQL"):
                _up(stack, {Service.kafka_broker, Service.victoria_metrics, Service.postgres}, stack_ports())
            where = Endpoints(stack.nodes())
            registry = Registry.connect(where.registry_url)
            registry.ensure_team(TEAM)
            registry.add_member(TEAM, MEMBER)
            clusters = Clusters(registry, state)
            with console.status("odin cluster create: 1 master, 2 workers"):
                started = time.perf_counter()
                clusters.create(ClusterSpec(team=TEAM, name=CLUSTER, workers=2, worker_cores=2), MEMBER)
                cluster_s = time.perf_counter() - started
            _bookings(registry)
            with console.status("odin up: Airflow (its form's dropdowns list the new cluster)"):
                _up(stack, {Service.airflow}, None, {"admin": "admin", MEMBER: "user"})
            where = Endpoints(stack.nodes())
            api = AirflowApi(where.airflow_url, MEMBER, where.airflow_password(MEMBER))
            api.wait_for_dag("dagger_deploy")
            api.unpause("dagger_deploy")
            runs: list[dict[str, Any]] = []
            daggers = Daggers(registry, state)
            for n in range(1, args.runs + 1):
                with console.status(f"deploy {n}/{args.runs}: trigger → first row"):
                    runs.append(deploy_once(api, daggers, where, n))
            report(cluster_s, runs)
        finally:
            try:
                if clusters is not None and registry is not None and registry.cluster(TEAM, CLUSTER) is not None:
                    clusters.destroy(TEAM, CLUSTER, MEMBER)  # every dagger was stopped after its run
            finally:
                if registry is not None:
                    registry.close()
                stack.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
