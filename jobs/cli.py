"""`dagger`: validate, preview and run daggers from their spec files."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from jobs.plan import DaggerPlan, plan_dagger
from jobs.spec import SpecError, json_schema, load_spec

app = typer.Typer(help="Daggers: streaming SQL aggregations over Kafka.", no_args_is_help=True, add_completion=False)
console = Console()
err = Console(stderr=True)

SpecArg = Annotated[Path, typer.Argument(help="Dagger spec (YAML or JSON).", show_default=False)]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where checkpoints live (default: .local).")]


def _plan(spec_path: Path, state_dir: Path | None = None) -> DaggerPlan:
    try:
        return plan_dagger(load_spec(spec_path), state_dir)
    except SpecError as e:
        err.print(f"[bold red]invalid dagger spec {spec_path}[/]")
        for line in str(e).splitlines():
            err.print(f"  {line}", markup=False, highlight=False)
        raise typer.Exit(2) from None


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
) -> None:
    """Run the query on the most recent events and print the result (nothing is written to the sink)."""
    from jobs.engine import preview as run_preview
    from jobs.engine import session_for

    plan = _plan(spec)
    with console.status("starting Spark and reading recent events"):
        spark = session_for(plan)
        table = run_preview(plan, spark, limit, recent)
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
) -> None:
    """Run the dagger until stopped (SIGTERM/Ctrl-C stop it after the current batch), or `--once`."""
    from jobs.engine import run as run_dagger
    from jobs.engine import session_for
    from jobs.telemetry import event_rows, sentinel_rows

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for chatty in ("py4j", "httpx"):  # a line per Spark callback or HTTP request drowns the dagger's own
        logging.getLogger(chatty).setLevel(logging.WARNING)
    plan = _plan(spec, state_dir)
    console.print(f"dagger {plan.spec.qualified_name} on {master}; checkpoint {plan.checkpoint}")

    def on_progress(p: dict[str, Any]) -> None:
        wm = (p.get("eventTime") or {}).get("watermark", "-")
        what = "end of input, closing every window" if sentinel_rows(p) else f"{event_rows(p)} events"
        console.print(
            f"batch {p['batchId']}: {what}, {p['durationMs'].get('triggerExecution', 0)} ms, watermark {wm}",
            highlight=False,
        )

    spark = session_for(plan, master)
    try:
        result = run_dagger(plan, spark, once=once, on_progress=on_progress, reset_checkpoint=reset_checkpoint)
    except RuntimeError as e:
        err.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(1) from None
    finally:
        try:
            spark.stop()
        except Exception as e:  # a signal to the process group stopped Spark's JVM already
            logging.getLogger("dagger").warning("Spark was already stopped: %s", type(e).__name__)
    summary = (
        f"{result.input_rows} events in {result.batches} batch(es), "
        f"{result.rows_written} row(s) written to {plan.spec.sink.type}"
    )
    if result.stopped:
        console.print(f"[yellow]stopped[/] by signal after {summary}; a restart continues from {plan.checkpoint}")
    else:
        console.print(f"[green]done[/]: {summary}")


@app.command()
def schema() -> None:
    """Print the JSON schema of dagger specs."""
    print(json_schema())


if __name__ == "__main__":
    app()
