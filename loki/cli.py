"""`loki`: chaos and load experiments against perf streams. validate -> plan -> simulate -> report."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from loki import playbook as playbooks
from loki.plan import ExperimentPlan
from loki.resources import environment_nodes, inventory
from odin.environment import connect_registry
from odin.registry import Refused, Registry
from odin.teams.actor import acting_user

PLAYBOOKS_DIR = playbooks.STANDARD_DIR

app = typer.Typer(
    help="Loki: chaos and load experiments against perf streams, with exact data-loss reports.",
    no_args_is_help=True,
    add_completion=True,
)
console = Console()
err = Console(stderr=True)

UserOpt = Annotated[
    str | None,
    typer.Option("--user", help="Act for this user (platform engineers only, recorded); default: your login."),
]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="Odin's state directory (default: $ODIN_HOME).")]
EnvOpt = Annotated[str | None, typer.Option("--env", help="Target environment (default: the playbook's).")]
TeamOpt = Annotated[str | None, typer.Option("--team", help="Target team (default: the playbook's).")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="Target cluster (default: the playbook's).")]
PlaybookArg = Annotated[str, typer.Argument(help="A playbook file, or the name of a standard one (loki list).")]
RateScale = Annotated[float, typer.Option("--rate-scale", min=0.001, help="Multiply every feeder rate.")]
TimeScale = Annotated[float, typer.Option("--time-scale", min=0.01, help="Multiply every duration and start.")]


def _fail(msg: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {msg}", highlight=False)
    return typer.Exit(code)


def _path(name_or_path: str) -> Path:
    given = Path(name_or_path)
    if given.exists() or given.suffix in (".yaml", ".yml", ".json"):
        return given
    return PLAYBOOKS_DIR / f"{name_or_path}.yaml"


def _load(
    name_or_path: str,
    env: str | None,
    team: str | None,
    cluster: str | None,
    rate: float = 1.0,
    time: float = 1.0,
    settle: str | None = None,
) -> playbooks.Playbook:
    try:
        book = playbooks.load(_path(name_or_path))
        return book.prepared(environment=env, team=team, cluster=cluster, settle=settle, rate=rate, time=time)
    except playbooks.PlaybookError as e:
        raise _fail(f"invalid playbook {name_or_path}:\n{e}") from None


def _actor_of(user: str | None) -> Callable[[Registry], str]:
    """The OS login, or `--user` for a platform engineer (recorded as an impersonation): odin.teams.actor."""
    return lambda registry: acting_user(registry, user, action="loki_run")


def make_plan(book: playbooks.Playbook, state_dir: Path | None, user: str | None = None) -> ExperimentPlan:
    """The playbook resolved against its environment's resources (read only), as the acting user may run it (a
    team member's with the platform's blast radius): loki.runner.plan_only."""
    from loki.runner import PlanRefused, plan_only

    try:
        return plan_only(book, state_dir, _actor_of(user))
    except PlanRefused as e:  # the environment was never brought up
        raise _fail(str(e)) from None
    except Refused as e:
        raise _fail(f"refused: {e}", 1) from None


@app.command()
def validate(playbook: PlaybookArg) -> None:
    """Check a playbook (schema and consistency) without touching anything; every error with its path."""
    book = _load(playbook, None, None, None)
    console.print(f"[green]valid[/]: {book.name}: {len(book.load.feeders)} feeder(s), {len(book.cases)} case(s)")


@app.command("plan")
def plan_command(
    playbook: PlaybookArg,
    env: EnvOpt = None,
    team: TeamOpt = None,
    cluster: ClusterOpt = None,
    state_dir: StateOpt = None,
    user: UserOpt = None,
) -> None:
    """Exactly what a run would touch, resolved against Odin's inventory and the registry; exit 1 if refused."""
    book = _load(playbook, env, team, cluster)
    result = make_plan(book, state_dir, user)
    book = result.playbook
    table = Table(title=f"loki plan {book.name} (blast radius: {', '.join(book.blast_radius)})")
    for column in ("resource", "what", "by"):
        table.add_column(column)
    for t in result.touches:
        table.add_row(t.resource, t.action, t.by)
    console.print(table)
    for r in result.refusals:
        err.print(f"[bold red]refused:[/] {r}", highlight=False)
    if not result.ok:
        raise typer.Exit(1)


@app.command("list")
def list_command(
    resources: Annotated[bool, typer.Option("--resources", help="Also the environment's resources.")] = False,
    runs: Annotated[bool, typer.Option("--runs", help="Also the runs in the simulation store.")] = False,
    env: Annotated[str, typer.Option("--env", help="The Odin environment.")] = "local",
    state_dir: StateOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout instead of tables.")] = False,
) -> None:
    """Standard playbooks, and (--resources) what an experiment in the environment could target."""
    listing: dict[str, list[dict[str, object]]] = {"playbooks": []}
    for path in sorted(PLAYBOOKS_DIR.glob("*.yaml")):
        try:
            book = playbooks.load(path)
        except playbooks.PlaybookError as e:
            listing["playbooks"].append({"name": path.stem, "cases": None, "invalid": str(e)})
            continue
        cases = [c.type for c in book.cases]
        listing["playbooks"].append({"name": book.name, "cases": cases, "description": book.description})
    if resources or runs:
        nodes, state = environment_nodes(env, state_dir)
        if not nodes:
            raise _fail(f"environment {env!r} was never brought up: run `odin up`")
        registry = connect_registry(nodes)
        try:
            if resources:
                listing["resources"] = [
                    {"name": r.name, "detail": r.detail} for r in inventory(env, nodes, registry, state)
                ]
            if runs:
                from loki.store import SimulationStore

                listing["runs"] = [
                    r.model_dump(mode="json", exclude={"spec", "summary"}) for r in SimulationStore(registry).runs()
                ]
        finally:
            registry.close()
    if as_json:
        print(json.dumps(listing, indent=2, default=str))
        return
    table = Table(title="playbooks (loki/playbooks)")
    for column in ("name", "cases", "description"):
        table.add_column(column)
    for b in listing["playbooks"]:
        invalid = b.get("invalid")
        table.add_row(str(b["name"]), "-" if invalid else ", ".join(b["cases"]) or "load",  # type: ignore[arg-type]
                      f"[red]invalid[/]: {invalid}" if invalid else str(b["description"]))  # fmt: skip
    console.print(table)
    if "resources" in listing:
        res = Table(title=f"resources of {env}")
        res.add_column("name")
        res.add_column("detail")
        for r in listing["resources"]:
            res.add_row(str(r["name"]), str(r["detail"]))
        console.print(res)
    if "runs" in listing:
        done = Table(title="runs (simulation store)")
        for column in ("run", "playbook", "target", "state", "verdict", "score", "started", "report"):
            done.add_column(column)
        for r in listing["runs"]:
            target = "/".join(str(x) for x in (r["environment"], r["team"], r["cluster"]) if x)
            started = str(r["started_at"] or "")[:19].replace("T", " ")
            done.add_row(str(r["id"]), str(r["playbook"]), target, str(r["state"]), str(r["verdict"] or ""),
                         str(r["score"] or ""), started, str(r["report"] or ""))  # fmt: skip
        console.print(done)


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="The new playbook's name (a slug).")],
    from_: Annotated[str, typer.Option("--from", help="The standard playbook to start from.")] = "worker-loss",
    out: Annotated[Path | None, typer.Option("--out", help="Where to write it (default: ./<name>.yaml).")] = None,
) -> None:
    """Start a playbook from a standard one, renamed; edit it, then `loki validate` and `loki plan` it."""
    source = _path(from_)
    if not source.exists():
        raise _fail(f"--from: no standard playbook {from_!r} (loki list)")
    target = out or Path(f"{name}.yaml")
    if target.exists():
        raise _fail(f"{target} exists: choose another --out")
    text = source.read_text()
    book = playbooks.load(source)
    target.write_text(text.replace(f"name: {book.name}", f"name: {name}", 1))
    try:
        playbooks.load(target)
    except playbooks.PlaybookError as e:
        target.unlink()
        raise _fail(str(e)) from None
    console.print(f"wrote {target}: edit it, then `loki validate {target}` and `loki plan {target}`")


@app.command()
def simulate(
    playbook: PlaybookArg,
    env: EnvOpt = None,
    team: TeamOpt = None,
    cluster: ClusterOpt = None,
    user: UserOpt = None,
    state_dir: StateOpt = None,
    reports: Annotated[Path | None, typer.Option("--reports", help="Where reports go (default: <state>/loki).")] = None,
    rate_scale: RateScale = 1.0,
    time_scale: TimeScale = 1.0,
    settle: Annotated[
        str | None,
        typer.Option(
            "--settle",
            help="After the last fault, how long the steady state has to come back, e.g. 300s (default: the "
            "playbook's steady_state.settle). A relaunch is slower on a small or busy machine.",
        ),
    ] = None,
) -> None:
    """Run the experiment: live progress, every step journaled, the report (JSON + HTML) at the end. Exit 1 when
    its verdict is fail or it was halted."""
    from loki.runner import PlanRefused, run_playbook

    book = _load(playbook, env, team, cluster, rate_scale, time_scale, settle)
    try:
        report, html_path = run_playbook(book, state_dir, _actor_of(user), reports, console.log)
    except (PlanRefused, Refused) as e:
        for line in str(e).splitlines():
            err.print(f"[bold red]refused:[/] {line}", highlight=False)
        raise typer.Exit(1) from None
    if report["state"] != "finished":
        err.print(f"[bold red]{report['state']}:[/] {report['reason']}", highlight=False)
    for e in report["errors"]:
        err.print(f"[red]error:[/] {e}", highlight=False)
    table = Table(title=f"loki {book.name}: {report['verdict']} (score {report['score']})")
    for column in ("case", "type", "verdict", "detect s", "recover s", "reasons"):
        table.add_column(column)
    for c in report["cases"]:
        table.add_row(
            c["case"], c["type"], c["verdict"], str(c["detect_s"]), str(c["recover_s"]), "; ".join(c["reasons"])
        )
    console.print(table)
    ev = report["events"]
    console.print(
        f"events: {ev['acknowledged']:,} acknowledged, {ev['failed']:,} failed, {ev['indeterminate']:,} indeterminate; "
        f"{ev['lost']:,} lost, {ev['duplicated']:,} counted twice. Report: {html_path}"
    )
    if report["verdict"] != "pass" or report["state"] != "finished":
        raise typer.Exit(1)


@app.command()
def feed(
    playbook: PlaybookArg,
    env: EnvOpt = None,
    team: TeamOpt = None,
    cluster: ClusterOpt = None,
    user: UserOpt = None,
    state_dir: StateOpt = None,
    rate_scale: RateScale = 1.0,
    time_scale: TimeScale = 1.0,
) -> None:
    """Run a playbook's load alone (its feeders; no consumer, no fault), with what was acknowledged."""
    from loki.runner import PlanRefused, feed_only

    book = _load(playbook, env, team, cluster, rate_scale, time_scale)
    try:
        counts = feed_only(book, state_dir, _actor_of(user), console)
    except (PlanRefused, Refused) as e:
        raise _fail(f"refused: {e}", 1) from None
    table = Table(title=f"loki feed {book.name}")
    for column in ("feeder", "sent", "acknowledged", "failed", "indeterminate", "malformed"):
        table.add_column(column)
    for i, c in enumerate(counts):
        table.add_row(str(i), *(f"{c[k]:,}" for k in ("sent", "acknowledged", "failed", "indeterminate", "malformed")))
    console.print(table)


@app.command()
def halt(
    env: Annotated[str, typer.Option("--env")] = "local", state_dir: StateOpt = None, user: UserOpt = None
) -> None:
    """Stop every running experiment you may halt (a platform engineer: all; a team member: the team's) at once;
    each reverts its faults (a run whose process died has them reverted from its journal here)."""
    from loki.runner import halt_all

    try:
        lines = halt_all(env, state_dir, _actor_of(user))
    except Refused as e:
        raise _fail(f"refused: {e}", 1) from None
    for line in lines:
        console.print(line, highlight=False)


@app.command()
def schema() -> None:
    """The playbook JSON schema."""
    sys.stdout.write(playbooks.json_schema() + "\n")


def main() -> None:  # pragma: no cover - console script shim
    sys.exit(app())
