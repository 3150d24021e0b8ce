"""`odin`: bring the platform's environments up, down, and report their health."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from odin.catalog import CatalogError
from odin.catalog.schemas import BufError
from odin.catalog.sync import StreamSync
from odin.endpoints import Endpoints
from odin.registry import Registry, RegistryError
from odin.spec import Service
from odin.stack import NodeStatus, PreflightError, Stack
from odin.terraform import TerraformError

app = typer.Typer(
    help="Odin provisions the platform: Terraform declares hosts, Ansible configures them.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)

EnvOpt = Annotated[str, typer.Option("--env", help="Environment under terraform/environments/.")]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="State directory (default: $ODIN_HOME or .local).")]


def _fail(msg: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {msg}")
    return typer.Exit(code)


def _parse_services(only: str | None) -> set[Service] | None:
    if not only:
        return None
    names = [s.strip().replace("-", "_") for s in only.split(",") if s.strip()]
    unknown = [n for n in names if n not in Service.__members__]
    if unknown:
        raise _fail(f"--only: unknown service(s) {', '.join(unknown)}; valid: {', '.join(Service)}")
    return {Service(n) for n in names}


def _parse_ports(ports: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in ports:
        name, _, value = item.partition("=")
        if not value.isdigit():
            raise _fail(f"--port {item!r}: expected NAME=NUMBER, e.g. --port kafka=19092")
        out[name.strip()] = int(value)
    return out


def _status_table(nodes: list[NodeStatus], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("node", "role", "processes", "health", "url", "detail"):
        table.add_column(col, overflow="fold")
    for n in nodes:
        procs = ", ".join(f"{p.name}:{p.pid}" if p.running else f"{p.name}:[red]dead[/]" for p in n.processes)
        health = "[green]healthy[/]" if n.health.ok else "[red]down[/]" if n.managed else "[dim]not started[/]"
        table.add_row(n.name, n.role, procs or "[dim]none[/]", health, n.url, n.health.detail)
    return table


@app.command()
def up(
    workers: Annotated[
        int | None, typer.Option("--workers", help="Spark workers (1-16); default: keep current.")
    ] = None,
    only: Annotated[str | None, typer.Option("--only", help="Comma-separated services to converge.")] = None,
    port: Annotated[list[str], typer.Option("--port", help="Port override NAME=NUMBER (repeatable).")] = [],  # noqa: B006
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Create or converge the environment. Re-running changes nothing; killed services are restarted."""
    services = _parse_services(only)
    ports = _parse_ports(port)
    try:
        stack = Stack(env, state_dir)
        spec = stack.resolve(workers, services, ports)
    except ValidationError as e:
        flags = {"spark_workers": "--workers", "services": "--only", "ports": "--port"}
        msgs = [
            f"{flags.get(str(x['loc'][0]), x['loc'][0])}{''.join(f'.{p}' for p in x['loc'][1:])}: {x['msg']}"
            for x in e.errors()
        ]
        raise _fail("; ".join(msgs)) from None
    except TerraformError as e:
        raise _fail(str(e)) from None
    with console.status("[bold]odin up[/]") as status:
        try:
            report = stack.up(spec, progress=lambda msg: status.update(f"[bold]odin up[/] {msg}"))
        except (TerraformError, PreflightError) as e:
            raise _fail(str(e)) from None
    console.print(f"terraform: {report.plan.summary()}" + (" (plan empty)" if report.plan.empty else ""))
    if report.removed:
        console.print(f"removed nodes stopped: {', '.join(report.removed)}")
    console.print(f"ansible: {report.playbook.total_changed} changed, status {report.playbook.status}")
    if report.registry_revision:
        console.print(f"registry: migrated to revision {report.registry_revision}")
    if report.catalog:
        _print_catalog_sync(report.catalog)
    for f in report.playbook.failures:
        err.print(f"[bold red]failed[/] {f.host} / {f.task}:\n{f.message}")
    if report.nodes:
        console.print(_status_table(report.nodes, f"{env}: {spec.spark_workers} Spark worker(s)"))
    if not report.ok:
        raise _fail("some services are not healthy; logs are in " + str(stack.state_dir / "log"), 1)


@app.command()
def down(
    purge: Annotated[bool, typer.Option("--purge", help="Also destroy Terraform state and delete all data.")] = False,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Stop every service of the environment (data is kept unless --purge)."""
    stack = Stack(env, state_dir)
    with console.status("[bold]odin down[/]") as status:
        report = stack.down(purge=purge, progress=lambda msg: status.update(f"[bold]odin down[/] {msg}"))
    if report.playbook is None:
        console.print("nothing to stop: the environment was never brought up")
        return
    for f in report.playbook.failures:
        err.print(f"[bold red]failed[/] {f.host} / {f.task}:\n{f.message}")
    if not report.ok:
        raise _fail("some processes could not be stopped", 1)
    console.print(f"stopped {report.stopped} process(es)" + ("; state and data purged" if purge else ""))


@app.command()
def status(env: EnvOpt = "local", state_dir: StateOpt = None) -> None:
    """Table of every node: processes, health, URL. Exit code 1 if any is down."""
    stack = Stack(env, state_dir)
    nodes = stack.status()
    if not nodes:
        console.print("the environment was never brought up: run `odin up`")
        raise typer.Exit(1)
    console.print(_status_table(nodes, f"environment {env}"))
    if not all(n.ok for n in nodes):
        raise typer.Exit(1)


catalog_app = typer.Typer(help="The stream catalog (odin/catalog/streams.yaml) and its schema versions.")
app.add_typer(catalog_app, name="catalog")


def _print_catalog_sync(results: list[StreamSync]) -> None:
    table = Table(title="stream catalog → registry", title_justify="left")
    for col in ("stream", "result", "schema version", "detail"):
        table.add_column(col, overflow="fold")
    for r in results:
        verdict = f"[red]{r.verdict}[/]" if not r.ok else r.verdict
        detail = "; ".join(r.findings)
        if r.daggers_on_old:
            detail += ("; " if detail else "") + "daggers on the old version: " + ", ".join(r.daggers_on_old)
        table.add_row(r.name, verdict, str(r.schema_version), detail)
    console.print(table)
    refused = [r.name for r in results if not r.ok]
    if refused:
        err.print(
            f"[bold red]refused:[/] {', '.join(refused)}: the new schema is not wire-compatible with the registered "
            "one; make the change compatible (add fields, never renumber or retype), or publish it as a new stream"
        )


@catalog_app.command("sync")
def catalog_sync_command(env: EnvOpt = "local", state_dir: StateOpt = None) -> None:
    """Load the catalog into the environment's registry; refuses schema changes that break the wire format."""
    stack = Stack(env, state_dir)
    try:
        results = stack.sync_catalog()
    except (CatalogError, RegistryError, LookupError, BufError) as e:
        raise _fail(str(e)) from None
    _print_catalog_sync(results)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


@catalog_app.command("list")
def catalog_list(env: EnvOpt = "local", state_dir: StateOpt = None) -> None:
    """The streams in the environment's registry: topics, message, schema version."""
    try:
        registry = Registry.connect(Endpoints(Stack(env, state_dir).nodes()).registry_url)
    except (RegistryError, LookupError) as e:
        raise _fail(str(e)) from None
    try:
        streams = registry.streams()
    finally:
        registry.close()
    table = Table(title=f"streams ({env})", title_justify="left")
    for col in ("stream", "topics", "message", "schema version", "Kafka", "description"):
        table.add_column(col, overflow="fold")
    for st in streams:
        table.add_row(
            st.name, ", ".join(st.topics), st.proto, str(st.schema_version), st.bootstrap_servers, st.description
        )
    console.print(table)


def main() -> None:  # pragma: no cover - console script shim
    sys.exit(app())
