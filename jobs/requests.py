"""What the dagger DAGs do (dags/self_serve.py stays thin): a run's params become a Request (jobs/form.py), checked
for who asks and where before anything is touched, previewed, then deployed, updated, stopped or listed through
jobs/lifecycle.py. Each step logs to the task log; refusals are recorded in the registry's history."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from jobs.failover import FailoverReport, fail_over
from jobs.form import Request, request_from_params
from jobs.healing import Checkup, HealthReport, alertmanager_pager
from jobs.health import LEVEL
from jobs.lifecycle import DaggerRow, Daggers, Deployment, Started
from jobs.plan import DaggerPlan
from jobs.spec import SpecError
from odin.access import once, require_member, visible_teams
from odin.cluster.lifecycle import Clusters
from odin.cluster.requests import platform
from odin.endpoints import Endpoints
from odin.redaction import redacted
from odin.registry import Refused
from odin.stack import Stack

Log = Callable[[str], None]
PREVIEW_ROWS = 20


def _request(params: Mapping[str, Any], user: str | None, action: str, registry: Any) -> Request:
    try:
        return request_from_params(params)
    except SpecError as e:
        subject = f"dagger:{params.get('team')}/{params.get('name') or (params.get('spec') or {}).get('name')}"
        registry.record(user or "?", action, subject, "refused", str(e), {"params": redacted(dict(params))})
        raise Refused(f"invalid params:\n{e}") from None


def render(table: Table) -> str:
    """A rich table as plain text, for task logs."""
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(table)
    return console.export_text()


def _checked(daggers: Daggers, params: Mapping[str, Any], user: str | None, update: bool) -> tuple[DaggerPlan, str]:
    """The run's params and triggering user, checked and placed: every task that acts rebuilds its request so,
    as what one task hands the next (XCom) can be changed by others than the run's user."""
    action = "dagger_update" if update else "dagger_deploy"
    request = _request(params, user, action, daggers.registry)
    spec = request.spec
    if update:
        return daggers.prepare_update(spec, user or "?", cluster=request.cluster, reset_state=request.reset_state)
    try:
        return daggers.check(spec, request.cluster, user), request.cluster
    except Refused as e:
        daggers.registry.record(user or "?", action, f"dagger:{spec.team}/{spec.name}", "refused", str(e))
        raise


def _member(registry: Any, user: str | None, team: str, action: str, subject: str) -> None:
    try:
        require_member(registry, user, team)
    except Refused as e:
        registry.record(user or "?", action, subject, "refused", str(e))
        raise


def check(params: Mapping[str, Any], user: str | None, log: Log, *, update: bool = False) -> dict[str, Any]:
    """Validate the params and the user's rights, and show the plan. What it returns is for reading only: the next
    tasks check again from the run's params."""
    with platform() as (registry, state):
        plan, cluster = _checked(Daggers(registry, state, log), params, user, update)
    log(f"dagger {plan.spec.team}/{plan.spec.name} on cluster {cluster}: valid ({plan.output_mode} mode)")
    log(f"Spark SQL:\n{plan.query.spark_sql}")
    return {"team": plan.spec.team, "name": plan.spec.name, "cluster": cluster, "output_mode": plan.output_mode}


def preview(params: Mapping[str, Any], user: str | None, log: Log, *, update: bool = False) -> int:
    """Run the query on the stream's latest events (local Spark, writes nothing); the result goes to the log as a
    table. Any error stops the run here."""
    from jobs.engine import preview as run_preview
    from jobs.engine import session_for

    with platform() as (registry, state):
        plan, _ = _checked(Daggers(registry, state, log), params, user, update)
    spec = plan.spec
    spark = session_for(plan)
    try:
        result = run_preview(plan, spark, PREVIEW_ROWS)
    finally:
        spark.stop()
    rows = result.to_pylist()
    table = Table(title=f"preview of {spec.team}/{spec.name}: {len(rows)} row(s)", title_justify="left")
    for col in result.column_names or ["(no rows)"]:
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    log("\n" + render(table))
    return len(rows)


def submit(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> Deployment:
    with platform() as (registry, state):
        daggers = Daggers(registry, state, log)
        plan, cluster = _checked(daggers, params, user, update=False)  # again: the registry may have changed since
        once(registry, f"dagger:{plan.spec.team}/{plan.spec.name}", "dagger_deploy", user, run_id)
        return daggers.submit(plan, cluster, user or "?")


def redeploy(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> Deployment:
    with platform() as (registry, state):
        daggers = Daggers(registry, state, log)
        plan, cluster = _checked(daggers, params, user, update=True)
        once(registry, f"dagger:{plan.spec.team}/{plan.spec.name}", "dagger_update", user, run_id)
        reset = bool(params.get("reset_state"))
        return daggers.redeploy(plan, cluster, user or "?", reset_state=reset)


def conclude(deployment: Deployment, verdict: Started, log: Log) -> dict[str, Any]:
    with platform() as (registry, state):
        return Daggers(registry, state, log).conclude(deployment, verdict).model_dump(mode="json")


def stop(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> dict[str, Any]:
    team, name = str(params["team"]), str(params["name"])
    with platform() as (registry, state):
        daggers = Daggers(registry, state, log)
        _member(registry, user, team, "dagger_stop", f"dagger:{team}/{name}")
        once(registry, f"dagger:{team}/{name}", "dagger_stop", user, run_id)
        record = daggers.stop(team, name, user or "?")
    return record.model_dump(mode="json")


def failover(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> dict[str, Any]:
    """Move every dagger of a team cluster to another of the team's clusters (jobs/failover.py)."""
    team, cluster = str(params["team"]), str(params["cluster"])
    reason = str(params.get("reason") or f"requested by {user or '?'}")
    with platform() as (registry, state):
        daggers = Daggers(registry, state, log)
        _member(registry, user, team, "dagger_failover", f"cluster:{team}/{cluster}")
        once(registry, f"cluster:{team}/{cluster}", "dagger_failover", user, run_id)
        report = fail_over(
            daggers, Clusters(registry, state, log), team, cluster, user or "?", reason, params.get("to")
        )
    log(failover_summary(report))
    if not report.ok:
        raise Refused(f"{len(report.failed)} dagger(s) did not move: {report.failed}")
    return {"to": report.target, "moved": report.moved}


def failover_summary(report: FailoverReport) -> str:
    moved = ", ".join(report.moved) or "none"
    text = f"{report.team}/{report.cluster} failed over to {report.target}: moved {moved}"
    return text + "".join(f"\n{name}: did not move: {why}" for name, why in report.failed.items())


def listing(
    params: Mapping[str, Any], user: str | None, log: Log, state_dir: Path | None = None
) -> list[dict[str, Any]]:
    """The daggers the triggering user may see: their teams' (a platform engineer's: all, or `team`'s)."""
    with platform(state_dir=state_dir) as (registry, state):
        teams = visible_teams(registry, user, params.get("team") or None)
        rows = Daggers(registry, state, log).list(teams)
    log("\n" + render(daggers_table(rows)))
    return [
        {
            "team": r.team,
            "name": r.name,
            "cluster": r.cluster,
            "state": r.state,
            "lag": r.lag,
            "input_rate": r.input_rate,
        }
        for r in rows
    ]


def daggers_table(rows: list[DaggerRow]) -> Table:
    table = Table(title=f"{len(rows)} dagger(s)", title_justify="left")
    for col in ("team", "name", "cluster", "state", "since", "input/s", "lag", "schema versions"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.team,
            r.name,
            r.cluster or "-",
            r.state,
            f"{r.since:%Y-%m-%d %H:%M:%S}" if r.since else "-",
            f"{r.input_rate:,.0f}" if r.input_rate is not None else "-",
            f"{r.lag:,}" if r.lag is not None else "-",
            ", ".join(f"{k} v{v}" for k, v in r.schema_versions.items()) or "-",
        )
    return table


def health_tables(report: HealthReport) -> list[Table]:
    """A check's clusters and daggers, worst first, with the reasons and what the check did."""
    clusters = Table(title=f"{len(report.clusters)} cluster(s)", title_justify="left")
    for col in ("team", "cluster", "ok", "active master", "workers alive", "problems", "healed"):
        clusters.add_column(col)
    for c in report.clusters:
        healed = "-" if c.healed is None else ("yes" if c.healed else "no")
        problems = "; ".join(c.problems) or "-"
        ok = "[green]yes[/]" if c.ok else "[red]no[/]"
        clusters.add_row(c.team, c.name, ok, c.active_master or "-", f"{c.alive_workers}/{c.workers}", problems, healed)
    title = f"{len(report.daggers)} dagger(s), checked {report.checked_at:%H:%M:%S}"
    daggers = Table(title=title, title_justify="left")
    for col in ("team", "name", "cluster", "verdict", "driver", "progress age", "lag", "in/s", "out/s", "restarts"):
        daggers.add_column(col)
    daggers.add_column("reasons", overflow="fold")
    for d in sorted(report.daggers, key=lambda d: (-LEVEL[d.verdict], d.team, d.name)):
        daggers.add_row(
            d.team,
            d.name,
            d.cluster or "-",
            f"[{VERDICT_STYLE[d.verdict]}]{d.verdict}[/]",
            d.driver_state or "-",
            f"{d.progress_age_s:.0f} s" if d.progress_age_s is not None else "-",
            f"{d.lag:,}",
            f"{d.input_rate:,.0f}",
            f"{d.processed_rate:,.0f}",
            str(d.restarts),
            "; ".join(d.reasons) or "-",
        )
    tables = [clusters, daggers]
    if report.streams:
        streams = Table(title=f"{len(report.streams)} stream(s) with a failover cluster", title_justify="left")
        for col in ("stream", "serving", "bootstrap servers", "reachable", "down checks", "switched to"):
            streams.add_column(col)
        for s in report.streams:
            up = "[green]yes[/]" if s.reachable else "[red]no[/]"
            streams.add_row(s.name, s.serving, s.bootstrap_servers, up, str(s.down_checks), s.switched_to or "-")
        tables.append(streams)
    if report.alerts:
        alerts = Table(title=f"{len(report.alerts)} alert(s) firing", title_justify="left")
        for col in ("since", "alert", "severity", "subject", "receiver"):
            alerts.add_column(col)
        alerts.add_column("summary", overflow="fold")
        for a in report.alerts:
            since = f"{a.starts_at:%Y-%m-%d %H:%M:%S}" if a.starts_at else "-"
            severity = a.labels.get("severity", "-")
            alerts.add_row(since, a.alertname, severity, a.subject or "-", a.receiver, a.annotations.get("summary", ""))
        tables.append(alerts)
    return tables


VERDICT_STYLE = {"healthy": "green", "degraded": "yellow", "failed": "red", "crashlooping": "bold red"}


def check_health(environment: str, heal: bool, log: Log) -> dict[str, Any]:
    """One health check of the environment's team clusters and daggers (jobs/healing.py), healing if asked; its
    tables and actions go to the log. What the dagger_health DAG runs every minute."""
    where = Endpoints(Stack(environment).nodes())
    try:
        pager = alertmanager_pager(where.alertmanager_url)
    except LookupError:
        pager = None  # an environment without Alertmanager: the page is only the registry's history entry
    with platform(environment) as (registry, state):
        checkup = Checkup(registry, state, metrics_url=where.victoria_metrics_url, pager=pager, say=log)
        report = checkup.run(heal)
    for table in health_tables(report):
        log(render(table))
    for action in report.actions:
        log(f"action: {action}")
    return {
        "daggers": {d.qualified_name: d.verdict for d in report.daggers},
        "clusters": {f"{c.team}/{c.name}": c.ok for c in report.clusters},
        "actions": report.actions,
    }
