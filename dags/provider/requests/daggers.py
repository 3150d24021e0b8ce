"""What the dagger DAGs do (dags/self_serve.py stays thin): a run's params become a Request
(jobs/lifecycle/request.py), checked for who asks and where before anything is touched, previewed, then deployed,
updated, stopped or listed through jobs/lifecycle/daggers.py. Each step logs to the task log; refusals are recorded
in the registry's history."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from jobs.lifecycle.daggers import Daggers, Deployment, Started
from jobs.lifecycle.request import Request, request_from_params
from jobs.lifecycle.tables import daggers_links, daggers_table
from jobs.spec import SpecError
from odin.environment import opened
from odin.registry import Refused
from odin.teams.access import once, require_member, visible_teams
from odin.teams.redaction import redacted

if TYPE_CHECKING:
    from jobs.engine.plan import DaggerPlan

# Each Airflow task imports this module: what only some tasks need (the health check's and failover's modules,
# Terraform and Ansible) is imported where it is used.

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
    with daggers.registry.refusals(user, action, f"dagger:{spec.team}/{spec.name}"):
        return daggers.check(spec, request.cluster, user), request.cluster


def check(params: Mapping[str, Any], user: str | None, log: Log, *, update: bool = False) -> dict[str, Any]:
    """Validate the params and the user's rights, and show the plan. What it returns is for reading only: the next
    tasks check again from the run's params."""
    with opened() as (registry, state):
        plan, cluster = _checked(Daggers(registry, state, log), params, user, update)
    log(f"dagger {plan.spec.team}/{plan.spec.name} on cluster {cluster}: valid ({plan.output_mode} mode)")
    log(f"Spark SQL:\n{plan.query.spark_sql}")
    return {"team": plan.spec.team, "name": plan.spec.name, "cluster": cluster, "output_mode": plan.output_mode}


def preview(params: Mapping[str, Any], user: str | None, log: Log, *, update: bool = False) -> int:
    """Run the query on the stream's latest events (local Spark, writes nothing); the result goes to the log as a
    table. Any error stops the run here."""
    from jobs.engine.runner import preview as run_preview
    from jobs.engine.runner import session_for

    with opened() as (registry, state):
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
    with opened() as (registry, state):
        daggers = Daggers(registry, state, log)
        plan, cluster = _checked(daggers, params, user, update=False)  # again: the registry may have changed since
        once(registry, f"dagger:{plan.spec.team}/{plan.spec.name}", "dagger_deploy", user, run_id)
        return daggers.submit(plan, cluster, user or "?")


def redeploy(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> Deployment:
    with opened() as (registry, state):
        daggers = Daggers(registry, state, log)
        plan, cluster = _checked(daggers, params, user, update=True)
        once(registry, f"dagger:{plan.spec.team}/{plan.spec.name}", "dagger_update", user, run_id)
        reset = bool(params.get("reset_state"))
        return daggers.redeploy(plan, cluster, user or "?", reset_state=reset)


def conclude(deployment: Deployment, verdict: Started, log: Log) -> dict[str, Any]:
    with opened() as (registry, state):
        return Daggers(registry, state, log).conclude(deployment, verdict).model_dump(mode="json")


def stop(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> dict[str, Any]:
    team, name = str(params["team"]), str(params["name"])
    with opened() as (registry, state):
        daggers = Daggers(registry, state, log)
        with registry.refusals(user, "dagger_stop", f"dagger:{team}/{name}"):
            require_member(registry, user, team)
        once(registry, f"dagger:{team}/{name}", "dagger_stop", user, run_id)
        record = daggers.stop(team, name, user or "?")
    return record.model_dump(mode="json")


def failover(params: Mapping[str, Any], user: str | None, log: Log, run_id: str | None = None) -> dict[str, Any]:
    """Move every dagger of a team cluster to another of the team's clusters (jobs/health/cluster_failover.py)."""
    from jobs.health.cluster_failover import fail_over
    from jobs.health.tables import failover_summary
    from odin.cluster.lifecycle import Clusters

    team, cluster = str(params["team"]), str(params["cluster"])
    reason = str(params.get("reason") or f"requested by {user or '?'}")
    with opened() as (registry, state):
        daggers = Daggers(registry, state, log)
        with registry.refusals(user, "dagger_failover", f"cluster:{team}/{cluster}"):
            require_member(registry, user, team)
        once(registry, f"cluster:{team}/{cluster}", "dagger_failover", user, run_id)
        report = fail_over(
            daggers, Clusters(registry, state, log), team, cluster, user or "?", reason, params.get("to")
        )
    log(failover_summary(report))
    if not report.ok:
        raise Refused(f"{len(report.failed)} dagger(s) did not move: {report.failed}")
    return {"to": report.target, "moved": report.moved}


def listing(
    params: Mapping[str, Any], user: str | None, log: Log, state_dir: Path | None = None
) -> list[dict[str, Any]]:
    """The daggers the triggering user may see: their teams' (a platform engineer's: all, or `team`'s)."""
    with opened(state_dir=state_dir) as (registry, state):
        teams = visible_teams(registry, user, params.get("team") or None)
        rows = Daggers(registry, state, log).list(teams)
    log("\n" + render(daggers_table(rows)))
    for line in daggers_links(rows):
        log(line)
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


def check_health(environment: str, heal: bool, log: Log) -> dict[str, Any]:
    """One health check of the environment's team clusters and daggers (jobs/health/checkup.py), healing if asked; its
    tables and actions go to the log. What the dagger_health DAG runs every minute."""
    from jobs.health.checkup import Checkup, alertmanager_pager
    from jobs.health.tables import health_links, health_tables
    from odin import form_choices
    from odin.endpoints import Endpoints
    from odin.environment import connect_registry, nodes
    from odin.paths import default_state_dir

    state_dir = default_state_dir()
    found = nodes(environment, state_dir)  # once: read from Terraform's state file
    where = Endpoints(found)
    try:
        pager = alertmanager_pager(where.alertmanager_url)
    except LookupError:
        pager = None  # an environment without Alertmanager: the page is only the registry's history entry
    registry = connect_registry(found)
    try:
        checkup = Checkup(registry, state_dir, metrics_url=where.victoria_metrics_url, pager=pager, say=log)
        report = checkup.run(heal)
        form_choices.refresh(registry, state_dir)  # the forms' dropdowns follow whatever changed them meanwhile
    finally:
        registry.close()
    for table in health_tables(report):
        log(render(table))
    for line in health_links(report):
        log(line)
    for action in report.actions:
        log(f"action: {action}")
    return {
        "daggers": {d.qualified_name: d.verdict for d in report.daggers},
        "clusters": {f"{c.team}/{c.name}": c.ok for c in report.clusters},
        "actions": report.actions,
    }
