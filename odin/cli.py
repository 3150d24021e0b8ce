"""`odin`: bring the platform's environments up, down, and report their health."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.status import Status
from rich.table import Table

from odin import form_choices
from odin.alerting.routing import RoutingError, team_receiver
from odin.catalog import PERF_SUFFIX, CatalogError
from odin.catalog.schemas import BufError
from odin.catalog.sync import StreamSync
from odin.cluster.lifecycle import ClusterError, ClusterReport, Clusters
from odin.cluster.spec import ClusterSpec
from odin.endpoints import Endpoints
from odin.environment import connect_registry
from odin.models import SLUG, format_errors
from odin.provision.ansible import SKIPPED
from odin.provision.terraform import TerraformError
from odin.registry import Refused, Registry, RegistryError
from odin.registry.records import ClusterRecord
from odin.spec import Service
from odin.stack import NodeStatus, PreflightError, Stack
from odin.teams.access import PLATFORM_TEAM, require_member, require_platform_engineer
from odin.teams.actor import login
from odin.teams.databases import team_database
from odin.teams.secrets import TeamSecrets, check

app = typer.Typer(
    help="Odin provisions the platform: Terraform declares hosts, Ansible configures them.",
    no_args_is_help=True,
    add_completion=True,
)
console = Console()
err = Console(stderr=True)
T = TypeVar("T")

EnvOpt = Annotated[str, typer.Option("--env", help="Environment under terraform/environments/.")]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="State directory (default: $ODIN_HOME or .local).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON on stdout instead of a table.")]


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


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


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
    airflow_user: Annotated[
        list[str], typer.Option("--airflow-user", help="Airflow user NAME=ROLE (viewer, user, op, admin; repeatable).")
    ] = [],  # noqa: B006
    traffic_rate: Annotated[
        float | None,
        typer.Option("--traffic-rate", help="Events per second the traffic node sends on each catalog data stream."),
    ] = None,
    converge: Annotated[
        bool,
        typer.Option(
            "--converge",
            help="Converge every node; without it, only the nodes whose inputs changed since their last converge or "
            "that are not healthy.",
        ),
    ] = False,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Create or converge the environment. Re-running changes nothing; killed services are restarted."""
    services = _parse_services(only)
    ports = _parse_ports(port)
    users = dict(u.partition("=")[::2] for u in airflow_user)
    try:
        stack = Stack(env, state_dir)
        spec = stack.resolve(workers, services, ports, users, traffic_rate)
    except ValidationError as e:
        flags = {
            "spark_workers": "--workers",
            "services": "--only",
            "ports": "--port",
            "airflow_users": "--airflow-user",
            "traffic_rate": "--traffic-rate",
        }
        msgs = [
            f"{flags.get(str(x['loc'][0]), x['loc'][0])}{''.join(f'.{p}' for p in x['loc'][1:])}: {x['msg']}"
            for x in e.errors()
        ]
        raise _fail("; ".join(msgs)) from None
    except TerraformError as e:
        raise _fail(str(e)) from None
    with console.status("[bold]odin up[/]") as status:
        try:
            report = stack.up(spec, progress=lambda msg: status.update(f"[bold]odin up[/] {msg}"), converge=converge)
        except (TerraformError, PreflightError) as e:
            raise _fail(str(e)) from None
    console.print(f"terraform: {report.plan.summary()}" + (" (plan empty)" if report.plan.empty else ""))
    if report.removed:
        console.print(f"removed nodes stopped: {', '.join(report.removed)}")
    if report.playbook.status == SKIPPED:
        console.print("ansible: not run (nothing changed since its last run, all healthy; --converge runs it)")
    else:
        on = ", ".join(report.converged) if len(report.converged) <= 4 else f"{len(report.converged)} nodes"
        console.print(f"ansible: {report.playbook.total_changed} changed, status {report.playbook.status} (on {on})")
    if report.registry_revision:
        console.print(f"registry: migrated to revision {report.registry_revision}")
        if first := _first_platform_engineer(stack):
            console.print(f"registry: {first} is the first platform engineer (team {PLATFORM_TEAM})")
    if report.catalog:
        _print_catalog_sync(report.catalog)
    for f in report.playbook.failures:
        err.print(f"[bold red]failed[/] {f.host} / {f.task}:\n{f.message}")
    if report.nodes:
        console.print(_status_table(report.nodes, f"{env}: {spec.spark_workers} Spark worker(s)"))
    if any(n.role == Service.airflow for n in report.nodes):
        users = ", ".join(f"{u} ({r})" for u, r in sorted(spec.airflow_users.items()))
        console.print(f"Airflow users: {users}; passwords in {Endpoints(stack.nodes()).airflow_passwords}")
    if not report.ok:
        raise _fail("some services are not healthy; logs are in " + str(stack.state_dir / "log"), 1)


@app.command()
def down(
    purge: Annotated[bool, typer.Option("--purge", help="Also destroy Terraform state and delete all data.")] = False,
    only: Annotated[str | None, typer.Option("--only", help="Comma-separated services to stop.")] = None,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Stop every service of the environment, or some (data is kept unless --purge)."""
    services = _parse_services(only)
    if purge and services:
        raise _fail("--purge removes the whole environment: it cannot be combined with --only")
    stack = Stack(env, state_dir)
    with console.status("[bold]odin down[/]") as status:

        def say(msg: str) -> None:
            status.update(f"[bold]odin down[/] {msg}")

        report = stack.down(purge, say, services, after_control_plane=lambda: _stop_team_clusters(stack, say))
    if report.playbook is None:
        console.print("nothing to stop: the environment was never brought up")
        return
    for f in report.playbook.failures:
        err.print(f"[bold red]failed[/] {f.host} / {f.task}:\n{f.message}")
    if not report.ok:
        raise _fail("some processes could not be stopped", 1)
    console.print(f"stopped {report.stopped} process(es)" + ("; state and data purged" if purge else ""))


def _stop_team_clusters(stack: Stack, say: Callable[[str], None]) -> None:
    """Every team cluster of the environment stops with it (the registry keeps them: health heals them after `up`)."""
    try:
        registry = connect_registry(stack.nodes())
    except LookupError:
        return  # no registry: no team clusters
    except RegistryError as e:
        err.print(f"[yellow]team clusters not stopped[/]: {e}")
        return
    try:
        records = registry.clusters(states=("ready", "failed"))
        clusters = Clusters(registry, stack.state_dir)
        for c in records:
            say(f"stopping team cluster {c.team}/{c.name}")
            clusters.stop(c.team, c.name)
            console.print(f"team cluster {c.team}/{c.name} stopped (`odin up`, then the health check, brings it back)")
    finally:
        registry.close()


@app.command()
def status(env: EnvOpt = "local", state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Table of every node: processes, health, URL. Exit code 1 if any is down."""
    stack = Stack(env, state_dir)
    nodes = stack.status()
    if not nodes:
        err.print("the environment was never brought up: run `odin up`")
        raise typer.Exit(1)
    if as_json:
        rows = [
            {"node": n.name, "role": n.role, "url": n.url, "healthy": n.health.ok, "managed": n.managed,
             "detail": n.health.detail, "processes": [{"name": p.name, "pid": p.pid} for p in n.processes]}
            for n in nodes
        ]  # fmt: skip
        _print_json(rows)
    else:
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
def catalog_list(env: EnvOpt = "local", state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """The streams in the environment's registry: topics, message, schema version."""
    try:
        registry = connect_registry(Stack(env, state_dir).nodes())
    except (RegistryError, LookupError) as e:
        raise _fail(str(e)) from None
    try:
        streams = registry.streams()
    finally:
        registry.close()
    if as_json:
        _print_json([st.model_dump(mode="json") for st in streams])
        return
    table = Table(title=f"streams ({env})", title_justify="left")
    for col in ("stream", "topics", "message", "schema version", "Kafka", "description"):
        table.add_column(col, overflow="fold")
    for st in streams:
        table.add_row(
            st.name, ", ".join(st.topics), st.proto, str(st.schema_version), st.bootstrap_servers, st.description
        )
    console.print(table)


def _first_platform_engineer(stack: Stack) -> str | None:
    """A new registry's first platform engineer is the OS user who brought it up; later ones are added by them."""
    registry = connect_registry(stack.nodes())
    try:
        if registry.members(PLATFORM_TEAM):
            return None
        registry.ensure_team(PLATFORM_TEAM, "Platform engineers: provision clusters and administer teams.")
        registry.add_member(PLATFORM_TEAM, login())
        registry.record(login(), "team_add", f"team:{PLATFORM_TEAM}", "ok", "the first platform engineer (odin up)")
        return login()
    finally:
        registry.close()


# -- teams and team clusters ----------------------------------------------------------------------------------

team_app = typer.Typer(help="Teams and their members (who may deploy to which clusters).")
cluster_app = typer.Typer(help="Team Spark clusters: create, scale, destroy, list.")
app.add_typer(team_app, name="team")
app.add_typer(cluster_app, name="cluster")


@contextmanager
def _registry(env: str, state_dir: Path | None) -> Iterator[Registry]:
    """The environment's registry; a clear message and exit 2 if there is none."""
    try:
        registry = connect_registry(Stack(env, state_dir).nodes())
    except LookupError:
        raise _fail(f"environment {env!r} has no registry: run `odin up`") from None
    except RegistryError as e:
        raise _fail(str(e)) from None
    try:
        yield registry
    finally:
        registry.close()


def _platform_engineer(registry: Registry, action: str, subject: str) -> str:
    """The login, if a platform engineer: team and cluster administration is theirs (refusals recorded)."""
    user = login()
    try:
        with registry.refusals(user, action, subject):
            return require_platform_engineer(registry, user)
    except Refused as e:
        raise _fail(f"refused: {e}") from None


@team_app.command("add")
def team_add(
    name: Annotated[str, typer.Argument(help="Team name (a slug).")],
    member: Annotated[list[str], typer.Option("--member", help="A user of the team (repeatable).")] = [],  # noqa: B006
    auto_failover: Annotated[
        bool | None,
        typer.Option(
            "--auto-failover/--no-auto-failover",
            help="Let the health check move the team's daggers off a cluster that stays down (default: unchanged).",
        ),
    ] = None,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Add a team (if new) and members to it."""
    if not re.fullmatch(SLUG, name):
        raise _fail(f"team {name!r}: lowercase letters, digits and dashes, starting with a letter")
    with _registry(env, state_dir) as registry:
        _platform_engineer(registry, "team_add", f"team:{name}")
        registry.ensure_team(name)
        for user in member:
            registry.add_member(name, user)
        if auto_failover is not None:
            registry.set_auto_failover(name, auto_failover)
        form_choices.refresh(registry, Stack(env, state_dir).state_dir)
        failover = "on" if registry.auto_failover(name) else "off"
        console.print(f"team {name}: members {', '.join(registry.members(name)) or 'none'}; auto-failover {failover}")
        database = team_database(name, state_dir, env)
        console.print(f"team {name}: PostgreSQL {database.dsn}, password in team secret {database.password_env}")
    try:
        if Stack(env, state_dir).sync_alert_routes():
            console.print(f"alertmanager: team {name}'s alerts now route to receiver {team_receiver(name)}")
    except LookupError:
        pass  # no Alertmanager in this environment: `odin up` routes the team when it adds one
    except RoutingError as e:
        raise _fail(f"team {name} is added, but its alert route is not: {e}. Fix it, then re-run `odin up`") from None


@team_app.command("list")
def team_list(env: EnvOpt = "local", state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Teams and their members."""
    with _registry(env, state_dir) as registry:
        teams = [
            {"team": t, "auto_failover": registry.auto_failover(t), "members": registry.members(t)}
            for t in registry.teams()
        ]
    if as_json:
        _print_json(teams)
        return
    table = Table(title="teams", title_justify="left")
    for col in ("team", "auto-failover", "members"):
        table.add_column(col)
    for t in teams:
        table.add_row(t["team"], "on" if t["auto_failover"] else "off", ", ".join(t["members"]))
    console.print(table)


secret_app = typer.Typer(help="Team secrets: the values a dagger spec names by environment variable (never logged).")
app.add_typer(secret_app, name="secret")


@contextmanager
def _team_secrets(team: str, env: str, state_dir: Path | None, action: str, **detail: str) -> Iterator[TeamSecrets]:
    """The team's secrets, for a member of the team (or a platform engineer); the action (a secret's name, never
    its value) goes in the registry's history."""
    user = login()
    with _registry(env, state_dir) as registry:
        try:
            with registry.action(user, action, f"team:{team}", **detail):
                require_member(registry, user, team)
                yield TeamSecrets(Stack(env, state_dir).state_dir)
        except Refused as e:
            raise _fail(f"refused: {e}") from None


@secret_app.command("set")
def secret_set(
    team: Annotated[str, typer.Argument(help="The team whose daggers use it.")],
    name: Annotated[str, typer.Argument(help="The environment variable a spec names (sink.password_env).")],
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Set a secret: the value is read from the terminal without echo, or from stdin (never a command-line
    argument, which every local user can read)."""
    value = typer.prompt(f"{name}", hide_input=True) if sys.stdin.isatty() else sys.stdin.read().rstrip("\n")
    try:
        check(name, value)
    except ValueError as e:
        raise _fail(str(e)) from None
    with _team_secrets(team, env, state_dir, "secret_set", name=name) as secrets:
        secrets.set(team, name, value)
    console.print(f"secret {name} of team {team} set; daggers deployed from now on get it")


@secret_app.command("list")
def secret_list(
    team: Annotated[str, typer.Argument(help="The team whose secrets to name.")],
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The names of a team's secrets (never their values)."""
    with _team_secrets(team, env, state_dir, "secret_list") as secrets:
        names = secrets.names(team)
    if as_json:
        _print_json(names)
        return
    console.print("\n".join(names) if names else f"team {team} has no secrets")


@secret_app.command("unset")
def secret_unset(
    team: Annotated[str, typer.Argument()],
    name: Annotated[str, typer.Argument()],
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Remove a secret (running daggers keep the value they started with)."""
    with _team_secrets(team, env, state_dir, "secret_unset", name=name) as secrets:
        removed = secrets.unset(team, name)
    console.print(f"secret {name} of team {team} {'removed' if removed else 'was not set'}")


def _on_cluster(
    what: str, team: str, name: str, env: str, state_dir: Path | None, act: Callable[[Clusters, str], T]
) -> T:
    """`act(clusters, user)` with progress on the console; refusals exit 2, failures 1, each with one message."""
    with _registry(env, state_dir) as registry, console.status(f"[bold]cluster {team}/{name}[/]") as status:
        clusters = Clusters(registry, Stack(env, state_dir).state_dir, lambda m: _progress(status, m))
        try:
            return act(clusters, _platform_engineer(registry, f"cluster_{what}", f"cluster:{team}/{name}"))
        except Refused as e:
            raise _fail(f"refused: {e}") from None
        except (ClusterError, TerraformError) as e:
            raise _fail(f"{what} failed: {e}", 1) from None


def _print_report(report: ClusterReport, title: str) -> None:
    console.print(f"terraform: {report.plan_summary}")
    console.print(_cluster_table([report.record], title))


def _cluster_table(records: list[ClusterRecord], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("cluster", "environment", "state", "masters", "workers", "master URL", "REST", "since"):
        table.add_column(col, overflow="fold")
    for c in records:
        state = {"ready": "[green]ready[/]", "failed": "[red]failed[/]"}.get(c.state, c.state)
        since = f"{c.updated_at:%Y-%m-%d %H:%M}" if c.updated_at else ""
        rest = ", ".join(c.addresses.get("rest_urls", []))
        table.add_row(
            c.qualified_name, c.environment, state, str(c.masters), f"{c.workers} x {c.worker_cores} cores, "
            f"{c.worker_memory}", c.addresses.get("master_url", ""), rest, since,
        )  # fmt: skip
    return table


@cluster_app.command("create")
def cluster_create(
    team: Annotated[str, typer.Argument(help="The team that owns the cluster.")],
    name: Annotated[str, typer.Argument(help="The cluster's name.")],
    on: Annotated[
        str,
        typer.Option(
            "--on",
            help="Where the cluster's hosts are: local (processes on this machine) or gcp. Not --env, which names the "
            "Odin environment whose registry records the cluster.",
        ),
    ] = "local",
    masters: Annotated[int, typer.Option("--masters", help="1: FILESYSTEM recovery; 2+: ZooKeeper.")] = 1,
    workers: Annotated[int, typer.Option("--workers")] = 1,
    worker_cores: Annotated[int, typer.Option("--worker-cores")] = 1,
    worker_memory: Annotated[str, typer.Option("--worker-memory")] = "1g",
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Provision a team's Spark cluster: Terraform plan (shown), apply, Ansible, health, registry."""
    fields = dict(team=team, name=name, environment=on, masters=masters, workers=workers)
    try:
        spec = ClusterSpec.model_validate({**fields, "worker_cores": worker_cores, "worker_memory": worker_memory})
    except ValidationError as e:
        raise _fail(format_errors(e).replace("environment:", "--on:")) from None
    _print_report(_on_cluster("create", team, name, env, state_dir, lambda c, user: c.create(spec, user)), "created")


@cluster_app.command("scale")
def cluster_scale(
    team: Annotated[str, typer.Argument()],
    name: Annotated[str, typer.Argument()],
    workers: Annotated[int, typer.Option("--workers", help="The new number of workers (1-16).")],
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Add or remove workers; nothing else restarts."""
    report = _on_cluster("scale", team, name, env, state_dir, lambda c, user: c.scale(team, name, workers, user))
    _print_report(report, "scaled")


@cluster_app.command("destroy")
def cluster_destroy(
    team: Annotated[str, typer.Argument()],
    name: Annotated[str, typer.Argument()],
    stop_daggers: Annotated[bool, typer.Option("--stop-daggers", help="Stop the daggers running on it.")] = False,
    move_daggers_to: Annotated[
        str | None, typer.Option("--move-daggers-to", help="Redeploy them on another cluster of the team.")
    ] = None,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Stop every process of the cluster and destroy it (refused while daggers run on it, unless they are stopped or
    moved)."""

    def destroy(c: Clusters, user: str) -> None:
        c.destroy(team, name, user, stop_daggers=stop_daggers, move_daggers_to=move_daggers_to)

    _on_cluster("destroy", team, name, env, state_dir, destroy)
    console.print(f"cluster {team}/{name} destroyed")


@cluster_app.command("list")
def cluster_list(
    team: Annotated[str | None, typer.Option("--team")] = None,
    all_states: Annotated[bool, typer.Option("--all", help="Destroyed clusters too.")] = False,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The clusters of the registry: state, size, addresses."""
    with _registry(env, state_dir) as registry:
        records = [c for c in registry.clusters(team) if all_states or c.state != "destroyed"]
    if as_json:
        _print_json([c.model_dump(mode="json") for c in records])
        return
    console.print(_cluster_table(records, f"clusters ({env})"))


@app.command()
def mirror(
    topics: Annotated[list[str] | None, typer.Argument(help="Topics to mirror (each keeps its offsets).")] = None,
    source: Annotated[str | None, typer.Option("--from", help="The source Kafka cluster's bootstrap servers.")] = None,
    target: Annotated[str | None, typer.Option("--to", help="The target Kafka cluster's bootstrap servers.")] = None,
    suffix: Annotated[str, typer.Option("--suffix", help="Name each copy <topic><suffix>.")] = "",
    perf: Annotated[
        str | None,
        typer.Option(
            "--perf", help="A catalog stream: copy it into its -perf twin (clusters and topics from the catalog)."
        ),
    ] = None,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Copy topics into another cluster, keeping every partition's offsets, until SIGTERM or Ctrl-C: into a failover
    cluster (same names), or a data stream into its perf stream (--perf STREAM)."""
    import signal
    import threading

    from odin.kafka.mirror import Mirror, MirrorError

    if perf:
        registry = connect_registry(Stack(env, state_dir).nodes())
        try:
            stream, twin = registry.stream(perf), registry.stream(f"{perf}{PERF_SUFFIX}")
        finally:
            registry.close()
        if stream is None or twin is None or stream.perf_twin_of:
            raise _fail(f"--perf: {perf!r} is not a data stream of the catalog (odin catalog list)")
        source, target, topics, suffix = stream.bootstrap_servers, twin.bootstrap_servers, stream.topics, PERF_SUFFIX
    if not (topics and source and target):
        raise _fail("give TOPIC... with --from and --to, or --perf STREAM")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    job = Mirror(source, target, topics, suffix=suffix, say=lambda m: console.print(m, highlight=False))
    try:
        job.run(stop)
    except KeyboardInterrupt:
        pass
    except MirrorError as e:
        raise _fail(str(e), code=1) from None
    finally:
        job.close()
    console.print(f"mirror stopped: {job.stats.copied:,} record(s) copied")


@app.command()
def feed(
    stream: Annotated[str, typer.Argument(help="A catalog stream (odin catalog list), perf twins included.")],
    rate: Annotated[float, typer.Option("--rate", help="Events per second.", min=0.001, max=100_000)] = 100.0,
    duration: Annotated[
        str | None, typer.Option("--for", help="How long, e.g. 90s, 5m; default: until Ctrl-C or SIGTERM.")
    ] = None,
    env: EnvOpt = "local",
    state_dir: StateOpt = None,
) -> None:
    """Send live events to a catalog stream, stamped with the time they are sent, on top of the traffic node's: for
    a load a preview or a dashboard should show. Platform engineers only: the streams are every team's input."""
    import signal
    import threading

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from odin.models import parse_duration
    from odin.traffic.feed import Feed, NoGenerator, producer

    try:
        seconds = None if duration is None else parse_duration(duration).total_seconds()
    except ValueError as e:
        raise _fail(f"--for: {e}") from None
    with _registry(env, state_dir) as registry:
        _platform_engineer(registry, "stream_feed", f"stream:{stream}")
        record = registry.stream(stream)
    if record is None:
        raise _fail(f"STREAM: {stream!r} is not in the catalog; see `odin catalog list`")
    servers = record.serving_bootstrap_servers
    try:
        job = Feed(record, rate, servers, producer(servers))
        job.create_topics()
    except NoGenerator as e:
        raise _fail(str(e)) from None
    except Exception as e:  # the broker: unreachable, or refusing the topics
        raise _fail(f"{servers}: {e}; is the stack up (`odin status`)?", code=1) from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    total = None if seconds is None else int(rate * seconds)
    columns = [TextColumn(f"{stream} at {rate:g}/s"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("feed", total=total)
        try:
            while not stop.is_set() and (total is None or job.sent < total):
                job.send_due(total)
                job.producer.poll(0)
                bar.update(task, completed=job.counts.delivered)
                stop.wait(0.1)
        except KeyboardInterrupt:
            pass
        left = job.producer.flush(30)
        bar.update(task, completed=job.counts.delivered)
    c = job.counts
    console.print(f"{stream}: {c.delivered:,} delivered, {c.failed:,} failed, {c.skipped + left:,} not sent")
    if c.failed or left:
        raise _fail(f"some events did not reach {servers}: {c.last_error or 'timed out'}", code=1)


def _progress(status: Status, message: str) -> None:
    status.update(f"[bold]odin[/] {message}")
    if message.startswith(("terraform plan", "  ")):
        console.print(message, markup=False, highlight=False)


def main() -> None:  # pragma: no cover - console script shim
    sys.exit(app())
