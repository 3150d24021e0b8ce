"""`dagger`: validate, preview and run daggers from their spec files.

Every expected failure ends in one message on stderr (what failed, why, what to do) and a non-zero exit: 2 for a bad
spec, 1 for a failure at run time, 130 when interrupted. `--verbose` adds the full trace, Spark's warnings and the
dagger's INFO logs; without it Spark's driver log (errors only) goes to a file the message names.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.console import Console
from rich.table import Table

from jobs.engine.plan import DaggerPlan, plan_dagger
from jobs.spec import DaggerSpec, SpecError, json_schema, load_spec, resolve_streams

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

app = typer.Typer(help="Daggers: streaming SQL aggregations over Kafka.", no_args_is_help=True, add_completion=False)
console = Console()
err = Console(stderr=True, soft_wrap=True)  # no wrapping: a message stays whole for whoever greps it
log = logging.getLogger("dagger")
BROKER_TIMEOUT_S = 10.0  # a stream's brokers must answer this fast before Spark starts
STARTED = time.time()

SpecArg = Annotated[Path, typer.Argument(help="Dagger spec (YAML or JSON).", show_default=False)]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where checkpoints live (default: .local).")]
VerboseOpt = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Show Spark's warnings, the dagger's INFO logs and a failure's full trace."),
]


class BrokerUnreachable(RuntimeError):
    """A stream's Kafka brokers did not answer."""


def _resolved(spec: DaggerSpec, state_dir: Path | None) -> DaggerSpec:
    """Catalog streams (`stream: booking-log`) looked up in the local environment's registry."""
    if all(s.resolved for s in spec.streams):
        return spec
    from odin.catalog.lookup import registry_streams
    from odin.registry import RegistryError

    try:
        return resolve_streams(spec, registry_streams("local", state_dir))
    except RegistryError as e:
        raise SpecError(f"streams: {e}") from None


def _plan(spec_path: Path, state_dir: Path | None = None) -> DaggerPlan:
    try:
        return plan_dagger(_resolved(load_spec(spec_path), state_dir), state_dir)
    except SpecError as e:
        err.print(f"[bold red]invalid dagger spec {spec_path}[/]")
        for line in str(e).splitlines():
            err.print(f"  {line}", markup=False, highlight=False)
        raise typer.Exit(2) from None


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per HTTP request drowns the dagger's own
    # py4j logs a line per Spark callback, and an exception raised in one (a sink's) with its whole traceback; pyspark
    # logs a failed query's context as JSON. The error message reports them once; --verbose shows them all.
    for chatty in ("py4j", "DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logging.getLogger(chatty).setLevel(logging.WARNING if verbose else logging.CRITICAL)


def _spark_log(plan: DaggerPlan, command: str, verbose: bool) -> Path | None:
    """Where Spark's driver log goes unless --verbose (then: the console, as Spark has it): one file per dagger and
    command, rewritten by each run that logs an error (made only then)."""
    if verbose:
        return None
    return Path(tempfile.gettempdir()) / f"dagger-{plan.spec.team}-{plan.spec.name}.{command}.spark.log"


def _servers(plan: DaggerPlan) -> str:
    return ", ".join(sorted({s.kafka.bootstrap_servers for s in plan.spec.streams}))


def _reach_brokers(plan: DaggerPlan, verbose: bool) -> None:
    """Fail fast, before Spark starts, when a stream's brokers do not answer: librdkafka would retry for ever in the
    source, and topic creation waits 30 s. Reads metadata only (a preview writes nothing)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from jobs.engine.kafka_source import kafka_config

    checked: set[str] = set()
    for stream in plan.spec.streams:
        conf = kafka_config(stream, consumer=False)
        servers = conf["bootstrap.servers"]
        if servers in checked:
            continue
        checked.add(servers)
        # librdkafka prints a line for each refused connection: only with --verbose, the message below says it all.
        admin = AdminClient(conf if verbose else {**conf, "log_level": 0})
        try:
            admin.list_topics(timeout=BROKER_TIMEOUT_S)
        except KafkaException as e:
            reason = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
            raise BrokerUnreachable(
                f"Kafka at {servers} (stream {stream.table}) did not answer within {BROKER_TIMEOUT_S:.0f} s: {reason}"
            ) from None


def _hint(kind: str, plan: DaggerPlan | None) -> str | None:
    """What to do, for failures whose message does not say it (DataLossError and CheckpointError do)."""
    servers = _servers(plan) if plan else "the streams' bootstrap servers"
    return {
        "SinkError": "Check the sink (`sink:` in the spec) and that it accepts writes; the next run writes the "
        "failed batch again.",
        "KafkaException": f"Check that Kafka runs at {servers} and is reachable from here, and the streams' `kafka:` "
        "settings.",
        "BrokerUnreachable": f"Check that Kafka runs at {servers} and is reachable from here, and "
        "`streams[].kafka.bootstrap_servers` in the spec.",
    }.get(kind)


def _trace(exc: BaseException) -> str:
    """The full trace with its causes, like Python's, but each exception's text taken without the JVM (Spark is
    stopped by then, and str() of its exceptions calls into it)."""
    from jobs.engine.session import exception_text

    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    parts = [
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_tb(e.__traceback__))
        + f"{type(e).__module__}.{type(e).__qualname__}: {exception_text(e)}\n"
        for e in reversed(chain)
    ]
    return "\nThe above exception caused the following one:\n\n".join(parts)


@contextmanager
def _failures(plan: DaggerPlan | None, verbose: bool = False, spark_log: Path | None = None) -> Iterator[None]:
    """The CLI's error boundary: any exception becomes one message on stderr and exit 1 (130 on Ctrl-C)."""
    try:
        yield
    except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise  # typer's Exit is no click exception: a bad spec's exit 2 must pass through
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        raise typer.Exit(130) from None
    except Exception as e:
        from jobs.engine.session import root_cause

        if verbose:
            err.print(_trace(e), markup=False, highlight=False)
        cause = root_cause(e)
        what = f"dagger {plan.spec.qualified_name}" if plan else "dagger"
        err.print("[bold red]error:[/] ", end="")
        err.print(f"{what} failed: {cause}", markup=False, highlight=False)
        hint = _hint(cause.kind, plan)
        if hint:
            err.print(f"  {hint}", markup=False, highlight=False)
        if not verbose:
            more = "  Run it again with --verbose for the full details"
            if spark_log is not None and spark_log.exists() and spark_log.stat().st_mtime >= STARTED:
                more += f"; Spark's errors are in {spark_log}"  # this run's, not an earlier one's
            err.print(f"{more}.", markup=False, highlight=False)
        raise typer.Exit(1) from None


def _stop(spark: SparkSession) -> None:
    try:
        spark.stop()
    except Exception as e:  # a signal to the process group stopped Spark's JVM already
        log.info("Spark was already stopped: %s", type(e).__name__)


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in rows[0] if rows else ["(no rows)"]:
        table.add_column(str(col), overflow="fold")
    for r in rows:
        table.add_row(*(str(v) for v in r.values()))
    return table


@app.command()
def validate(spec: SpecArg) -> None:
    """Check a spec (fields, schemas, SQL) without starting Spark."""
    with _failures(None):
        plan = _plan(spec)
        rows = [
            {"table": s.table, "topics": ", ".join(st.topics), "proto": st.proto, "to Spark": ", ".join(s.columns)}
            for s, st in zip(plan.streams, plan.spec.streams, strict=True)
        ]
        console.print(_table(rows, f"dagger {plan.spec.qualified_name}: streams"))
        console.print(f"[bold]Spark SQL[/] ({plan.output_mode} mode):\n{plan.query.spark_sql}", highlight=False)
        for pushed in (c for s in plan.streams for c in (*s.computed, *s.filters)):
            console.print(f"[bold]evaluated in the Kafka reader[/]: {pushed.describe()}", highlight=False)
        console.print(
            f"[bold]sink[/] {plan.spec.sink.type}: keys {', '.join(plan.shape.key_columns) or '-'}; "
            f"values {', '.join(plan.shape.value_columns) or '-'}; time {plan.shape.time_column or '-'}"
        )
        console.print("[green]valid[/]")


@app.command()
def preview(
    spec: SpecArg,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Rows to show.")] = 20,
    recent: Annotated[int, typer.Option("--recent", min=1, help="Latest events read per partition.")] = 10_000,
    verbose: VerboseOpt = False,
) -> None:
    """Run the query on the most recent events and print the result. Read-only: nothing goes to the sink, to
    dead-letter topics or to consumer groups, and no topic is created."""
    from jobs.engine.runner import preview as run_preview
    from jobs.engine.runner import session_for

    _logging(verbose)
    plan = _plan(spec)
    spark_log = _spark_log(plan, "preview", verbose)
    with _failures(plan, verbose, spark_log):
        _reach_brokers(plan, verbose)
        with console.status("starting Spark and reading recent events"):
            spark = session_for(plan, log_file=spark_log)
            try:
                table = run_preview(plan, spark, limit, recent)
            finally:
                _stop(spark)
        console.print(_table(table.to_pylist(), f"preview of {plan.spec.qualified_name} ({table.num_rows} rows)"))


@app.command()
def run(
    spec: SpecArg,
    once: Annotated[bool, typer.Option("--once", help="Read all available events, emit every window, exit.")] = False,
    master: Annotated[str, typer.Option("--master", help="Spark master URL.")] = "local[2]",
    state_dir: StateOpt = None,
    reset_checkpoint: Annotated[
        bool,
        typer.Option(
            "--reset-checkpoint",
            help="Start over: delete the checkpoint and read the streams again from `kafka.start` (sinks take the "
            "new batches as new).",
        ),
    ] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the dagger until stopped (SIGTERM/Ctrl-C stop it after the current batch), or `--once`."""
    from jobs.engine.runner import run as run_dagger
    from jobs.engine.runner import session_for
    from jobs.engine.telemetry import event_rows, sentinel_rows

    _logging(verbose)
    plan = _plan(spec, state_dir)
    console.print(f"dagger {plan.spec.qualified_name} on {master}; checkpoint {plan.checkpoint}", soft_wrap=True)

    def on_progress(p: dict[str, Any], _sink_errors: int) -> None:
        wm = (p.get("eventTime") or {}).get("watermark", "-")
        what = "end of input, closing every window" if sentinel_rows(p) else f"{event_rows(p)} events"
        console.print(
            f"batch {p['batchId']}: {what}, {p['durationMs'].get('triggerExecution', 0)} ms, watermark {wm}",
            highlight=False,
            soft_wrap=True,  # one line per batch, whatever the terminal's width
        )

    spark_log = _spark_log(plan, "run", verbose)
    with _failures(plan, verbose, spark_log):
        _reach_brokers(plan, verbose)
        spark = session_for(plan, master, log_file=spark_log)
        try:
            result = run_dagger(plan, spark, once=once, on_progress=on_progress, reset_checkpoint=reset_checkpoint)
        finally:
            _stop(spark)
    summary = (
        f"{result.input_rows} events in {result.batches} batch(es), "
        f"{result.rows_written} row(s) written to {plan.spec.sink.type}"
    )
    if result.stopped:
        console.print(
            f"[yellow]stopped[/] by signal after {summary}; a restart continues from {plan.checkpoint}", soft_wrap=True
        )
    else:
        console.print(f"[green]done[/]: {summary}", soft_wrap=True)


# -- the lifecycle on team clusters (jobs/lifecycle/daggers.py), as the dagger_* DAGs do it -----------------------

UserOpt = Annotated[
    str,
    typer.Option(
        "--user", help="Act for this user (platform engineers only; recorded). Everyone else acts as their login."
    ),
]


@contextmanager
def _daggers(state_dir: Path | None) -> Iterator[Any]:
    """The local environment's registry as Daggers; a refusal or failed deployment is one message and exit 1."""
    from jobs.lifecycle.daggers import Daggers, DeployError
    from jobs.lifecycle.submission import SubmissionError
    from odin.environment import opened
    from odin.registry import Refused, RegistryError

    try:
        with opened(state_dir=state_dir) as (registry, state):
            yield Daggers(registry, state, lambda msg: console.print(msg, highlight=False, soft_wrap=True))
    except (Refused, RegistryError, DeployError, SubmissionError, LookupError) as e:
        what = "refused" if isinstance(e, Refused) else "error"
        err.print(f"[bold red]{what}:[/] ", end="")
        err.print(str(e), markup=False, highlight=False)
        raise typer.Exit(1) from None


def _actor(daggers: Any, user: str, action: str) -> str:
    """Who acts: the OS login, or `--user` for a platform engineer (odin/teams/actor.py)."""
    from odin.teams.actor import acting_user

    return acting_user(daggers.registry, user or None, action=action)


@app.command()
def deploy(
    spec: SpecArg,
    cluster: Annotated[str, typer.Option("--cluster", help="One of the team's clusters (odin cluster list).")],
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Deploy to a team cluster (cluster mode, supervised) and wait for the query's first progress."""
    with _daggers(state_dir) as daggers:
        record = daggers.deploy(_loaded(spec), cluster, _actor(daggers, user, "dagger_deploy"))
    console.print(f"[green]running[/]: {record.qualified_name} on {record.cluster} (driver {record.submission_id})")


@app.command()
def update(
    spec: SpecArg,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Move it to another of the team's clusters.")] = None,
    reset_state: Annotated[
        bool, typer.Option("--reset-state", help="Start over when the checkpoint cannot serve the new spec.")
    ] = False,
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Stop a deployed dagger and redeploy it with the new spec, on its checkpoint when that can serve it."""
    with _daggers(state_dir) as daggers:
        actor = _actor(daggers, user, "dagger_update")
        record = daggers.update(_loaded(spec), actor, cluster=cluster, reset_state=reset_state)
    console.print(f"[green]running[/]: {record.qualified_name} v{record.spec_version} on {record.cluster}")


@app.command()
def stop(
    team: Annotated[str, typer.Argument(help="The dagger's team.")],
    name: Annotated[str, typer.Argument(help="The dagger's name.")],
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Stop a deployed dagger (its checkpoint stays for a later deploy)."""
    with _daggers(state_dir) as daggers:
        record = daggers.stop(team, name, _actor(daggers, user, "dagger_stop"))
    console.print(f"[yellow]stopped[/]: {record.qualified_name}")


@app.command()
def failover(
    team: Annotated[str, typer.Option("--team", help="The team whose cluster is down.")],
    cluster: Annotated[str, typer.Option("--cluster", help="The cluster to move every dagger off.")],
    to: Annotated[
        str | None, typer.Option("--to", help="The team's cluster to move them to (default: its healthiest other).")
    ] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why, for the registry's history.")] = "",
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Move every dagger of a team cluster to another cluster of the team, each resuming from its checkpoint."""
    from jobs.health.cluster_failover import fail_over
    from jobs.health.tables import failover_summary
    from odin.cluster.lifecycle import Clusters

    with _daggers(state_dir) as daggers:
        actor = _actor(daggers, user, "dagger_failover")
        clusters = Clusters(daggers.registry, daggers.state_dir, daggers.say)
        report = fail_over(daggers, clusters, team, cluster, actor, reason or f"requested by {actor}", to)
    console.print(failover_summary(report), highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@app.command("switch-stream")
def switch_stream_command(
    stream: Annotated[str, typer.Argument(help="The catalog stream.")],
    to: Annotated[str, typer.Option("--to", help="failover (its mirror) or primary.")] = "failover",
    reason: Annotated[str, typer.Option("--reason", help="Why, for the registry's history.")] = "",
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Serve a catalog stream from its failover Kafka cluster (or its primary again) and restart its daggers there,
    each resuming its checkpoint (platform engineers)."""
    from jobs.health.kafka_failover import switch_stream

    if to not in ("failover", "primary"):
        console.print(f"[red]--to: {to!r} is neither failover nor primary[/]")
        raise typer.Exit(2)
    with _daggers(state_dir) as daggers:
        actor = _actor(daggers, user, "stream_switch")
        done = switch_stream(
            daggers, stream, actor, reason or f"requested by {actor}", "failover" if to == "failover" else "primary"
        )
    console.print(f"stream {stream} served from {done.bootstrap_servers}; moved: {', '.join(done.moved) or 'none'}")
    for name, why in done.failed.items():
        console.print(f"[red]{name}[/]: did not move: {why}", highlight=False)
    if not done.ok:
        raise typer.Exit(1)


@app.command("list")
def list_daggers(
    team: Annotated[str | None, typer.Option("--team", help="Only this team's.")] = None,
    state_dir: StateOpt = None,
) -> None:
    """Your teams' deployed daggers (a platform engineer's: every team's): cluster, state, since, input rate, lag,
    schema versions."""
    from jobs.lifecycle.tables import daggers_table
    from odin.teams.access import visible_teams
    from odin.teams.actor import login

    with _daggers(state_dir) as daggers:
        teams = visible_teams(daggers.registry, login(), team)
        console.print(daggers_table(daggers.list(teams)))


@app.command()
def status(
    team: Annotated[str | None, typer.Option("--team", help="Only this team's clusters and daggers.")] = None,
    heal: Annotated[
        bool, typer.Option("--heal", help="Act as the dagger_health DAG does: restart, converge, record.")
    ] = False,
    state_dir: StateOpt = None,
) -> None:
    """Health of team clusters and daggers now: verdict, reasons, driver, progress age, lag, rates, restarts."""
    from jobs.health.checkup import Checkup
    from jobs.health.tables import health_tables
    from odin.teams.access import require_platform_engineer, visible_teams
    from odin.teams.actor import login

    with _daggers(state_dir) as daggers:
        me = login()
        if heal:  # restarts and moves every team's daggers: the health DAG's job, or a platform engineer's
            require_platform_engineer(daggers.registry, me)
        teams = visible_teams(daggers.registry, me, team)
        checkup = Checkup(daggers.registry, daggers.state_dir, say=daggers.say, teams=teams)
        report = checkup.run(heal=heal, record=heal)
    for table in health_tables(report):
        console.print(table)
    for action in report.actions:
        console.print(f"action: {action}", highlight=False, soft_wrap=True)
    if any(d.verdict in ("failed", "crashlooping") for d in report.daggers):
        raise typer.Exit(1)


def _loaded(path: Path) -> DaggerSpec:
    try:
        return load_spec(path)
    except SpecError as e:
        err.print(f"[bold red]invalid dagger spec {path}[/]")
        for line in str(e).splitlines():
            err.print(f"  {line}", markup=False, highlight=False)
        raise typer.Exit(2) from None


@app.command()
def schema() -> None:
    """Print the JSON schema of dagger specs."""
    print(json_schema())


if __name__ == "__main__":
    app()
