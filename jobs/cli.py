"""`dagger`: validate, preview and run daggers from their spec files.

Every expected failure ends in one message on stderr (what failed, why, what to do) and a non-zero exit: 2 for a bad
spec, 1 for a failure at run time, 130 when interrupted. `--verbose` adds the full trace, Spark's warnings and the
dagger's INFO logs; without it Spark's driver log (errors only) goes to a file the message names. Commands that list
(`list`, `status`, `preview`, `validate`) print JSON with `--json`: the tables' data on stdout, nothing else there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import click
import typer
from rich.console import Console
from rich.table import Table

from jobs.lifecycle.logs import MAX_POLL_S, MIN_POLL_S, LogType
from jobs.spec import DaggerSpec, KafkaSettings, SpecError, json_schema, load_spec, resolve_streams

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.engine.plan import DaggerPlan

app = typer.Typer(help="Daggers: streaming SQL aggregations over Kafka.", no_args_is_help=True, add_completion=True)
console = Console()
err = Console(stderr=True, soft_wrap=True)  # no wrapping: a message stays whole for whoever greps it
log = logging.getLogger("dagger")
MAX_OUTPUT_ROWS = 1000  # `dagger output --last`: a look at the newest rows, not an export
BROKER_TIMEOUT_S = 10.0  # a stream's brokers must answer this fast before Spark starts
STARTED = time.time()

SpecArg = Annotated[Path, typer.Argument(help="Dagger spec (YAML or JSON).", show_default=False)]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where checkpoints live (default: .local).")]
VerboseOpt = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Show Spark's warnings, the dagger's INFO logs and a failure's full trace."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON on stdout (the tables' data, no markup) instead of tables.")
]


class BrokerUnreachable(RuntimeError):
    """A stream's Kafka brokers did not answer."""


def _resolved(spec: DaggerSpec, state_dir: Path | None) -> DaggerSpec:
    """Catalog streams (`stream: booking-log`) looked up in the local environment: its registry, or the reviewed
    catalog file when it runs none (a partial stack, or none yet)."""
    if all(s.resolved for s in spec.streams):
        return spec
    from odin.catalog.lookup import environment_streams
    from odin.registry import RegistryError

    try:
        source = environment_streams("local", state_dir, KafkaSettings().bootstrap_servers)
        resolved = resolve_streams(spec, source.lookup)
    except RegistryError as e:
        raise SpecError(f"streams: {e}") from None
    if not source.registry:
        err.print(
            "[dim]streams: from the catalog file odin/catalog/streams.yaml (this environment runs no registry; "
            "a deploy locks each stream's schema version there)[/]"
        )
    return resolved


def _plan(spec_path: Path, state_dir: Path | None = None) -> DaggerPlan:
    from jobs.engine.plan import plan_dagger

    try:
        return plan_dagger(_resolved(load_spec(spec_path), state_dir), state_dir)
    except SpecError as e:
        _invalid(spec_path, e)


def _invalid(path: Path, e: SpecError) -> NoReturn:
    err.print(f"[bold red]invalid dagger spec {path}[/]")
    for line in str(e).splitlines():
        err.print(f"  {line}", markup=False, highlight=False)
    err.print("  Every field is in `dagger schema` and docs/reference/dagger-spec.md.", markup=False, highlight=False)
    raise typer.Exit(2) from None


def _json_value(value: Any) -> Any:
    """What json.dumps cannot write itself (a preview's timestamps, decimals): ISO dates, else text."""
    return value.isoformat() if isinstance(value, datetime | date) else str(value)


def _print_json(data: Any) -> None:
    """JSON on stdout, as it is: rich would colour it and take brackets in the data for markup."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_value) + "\n")
    sys.stdout.flush()


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
def validate(spec: SpecArg, as_json: JsonOpt = False) -> None:
    """Check a spec (fields, schemas, SQL) without starting Spark."""
    with _failures(None):
        plan = _plan(spec)
        rows = [
            {"table": s.table, "topics": ", ".join(st.topics), "proto": st.proto, "to Spark": ", ".join(s.columns)}
            for s, st in zip(plan.streams, plan.spec.streams, strict=True)
        ]
        pushed = [c.describe() for s in plan.streams for c in (*s.computed, *s.filters)]
        if as_json:
            shape = plan.shape
            sink = {"type": plan.spec.sink.type, "keys": list(shape.key_columns), "values": list(shape.value_columns)}
            _print_json(
                {
                    "dagger": plan.spec.qualified_name,
                    "streams": [
                        {"table": s.table, "topics": st.topics, "proto": st.proto, "to_spark": list(s.columns)}
                        for s, st in zip(plan.streams, plan.spec.streams, strict=True)
                    ],
                    "output_mode": plan.output_mode,
                    "spark_sql": plan.query.spark_sql,
                    "evaluated_in_the_kafka_reader": pushed,
                    "sink": sink | {"time": shape.time_column},
                    "valid": True,
                }
            )
            return
        console.print(_table(rows, f"dagger {plan.spec.qualified_name}: streams"))
        console.print(f"[bold]Spark SQL[/] ({plan.output_mode} mode):\n{plan.query.spark_sql}", highlight=False)
        for described in pushed:
            console.print(f"[bold]evaluated in the Kafka reader[/]: {described}", highlight=False)
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
    as_json: JsonOpt = False,
) -> None:
    """Run the query on the most recent events and print the result. Read-only: nothing goes to the sink, to
    dead-letter topics or to consumer groups, and no topic is created."""
    from jobs.engine.session import use_system_allocator

    use_system_allocator()  # before pyarrow's import
    from jobs.engine.runner import preview as run_preview
    from jobs.engine.runner import session_for

    _logging(verbose)
    plan = _plan(spec)
    spark_log = _spark_log(plan, "preview", verbose)
    with _failures(plan, verbose, spark_log):
        _reach_brokers(plan, verbose)
        with (err if as_json else console).status("starting Spark and reading recent events"):
            spark = session_for(plan, log_file=spark_log)
            try:
                table = run_preview(plan, spark, limit, recent)
            finally:
                _stop(spark)
        if as_json:
            _print_json(table.to_pylist())
            return
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
    """Run the dagger until stopped (SIGTERM/Ctrl-C stop it after the current batch), or `--once`. SIGUSR1 drains
    a running dagger: it reads what is left, emits every window as `--once` does, and exits."""
    from jobs.engine.session import use_system_allocator

    use_system_allocator()  # before pyarrow's import
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
            # a new session: its planners start beside the query's start (bench/RESULTS.md: first row ~1.4 s sooner)
            result = run_dagger(
                plan, spark, once=once, on_progress=on_progress, reset_checkpoint=reset_checkpoint, warm=True
            )
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
def _daggers(state_dir: Path | None, progress: Console = console) -> Iterator[Any]:
    """The local environment's registry as Daggers, saying its progress on `progress` (stderr where stdout is for
    JSON or a log); a refusal or failed deployment is one message and exit 1."""
    from jobs.lifecycle.daggers import Daggers, DeployError
    from jobs.lifecycle.logs import LogUnavailable
    from jobs.lifecycle.outputs import OutputUnavailable
    from jobs.lifecycle.submission import SubmissionError
    from odin.environment import opened
    from odin.registry import Refused, RegistryError

    failures = (Refused, RegistryError, DeployError, SubmissionError, LogUnavailable, OutputUnavailable, LookupError)
    try:
        with opened(state_dir=state_dir) as (registry, state):
            yield Daggers(registry, state, lambda msg: progress.print(msg, highlight=False, soft_wrap=True))
    except failures as e:
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
    loaded = _loaded(spec)  # a bad spec says so before the registry is asked
    with _daggers(state_dir) as daggers:
        record = daggers.deploy(loaded, cluster, _actor(daggers, user, "dagger_deploy"))
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
    loaded = _loaded(spec)
    with _daggers(state_dir) as daggers:
        actor = _actor(daggers, user, "dagger_update")
        record = daggers.update(loaded, actor, cluster=cluster, reset_state=reset_state)
    console.print(f"[green]running[/]: {record.qualified_name} v{record.spec_version} on {record.cluster}")


@app.command()
def stop(
    team: Annotated[str, typer.Argument(help="The dagger's team.")],
    name: Annotated[str, typer.Argument(help="The dagger's name.")],
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="First read what is left on its streams and close every window (as `dagger run --once` does), "
            "then stop; a drain that takes longer than --drain-timeout is cut short by the stop.",
        ),
    ] = False,
    drain_timeout: Annotated[float, typer.Option("--drain-timeout", min=1, help="Seconds a drain may take.")] = 600,
    user: UserOpt = "",
    state_dir: StateOpt = None,
) -> None:
    """Stop a deployed dagger (its checkpoint stays for a later deploy)."""
    with _daggers(state_dir) as daggers:
        actor = _actor(daggers, user, "dagger_stop")
        record = daggers.stop(team, name, actor, drain_timeout_s=drain_timeout if drain else None)
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
        err.print(
            f"[bold red]error:[/] --to: {to!r} is neither failover nor primary: give `--to failover` or `--to primary`"
        )
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
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
) -> None:
    """Your teams' deployed daggers (a platform engineer's: every team's): cluster, state, since, input rate, lag,
    schema versions, the driver's id, and where Spark shows it (master UI, application, driver log)."""
    from jobs.lifecycle.tables import daggers_links, daggers_table
    from odin.teams.access import visible_teams
    from odin.teams.actor import login

    with _daggers(state_dir, err if as_json else console) as daggers:
        teams = visible_teams(daggers.registry, login(), team)
        rows = daggers.list(teams)
    if as_json:
        _print_json([r.to_dict() for r in rows])
        return
    console.print(daggers_table(rows))
    for line in daggers_links(rows):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
def status(
    team: Annotated[str | None, typer.Option("--team", help="Only this team's clusters and daggers.")] = None,
    heal: Annotated[
        bool, typer.Option("--heal", help="Act as the dagger_health DAG does: restart, converge, record.")
    ] = False,
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
) -> None:
    """Health of team clusters and daggers now: verdict, reasons, driver and its id, progress age, lag, rates,
    restarts, and where Spark shows each driver. Exit 1 when a dagger is failed or crashlooping (with --json too)."""
    from jobs.health.checkup import Checkup
    from jobs.health.tables import health_links, health_tables
    from odin.teams.access import require_platform_engineer, visible_teams
    from odin.teams.actor import login

    with _daggers(state_dir, err if as_json else console) as daggers:
        me = login()
        if heal:  # restarts and moves every team's daggers: the health DAG's job, or a platform engineer's
            require_platform_engineer(daggers.registry, me)
        teams = visible_teams(daggers.registry, me, team)
        checkup = Checkup(daggers.registry, daggers.state_dir, say=daggers.say, teams=teams)
        report = checkup.run(heal=heal, record=heal)
    if as_json:
        _print_json(report.model_dump(mode="json"))
    else:
        for table in health_tables(report):
            console.print(table)
        for line in health_links(report):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        for action in report.actions:
            console.print(f"action: {action}", highlight=False, soft_wrap=True)
    if any(d.verdict in ("failed", "crashlooping") for d in report.daggers):
        raise typer.Exit(1)


REPLACED_WAIT_S = 120.0  # how long `logs --follow` waits for a replacing driver's log (queued for a worker, starting)


def _readable(driver_log: Callable[[], Any], interval: float, wait_s: float = REPLACED_WAIT_S) -> Any:
    """driver_log() once its worker serves the log (a driver just submitted may wait for one), at most `wait_s`."""
    from jobs.lifecycle.logs import LogUnavailable

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return driver_log()
        except LogUnavailable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(interval)


@app.command()
def logs(
    team: Annotated[str, typer.Argument(help="The dagger's team.")],
    name: Annotated[str, typer.Argument(help="The dagger's name.")],
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Then print new lines as they come, until Ctrl-C or the dagger stops."),
    ] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", min=0, help="How many of the last lines to print.")] = 100,
    log_type: Annotated[
        LogType,
        typer.Option(
            "--type", help="stdout: the dagger's own lines (its logging, tracebacks); stderr: Spark's driver JVM log."
        ),
    ] = LogType.stdout,
    interval: Annotated[
        float, typer.Option("--interval", min=MIN_POLL_S, max=MAX_POLL_S, help="Seconds between polls with --follow.")
    ] = 1.0,
    state_dir: StateOpt = None,
) -> None:
    """Print a deployed dagger's driver log from its cluster: as the worker running the driver serves it, else from
    the worker's files on this host. For members of the dagger's team and platform engineers (a refusal is recorded).
    With --follow, a driver the master relaunches or the platform restarts is followed on; the dagger's stop ends it."""
    from jobs.lifecycle.daggers import LIVE
    from jobs.lifecycle.logs import follow as follow_log
    from jobs.lifecycle.logs import tail
    from odin.teams.actor import login

    def emit(line: str) -> None:
        sys.stdout.write(line + "\n")  # as it is: a log's brackets are no markup
        sys.stdout.flush()

    try:
        with _daggers(state_dir, err) as daggers:
            me = login()
            log = daggers.driver_log(team, name, me, log_type)
            err.print(
                f"{team}/{name}: the {log_type} of driver {log.links.driver_id}, from {log.source.where}", markup=False
            )
            shown, pos = tail(log.source, lines, partial=not follow)  # a line being written shows once, complete
            for line in shown:
                emit(line)
            while follow:  # each turn follows one driver; a turn ends only when that driver is replaced or ended
                follow_log(log.source, pos, emit, poll_s=interval, alive=lambda log=log: daggers.driver_alive(log))
                record = daggers.registry.dagger(team, name)  # driver_alive recorded a relaunched driver's new id
                if record is None or record.state not in LIVE or record.submission_id in (None, log.links.driver_id):
                    err.print(f"dagger {team}/{name} is {record.state if record else 'gone'}: its log ends here")
                    break
                err.print(f"driver {log.links.driver_id} was replaced by {record.submission_id}: following its log")
                log, pos = _readable(lambda: daggers.driver_log(team, name, me, log_type), interval), 0
    except KeyboardInterrupt:  # how a follow ends
        raise typer.Exit(0) from None
    except BrokenPipeError:  # `dagger logs ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error as Python flushes at exit
        raise typer.Exit(0) from None


@app.command()
def output(
    team: Annotated[str, typer.Argument(help="The dagger's team.")],
    name: Annotated[str, typer.Argument(help="The dagger's name.")],
    last: Annotated[int, typer.Option("--last", "-n", min=1, max=MAX_OUTPUT_ROWS, help="How many rows.")] = 20,
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
) -> None:
    """Print a deployed dagger's newest output rows, read where the platform put them: an influx sink's points in
    the time-series DB, a postgres sink's table in the team's database, a kafka sink's topic. For members of the
    dagger's team and platform engineers (a refusal is recorded)."""
    from odin.teams.actor import login

    with _daggers(state_dir, err) as daggers:
        out = daggers.output(team, name, login(), last)
    if as_json:
        _print_json(out.to_dict())
        return
    total = f" of {out.total:,}" if out.total is not None else ""
    err.print(f"{team}/{name}: {len(out.rows)}{total} rows, newest last, from {out.where}", markup=False)
    if out.rows:
        console.print(_table([dict(zip(out.columns, row, strict=True)) for row in out.rows], f"{team}/{name}"))
    else:
        err.print(out.note, markup=False)


def _loaded(path: Path) -> DaggerSpec:
    try:
        return load_spec(path)
    except SpecError as e:
        _invalid(path, e)


@app.command()
def schema() -> None:
    """Print the JSON schema of dagger specs."""
    print(json_schema())


if __name__ == "__main__":
    app()
